package agentsession

import (
	"context"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ackTimeout bounds one batch of inbox deletes (its callers may have left by then).
const ackTimeout = 30 * time.Second

// ackBatchKeys is how many acknowledged entries one batch deletes at most: one txn of
// store.DeleteMany.
const ackBatchKeys = 100

// inboxAcks deletes the inbox entries that agents acknowledged, for every session of
// the replica together (group commit): a session's ack waits while one store.DeleteMany
// deletes what all sessions acknowledged meanwhile. Each delete keeps its own compare,
// so the outcome per entry is the one a lone store.Delete would have had. A txn per
// acknowledged assignment was, after RunTask's own group commit, the busiest etcd write
// of the placement path: every placed task is acknowledged once.
type inboxAcks struct {
	kv clientv3.KV

	mu      sync.Mutex
	queue   []*ackCall
	running bool
}

type ackCall struct {
	ctx   context.Context //nolint:containedctx // the waiting session's
	items []store.KeyRevision
	done  chan ackOutcome
}

type ackOutcome struct {
	errs []error
	err  error
}

// delete deletes items (each only at its ModRevision, see store.DeleteMany) in a batch
// with other sessions' and returns one outcome per item, or an error for them all (ctx's
// when the caller stops waiting; the batch still runs).
func (a *inboxAcks) delete(ctx context.Context, items []store.KeyRevision) ([]error, error) {
	call := &ackCall{ctx: ctx, items: items, done: make(chan ackOutcome, 1)}
	a.mu.Lock()
	a.queue = append(a.queue, call)
	if !a.running {
		a.running = true
		go a.run()
	}
	a.mu.Unlock()
	select {
	case out := <-call.done:
		return out.errs, out.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run commits batches until the queue is empty.
func (a *inboxAcks) run() {
	for {
		a.mu.Lock()
		if len(a.queue) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		n, keys := 0, 0
		for n < len(a.queue) && (n == 0 || keys+len(a.queue[n].items) <= ackBatchKeys) {
			keys += len(a.queue[n].items)
			n++
		}
		calls := slices.Clone(a.queue[:n])
		a.queue = slices.Delete(a.queue, 0, n)
		a.mu.Unlock()
		a.commit(calls)
	}
}

// commit deletes the calls' items in one store.DeleteMany. An entry two calls name (an
// agent that acked twice, on two sessions) is deleted once and both get its outcome.
func (a *inboxAcks) commit(calls []*ackCall) {
	var items []store.KeyRevision
	at := map[store.KeyRevision]int{}
	for _, c := range calls {
		for _, it := range c.items {
			if _, ok := at[it]; !ok {
				at[it] = len(items)
				items = append(items, it)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(calls[0].ctx), ackTimeout)
	defer cancel()
	errs, err := a.deleteUnique(ctx, items)
	for _, c := range calls {
		if err != nil {
			c.done <- ackOutcome{err: err}
			continue
		}
		out := make([]error, len(c.items))
		for i, it := range c.items {
			out[i] = errs[at[it]]
		}
		c.done <- ackOutcome{errs: out}
	}
}

// deleteUnique is store.DeleteMany over items that may name one key at two revisions
// (redelivered between two acks): etcd refuses a txn that writes a key twice, so each
// further revision of a key goes in a later round.
func (a *inboxAcks) deleteUnique(ctx context.Context, items []store.KeyRevision) ([]error, error) {
	var rounds [][]int
	next := map[string]int{}
	for i, it := range items {
		r := next[it.Key]
		next[it.Key] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	errs := make([]error, len(items))
	for _, idx := range rounds {
		part := make([]store.KeyRevision, len(idx))
		for j, i := range idx {
			part[j] = items[i]
		}
		e, err := store.DeleteMany(ctx, a.kv, part)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			errs[i] = e[j]
		}
	}
	return errs, nil
}
