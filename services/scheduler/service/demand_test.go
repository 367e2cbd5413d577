package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/control"
)

// TestAwsvpcDemandSameForRunTaskAndService places an awsvpc task with port 80 on an
// instance whose host keeps tcp 80 for itself, once through RunTask and once through a
// service. An awsvpc task has its own network interface and binds no host port, so both
// paths must accept the instance: they share one demand computation.
func TestAwsvpcDemandSameForRunTaskAndService(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	if _, err := e.ctl.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
		Cluster: e.cluster, HostId: "h1", RuntimeReady: true,
		Resources: control.Resources(2048, 2048, []string{"80"}, nil),
	}); err != nil {
		t.Fatalf("RegisterInstance: %v", err)
	}
	td := must(e, e.ctl.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String("web"), NetworkMode: proto.String("awsvpc"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: proto.String("app"), Image: proto.String("nginx"), Cpu: 128, Memory: proto.Int32(128),
			PortMappings: []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80)}},
		}},
	}).GetTaskDefinition().GetTaskDefinitionArn()

	run := must(e, e.ctl.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String(e.cluster), TaskDefinition: proto.String(td)})
	if len(run.GetTasks()) != 1 || len(run.GetFailures()) != 0 {
		t.Fatalf("RunTask: tasks %d failures %v, want 1 task on the instance", len(run.GetTasks()), run.GetFailures())
	}

	e.createService("web", td, 1, nil)
	e.pass()
	if c := e.count("web"); c.total != 1 {
		s := e.service("web")
		var evs []string
		for _, ev := range s.GetEvents() {
			evs = append(evs, ev.GetMessage())
		}
		t.Fatalf("service placed %d tasks, want 1 (RunTask accepted the same instance); events %q", c.total, evs)
	}
}
