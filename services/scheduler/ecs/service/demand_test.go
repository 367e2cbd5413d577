package service

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
)

// TestAwsvpcDemandSameForRunTaskAndService: an awsvpc task has its own network interface
// and binds no host port, so the demand RunTask stores on the task record and the demand
// the service reconciler ranks instances by (both placement.DemandOf) reserve no tcp 80.
// On the old code control.TaskReservation reserved [] and placement.DemandOf [80] (the
// registration copies containerPort into hostPort), so a service was refused an instance
// RunTask accepted. The API refuses networkMode awsvpc until task networking lands
// (issue 14), so this checks the shared computation on the task definition as
// registration stores it; the end-to-end form returns with awsvpc.
func TestAwsvpcDemandSameForRunTaskAndService(t *testing.T) {
	td := &ecsv1.TaskDefinition{
		TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:1"),
		Family:            proto.String("web"), NetworkMode: proto.String("awsvpc"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: proto.String("app"), Image: proto.String("nginx"), Cpu: 128, Memory: proto.Int32(128),
			PortMappings: []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80), HostPort: proto.Int32(80), Protocol: proto.String("tcp")}},
		}},
	}
	ranked, err := placement.DemandOf(td, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := task.NewRecord(task.Template{
		Region: "us-east-1", Account: "000000000000", Cluster: "c", LongARN: true, Now: time.Unix(1, 0),
		NewID: func() string { return "0123456789abcdef0123456789abcdef" }, TaskDefinition: td, Group: "family:web", LaunchType: "EC2",
	})
	stored := placement.TaskDemand(rec)
	if len(ranked.Ports) != 0 || len(stored.Ports) != 0 {
		t.Fatalf("awsvpc task reserves host ports: ranked %v stored %v, want none", ranked.Ports, stored.Ports)
	}
	if stored.CPU != ranked.CPU || stored.Memory != ranked.Memory || !slices.Equal(stored.UDPPorts, ranked.UDPPorts) {
		t.Fatalf("stored demand %+v differs from the ranked one %+v", stored, ranked)
	}
}
