package placement

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/caller"
	"github.com/berthhq/berth/services/scheduler/control"
	"github.com/berthhq/berth/services/scheduler/etcdembed"
)

// TestRunTaskNoEligibleInstanceSaysWhy is issue 12's RunTask with every container
// instance DRAINING (or with no agent connected): the answer must not be
// {"tasks": [], "failures": []}; every instance gets a failure naming why it was not used.
func TestRunTaskNoEligibleInstanceSaysWhy(t *testing.T) {
	for _, batch := range []bool{false, true} {
		cli := etcdembed.StartForTest(t)
		// Without the watch-fed cache: the test changes instances and places at once.
		p := NewPlacer(cli, nil, WithoutCache())
		defer p.Close()
		srv := control.New(control.Config{KV: cli, Placer: &ControlPlacer{Placer: p, Batch: batch}})
		ctx := caller.With(context.Background(), caller.Identity{Account: testAccount, Region: testRegion})
		if _, err := srv.CreateCluster(ctx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("c")})); err != nil {
			t.Fatal(err)
		}
		var arns []string
		for i := range 2 {
			resp, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{
				Cluster: "c", HostId: "h" + string(rune('0'+i)), RuntimeReady: true, Resources: control.Resources(1024, 1024, nil, nil),
			})
			if err != nil {
				t.Fatal(err)
			}
			a := resp.GetContainerInstance().GetContainerInstanceArn()
			if err := srv.SetAgentConnected(ctx, testScope, a, true); err != nil {
				t.Fatal(err)
			}
			arns = append(arns, a)
		}
		if _, err := srv.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
			Family:               proto.String("web"),
			ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 128, Memory: proto.Int32(128)}},
		})); err != nil {
			t.Fatal(err)
		}
		run := func(when, reason string) {
			t.Helper()
			r, err := srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(2)}))
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if len(r.Msg.GetTasks()) != 0 {
				t.Fatalf("%s: placed %d tasks", when, len(r.Msg.GetTasks()))
			}
			got := map[string]string{}
			for _, f := range r.Msg.GetFailures() {
				got[f.GetArn()] = f.GetReason()
			}
			for _, a := range arns {
				if got[a] != reason {
					t.Fatalf("batch %v, %s: failures %v, want %s for every instance", batch, when, r.Msg.GetFailures(), reason)
				}
			}
		}
		// No agent connected.
		for _, a := range arns {
			if err := srv.SetAgentConnected(ctx, testScope, a, false); err != nil {
				t.Fatal(err)
			}
		}
		run("no agent connected", ReasonAgent)
		// Every instance DRAINING.
		for _, a := range arns {
			if err := srv.SetAgentConnected(ctx, testScope, a, true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.UpdateContainerInstancesState(ctx, connect.NewRequest(&ecsv1.UpdateContainerInstancesStateRequest{
			Cluster: proto.String("c"), ContainerInstances: arns, Status: proto.String("DRAINING"),
		})); err != nil {
			t.Fatal(err)
		}
		run("every instance DRAINING", "DRAINING")
	}
}
