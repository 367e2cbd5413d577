package control_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Placement through control with the production Placer, moved from the placement
// package (which no longer knows control) when ControlPlacer went away.

const (
	testAccount = "000000000000"
	testRegion  = "us-east-1"
)

// testScope is testAccount in testRegion, where the tests place.
var testScope = keys.Scope{Account: testAccount, Region: testRegion}

// placingServer starts an etcd, a Placer on it (with its watch-fed cache, as production,
// unless uncached) and a control Server over both, with cluster "c" created; it returns
// the server, its etcd client and a context calling as testAccount in testRegion.
func placingServer(t testing.TB, uncached bool) (*control.Server, *clientv3.Client, context.Context) {
	t.Helper()
	return placingServerOps(t, uncached, 0, 0)
}

// placingServerOps is placingServer whose etcd allows etcdOps operations per txn and
// whose control is told controlOps (0: etcd's default, 128); `berth dev` gives both
// etcdembed.DevMaxTxnOps.
func placingServerOps(t testing.TB, uncached bool, etcdOps, controlOps int) (*control.Server, *clientv3.Client, context.Context) {
	t.Helper()
	ectx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := etcdembed.Start(ectx, etcdembed.Config{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0", UnsafeNoFsync: true, MaxTxnOps: etcdOps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es.Close() })
	cli := es.Client()
	var opts []placement.Option
	if uncached {
		opts = append(opts, placement.WithoutCache())
	}
	p := placement.NewPlacer(cli, nil, opts...)
	t.Cleanup(p.Close)
	srv := control.New(control.Config{KV: cli, Placer: p, MaxTxnOps: controlOps})
	ctx := caller.With(context.Background(), caller.Identity{Account: testAccount, Region: testRegion})
	if _, err := srv.CreateCluster(ctx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("c")})); err != nil {
		t.Fatal(err)
	}
	return srv, cli, ctx
}

// RunTask through control's placement with the production Placer (watch-fed cache):
// strategies and constraints reach the engine, and 200 concurrent RunTask calls against
// tight capacity never over-commit — through the group commit (no clientToken) and
// through a txn of each call's own (a clientToken: "single").
func TestRunTaskPlacement(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "batched"}[batch], func(t *testing.T) { testRunTaskPlacement(t, batch) })
	}
}

// tokenFor returns nil for a batched RunTask, else a new clientToken (which makes
// control commit the call in a txn of its own).
func tokenFor(batch bool) *string {
	if batch {
		return nil
	}
	return proto.String(control.NewID())
}

func testRunTaskPlacement(t *testing.T, batch bool) {
	srv, cli, ctx := placingServer(t, false)
	var arns []string
	for i, zone := range []string{"a", "a", "b", "b", "b"} {
		resp, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{
			Cluster: "c", HostId: "h" + string(rune('0'+i)), RuntimeReady: true,
			Resources:  control.Resources(1024, 1024, []string{"22"}, nil),
			Attributes: []*ecsv1.Attribute{{Name: proto.String("zone"), Value: proto.String(zone)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.SetAgentConnected(ctx, testScope, resp.GetContainerInstance().GetContainerInstanceArn(), true); err != nil {
			t.Fatal(err)
		}
		arns = append(arns, resp.GetContainerInstance().GetContainerInstanceArn())
	}
	if _, err := srv.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family:               proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 256, Memory: proto.Int32(256)}},
	})); err != nil {
		t.Fatal(err)
	}

	// memberOf restricts to zone a; binpack packs one instance first.
	r, err := srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{
		Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(2), ClientToken: tokenFor(batch),
		PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("memberOf"), Expression: proto.String("attribute:zone == a")}},
		PlacementStrategy:    []*ecsv1.PlacementStrategy{{Type: proto.String("binpack"), Field: proto.String("memory")}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Msg.GetTasks()) != 2 || r.Msg.GetTasks()[0].GetContainerInstanceArn() != r.Msg.GetTasks()[1].GetContainerInstanceArn() ||
		(r.Msg.GetTasks()[0].GetContainerInstanceArn() != arns[0] && r.Msg.GetTasks()[0].GetContainerInstanceArn() != arns[1]) {
		t.Fatalf("tasks %v failures %v", r.Msg.GetTasks(), r.Msg.GetFailures())
	}
	// A bad expression is InvalidParameterException.
	_, err = srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{
		Cluster: proto.String("c"), TaskDefinition: proto.String("web"),
		PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("memberOf"), Expression: proto.String("attribute:zone ==")}},
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("bad expression: %v", err)
	}

	// 200 concurrent RunTask calls; 5 instances × 4 slots − 2 already used = 18 fit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed, failed := 0, 0
	for range 200 {
		wg.Go(func() {
			r, err := srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), ClientToken: tokenFor(batch),
				PlacementStrategy: []*ecsv1.PlacementStrategy{{Type: proto.String("spread"), Field: proto.String("attribute:zone")}}}))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			placed += len(r.Msg.GetTasks())
			if len(r.Msg.GetTasks()) == 0 {
				failed++
			}
		})
	}
	wg.Wait()
	if placed != 18 || failed != 182 {
		t.Fatalf("placed %d failed %d", placed, failed)
	}
	sum := map[string]int32{}
	items, _, err := store.List[*storev1.TaskRecord](context.Background(), cli, keys.Tasks(testScope, "c"), 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		sum[it.Value.GetContainerInstanceId()] += it.Value.GetReservedCpu()
	}
	if len(items) != 20 {
		t.Fatalf("%d tasks stored", len(items))
	}
	for id, cpu := range sum {
		if cpu > 1024 {
			t.Fatalf("instance %s over-committed: %d", id, cpu)
		}
	}
	// The cluster's counters saw every placement exactly once.
	d, err := srv.DescribeClusters(ctx, connect.NewRequest(&ecsv1.DescribeClustersRequest{Clusters: []string{"c"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Msg.GetClusters()[0].GetPendingTasksCount(); got != 20 {
		t.Fatalf("cluster pendingTasksCount %d, want 20", got)
	}
}

// StartTask places task i on named instance i with the same checks; a full instance fails
// only its own task.
func TestStartTaskPlacement(t *testing.T) {
	srv, _, ctx := placingServer(t, false)
	var arns []string
	for i, cpu := range []int32{1024, 100, 1024} {
		resp, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{
			Cluster: "c", HostId: "h" + string(rune('0'+i)), RuntimeReady: true, Resources: control.Resources(cpu, 1024, nil, nil),
		})
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, resp.GetContainerInstance().GetContainerInstanceArn())
	}
	if _, err := srv.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family:               proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 256, Memory: proto.Int32(256)}},
	})); err != nil {
		t.Fatal(err)
	}
	r, err := srv.StartTask(ctx, connect.NewRequest(&ecsv1.StartTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), ContainerInstances: arns}))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Msg.GetTasks()) != 2 || r.Msg.GetTasks()[0].GetContainerInstanceArn() != arns[0] || r.Msg.GetTasks()[1].GetContainerInstanceArn() != arns[2] {
		t.Fatalf("tasks %v", r.Msg.GetTasks())
	}
	if f := r.Msg.GetFailures(); len(f) != 1 || f[0].GetArn() != arns[1] || f[0].GetReason() != placement.ReasonCPU {
		t.Fatalf("failures %v", f)
	}
}

// TestRunTaskNoEligibleInstanceSaysWhy is issue 12's RunTask with every container
// instance DRAINING (or with no agent connected): the answer must not be
// {"tasks": [], "failures": []}; every instance gets a failure naming why it was not used.
func TestRunTaskNoEligibleInstanceSaysWhy(t *testing.T) {
	for _, batch := range []bool{false, true} {
		srv, _, ctx := placingServer(t, true)
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
			r, err := srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(2), ClientToken: tokenFor(batch)}))
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
		run("no agent connected", placement.ReasonAgent)
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

// Concurrent RunTask calls share group commits up to the etcd cluster's --max-txn-ops:
// with 1,024 (`berth dev`'s), 48 calls of count 10 commit in fewer txns than calls (at
// etcd's default, 128, each call took a txn of its own), yet against capacity for 300
// tasks exactly 300 are placed, no instance is over-committed and the cluster's counter
// saw each placement once.
func TestRunTaskGroupCommitHoldsManyCalls(t *testing.T) {
	srv, cli, ctx := placingServerOps(t, false, etcdembed.DevMaxTxnOps, etcdembed.DevMaxTxnOps)
	txns := placeConcurrently(t, srv, cli, ctx)
	if txns >= 30 {
		t.Fatalf("%d txns for 30 calls that placed: the group commit held one call a txn", txns)
	}
	t.Logf("48 calls placed 300 tasks in %d txns", txns)
}

// A scheduler told a larger --max-txn-ops than its etcd allows still places every call:
// a group etcd refuses as too many operations (nothing written) is placed call by call,
// and later groups keep to etcd's default.
func TestRunTaskGroupCommitFallsBackToEtcdLimit(t *testing.T) {
	srv, cli, ctx := placingServerOps(t, false, 0, etcdembed.DevMaxTxnOps)
	placeConcurrently(t, srv, cli, ctx)
}

// placeConcurrently registers 30 instances with room for 10 tasks each and sends 48
// concurrent RunTask(10) calls; it checks that exactly the 300 tasks that fit were
// placed, no instance is over-committed and the cluster's counter saw each placement
// once, and returns how many txns (revisions) the calls took.
func placeConcurrently(t *testing.T, srv *control.Server, cli *clientv3.Client, ctx context.Context) int64 {
	t.Helper()
	for i := range 30 { // 30 instances × 10 slots of 256 CPU units
		resp, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{
			Cluster: "c", HostId: fmt.Sprintf("h%02d", i), RuntimeReady: true, Resources: control.Resources(2560, 1<<20, nil, nil),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.SetAgentConnected(ctx, testScope, resp.GetContainerInstance().GetContainerInstanceArn(), true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family:               proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 256, Memory: proto.Int32(8)}},
	})); err != nil {
		t.Fatal(err)
	}
	rev := func() int64 {
		r, err := cli.Get(context.Background(), "revision-probe")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	rev0 := rev()
	const calls = 48
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed := 0
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			r, err := srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(10),
				StartedBy: proto.String(fmt.Sprintf("caller-%d", i))})) // one more index key a task
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			placed += len(r.Msg.GetTasks())
		})
	}
	close(start)
	wg.Wait()
	txns := rev() - rev0 // every write of a placement is one txn: one revision
	if placed != 300 {
		t.Fatalf("placed %d tasks, want 300 (capacity)", placed)
	}
	items, _, err := store.List[*storev1.TaskRecord](context.Background(), cli, keys.Tasks(testScope, "c"), 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string]int32{}
	for _, it := range items {
		sum[it.Value.GetContainerInstanceId()] += it.Value.GetReservedCpu()
	}
	if len(items) != 300 {
		t.Fatalf("%d tasks stored", len(items))
	}
	for id, cpu := range sum {
		if cpu > 2560 {
			t.Fatalf("instance %s over-committed: %d CPU units", id, cpu)
		}
	}
	d, err := srv.DescribeClusters(ctx, connect.NewRequest(&ecsv1.DescribeClustersRequest{Clusters: []string{"c"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Msg.GetClusters()[0].GetPendingTasksCount(); got != 300 {
		t.Fatalf("cluster pendingTasksCount %d, want 300", got)
	}
	return txns
}
