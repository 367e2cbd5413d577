package awsjson_test

import (
	"encoding/json"
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

func TestDefaultsResolve(t *testing.T) {
	if err := awsjson.CheckDefaults(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsRefuseBadRows(t *testing.T) {
	for _, row := range []awsjson.MemberDefault{
		{Shape: "NoSuchShape", Member: "volumes", Default: awsjson.EmptyList},
		{Shape: "TaskDefinition", Member: "noSuchMember", Default: awsjson.EmptyList},
		{Shape: "TaskDefinition", Member: "family", Default: awsjson.EmptyList},
		{Shape: "TaskDefinition", Member: "volumes", Default: awsjson.True},
		{Shape: "Task", Member: "containers", Default: awsjson.EmptyStructure},
		{Shape: "ContainerDefinition", Member: "cpu", Default: awsjson.True},
	} {
		if err := awsjson.BuildDefaults([]awsjson.MemberDefault{row}); err == nil {
			t.Errorf("row %+v accepted", row)
		}
	}
}

// nested encodes an empty message of the named berth.ecs.v1 shape as a nested structure and
// returns its members.
func nested(t *testing.T, m proto.Message) map[string]json.RawMessage {
	t.Helper()
	body := awsjson.MarshalNested(m)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return obj
}

func newShape(t *testing.T, shape string) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("berth.ecs.v1." + shape))
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

// TestDefaultsTable: every row of the table is written for an unset member, with the
// value the row says.
func TestDefaultsTable(t *testing.T) {
	want := map[awsjson.Default]string{awsjson.EmptyList: "[]", awsjson.True: "true"}
	for _, row := range awsjson.Defaults {
		if row.Default == awsjson.OmitEmpty {
			t.Run(row.Shape+"."+row.Member, func(t *testing.T) {
				body, _ := awsjson.Marshal(newShape(t, row.Shape))
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(body, &obj); err != nil {
					t.Fatal(err)
				}
				if v, ok := obj[row.Member]; ok {
					t.Errorf("%s = %s in %s, want it left out", row.Member, v, body)
				}
			})
			continue
		}
		t.Run(row.Shape+"."+row.Member, func(t *testing.T) {
			obj := nested(t, newShape(t, row.Shape))
			got, ok := obj[row.Member]
			if !ok {
				t.Fatalf("member %s missing from %v", row.Member, obj)
			}
			if row.Default == awsjson.EmptyStructure {
				var inner map[string]json.RawMessage
				if err := json.Unmarshal(got, &inner); err != nil {
					t.Fatalf("%s = %s, want an object", row.Member, got)
				}
				return
			}
			if string(got) != want[row.Default] {
				t.Errorf("%s = %s, want %s", row.Member, got, want[row.Default])
			}
		})
	}
}

// TestDefaultsKeepSetValues: a set member is written as set, never replaced by the
// default (essential false stays false, a list keeps its elements).
func TestDefaultsKeepSetValues(t *testing.T) {
	obj := nested(t, &ecsv1.ContainerDefinition{
		Essential:    proto.Bool(false),
		PortMappings: []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80)}},
	})
	if string(obj["essential"]) != "false" {
		t.Errorf("essential = %s, want false", obj["essential"])
	}
	if string(obj["portMappings"]) != `[{"containerPort":80}]` {
		t.Errorf("portMappings = %s", obj["portMappings"])
	}
}

// TestRequiredListsAlwaysWritten: a list the model marks required is written even when
// empty, so a client round-tripping it (deploymentConfiguration.alarms into UpdateService)
// passes its own input validation.
func TestRequiredListsAlwaysWritten(t *testing.T) {
	obj := nested(t, &ecsv1.DeploymentConfiguration{
		Alarms: &ecsv1.DeploymentAlarms{Enable: false, Rollback: false},
	})
	if string(obj["alarms"]) != `{"alarmNames":[],"enable":false,"rollback":false}` {
		t.Errorf("alarms = %s", obj["alarms"])
	}
	obj = nested(t, &ecsv1.HealthCheck{})
	if string(obj["command"]) != "[]" {
		t.Errorf("healthCheck.command = %s, want []", obj["command"])
	}
}

// TestOptionalMembersStayOut: members AWS leaves out when it has nothing for them are not
// in the table and stay out (a task's tags unless include asks for TAGS, a service's
// tags, a task definition's inferenceAccelerators).
func TestOptionalMembersStayOut(t *testing.T) {
	for _, tc := range []struct {
		msg     proto.Message
		members []string
	}{
		{&ecsv1.Task{Tags: []*ecsv1.Tag{}}, []string{"tags", "stopCode", "stoppedReason", "startedBy"}},
		{&ecsv1.Service{Tags: []*ecsv1.Tag{}}, []string{"tags", "capacityProviderStrategy", "networkConfiguration"}},
		{&ecsv1.TaskDefinition{}, []string{"tags", "inferenceAccelerators", "cpu", "memory", "deregisteredAt"}},
		{&ecsv1.ContainerDefinition{}, []string{"command", "entryPoint", "dockerLabels", "memory", "healthCheck"}},
	} {
		obj := nested(t, tc.msg)
		for _, m := range tc.members {
			if v, ok := obj[m]; ok {
				t.Errorf("%T: %s = %s, want it left out", tc.msg, m, v)
			}
		}
	}
}

// TestMarshalTaskShapes compares whole responses with the shape of AWS's own examples
// (ecs-examples-2014-11-13.json: DescribeTaskDefinition, DescribeTasks).
func TestMarshalTaskShapes(t *testing.T) {
	td, _ := awsjson.Marshal(&ecsv1.DescribeTaskDefinitionResponse{TaskDefinition: &ecsv1.TaskDefinition{
		Family:   proto.String("hello_world"),
		Revision: 8,
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: proto.String("wordpress"), Image: proto.String("wordpress"), Memory: proto.Int32(500),
		}},
	}})
	const wantTD = `{"taskDefinition":{"compatibilities":[],"containerDefinitions":[{"cpu":0,"environment":[],"essential":true,"image":"wordpress","memory":500,"mountPoints":[],"name":"wordpress","portMappings":[],"volumesFrom":[]}],"family":"hello_world","placementConstraints":[],"requiresAttributes":[],"revision":8,"volumes":[]}}`
	if string(td) != wantTD {
		t.Errorf("DescribeTaskDefinition\n got %s\nwant %s", td, wantTD)
	}
	tagged, _ := awsjson.Marshal(&ecsv1.DescribeTaskDefinitionResponse{Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}}})
	if string(tagged) != `{"tags":[{"key":"k","value":"v"}]}` {
		t.Errorf("tags asked for with include=TAGS: got %s", tagged)
	}
	tasks, _ := awsjson.Marshal(&ecsv1.DescribeTasksResponse{Tasks: []*ecsv1.Task{{
		TaskArn:    proto.String("t"),
		Containers: []*ecsv1.Container{{Name: proto.String("sleep")}},
	}}})
	const wantTasks = `{"failures":[],"tasks":[{"attachments":[],"containers":[{"name":"sleep","networkBindings":[],"networkInterfaces":[]}],"enableExecuteCommand":false,"overrides":{"containerOverrides":[],"inferenceAcceleratorOverrides":[]},"taskArn":"t","version":0}]}`
	if string(tasks) != wantTasks {
		t.Errorf("DescribeTasks\n got %s\nwant %s", tasks, wantTasks)
	}
}

// TestMarshalResultsDoNotShareBuffers: Marshal reuses scratch buffers, so a returned body
// must stay intact while other responses are encoded, concurrently too.
func TestMarshalResultsDoNotShareBuffers(t *testing.T) {
	first, _ := awsjson.Marshal(&ecsv1.DescribeTaskDefinitionResponse{TaskDefinition: &ecsv1.TaskDefinition{Family: proto.String("first")}})
	want := string(first)
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := 0; j < 200; j++ {
				body, _ := awsjson.Marshal(&ecsv1.DescribeTaskDefinitionResponse{TaskDefinition: &ecsv1.TaskDefinition{Family: proto.String("other-family-name")}})
				if !json.Valid(body) {
					t.Errorf("invalid body %s", body)
					return
				}
			}
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	if string(first) != want {
		t.Errorf("first body changed to %s", first)
	}
}

// TestEveryRequiredMemberWrittenWhenEmpty walks every structure of the ECS model (each
// berth.ecs.v1 shape, at any depth of any response) and checks that an empty one is
// written with each member the model marks required that Marshal can supply: every
// required list as [] and every unboxed required scalar (alarms' enable and rollback).
// Required strings and structures have no empty value an SDK would accept; handlers set
// them. An AWS SDK refuses to send back a copied structure that lacks a required member
// (issue 35: "missing required field,
// CreateServiceInput.DeploymentConfiguration.Alarms.AlarmNames").
func TestEveryRequiredMemberWrittenWhenEmpty(t *testing.T) {
	msgs := ecsv1.File_berth_ecs_v1_shapes_proto.Messages()
	checked := 0
	for i := 0; i < msgs.Len(); i++ {
		md := msgs.Get(i)
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
		if err != nil {
			t.Fatal(err)
		}
		obj := nested(t, mt.New().Interface())
		fields := md.Fields()
		for j := 0; j < fields.Len(); j++ {
			fd := fields.Get(j)
			if !proto.GetExtension(fd.Options(), ecsv1.E_Required).(bool) {
				continue
			}
			switch {
			case fd.IsList():
				if string(obj[fd.JSONName()]) != "[]" {
					t.Errorf("empty %s: required list %s = %s, want []", md.Name(), fd.JSONName(), obj[fd.JSONName()])
				}
			case !fd.HasPresence() && !fd.IsMap() && fd.Kind() != protoreflect.MessageKind:
				if _, ok := obj[fd.JSONName()]; !ok {
					t.Errorf("empty %s: required scalar %s missing", md.Name(), fd.JSONName())
				}
			default:
				continue
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no required member checked")
	}
}
