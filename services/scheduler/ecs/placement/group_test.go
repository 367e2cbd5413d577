package placement

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// groupCommit is taskCommit for PlaceGroup: every request's placements in one txn.
func groupCommit(cluster string, d Demand, seq *int64, mu *sync.Mutex) GroupCommitFunc {
	one := taskCommit(cluster, d, seq, mu)
	return func(ctx context.Context, txn *store.Txn, placed [][]Placed) error {
		var all []Placed
		for _, pl := range placed {
			all = append(all, pl...)
		}
		return one(ctx, txn, all)
	}
}

// PlaceGroup plans a group's requests one after another on one snapshot, so a request
// sees the room the ones before it took, and commits them at one revision; concurrent
// groups on a full cluster (chaining on each other's commits in flight, re-planning when
// their instances changed meanwhile) never over-commit, and each instance record holds exactly its
// tasks' reservations; a hook's error fails the group and writes nothing.
func TestPlaceGroup(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	p := NewPlacer(cli, nil)
	defer p.Close()
	d := Demand{CPU: 128, Memory: 128}
	var seq int64
	var mu sync.Mutex

	t.Run("one group sees its own reservations", func(t *testing.T) {
		putInstance(t, cli, "solo", "i0", 8*128, 8*128, nil)
		reqs := make([]Request, 9)
		for i := range reqs {
			reqs[i] = Request{Demand: d}
		}
		res, err := p.PlaceGroup(ctx, nil, testScope, "solo", reqs, groupCommit("solo", d, &seq, &mu))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res[:8] {
			if len(r.Placed) != 1 || r.Revision != res[0].Revision || r.Revision == 0 {
				t.Errorf("request %d: placed %d at revision %d, want 1 at %d", i, len(r.Placed), r.Revision, res[0].Revision)
			}
		}
		if last := res[8]; len(last.Placed) != 0 || len(last.Failures) != 1 || last.Failures[0].Reason != ReasonCPU {
			t.Errorf("ninth request: %+v, want RESOURCE:CPU (the eight before it filled the instance)", last)
		}
	})

	t.Run("concurrent groups never over-commit", func(t *testing.T) {
		// 10 instances × 8 slots = 80 slots for 12 groups × 10 requests.
		for i := range 10 {
			putInstance(t, cli, "g", "i"+strconv.Itoa(i), 8*128, 8*128, nil)
		}
		commit := groupCommit("g", d, &seq, &mu)
		var wg sync.WaitGroup
		var placed, full int
		var rmu sync.Mutex
		for range 12 {
			wg.Go(func() {
				reqs := make([]Request, 10)
				for i := range reqs {
					reqs[i] = Request{Demand: d, Strategy: []Strategy{{Type: "binpack", Field: "cpu"}}}
				}
				res, err := p.PlaceGroup(ctx, nil, testScope, "g", reqs, commit)
				if err != nil {
					t.Error(err)
					return
				}
				rmu.Lock()
				defer rmu.Unlock()
				for _, r := range res {
					placed += len(r.Placed)
					if len(r.Failures) > 0 {
						full++
					}
				}
			})
		}
		wg.Wait()
		if placed != 80 || full != 40 {
			t.Fatalf("placed %d, no room %d; want 80 and 40", placed, full)
		}
		tasks, _, err := store.List[*storev1.TaskRecord](ctx, cli, keys.Tasks(testScope, "g"), 0, "")
		if err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		for _, it := range tasks {
			per[it.Value.GetContainerInstanceId()]++
		}
		for i := range 10 {
			id := "i" + strconv.Itoa(i)
			rec, _, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, "g", id))
			if err != nil {
				t.Fatal(err)
			}
			ci := rec.GetContainerInstance()
			if left := resource(ci, ResourceCPU).GetIntegerValue(); per[id] != 8 || left != 0 || rec.GetActiveTasks() != 8 {
				t.Errorf("%s: %d tasks, cpu left %d, active tasks %d; want 8, 0, 8", id, per[id], left, rec.GetActiveTasks())
			}
		}
	})

	t.Run("a hook's error writes nothing", func(t *testing.T) {
		putInstance(t, cli, "refused", "i0", 1024, 1024, nil)
		refused := errors.New("hook refused")
		_, err := p.PlaceGroup(ctx, nil, testScope, "refused", []Request{{Demand: d}}, func(context.Context, *store.Txn, [][]Placed) error { return refused })
		if !errors.Is(err, refused) {
			t.Fatalf("PlaceGroup: %v, want the hook's error", err)
		}
		rec, _, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, "refused", "i0"))
		if err != nil {
			t.Fatal(err)
		}
		if left := resource(rec.GetContainerInstance(), ResourceCPU).GetIntegerValue(); left != 1024 {
			t.Errorf("cpu left %d after a refused group, want 1024", left)
		}
	})

	t.Run("Place needs a hook", func(t *testing.T) {
		_, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "refused", Request: Request{Demand: d}})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Place without Commit: %v, want ErrInvalid", err)
		}
	})
}
