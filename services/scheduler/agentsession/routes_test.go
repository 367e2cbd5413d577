package agentsession

import (
	"context"
	"testing"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
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
