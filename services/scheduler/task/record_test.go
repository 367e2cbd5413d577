package task

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
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
