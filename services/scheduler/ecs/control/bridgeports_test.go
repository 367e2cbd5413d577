package control

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestBridgeContainerPortReserved: in bridge mode a port mapping without a hostPort gets
// a dynamic host port from the agent, so two copies of the task fit on one instance; a
// fixed hostPort is reserved at placement, so a second copy on the same instance is
// refused with RESOURCE:PORTS instead of dying with "address already in use", the port
// shows as used in remainingResources, and a port the instance keeps (22) is refused too.
func TestBridgeContainerPortReserved(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h1", 4096, 4096)
	reg := func(family string, port, hostPort int32) {
		pm := &ecsv1.PortMapping{ContainerPort: proto.Int32(port)}
		if hostPort > 0 {
			pm.HostPort = proto.Int32(hostPort)
		}
		must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String(family),
			ContainerDefinitions: []*ecsv1.ContainerDefinition{{
				Name: proto.String("s"), Image: proto.String("busybox"), Memory: proto.Int32(32),
				PortMappings: []*ecsv1.PortMapping{pm},
			}},
		})
	}
	reg("dyn", 80, 0)
	for i := range 2 {
		out := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("dyn")})
		if len(out.GetTasks()) != 1 {
			t.Fatalf("dynamic-port copy %d: %v", i, out.GetFailures())
		}
	}
	reg("srv", 80, 18088)
	first := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("srv")})
	if len(first.GetTasks()) != 1 {
		t.Fatalf("first RunTask: %v", first.GetFailures())
	}
	second := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("srv")})
	if len(second.GetTasks()) != 0 || len(second.GetFailures()) != 1 || second.GetFailures()[0].GetReason() != "RESOURCE:PORTS" {
		t.Fatalf("second RunTask: tasks %d failures %v, want one RESOURCE:PORTS failure", len(second.GetTasks()), second.GetFailures())
	}
	used := false
	for _, r := range e.describeInstance("c", ci.GetContainerInstanceArn()).GetRemainingResources() {
		if r.GetName() == "PORTS" {
			for _, p := range r.GetStringSetValue() {
				used = used || p == "18088"
			}
		}
	}
	if !used {
		t.Fatalf("remainingResources PORTS lacks the running task's 18088")
	}
	reg("ssh", 22, 22)
	ssh := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("ssh")})
	if len(ssh.GetTasks()) != 0 || len(ssh.GetFailures()) != 1 || ssh.GetFailures()[0].GetReason() != "RESOURCE:PORTS" {
		t.Fatalf("RunTask on the instance's port 22: tasks %d failures %v, want RESOURCE:PORTS", len(ssh.GetTasks()), ssh.GetFailures())
	}
}
