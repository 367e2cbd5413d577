package agentsession

import (
	"context"
	"slices"
	"testing"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/proto"
)

// TestTaskSubnetRoutes: an agent's session carries the other instances' task subnets and
// host addresses (never its own, never an INACTIVE instance's or one without an address),
// again whenever they change, and an empty list once the last peer is deregistered.
func TestTaskSubnetRoutes(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	self := keys.Instance(testScope, cluster, instID)
	rec, rev, err := store.Get[*storev1.ContainerInstanceRecord](ctx, h.cli, self)
	if err != nil {
		t.Fatal(err)
	}
	rec.TaskSubnet, rec.HostAddress = "10.240.0.0/24", "192.0.2.1"
	if _, err := store.Update(ctx, h.cli, self, rev, rec); err != nil {
		t.Fatal(err)
	}
	peer := func(id, status, subnet, addr string) string {
		arn := "arn:aws:ecs:us-east-1:" + acct + ":container-instance/" + cluster + "/" + id
		ci := &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(arn), Status: proto.String(status)}
		k := keys.Instance(testScope, cluster, id)
		if _, err := h.cli.Put(ctx, k, mustMarshal(t, &storev1.ContainerInstanceRecord{ContainerInstance: ci, ClusterName: cluster, TaskSubnet: subnet, HostAddress: addr})); err != nil {
			t.Fatal(err)
		}
		return arn
	}
	i2 := peer("i2", "ACTIVE", "10.240.2.0/24", "192.0.2.2")
	peer("i3", "INACTIVE", "10.240.3.0/24", "192.0.2.3")
	peer("i4", "ACTIVE", "10.240.4.0/24", "") // an agent that reports no address

	a := h.connect(t, "")
	if a.next().GetExpectedTasks() == nil {
		t.Fatal("first message is not ExpectedTasks")
	}
	want := func(routes ...*agentv1.TaskSubnetRoute) {
		t.Helper()
		got := a.next().GetTaskSubnetRoutes()
		if got == nil || !proto.Equal(got, &agentv1.TaskSubnetRoutes{Routes: routes}) {
			t.Fatalf("task subnet routes %v, want %v", got, routes)
		}
	}
	want(&agentv1.TaskSubnetRoute{ContainerInstanceArn: i2, Subnet: "10.240.2.0/24", HostAddress: "192.0.2.2"})

	// i4 reports its address (re-registration), i2 moves.
	i4 := peer("i4", "DRAINING", "10.240.4.0/24", "192.0.2.4")
	want(&agentv1.TaskSubnetRoute{ContainerInstanceArn: i2, Subnet: "10.240.2.0/24", HostAddress: "192.0.2.2"},
		&agentv1.TaskSubnetRoute{ContainerInstanceArn: i4, Subnet: "10.240.4.0/24", HostAddress: "192.0.2.4"})
	peer("i2", "ACTIVE", "10.240.2.0/24", "192.0.2.22")
	want(&agentv1.TaskSubnetRoute{ContainerInstanceArn: i2, Subnet: "10.240.2.0/24", HostAddress: "192.0.2.22"},
		&agentv1.TaskSubnetRoute{ContainerInstanceArn: i4, Subnet: "10.240.4.0/24", HostAddress: "192.0.2.4"})
	// Deregistered (INACTIVE, subnet returned), then deleted: gone from the list.
	peer("i2", "INACTIVE", "", "192.0.2.22")
	want(&agentv1.TaskSubnetRoute{ContainerInstanceArn: i4, Subnet: "10.240.4.0/24", HostAddress: "192.0.2.4"})
	if _, err := h.cli.Delete(ctx, keys.Instance(testScope, cluster, "i4")); err != nil {
		t.Fatal(err)
	}
	want()
}

// TestRouteWatchShared: the sessions of one cluster share one watch of its instances;
// each hears of a change of the routes (not of other instance writes) and the watch
// stops with its last session.
func TestRouteWatchShared(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	put := func(id, subnet, addr string, running int32) {
		t.Helper()
		arn := "arn:aws:ecs:us-east-1:" + acct + ":container-instance/" + cluster + "/" + id
		ci := &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(arn), Status: proto.String("ACTIVE"), RunningTasksCount: running}
		if _, err := cli.Put(ctx, keys.Instance(testScope, cluster, id), mustMarshal(t, &storev1.ContainerInstanceRecord{ContainerInstance: ci, ClusterName: cluster, TaskSubnet: subnet, HostAddress: addr})); err != nil {
			t.Fatal(err)
		}
	}
	signal := func(ch <-chan struct{}) {
		t.Helper()
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatal("routes channel closed")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no routes signal")
		}
	}
	hosts := func(w *routeWatch, self string) []string {
		t.Helper()
		all, ready, err := w.current()
		if !ready || err != nil {
			t.Fatalf("routes ready %v, err %v", ready, err)
		}
		var out []string
		for _, r := range peerRoutes(self, all).GetRoutes() {
			out = append(out, r.GetHostAddress())
		}
		return out
	}
	put("i1", "10.240.1.0/24", "192.0.2.1", 0)
	put("i2", "10.240.2.0/24", "192.0.2.2", 0)

	rw := &routeWatches{cli: cli}
	w1, ch1, release1 := rw.subscribe(testScope, cluster)
	w2, ch2, release2 := rw.subscribe(testScope, cluster)
	if w1 != w2 || len(rw.byCluster) != 1 {
		t.Fatalf("two sessions of a cluster got %p and %p (%d watches)", w1, w2, len(rw.byCluster))
	}
	signal(ch1)
	signal(ch2)
	if got := hosts(w1, "i1"); !slices.Equal(got, []string{"192.0.2.2"}) {
		t.Fatalf("i1's peers %v", got)
	}
	if got := hosts(w2, "i2"); !slices.Equal(got, []string{"192.0.2.1"}) {
		t.Fatalf("i2's peers %v", got)
	}

	// A placement's write (counters only) is no routes change; a new address is.
	put("i2", "10.240.2.0/24", "192.0.2.2", 5)
	put("i2", "10.240.2.0/24", "192.0.2.22", 5)
	signal(ch1)
	if got := hosts(w1, "i1"); !slices.Equal(got, []string{"192.0.2.22"}) {
		t.Fatalf("i1's peers after the move %v", got)
	}
	select {
	case <-ch1:
		t.Fatal("a second signal for one routes change")
	case <-time.After(300 * time.Millisecond):
	}

	release1()
	release1() // a second release is a no-op
	if len(rw.byCluster) != 1 {
		t.Fatal("the watch stopped while a session still follows it")
	}
	release2()
	if len(rw.byCluster) != 0 {
		t.Fatal("the watch outlived its last session")
	}
	// A later session starts a new watch and hears the current routes at once.
	w3, ch3, release3 := rw.subscribe(testScope, cluster)
	defer release3()
	if w3 == w1 {
		t.Fatal("a stopped watch was reused")
	}
	signal(ch3)
	if got := hosts(w3, "i2"); !slices.Equal(got, []string{"192.0.2.1"}) {
		t.Fatalf("i2's peers from a new watch %v", got)
	}
}
