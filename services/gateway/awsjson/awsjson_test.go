package awsjson_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s mismatch\n got: %s\nwant: %s", name, got, want)
	}
}

func TestUnmarshalGoldenRequest(t *testing.T) {
	data, err := os.ReadFile("testdata/register_task_definition.request.json")
	if err != nil {
		t.Fatal(err)
	}
	var got ecsv1.RegisterTaskDefinitionRequest
	if err := awsjson.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := &ecsv1.RegisterTaskDefinitionRequest{
		Family:      proto.String("web"),
		NetworkMode: proto.String("bridge"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name:         proto.String("app"),
			Image:        proto.String("127.0.0.1:5000/sleep:latest"),
			Cpu:          256,
			Memory:       proto.Int32(512),
			Essential:    proto.Bool(true),
			Command:      []string{"sleep", "3600"},
			Environment:  []*ecsv1.KeyValuePair{{Name: proto.String("MODE"), Value: proto.String("prod")}},
			PortMappings: []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080), HostPort: proto.Int32(0), Protocol: proto.String("tcp")}},
			DockerLabels: map[string]string{"team": "core", "tier": "web"},
		}},
		Tags: []*ecsv1.Tag{{Key: proto.String("env"), Value: proto.String("dev")}},
	}
	if !proto.Equal(&got, want) {
		t.Errorf("decoded\n%v\nwant\n%v", &got, want)
	}
}

func TestMarshalGoldenResponses(t *testing.T) {
	ci := &ecsv1.DescribeContainerInstancesResponse{
		ContainerInstances: []*ecsv1.ContainerInstance{{
			AgentConnected:       true,
			Attributes:           []*ecsv1.Attribute{{Name: proto.String("ecs.os-type"), Value: proto.String("linux")}},
			ContainerInstanceArn: proto.String("arn:aws:ecs:us-east-1:000000000000:container-instance/default/0123456789abcdef"),
			RegisteredAt:         proto.Float64(1700000000.25),
			RegisteredResources: []*ecsv1.Resource{
				{Name: proto.String("CPU"), Type: proto.String("INTEGER"), IntegerValue: 2048},
				{Name: proto.String("MEMORY"), Type: proto.String("LONG"), LongValue: 9007199254740993, DoubleValue: 1.5},
				{Name: proto.String("PORTS"), Type: proto.String("STRINGSET"), StringSetValue: []string{"22", "2376"}},
			},
			RunningTasksCount: 3,
			Status:            proto.String("ACTIVE"),
			Version:           42,
		}},
	}
	for name, msg := range map[string]proto.Message{
		"describe_container_instances.response.json": ci,
		"list_clusters.response.json":                &ecsv1.ListClustersResponse{},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := awsjson.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, got)
			// MarshalPooled writes the same bytes, also into a reused buffer.
			for range 2 {
				pooled, release := awsjson.MarshalPooled(msg)
				if string(pooled) != string(got) {
					t.Errorf("MarshalPooled:\n%s\nMarshal:\n%s", pooled, got)
				}
				release()
			}
			// The codec is symmetric: decoding the golden body gives the message back.
			back := msg.ProtoReflect().New().Interface()
			if err := awsjson.Unmarshal(got, back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, msg) {
				t.Errorf("round trip changed the message:\n%v\n%v", back, msg)
			}
		})
	}
}

func TestAppendErrorEscaping(t *testing.T) {
	got := awsjson.AppendError(nil, "InvalidParameterException", "quote \" backslash \\ newline \n tab \t nul \x00 <html> & é \xff")
	golden(t, "error_escaping.golden", got)
}

// TestMarshalOmitsEmptyNestedListsAndUnsetOptionals: members outside the Defaults table
// stay out when empty or unset (a cluster's tags, settings and configuration, as AWS leaves
// them out unless include asks for them), while the table's are written.
func TestMarshalOmitsEmptyNestedListsAndUnsetOptionals(t *testing.T) {
	got, _ := awsjson.Marshal(&ecsv1.DescribeClustersResponse{
		Clusters: []*ecsv1.Cluster{{ClusterName: proto.String("default"), Tags: []*ecsv1.Tag{}, Settings: []*ecsv1.ClusterSetting{}}},
	})
	want := `{"clusters":[{"activeServicesCount":0,"capacityProviders":[],"clusterName":"default","defaultCapacityProviderStrategy":[],"pendingTasksCount":0,"registeredContainerInstancesCount":0,"runningTasksCount":0,"statistics":[]}],"failures":[]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		msg        proto.Message
		typ        string
		contains   []string
	}{
		{"malformed", `{"cluster":`, &ecsv1.ListServicesRequest{}, "SerializationException", []string{"not valid JSON"}},
		{"not an object", `[1,2]`, &ecsv1.ListServicesRequest{}, "SerializationException", []string{"START_ARRAY"}},
		{"string for integer", `{"maxResults":"10"}`, &ecsv1.ListClustersRequest{}, "SerializationException", []string{"STRING_VALUE can not be converted to an Integer", "'maxResults'"}},
		{"fraction for integer", `{"maxResults":1.5}`, &ecsv1.ListClustersRequest{}, "SerializationException", []string{"'maxResults'"}},
		{"integer overflow", `{"maxResults":4294967296}`, &ecsv1.ListClustersRequest{}, "SerializationException", []string{"'maxResults'"}},
		{"number for string", `{"cluster":5}`, &ecsv1.ListServicesRequest{}, "SerializationException", []string{"NUMBER_VALUE can not be converted to a String", "'cluster'"}},
		{"object for list", `{"clusters":{}}`, &ecsv1.DescribeClustersRequest{}, "SerializationException", []string{"START_OBJECT", "a list", "'clusters'"}},
		{"wrong element", `{"clusters":["a",1]}`, &ecsv1.DescribeClustersRequest{}, "SerializationException", []string{"'clusters.2.member'"}},
		{"string for bool", `{"containerDefinitions":[{"name":"a","image":"b","essential":"yes"}],"family":"f"}`, &ecsv1.RegisterTaskDefinitionRequest{}, "SerializationException", []string{"'containerDefinitions.1.member.essential'", "a Boolean"}},
		{"map value", `{"containerDefinitions":[{"dockerLabels":{"a":1}}],"family":"f"}`, &ecsv1.RegisterTaskDefinitionRequest{}, "SerializationException", []string{"'containerDefinitions.1.member.dockerLabels.a'"}},
		{"missing required", `{}`, &ecsv1.RegisterTaskDefinitionRequest{}, "InvalidParameterException", []string{"2 validation errors detected", "Value null at 'containerDefinitions'", "Value null at 'family'", "Member must not be null"}},
		{"missing nested required", `{"family":"f","containerDefinitions":[{"name":"x","dependsOn":[{"containerName":"a"}]}]}`, &ecsv1.RegisterTaskDefinitionRequest{}, "InvalidParameterException", []string{"1 validation error detected", "Value null at 'containerDefinitions.1.member.dependsOn.1.member.condition'"}},
		{"enum", `{"launchType":"MOON"}`, &ecsv1.ListTasksRequest{}, "InvalidParameterException", []string{"Value 'MOON' at 'launchType'", "[EC2, FARGATE, EXTERNAL"}},
		{"enum in list", `{"cluster":"c","include":["TAGS","NOPE"],"tasks":["t"]}`, &ecsv1.DescribeTasksRequest{}, "InvalidParameterException", []string{"Value 'NOPE' at 'include.2.member'"}},
		{"unknown nested member", `{"family":"x","containerDefinitions":[{"name":"a","image":"i","memory":32,"bogusField":1}]}`, &ecsv1.RegisterTaskDefinitionRequest{}, "SerializationException", []string{"Unknown member 'containerDefinitions.1.member.bogusField'"}},
		{"unknown top-level member", `{"desiredcount":2}`, &ecsv1.ListClustersRequest{}, "SerializationException", []string{"Unknown member 'desiredcount'"}},
		{"unknown null member", `{"maxResults":null,"zzz":null}`, &ecsv1.ListClustersRequest{}, "SerializationException", []string{"Unknown member 'zzz'"}},
		{"timestamp as string", `{"cluster":"c","status":"s","task":"t","pullStartedAt":"yesterday"}`, &ecsv1.SubmitTaskStateChangeRequest{}, "SerializationException", []string{"a Timestamp", "'pullStartedAt'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := awsjson.Unmarshal([]byte(tc.body), tc.msg)
			var ae *awsjson.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *awsjson.Error", err)
			}
			if ae.Type != tc.typ {
				t.Errorf("type = %s, want %s (%s)", ae.Type, tc.typ, ae.Message)
			}
			for _, c := range tc.contains {
				if !strings.Contains(ae.Message, c) {
					t.Errorf("message %q lacks %q", ae.Message, c)
				}
			}
		})
	}
}

func TestUnmarshalAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		msg, want  proto.Message
	}{
		{"empty body", ``, &ecsv1.ListClustersRequest{}, &ecsv1.ListClustersRequest{}},
		{"nulls are absent", `{"maxResults":null,"nextToken":null}`, &ecsv1.ListClustersRequest{}, &ecsv1.ListClustersRequest{}},
		{"integral float", `{"maxResults":10.0}`, &ecsv1.ListClustersRequest{}, &ecsv1.ListClustersRequest{MaxResults: proto.Int32(10)}},
		{"exponent", `{"maxResults":1e2}`, &ecsv1.ListClustersRequest{}, &ecsv1.ListClustersRequest{MaxResults: proto.Int32(100)}},
		{"unicode", `{"nextToken":"\u00e9\ud83d\ude00"}`, &ecsv1.ListClustersRequest{}, &ecsv1.ListClustersRequest{NextToken: proto.String("é😀")}},
		// Strings with escapes, non-ASCII and invalid UTF-8 (which json.Unmarshal turns into
		// U+FFFD) decode the same in a list of strings, whose plain elements skip
		// json.Unmarshal, as in a scalar member.
		{"list of strings", "{\"cluster\":\"c\\\"q\",\"tasks\":[\"a\",\"b\\\\c\",\"\\u00e9\",\"é\",\"x\xffy\",\"tab\\t\"]}", &ecsv1.DescribeTasksRequest{},
			&ecsv1.DescribeTasksRequest{Cluster: proto.String("c\"q"), Tasks: []string{"a", "b\\c", "é", "é", "x\ufffdy", "tab\t"}}},
		{"timestamp", `{"cluster":"c","task":"t","status":"RUNNING","pullStartedAt":1700000000.5}`, &ecsv1.SubmitTaskStateChangeRequest{},
			&ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("c"), Task: proto.String("t"), Status: proto.String("RUNNING"), PullStartedAt: proto.Float64(1700000000.5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := awsjson.Unmarshal([]byte(tc.body), tc.msg); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(tc.msg, tc.want) {
				t.Errorf("got %v want %v", tc.msg, tc.want)
			}
		})
	}
}
