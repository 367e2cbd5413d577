package placement

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/etcdembed"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Concurrent Place calls share txns (group commit): several calls commit at one
// revision, no instance is over-committed, the instance records hold every reservation,
// a call whose hook fails fails alone, and a call whose writes clash with another's
// (the same key) is placed in a later txn rather than failing.
func TestPlaceGroupCommit(t *testing.T) {
	cli := etcdembed.StartForTest(t)
	ctx := context.Background()
	// 10 instances × 8 slots = 80 slots for 120 placements.
	for i := range 10 {
		putInstance(t, cli, "g", "i"+strconv.Itoa(i), 8*128, 8*128, nil)
	}
	p := NewPlacer(cli, nil, WithGroupOps(64))
	defer p.Close()
	d := Demand{CPU: 128, Memory: 128}
	var seq int64
	var mu sync.Mutex
	commit := taskCommit("g", d, &seq, &mu)
	hookErr := errors.New("hook refused")
	var wg sync.WaitGroup
	type outcome struct {
		res PlaceResult
		err error
	}
	outs := make([]outcome, 120)
	for i := range 120 {
		wg.Go(func() {
			c := commit
			switch {
			case i%40 == 7:
				c = func(context.Context, *store.Txn, []Placed) error { return hookErr }
			case i%40 == 9:
				// Every such call writes the same extra key: no two can share a txn.
				c = func(ctx context.Context, txn *store.Txn, placed []Placed) error {
					txn.Put(keys.ClientToken(testScope, "g", "shared"), wrapperspb.String(strconv.Itoa(i)))
					return commit(ctx, txn, placed)
				}
			}
			res, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "g", Request: Request{Demand: d}, Commit: c})
			outs[i] = outcome{res, err}
		})
	}
	wg.Wait()
	placed, full, refused := 0, 0, 0
	byRev := map[int64]int{}
	for i, o := range outs {
		switch {
		case i%40 == 7 && errors.Is(o.err, hookErr):
			refused++
		case i%40 == 7 && (o.err != nil || len(o.res.Placed) > 0):
			// Its hook runs only when there is room, and then fails the call.
			t.Errorf("call %d: %v, placed %d; want the hook's error or no room", i, o.err, len(o.res.Placed))
		case o.err != nil:
			t.Errorf("call %d: %v", i, o.err)
		case len(o.res.Placed) == 1:
			placed++
			byRev[o.res.Revision]++
		case len(o.res.Failures) > 0:
			full++
		}
	}
	if placed != 80 || placed+full+refused != 120 {
		t.Errorf("placed %d, no room %d, refused by the hook %d; want 80 placed of 120", placed, full, refused)
	}
	shared := 0
	for _, n := range byRev {
		shared = max(shared, n)
	}
	if shared < 2 {
		t.Errorf("no two calls shared a txn (%d txns for %d placements)", len(byRev), placed)
	}
	// Every instance holds exactly its tasks' reservations.
	tasks, _, err := store.List[*storev1.TaskRecord](ctx, cli, keys.Tasks(testScope, "g"), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, it := range tasks {
		per[it.Value.GetContainerInstanceId()]++
	}
	if len(tasks) != 80 {
		t.Errorf("%d task records, want 80", len(tasks))
	}
	for i := range 10 {
		id := "i" + strconv.Itoa(i)
		rec, _, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, "g", id))
		if err != nil {
			t.Fatal(err)
		}
		ci := rec.GetContainerInstance()
		if left := resource(ci, ResourceCPU).GetIntegerValue(); left != int32(8-per[id])*128 || per[id] > 8 || ci.GetPendingTasksCount() != int32(per[id]) {
			t.Errorf("%s: %d tasks, cpu left %d, pending %d", id, per[id], left, ci.GetPendingTasksCount())
		}
	}
}
