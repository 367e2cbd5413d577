package tasks

import (
	"testing"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"google.golang.org/protobuf/proto"
)

// TestReservation: a task's reservation is its task-level cpu and memory, else the sum of
// its containers' (memory: the hard limit, else the soft one), as ECS reserves them.
func TestReservation(t *testing.T) {
	ctrs := []*ecsv1.ContainerDefinition{
		{Cpu: 128, Memory: proto.Int32(256), MemoryReservation: proto.Int32(64)},
		{Cpu: 64, MemoryReservation: proto.Int32(100)},
	}
	for _, tc := range []struct {
		name     string
		task     *ecsv1.Task
		cpu, mem int32
	}{
		{"task level", &ecsv1.Task{Cpu: proto.String("512"), Memory: proto.String("1024")}, 512, 1024},
		{"container level", &ecsv1.Task{}, 192, 356},
		{"mixed", &ecsv1.Task{Cpu: proto.String("1024")}, 1024, 356},
	} {
		cpu, mem := reservation(&agentv1.Assignment{Task: tc.task, TaskDefinition: &ecsv1.TaskDefinition{ContainerDefinitions: ctrs}})
		if cpu != tc.cpu || mem != tc.mem {
			t.Errorf("%s: cpu %d mem %d, want %d %d", tc.name, cpu, mem, tc.cpu, tc.mem)
		}
	}
}
