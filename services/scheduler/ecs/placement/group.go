package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GroupCommitFunc adds to txn the writes of several requests placed together: placed[i]
// are request i's placements. Like CommitFunc, it must write each touched instance
// record (Placed.Instance, shared by every placement on that instance in the group and
// changed in place) under Placed.InstanceRev. It may run several times.
type GroupCommitFunc func(ctx context.Context, txn *store.Txn, placed [][]Placed) error

// PlaceGroup places several requests on one cluster in one txn: it plans them one after
// another on one snapshot (each sees the ones before it) and calls commit once with all
// the placements; the hook writes the instances (as task.PlaceTxn does). Its commit
// does not wait for the cluster's other commits in this process: a group plans on the
// instances as the commits in flight write them and chains on them (see Placer), and a
// group whose instances changed in the cache while it planned plans again; a conflict
// in etcd re-reads the touched instances (but those a commit in flight writes) and plans
// the whole group again. A request refused for want of room that commits in flight took
// waits for them and is planned again if one of them failed. It returns one result per
// request, or an error as Place does (nothing written then). The txn commits through kv
// (nil: the Placer's client), as PlaceRequest.KV.
func (p *Placer) PlaceGroup(ctx context.Context, kv clientv3.KV, account keys.Scope, cluster string, reqs []Request, commit GroupCommitFunc) (res []PlaceResult, err error) {
	defer func(start time.Time) { p.metrics.observeGroup(start, res, err) }(time.Now())
	return p.placeGroup(ctx, kv, account, cluster, reqs, commit)
}

// placeGroup is PlaceGroup without its metrics; Place is a group of one.
func (p *Placer) placeGroup(ctx context.Context, kv clientv3.KV, account keys.Scope, cluster string, reqs []Request, commit GroupCommitFunc) ([]PlaceResult, error) {
	for _, r := range reqs {
		if err := Compile(r); err != nil {
			return nil, err
		}
	}
	eng := p.rngPool.Get().(*Engine)
	defer p.rngPool.Put(eng)
	var stale []string
	// planAgain readies a new plan from the cache as it is (no re-read, no round trip),
	// after the cache moved under this one; it fails once that has happened too often.
	local := 0
	planAgain := func() error {
		if local++; local > 10000 {
			return fmt.Errorf("%w: instances keep changing", ErrConflicts)
		}
		stale = stale[:0]
		return nil
	}
	for attempt := 1; ; {
		snap, err := p.snapshot(ctx, account, cluster, stale)
		if err != nil {
			return nil, err
		}
		// Later requests are planned on the reservations of earlier ones, in a copy of the
		// snapshot's views; a group of one plans on the snapshot itself.
		views := snap.views
		if len(reqs) > 1 {
			views = slices.Clone(snap.views)
		}
		recs := map[string]*storev1.ContainerInstanceRecord{}
		var order []string
		results := make([]PlaceResult, len(reqs))
		placed := make([][]Placed, len(reqs))
		placedAny := false
		for i, r := range reqs {
			plan, err := eng.Place(views, r)
			if err != nil {
				return nil, err
			}
			results[i].Failures = plan.Failures
			for j, ch := range plan.Choices {
				id := ch.Instance.ID
				if recs[id] == nil {
					order = append(order, id)
				}
				pl, err := placedOn(snap, recs, j, ch)
				if err != nil {
					return nil, err
				}
				if i < len(reqs)-1 {
					k := snap.pos[id]
					v := views[k].clone()
					reserve(v, r.Demand, r.Group)
					views[k] = v
				}
				placed[i] = append(placed[i], pl)
				placedAny = true
			}
			results[i].Placed = placed[i]
		}
		// A request that failed may have failed for reservations of commits still in
		// flight: wait for them, and plan again if one did not land.
		if failedAny(results) {
			if fs := snap.busyFlights(); len(fs) > 0 && !landedAll(ctx, fs) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if err := planAgain(); err != nil {
					return nil, err
				}
				continue
			}
		}
		if !placedAny {
			return results, nil
		}
		// The hook may read etcd: it runs outside the cache's lock, before begin.
		txn := store.NewTxn(p.writer(kv))
		if err := commit(ctx, txn, placed); err != nil {
			return nil, err
		}
		f, fresh, err := p.begin(account, cluster, snap, order, recs, txn)
		if err != nil {
			return nil, err
		}
		if !fresh {
			if err := planAgain(); err != nil {
				return nil, err
			}
			continue
		}
		var rev int64
		if await(ctx, f) {
			rev, err = txn.Commit(ctx)
		} else if err = ctx.Err(); err == nil {
			err = fmt.Errorf("placement: %w: a commit this one chains on failed", store.ErrConflict)
		}
		settle(f, rev, err)
		if err == nil {
			for i := range results {
				if len(results[i].Placed) > 0 {
					results[i].Revision = rev
				}
			}
			return results, nil
		}
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("placement: commit: %w", err)
		}
		if attempt >= p.attempts {
			return nil, fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflicts, attempt, err)
		}
		attempt++
		stale = append(stale[:0], order...)
		if err := store.Sleep(ctx, store.Backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// failedAny reports whether a request of results has a failure.
func failedAny(results []PlaceResult) bool {
	for _, r := range results {
		if len(r.Failures) > 0 {
			return true
		}
	}
	return false
}
