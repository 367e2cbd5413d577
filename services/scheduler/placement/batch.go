package placement

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
	"google.golang.org/protobuf/proto"
)

// Group commit. Concurrent Place calls on one cluster of this process join a queue; one
// goroutine per cluster takes whatever is queued, plans the calls one after another on a
// working copy of the snapshot (each sees the reservations of the ones before it), and
// commits them all in one txn that CASes every touched instance. An etcd txn costs far
// more than a plan (gRPC both ways, raft, apply), so sharing one among several placements
// is what makes thousands per second possible on two cores.

// maxBatchTasks bounds the tasks of one group commit, keeping the txn under etcd's
// default limit of 128 operations (a task with its index, inbox and instance writes is
// about four, more with a caller's hook).
const maxBatchTasks = 24

type batchCall struct {
	ctx  context.Context //nolint:containedctx // the waiting caller's context, checked by the batcher
	req  PlaceRequest
	done chan batchResult
}

type batchResult struct {
	res PlaceResult
	err error
}

type batcher struct {
	mu      sync.Mutex
	queue   []*batchCall
	running bool // a runBatcher goroutine owns the queue
}

func (p *Placer) placeBatched(ctx context.Context, req PlaceRequest) (PlaceResult, error) {
	cc, err := p.cache(ctx, req.Account, req.Cluster)
	if err != nil {
		return PlaceResult{}, err
	}
	call := &batchCall{ctx: ctx, req: req, done: make(chan batchResult, 1)}
	b := &cc.batch
	b.mu.Lock()
	b.queue = append(b.queue, call)
	if !b.running {
		b.running = true
		p.wg.Add(1)
		go p.runBatcher(req.Account, req.Cluster, cc)
	}
	b.mu.Unlock()
	select {
	case r := <-call.done:
		return r.res, r.err
	case <-ctx.Done():
		// The batcher may still commit this call; the caller sees the context error, as
		// with any write whose outcome it stopped waiting for.
		return PlaceResult{}, ctx.Err()
	}
}

// runBatcher commits queued calls until the queue stays empty, then exits.
func (p *Placer) runBatcher(account keys.Scope, cluster string, cc *clusterCache) {
	defer p.wg.Done()
	eng := NewEngine(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	b := &cc.batch
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		// Take calls up to maxBatchTasks tasks (at least one call).
		n, tasks := 0, 0
		for n < len(b.queue) && (n == 0 || tasks+max(b.queue[n].req.Request.Count, 1) <= maxBatchTasks) {
			tasks += max(b.queue[n].req.Request.Count, 1)
			n++
		}
		calls := slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
		b.mu.Unlock()
		if p.ctx.Err() != nil {
			for _, c := range calls {
				c.done <- batchResult{err: p.ctx.Err()}
			}
			continue
		}
		p.commitBatch(account, cluster, cc, eng, calls)
	}
}

// commitBatch plans and commits calls together, retrying on conflicts.
func (p *Placer) commitBatch(account keys.Scope, cluster string, cc *clusterCache, eng *Engine, calls []*batchCall) {
	var stale []string
	for attempt := 1; ; attempt++ {
		// Drop calls whose callers gave up.
		calls = slices.DeleteFunc(calls, func(c *batchCall) bool {
			if c.ctx.Err() != nil {
				c.done <- batchResult{err: c.ctx.Err()}
				return true
			}
			return false
		})
		if len(calls) == 0 {
			return
		}
		// The batch outlives any one caller: etcd calls use the Placer's context.
		ctx := p.ctx
		snap, err := p.snapshot(ctx, account, cluster, stale)
		if err != nil {
			for _, c := range calls {
				c.done <- batchResult{err: err}
			}
			return
		}
		views := slices.Clone(snap.views)
		recs := map[string]*storev1.ContainerInstanceRecord{}
		var order []string
		txn := store.NewTxn(p.cli)
		results := make([]batchResult, len(calls))
		var failed []int // calls whose hook failed: answered, then the batch is redone without them
		for i, c := range calls {
			plan, err := eng.Place(views, c.req.Request)
			if err != nil {
				results[i].err = err
				continue
			}
			results[i].res.Failures = plan.Failures
			if len(plan.Choices) == 0 {
				continue
			}
			placed := make([]Placed, 0, len(plan.Choices))
			for j, ch := range plan.Choices {
				id := ch.Instance.ID
				rec := recs[id]
				if rec == nil {
					rec = proto.Clone(snap.entry(id).rec).(*storev1.ContainerInstanceRecord)
					recs[id] = rec
					order = append(order, id)
				}
				if rec.ContainerInstance == nil || Reserve(rec.ContainerInstance, c.req.Request.Demand) != nil {
					results[i].err = fmt.Errorf("placement: instance %s: record and view disagree", id)
					break
				}
				// Later calls of the batch see this reservation.
				k := snap.pos[id]
				v := views[k].clone()
				reserve(v, c.req.Request.Demand, c.req.Request.Group)
				views[k] = v
				placed = append(placed, Placed{Index: j, InstanceID: id, InstanceARN: ch.Instance.ARN, Instance: rec, InstanceRev: snap.entry(id).rev})
			}
			if results[i].err != nil {
				continue
			}
			if c.req.Commit != nil {
				if err := c.req.Commit(c.ctx, txn, placed); err != nil {
					results[i].err = err
					failed = append(failed, i)
					break
				}
			}
			results[i].res.Placed = placed
		}
		if len(failed) > 0 {
			// A hook failed after writing into the shared txn: answer that call and redo
			// the batch without it (its reservations are discarded with this txn).
			c := calls[failed[0]]
			c.done <- batchResult{err: results[failed[0]].err}
			calls = slices.Delete(calls, failed[0], failed[0]+1)
			stale = stale[:0]
			continue
		}
		for _, id := range order {
			txn.Update(keys.Instance(account, cluster, id), snap.entry(id).rev, recs[id])
		}
		// Instance locks, so direct (fenced or hook-written) placements in this process
		// take turns with the batch.
		unlock := p.lockIDs(cc, order)
		rev := int64(0)
		if len(order) > 0 {
			rev, err = txn.Commit(ctx)
		}
		if err == nil {
			for _, id := range order {
				cc.upsert(id, recs[id], rev)
			}
			unlock()
			for i, c := range calls {
				if len(results[i].res.Placed) > 0 {
					results[i].res.Revision = rev
				}
				c.done <- results[i]
			}
			return
		}
		unlock()
		if (!errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound)) || attempt >= p.attempts {
			if errors.Is(err, store.ErrConflict) {
				err = fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflicts, attempt, err)
			} else {
				err = fmt.Errorf("placement: commit: %w", err)
			}
			for _, c := range calls {
				c.done <- batchResult{err: err}
			}
			return
		}
		stale = append(stale[:0], order...)
		if err := store.Sleep(p.ctx, store.Backoff(attempt)); err != nil {
			for _, c := range calls {
				c.done <- batchResult{err: err}
			}
			return
		}
	}
}

// lockIDs takes the per-instance commit locks of ids in id order.
func (p *Placer) lockIDs(cc *clusterCache, ids []string) func() {
	sorted := slices.Sorted(slices.Values(ids))
	cc.mu.Lock()
	locks := make([]*sync.Mutex, 0, len(sorted))
	for _, id := range sorted {
		l := cc.locks[id]
		if l == nil {
			l = &sync.Mutex{}
			cc.locks[id] = l
		}
		locks = append(locks, l)
	}
	cc.mu.Unlock()
	for _, l := range locks {
		l.Lock()
	}
	return func() {
		for i := len(locks) - 1; i >= 0; i-- {
			locks[i].Unlock()
		}
	}
}
