package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
)

// Group commit of Place calls. An etcd txn costs far more than choosing an instance, so
// concurrent Place calls of one cluster whose writes can share a txn (the Placer writes
// the instances, no If compares, the Placer's own client: see groupable) queue, and one
// goroutine per cluster plans them one after another on one snapshot and commits them
// together: each call's hook writes into a txn of its own, merged into the group's while
// it fits in etcd's --max-txn-ops. A call whose writes clash with the group's waits for
// the next group; a group that fails for anything but a revision conflict is retried
// call by call (each then gets its own error, as without grouping).

// DefaultGroupOps is the --max-txn-ops a group commit stays within unless WithGroupOps
// says otherwise: etcd's default.
const DefaultGroupOps = 128

// WithGroupOps sets the most operations (writes, or compares) of one group-commit txn:
// the etcd cluster's --max-txn-ops. n ≤ 1 turns group commit off: every Place then
// commits in a txn of its own.
func WithGroupOps(n int) Option {
	return func(p *Placer) {
		if n <= 1 {
			n = 0
		}
		p.groupOps = n
	}
}

// groupQueue is a cluster's Place calls waiting for a group commit.
type groupQueue struct {
	mu      sync.Mutex
	calls   []*groupCall
	running bool // a goroutine is committing the queue's groups
}

// groupCall is one waiting Place call.
type groupCall struct {
	ctx  context.Context //nolint:containedctx // the waiting caller's, for its hook
	req  PlaceRequest
	done chan groupOutcome // buffered: the committer never blocks on a caller that left
}

// groupOutcome is what became of a groupCall: its result or error, or solo when it is to
// be placed in a txn of its own.
type groupOutcome struct {
	res  PlaceResult
	err  error
	solo bool
}

// groupable reports whether req may share a group commit: the Placer writes its
// instances (the hooks then write only keys of their own) and it has no If compares
// (a failed compare could not be told apart) and commits through the Placer's client.
func (p *Placer) groupable(req PlaceRequest) bool {
	return p.groupOps > 1 && !p.noCache && !req.CommitWritesInstances && len(req.If) == 0 && req.KV == nil
}

// placeGrouped queues req for its cluster's group commit and waits for the outcome.
func (p *Placer) placeGrouped(ctx context.Context, req PlaceRequest) (PlaceResult, error) {
	cc, err := p.cache(ctx, req.Account, req.Cluster)
	if err != nil {
		return PlaceResult{}, err
	}
	call := &groupCall{ctx: ctx, req: req, done: make(chan groupOutcome, 1)}
	q := &cc.group
	q.mu.Lock()
	q.calls = append(q.calls, call)
	if !q.running {
		q.running = true
		p.wg.Add(1)
		go p.runGroups(req.Account, req.Cluster, q)
	}
	q.mu.Unlock()
	select {
	case out := <-call.done:
		if out.solo {
			return p.placeSolo(ctx, req)
		}
		return out.res, out.err
	case <-ctx.Done():
		return PlaceResult{}, ctx.Err()
	}
}

// runGroups commits q's calls, group after group, until q is empty.
func (p *Placer) runGroups(account keys.Scope, cluster string, q *groupQueue) {
	defer p.wg.Done()
	eng := p.rngPool.Get().(*Engine)
	defer p.rngPool.Put(eng)
	var rest []*groupCall
	for {
		q.mu.Lock()
		calls := append(rest, q.calls...)
		q.calls = nil
		if len(calls) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		rest = p.commitGroup(eng, account, cluster, calls)
	}
}

// member is a call taken into a group: its placements and the engine's failures.
type member struct {
	call     *groupCall
	placed   []Placed
	failures []Failure
}

// commitGroup places calls in one txn, as many as fit, and answers each; it returns the
// calls left for the next group.
func (p *Placer) commitGroup(eng *Engine, account keys.Scope, cluster string, calls []*groupCall) (rest []*groupCall) {
	ctx := p.ctx
	var stale []string
	local := 0
	for attempt := 1; ; {
		snap, err := p.snapshot(ctx, account, cluster, stale)
		if err != nil {
			for _, c := range calls {
				c.done <- groupOutcome{err: err}
			}
			return rest
		}
		members, order, recs, txn, left := p.buildGroup(eng, account, cluster, snap, calls)
		rest = append(rest, left...)
		if len(members) == 0 {
			return rest
		}
		// The group's instances take turns with other placements of this process on
		// them (as a single Place's do); a group whose instances changed meanwhile is
		// planned again from the cache.
		unlock, fresh := p.lock(account, cluster, false, snap, slices.Clone(order))
		if !fresh {
			unlock()
			if local++; local > 10000 {
				answer(members, groupOutcome{err: fmt.Errorf("%w: instances keep changing", ErrConflicts)})
				return rest
			}
			stale = stale[:0]
			calls = callsOf(members)
			continue
		}
		rev, err := txn.Commit(ctx)
		if err == nil {
			var all []Placed
			for _, m := range members {
				for i := range m.placed {
					m.placed[i].Instance = recs[m.placed[i].InstanceID]
				}
				all = append(all, m.placed...)
			}
			p.committed(account, cluster, all, rev)
			unlock()
			for _, m := range members {
				m.call.done <- groupOutcome{res: PlaceResult{Placed: m.placed, Failures: m.failures, Revision: rev}}
			}
			return rest
		}
		unlock()
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			if len(members) == 1 {
				answer(members, groupOutcome{err: fmt.Errorf("placement: commit: %w", err)})
			} else {
				// Which call's writes failed is not known: each goes on its own.
				answer(members, groupOutcome{solo: true})
			}
			return rest
		}
		if attempt >= p.attempts {
			answer(members, groupOutcome{err: fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflicts, attempt, err)})
			return rest
		}
		attempt++
		stale = append(stale[:0], order...)
		calls = callsOf(members)
		if err := store.Sleep(ctx, store.Backoff(attempt)); err != nil {
			answer(members, groupOutcome{err: err})
			return rest
		}
	}
}

// buildGroup plans calls one after another on snap (each sees the reservations of those
// before it) and builds the group's txn: each member's hook writes and one CAS update per
// touched instance (order, records in recs). Calls that fail alone, or place nothing,
// are answered here; the calls that do not fit are returned in left.
func (p *Placer) buildGroup(eng *Engine, account keys.Scope, cluster string, snap *snapshot, calls []*groupCall) (members []member, order []string, recs map[string]*storev1.ContainerInstanceRecord, txn *store.Txn, left []*groupCall) {
	views := slices.Clone(snap.views)
	recs = map[string]*storev1.ContainerInstanceRecord{}
	txn = store.NewTxn(p.cli)
	for i, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.done <- groupOutcome{err: err}
			continue
		}
		r := c.req.Request
		plan, err := eng.Place(views, r)
		if err != nil {
			c.done <- groupOutcome{err: err}
			continue
		}
		if len(plan.Choices) == 0 {
			c.done <- groupOutcome{res: PlaceResult{Failures: plan.Failures}}
			continue
		}
		// This call's records: copies of the group's (or the snapshot's), so that a call
		// that does not join leaves the group's as they were.
		mine := map[string]*storev1.ContainerInstanceRecord{}
		placed := make([]Placed, 0, len(plan.Choices))
		newIDs := 0
		var bad error
		for j, ch := range plan.Choices {
			id := ch.Instance.ID
			rec := mine[id]
			if rec == nil {
				base := recs[id]
				if base == nil {
					base = snap.entry(id).rec
					newIDs++
				}
				rec = proto.Clone(base).(*storev1.ContainerInstanceRecord)
				mine[id] = rec
			}
			if rec.ContainerInstance == nil {
				bad = fmt.Errorf("placement: instance %s has no container_instance", id)
				break
			}
			if err := Reserve(rec.ContainerInstance, r.Demand); err != nil {
				bad = fmt.Errorf("placement: instance %s: %w", id, err)
				break
			}
			rec.ContainerInstance.PendingTasksCount++
			placed = append(placed, Placed{Index: j, InstanceID: id, InstanceARN: ch.Instance.ARN, Instance: rec, InstanceRev: snap.entry(id).rev})
		}
		if bad != nil {
			c.done <- groupOutcome{err: bad}
			continue
		}
		sub := store.NewTxn(p.cli)
		if c.req.Commit != nil {
			if err := c.req.Commit(c.ctx, sub, placed); err != nil {
				c.done <- groupOutcome{err: err}
				continue
			}
		}
		if err := sub.Err(); err != nil {
			c.done <- groupOutcome{err: fmt.Errorf("placement: commit: %w", err)}
			continue
		}
		if len(members) > 0 && txn.Size()+sub.Size()+len(order)+newIDs > p.groupOps {
			return members, order, recs, p.instanceWrites(txn, account, cluster, snap, order, recs), append(left, calls[i:]...)
		}
		if err := txn.Merge(sub); err != nil {
			// Its writes clash with an earlier member's: it waits for the next group.
			left = append(left, c)
			continue
		}
		for id, rec := range mine {
			if recs[id] == nil {
				order = append(order, id)
			}
			recs[id] = rec
		}
		for _, ch := range plan.Choices {
			k := snap.pos[ch.Instance.ID]
			v := views[k].clone()
			reserve(v, r.Demand, r.Group)
			views[k] = v
		}
		members = append(members, member{call: c, placed: placed, failures: plan.Failures})
	}
	return members, order, recs, p.instanceWrites(txn, account, cluster, snap, order, recs), left
}

// instanceWrites adds to txn the CAS update of each instance of order (as read in snap,
// written as in recs) and returns txn.
func (p *Placer) instanceWrites(txn *store.Txn, account keys.Scope, cluster string, snap *snapshot, order []string, recs map[string]*storev1.ContainerInstanceRecord) *store.Txn {
	for _, id := range order {
		txn.Update(keys.Instance(account, cluster, id), snap.entry(id).rev, recs[id])
	}
	return txn
}

// answer sends out to every member.
func answer(members []member, out groupOutcome) {
	for _, m := range members {
		m.call.done <- out
	}
}

// callsOf returns the members' calls.
func callsOf(members []member) []*groupCall {
	out := make([]*groupCall, len(members))
	for i, m := range members {
		out[i] = m.call
	}
	return out
}
