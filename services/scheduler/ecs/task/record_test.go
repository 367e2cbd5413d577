package task

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// A task answers one containerOverrides entry per container, in the task definition's
// order, as AWS's RunTask and DescribeTasks examples do: the given override where there
// is one, the container's name alone otherwise.
func TestTaskRecordContainerOverridesPerContainer(t *testing.T) {
	td := &ecsv1.TaskDefinition{
		TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/two:1"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{
			{Name: proto.String("web"), Image: proto.String("i"), Memory: proto.Int32(32)},
			{Name: proto.String("sidecar"), Image: proto.String("i"), Memory: proto.Int32(32)},
		},
	}
	n := 0
	tt := Template{
		Region: "us-east-1", Account: "000000000000", Cluster: "c", LongARN: true, Now: time.Unix(1, 0),
		NewID:          func() string { n++; return "00000000-0000-0000-0000-00000000000" + strconv.Itoa(n%10) },
		TaskDefinition: td,
		Overrides: &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{
			{Name: proto.String("sidecar"), Command: []string{"sleep", "1"}},
		}},
	}
	got := NewRecord(tt).GetTask().GetOverrides().GetContainerOverrides()
	if len(got) != 2 || got[0].GetName() != "web" || got[0].Command != nil || got[1].GetName() != "sidecar" || len(got[1].GetCommand()) != 2 {
		t.Fatalf("containerOverrides %v, want [{web} {sidecar sleep 1}]", got)
	}
	if len(tt.Overrides.GetContainerOverrides()) != 1 {
		t.Fatalf("the caller's overrides were changed: %v", tt.Overrides)
	}

	tt.Overrides = nil
	got = NewRecord(tt).GetTask().GetOverrides().GetContainerOverrides()
	if len(got) != 2 || got[0].GetName() != "web" || got[1].GetName() != "sidecar" {
		t.Fatalf("containerOverrides without overrides %v, want [{web} {sidecar}]", got)
	}
}

// TestNewRecord: a new task is PENDING and desired RUNNING, its containers PENDING with
// the definition's cpu and memory (a container override's where given) and ARNs in the
// task's format; a FARGATE task shows its platform version (FargateLatest by default)
// and family; an awsvpc task has its ENI attachment PRECREATED in the first subnet.
func TestNewRecord(t *testing.T) {
	td := &ecsv1.TaskDefinition{
		TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:1"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{
			{Name: proto.String("web"), Image: proto.String("i"), Cpu: 128, Memory: proto.Int32(64)},
		},
	}
	vpc := proto.Clone(td).(*ecsv1.TaskDefinition)
	vpc.NetworkMode = proto.String("awsvpc")
	n := 0
	tmpl := func(td *ecsv1.TaskDefinition, launch string) Template {
		return Template{Region: "us-east-1", Account: "000000000000", Cluster: "c", LongARN: true, Now: time.Unix(5, 0),
			NewID: func() string { n++; return "0123456789abcdef0123456789abcde" + strconv.Itoa(n%10) }, TaskDefinition: td, LaunchType: launch}
	}
	for _, tc := range []struct {
		name  string
		tt    Template
		check func(t *testing.T, task *ecsv1.Task)
	}{
		{"ec2", tmpl(td, "EC2"), func(t *testing.T, task *ecsv1.Task) {
			c := task.GetContainers()[0]
			if task.GetLastStatus() != "PENDING" || task.GetDesiredStatus() != DesiredRunning || task.GetCreatedAt() != 5 ||
				task.GetCpu() != "128" || task.GetMemory() != "64" || task.PlatformVersion != nil || len(task.GetAttachments()) != 0 {
				t.Errorf("task = %v", task)
			}
			if c.GetLastStatus() != "PENDING" || c.GetCpu() != "128" || c.GetMemory() != "64" || c.GetTaskArn() != task.GetTaskArn() ||
				!strings.HasPrefix(c.GetContainerArn(), "arn:aws:ecs:us-east-1:000000000000:container/c/"+ID(&storev1.TaskRecord{Task: task})+"/") {
				t.Errorf("container = %v", c)
			}
		}},
		{"container override", func() Template {
			tt := tmpl(td, "EC2")
			tt.Overrides = &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("web"), Cpu: proto.Int32(256), Memory: proto.Int32(96)}}}
			return tt
		}(), func(t *testing.T, task *ecsv1.Task) {
			if c := task.GetContainers()[0]; c.GetCpu() != "256" || c.GetMemory() != "96" {
				t.Errorf("container = %v", c)
			}
		}},
		{"fargate", tmpl(td, "FARGATE"), func(t *testing.T, task *ecsv1.Task) {
			if task.GetPlatformVersion() != FargateLatest || task.GetPlatformFamily() != FargatePlatformFamily {
				t.Errorf("platform = %q %q", task.GetPlatformVersion(), task.GetPlatformFamily())
			}
		}},
		{"awsvpc", func() Template {
			tt := tmpl(vpc, "EC2")
			tt.NetworkConfiguration = &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{Subnets: []string{"subnet-0abc", "subnet-0def"}}}
			return tt
		}(), func(t *testing.T, task *ecsv1.Task) {
			atts := task.GetAttachments()
			if len(atts) != 1 || atts[0].GetId() != ENIAttachmentID(task.GetTaskArn()) || atts[0].GetStatus() != "PRECREATED" ||
				atts[0].GetType() != "ElasticNetworkInterface" || len(atts[0].GetDetails()) != 1 || atts[0].GetDetails()[0].GetValue() != "subnet-0abc" {
				t.Errorf("attachments = %v", atts)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := NewRecord(tc.tt)
			if rec.GetClusterName() != "c" {
				t.Errorf("cluster = %q", rec.GetClusterName())
			}
			tc.check(t, rec.GetTask())
		})
	}
}
