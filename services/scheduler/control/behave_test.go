package control

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestTaskCPUMinimum: a task-level cpu below the EC2 minimum of 128 units (0.125 vCPU) is
// a ClientException with AWS's message; 128 and "0.125 vCPU" are accepted.
func TestTaskCPUMinimum(t *testing.T) {
	e := newEnv(t)
	for _, cpu := range []string{"1", "64", "127", "0.1 vCPU", "196609"} {
		_, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String("small"), Cpu: proto.String(cpu), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")},
		})
		wantErr(t, err, "ClientException")
		if err.Message != "Invalid 'cpu' setting for task. For more information, see the Troubleshooting section of the Amazon ECS Developer Guide." {
			t.Fatalf("cpu %q: message %q", cpu, err.Message)
		}
	}
	for cpu, want := range map[string]string{"128": "128", "0.125 vCPU": "128", "196608": "196608"} {
		td := must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String("small"), Cpu: proto.String(cpu), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")},
		}).GetTaskDefinition()
		if td.GetCpu() != want {
			t.Fatalf("cpu %q stored as %q", cpu, td.GetCpu())
		}
	}
}
