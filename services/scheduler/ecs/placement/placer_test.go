package placement

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

const testAccount = "000000000000"

// testScope is testAccount in testRegion, where the tests place.
var testScope = keys.Scope{Account: testAccount, Region: testRegion}

func intRes(name string, v int32) *ecsv1.Resource {
	return &ecsv1.Resource{Name: proto.String(name), Type: proto.String("INTEGER"), IntegerValue: v}
}

// putInstance writes an ACTIVE, connected instance with cpu units and mem MiB.
func putInstance(t testing.TB, cli *clientv3.Client, cluster, id string, cpu, mem int32, attrs map[string]string) {
	t.Helper()
	ci := &ecsv1.ContainerInstance{
		ContainerInstanceArn: proto.String("arn:aws:ecs:us-east-1:" + testAccount + ":container-instance/" + cluster + "/" + id),
		Status:               proto.String("ACTIVE"),
		AgentConnected:       true,
		RegisteredResources:  []*ecsv1.Resource{intRes(ResourceCPU, cpu), intRes(ResourceMemory, mem)},
		RemainingResources:   []*ecsv1.Resource{intRes(ResourceCPU, cpu), intRes(ResourceMemory, mem)},
	}
	for k, v := range attrs {
		ci.Attributes = append(ci.Attributes, &ecsv1.Attribute{Name: proto.String(k), Value: proto.String(v)})
	}
	if _, err := store.Create(context.Background(), cli, keys.Instance(testScope, cluster, id), &storev1.ContainerInstanceRecord{ContainerInstance: ci, ClusterName: cluster}); err != nil {
		t.Fatal(err)
	}
}

// writeInstances is what every production hook does first (task.PlaceTxn): reserve d
// and count a pending task on each placement's instance record, then write every
// touched record once under the revision it was read at.
func writeInstances(txn *store.Txn, cluster string, d Demand, placed []Placed) error {
	written := map[string]bool{}
	for _, p := range placed {
		if err := Reserve(p.Instance.GetContainerInstance(), d); err != nil {
			return err
		}
		p.Instance.ActiveTasks++
	}
	for _, p := range placed {
		if !written[p.InstanceID] {
			written[p.InstanceID] = true
			txn.Update(keys.Instance(testScope, cluster, p.InstanceID), p.InstanceRev, p.Instance)
		}
	}
	return nil
}

// reserveOnly is a hook that writes the reservations and nothing else.
func reserveOnly(cluster string, d Demand) CommitFunc {
	return func(_ context.Context, txn *store.Txn, placed []Placed) error {
		return writeInstances(txn, cluster, d, placed)
	}
}

// taskCommit writes the reservations and a minimal task record per placement, with its
// reservation, so the test can sum reservations afterwards.
func taskCommit(cluster string, d Demand, seq *int64, mu *sync.Mutex) CommitFunc {
	return func(_ context.Context, txn *store.Txn, placed []Placed) error {
		for _, p := range placed {
			mu.Lock()
			*seq++
			id := fmt.Sprintf("t%06d", *seq)
			mu.Unlock()
			txn.Create(keys.Task(testScope, cluster, id), &storev1.TaskRecord{
				ClusterName: cluster, ContainerInstanceId: p.InstanceID,
				ReservedCpu: d.CPU, ReservedMemory: d.Memory,
			})
			txn.PutIndex(keys.TaskList(testScope, cluster, "RUNNING", keys.DimInstance, p.InstanceID, id))
		}
		return writeInstances(txn, cluster, d, placed)
	}
}

func TestPlacerConcurrentNeverOvercommits(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	// 5 instances × 4 tasks of capacity = 20 slots for 200 concurrent placements.
	for i := range 5 {
		putInstance(t, cli, "tight", "i"+strconv.Itoa(i), 1024, 1024, nil)
	}
	for _, cached := range []bool{true, false} {
		t.Run("cache="+strconv.FormatBool(cached), func(t *testing.T) {
			cluster := "tight"
			if !cached {
				cluster = "tight2"
				for i := range 5 {
					putInstance(t, cli, cluster, "i"+strconv.Itoa(i), 1024, 1024, nil)
				}
			}
			var opts []Option
			if !cached {
				opts = append(opts, WithoutCache())
			}
			p := NewPlacer(cli, nil, opts...)
			defer p.Close()
			d := Demand{CPU: 256, Memory: 200}
			var seq int64
			var mu sync.Mutex
			var wg sync.WaitGroup
			var placed, failed, errs int
			var cmu sync.Mutex
			// Without the cache every call lists the cluster and conflicts are the rule, so
			// fewer calls keep the test fast under -race; the cached path takes the full
			// 200.
			calls := 200
			if !cached {
				calls = 60
			}
			for range calls {
				wg.Go(func() {
					res, err := p.Place(ctx, PlaceRequest{
						Account: testScope, Cluster: cluster,
						Request: Request{Demand: d, Strategy: []Strategy{{Type: "binpack", Field: "cpu"}}},
						Commit:  taskCommit(cluster, d, &seq, &mu),
					})
					cmu.Lock()
					defer cmu.Unlock()
					switch {
					case err != nil:
						errs++
						t.Error(err)
					case len(res.Placed) == 1:
						placed++
					default:
						failed++
						if res.Failures[0].Reason != ReasonCPU {
							t.Errorf("failure %+v", res.Failures)
						}
					}
				})
			}
			wg.Wait()
			if placed != 20 || failed != calls-20 {
				t.Fatalf("placed %d failed %d errors %d, want 20/%d/0", placed, failed, errs, calls-20)
			}
			// Sum reservations per instance from the task records.
			tasks, _, err := store.List[*storev1.TaskRecord](ctx, cli, keys.Tasks(testScope, cluster), 1000, "")
			if err != nil {
				t.Fatal(err)
			}
			sum := map[string]int32{}
			for _, it := range tasks {
				sum[it.Value.ContainerInstanceId] += it.Value.ReservedCpu
			}
			for id, cpu := range sum {
				if cpu > 1024 {
					t.Fatalf("instance %s over-committed: %d CPU units", id, cpu)
				}
				rec, _, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, cluster, id))
				if err != nil {
					t.Fatal(err)
				}
				rem := FromRecord(id, rec, 0)
				if rem.CPU != int64(1024-cpu) || rem.CPU < 0 {
					t.Fatalf("instance %s remaining CPU %d, reserved %d", id, rem.CPU, cpu)
				}
				if rec.ActiveTasks != cpu/256 {
					t.Fatalf("instance %s active tasks %d", id, rec.ActiveTasks)
				}
			}
		})
	}
}

func TestPlacerStartTaskAndFence(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	putInstance(t, cli, "c", "a", 1024, 1024, nil)
	putInstance(t, cli, "c", "b", 1024, 1024, nil)
	p := NewPlacer(cli, nil)
	defer p.Close()
	d := Demand{CPU: 512, Memory: 512, Ports: []int32{8080}}
	res, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "c",
		Request: Request{Demand: d, Count: 2, Instances: []string{"b"}}, Commit: reserveOnly("c", d)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Placed) != 1 || res.Placed[0].InstanceID != "b" || len(res.Failures) != 1 || res.Failures[0].Reason != ReasonPorts {
		t.Fatalf("result %+v", res)
	}
	// A failed fence compare is returned, not retried.
	one := Demand{CPU: 1}
	_, err = p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "c", Request: Request{Demand: one}, Commit: reserveOnly("c", one),
		If: []clientv3.Cmp{store.Fence("/berth/v1/leader/none", 42)}})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("fenced place: %v", err)
	}
	// A deposed leader's placement through its fenced KV fails, alone or in a group,
	// and writes no reservation.
	deposed := store.FencedKV(cli, "/berth/v1/leader/none", 42)
	_, err = p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "c", Request: Request{Demand: one}, Commit: reserveOnly("c", one), KV: deposed})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("place through a deposed leader's KV: %v, want ErrFenced", err)
	}
	_, err = p.PlaceGroup(ctx, deposed, testScope, "c", []Request{{Demand: Demand{CPU: 1}}}, func(_ context.Context, txn *store.Txn, placed [][]Placed) error {
		for _, pl := range placed[0] {
			txn.Update(keys.Instance(testScope, "c", pl.InstanceID), pl.InstanceRev, pl.Instance)
		}
		return nil
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("group place through a deposed leader's KV: %v, want ErrFenced", err)
	}
	for _, id := range []string{"a", "b"} {
		rec, _, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, "c", id))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int32{"a": 1024, "b": 512}[id]
		if got := findResource(rec.GetContainerInstance().GetRemainingResources(), ResourceCPU).GetIntegerValue(); got != want {
			t.Fatalf("instance %s CPU left %d, want %d: a fenced placement wrote", id, got, want)
		}
	}
}
