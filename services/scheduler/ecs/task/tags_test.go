package task

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// tagList returns tags as "key=value", or "key" alone for a tag without a value.
func tagList(tags []*ecsv1.Tag) []string {
	out := []string{}
	for _, t := range tags {
		if t.Value == nil {
			out = append(out, t.GetKey())
			continue
		}
		out = append(out, t.GetKey()+"="+t.GetValue())
	}
	return out
}

func mkTags(kv ...string) []*ecsv1.Tag {
	var out []*ecsv1.Tag
	for i := 0; i < len(kv); i += 2 {
		out = append(out, &ecsv1.Tag{Key: proto.String(kv[i]), Value: proto.String(kv[i+1])})
	}
	return out
}

// TestTags: the tags a new task gets, per the ECS rules for RunTask and StartTask
// (propagateTags TASK_DEFINITION or NONE; SERVICE is refused before a record is built)
// and for a service's tasks (TASK_DEFINITION, SERVICE or NONE), with
// enableECSManagedTags' aws:ecs:clusterName and aws:ecs:serviceName (a service's task) or
// aws:ecs:taskDefinitionFamily (another).
func TestTags(t *testing.T) {
	td := &ecsv1.TaskDefinition{Family: proto.String("web")}
	tdTags := mkTags("team", "a", "env", "td")
	svcTags := append(mkTags("owner", "svc"), &ecsv1.Tag{Key: proto.String("bare")}) // CreateService stores tags as given
	many := make([]*ecsv1.Tag, 50)
	manyWant := make([]string, 50)
	for i := range many {
		k := "k" + strconv.Itoa(i)
		many[i] = &ecsv1.Tag{Key: proto.String(k), Value: proto.String("v")}
		manyWant[i] = k + "=v"
	}
	run := func(tt Template) Template { // a RunTask or StartTask task
		tt.Cluster, tt.TaskDefinition, tt.TaskDefinitionTags = "prod", td, tdTags
		return tt
	}
	svc := func(tt Template) Template { // a service's task
		tt.Cluster, tt.TaskDefinition, tt.TaskDefinitionTags = "prod", td, tdTags
		tt.ServiceName, tt.ServiceTags = "api", svcTags
		return tt
	}
	for _, tc := range []struct {
		name string
		tt   Template
		want []string
	}{
		{"run: nothing", run(Template{}), []string{}},
		{"run: own tags only without propagateTags", run(Template{Tags: mkTags("a", "1")}), []string{"a=1"}},
		{"run: NONE propagates nothing", run(Template{PropagateTags: "NONE", Tags: mkTags("a", "1")}), []string{"a=1"}},
		{"run: TASK_DEFINITION, then the task's own tags",
			run(Template{PropagateTags: "TASK_DEFINITION", Tags: mkTags("a", "1")}), []string{"team=a", "env=td", "a=1"}},
		{"run: the task's own tag wins over the definition's, in its place",
			run(Template{PropagateTags: "TASK_DEFINITION", Tags: mkTags("env", "run", "a", "1")}), []string{"team=a", "env=run", "a=1"}},
		{"run: an own tag without a value gets \"\"",
			run(Template{Tags: []*ecsv1.Tag{{Key: proto.String("flag")}}}), []string{"flag="}},
		{"run: SERVICE has no service tags to copy", run(Template{PropagateTags: "SERVICE", Tags: mkTags("a", "1")}), []string{"a=1"}},
		{"run: managed tags name the cluster and the family, after the others",
			run(Template{PropagateTags: "TASK_DEFINITION", Tags: mkTags("a", "1"), ManagedTags: true}),
			[]string{"team=a", "env=td", "a=1", "aws:ecs:clusterName=prod", "aws:ecs:taskDefinitionFamily=web"}},
		{"run: managed tags do not count against the 50",
			run(Template{Tags: many, ManagedTags: true}),
			append(slices.Clone(manyWant), "aws:ecs:clusterName=prod", "aws:ecs:taskDefinitionFamily=web")},

		{"service: NONE", svc(Template{PropagateTags: "NONE"}), []string{}},
		{"service: none given", svc(Template{}), []string{}},
		{"service: TASK_DEFINITION", svc(Template{PropagateTags: "TASK_DEFINITION"}), []string{"team=a", "env=td"}},
		{"service: SERVICE copies the service's tags as stored", svc(Template{PropagateTags: "SERVICE"}), []string{"owner=svc", "bare"}},
		{"service: managed tags name the cluster and the service",
			svc(Template{PropagateTags: "SERVICE", ManagedTags: true}),
			[]string{"owner=svc", "bare", "aws:ecs:clusterName=prod", "aws:ecs:serviceName=api"}},
		{"service: managed tags alone", svc(Template{ManagedTags: true}), []string{"aws:ecs:clusterName=prod", "aws:ecs:serviceName=api"}},
		{"service: managed tags do not count against the 50",
			Template{Cluster: "prod", TaskDefinition: td, ServiceName: "api", PropagateTags: "SERVICE", ServiceTags: many, ManagedTags: true},
			append(slices.Clone(manyWant), "aws:ecs:clusterName=prod", "aws:ecs:serviceName=api")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Tags(tc.tt)
			if got == nil {
				t.Fatal("Tags returned nil, want a list")
			}
			if !slices.Equal(tagList(got), tc.want) {
				t.Fatalf("tags %v, want %v", tagList(got), tc.want)
			}
		})
	}
}

// The task's tags are its own: changing them changes neither the task definition's, the
// service's nor the request's.
func TestTagsAreCopies(t *testing.T) {
	tt := Template{Cluster: "c", TaskDefinition: &ecsv1.TaskDefinition{Family: proto.String("f")},
		PropagateTags: "TASK_DEFINITION", TaskDefinitionTags: mkTags("a", "1"), Tags: mkTags("b", "2")}
	got := Tags(tt)
	for _, tag := range got {
		tag.Value = proto.String("changed")
	}
	if v := tt.TaskDefinitionTags[0].GetValue() + tt.Tags[0].GetValue(); v != "12" {
		t.Fatalf("the sources' values became %q", v)
	}
}

// TestNewRecordOrigin: what NewRecord writes from the task's origin — group (given, or
// "service:<name>" for a service's task, "family:<family>" for another), the service
// and deployment on a service's task, RunTask's client token.
func TestNewRecordOrigin(t *testing.T) {
	td := &ecsv1.TaskDefinition{
		Family:               proto.String("web"),
		TaskDefinitionArn:    proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:1"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("web"), Image: proto.String("i"), Memory: proto.Int32(64)}},
	}
	base := func(tt Template) Template {
		n := 0
		tt.Region, tt.Account, tt.Cluster, tt.LongARN, tt.Now = "us-east-1", "000000000000", "c", true, time.Unix(1, 0)
		tt.NewID = func() string { n++; return fmt.Sprintf("%032d", n) }
		tt.TaskDefinition, tt.LaunchType = td, "EC2"
		return tt
	}
	for _, tc := range []struct {
		name                            string
		tt                              Template
		group, service, deployment, tok string
	}{
		{"RunTask default group", base(Template{ClientToken: "tok"}), "family:web", "", "", "tok"},
		{"RunTask group", base(Template{Group: "batch"}), "batch", "", "", ""},
		{"service task", base(Template{ServiceName: "api", DeploymentID: "ecs-svc/1", StartedBy: "ecs-svc/1"}), "service:api", "api", "ecs-svc/1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := NewRecord(tc.tt)
			if g := rec.GetTask().GetGroup(); g != tc.group {
				t.Errorf("group %q, want %q", g, tc.group)
			}
			if rec.GetServiceName() != tc.service || rec.GetDeploymentId() != tc.deployment || rec.GetClientToken() != tc.tok {
				t.Errorf("service %q deployment %q client token %q, want %q %q %q",
					rec.GetServiceName(), rec.GetDeploymentId(), rec.GetClientToken(), tc.service, tc.deployment, tc.tok)
			}
			if rec.GetTask().GetTags() == nil {
				t.Error("tags nil, want a list")
			}
		})
	}
}
