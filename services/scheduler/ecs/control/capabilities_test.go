package control

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
)

// TestTaskENIWithoutSubnet: an agent that can set awsvpc up (it registers
// ecs.capability.task-eni) but whose instance gets no task subnet (every subnet of the
// pool overlaps one its host reports taken) is registered without the attribute, and an
// awsvpc task is refused at RunTask with failures[] ATTRIBUTE naming it and the empty
// pool; the agent's own missing attributes are kept and reported the same way.
func TestTaskENIWithoutSubnet(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	resp, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
		Cluster: "c", HostId: "nosubnet", RuntimeReady: true, Resources: Resources(1024, 1024, nil, nil),
		TakenTaskSubnets: []string{"0.0.0.0/0"},
		Attributes: []*ecsv1.Attribute{
			{Name: proto.String(placement.AttrOSType), Value: proto.String("linux")},
			{Name: proto.String(placement.AttrTaskENI)},
		},
		MissingAttributes: map[string]string{placement.AttrCNIPluginVersion: "iptables not found in PATH (apt-get install iptables)"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetTaskSubnet() != "" {
		t.Fatalf("task subnet %q inside 0.0.0.0/0", resp.GetTaskSubnet())
	}
	for _, a := range e.describeInstance("c", resp.GetContainerInstance().GetContainerInstanceArn()).GetAttributes() {
		if a.GetName() == placement.AttrTaskENI {
			t.Errorf("instance without a task subnet keeps %s", placement.AttrTaskENI)
		}
	}
	run := func(family, mode string) *ecsv1.Failure {
		t.Helper()
		must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String(family), NetworkMode: proto.String(mode),
			ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Memory: proto.Int32(32)}},
		})
		req := &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String(family)}
		if mode == "awsvpc" {
			req.NetworkConfiguration = &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{Subnets: []string{"subnet-1"}}}
		}
		out := must(e, e.s.RunTask, req)
		if len(out.GetTasks()) != 0 || len(out.GetFailures()) != 1 {
			t.Fatalf("%s: %d tasks, failures %v; want refused", family, len(out.GetTasks()), out.GetFailures())
		}
		return out.GetFailures()[0]
	}
	if f := run("eni", "awsvpc"); f.GetReason() != placement.ReasonAttribute || !strings.Contains(f.GetDetail(), placement.AttrTaskENI) || !strings.Contains(f.GetDetail(), "no awsvpc task subnet left") {
		t.Errorf("awsvpc failure %v", f)
	}
	if f := run("br", "bridge"); f.GetReason() != placement.ReasonAttribute || !strings.Contains(f.GetDetail(), "iptables not found in PATH") {
		t.Errorf("bridge failure %v", f)
	}
}
