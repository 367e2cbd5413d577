package control

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// stateTimeout bounds one batch of state changes (its callers may have left by then).
const stateTimeout = 30 * time.Second

// stateBatchTries is how many batches a change may fail in (another writer changed its
// instance or task between the batch's read and its commit) before it is recorded alone,
// with backoff.
const stateBatchTries = 5

// stateBatchMax is the most state changes one batch commits (fewer under a small
// --max-txn-ops: stateBatchLimit).
const stateBatchMax = 64

// stateBatcher records the agents' task state changes of the replica together (group
// commit): a change waits while one batch reads the task records its changes name, and
// the instance records of those that write them (a task stopping: its reservation goes
// back; a task starting writes only its own record and keys), in at most two multi-key
// reads, and commits them in one etcd txn, one nested txn per container instance
// (store.CommitEach), so that each instance's changes land or not on their own, as a
// lone ApplyTaskStateChange's would. The changes of an instance whose compares fail (a
// placement or another replica wrote it meanwhile) go to the front of the queue and are
// read again by the next batch (batches of one replica do not conflict with each other:
// one runs at a time); after stateBatchTries such failures, or when etcd fails, a change
// is recorded alone (applyStateChange), with its retries and backoff. Every placed task
// reports PENDING and RUNNING and later STOPPED: a read-read-txn round a report was, with
// placements through RunTask, the heaviest etcd traffic of a busy cluster.
type stateBatcher struct {
	s *Server

	mu      sync.Mutex
	queue   []*stateCall
	running bool
}

// stateCall is one ApplyTaskStateChange waiting for its batch.
type stateCall struct {
	ctx     context.Context //nolint:containedctx // the waiting caller's
	account keys.Scope
	cluster string
	instID  string
	taskID  string
	ch      *agentv1.TaskStateChange
	denied  error
	done    chan error
	batches int // batches whose nested txn for this change failed
}

func (c *stateCall) taskKey() string     { return keys.Task(c.account, c.cluster, c.taskID) }
func (c *stateCall) instanceKey() string { return keys.Instance(c.account, c.cluster, c.instID) }

// apply queues c with the replica's other state changes and returns its outcome, or ctx's
// error when the caller stops waiting (the batch still runs).
func (b *stateBatcher) apply(ctx context.Context, c *stateCall) error {
	c.ctx, c.done = ctx, make(chan error, 1)
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// limit is how many changes a batch holds: each writes a task record, its index keys, an
// instance record and an inbox entry, fewer than 16 operations, and the batch's nested
// txns share etcd's --max-txn-ops with the top level.
func (b *stateBatcher) limit() int {
	return max(1, min(stateBatchMax, b.s.placing.txnOps()/16))
}

// run commits batches until the queue is empty. A change of a task that already has one
// in the batch waits for the next batch, so each batch writes a task once.
func (b *stateBatcher) run() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		limit := b.limit()
		var batch, rest []*stateCall
		taken := map[string]bool{}
		for _, c := range b.queue {
			if len(batch) < limit && !taken[c.taskKey()] {
				taken[c.taskKey()] = true
				batch = append(batch, c)
			} else {
				rest = append(rest, c)
			}
		}
		b.queue = rest
		b.mu.Unlock()
		b.commit(batch)
	}
}

// instanceChanges are the changes of one batch on one container instance: one nested txn.
type instanceChanges struct {
	txn   *store.Txn
	key   string
	moves []func(*storev1.ContainerInstanceRecord) // what the changes do to the instance
	rec   *storev1.ContainerInstanceRecord         // read when moves is not empty; nil when gone
	rev   int64
	calls []*stateCall
}

// commit records calls (distinct tasks) in one read of their records, one read of the
// instance records that changes stopping (or otherwise leaving) tasks write, and one
// store.CommitEach; see stateBatcher. A batch of tasks starting reads no instance.
func (b *stateBatcher) commit(calls []*stateCall) {
	s := b.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(calls[0].ctx), stateTimeout)
	defer cancel()
	taskKeys := make([]string, len(calls))
	for i, c := range calls {
		taskKeys[i] = c.taskKey()
	}
	tasks, taskRevs, err := getMany[*storev1.TaskRecord](ctx, s.kv, taskKeys)
	if err != nil {
		b.alone(calls)
		return
	}
	groups := map[string]*instanceChanges{}
	var order []*instanceChanges
	for i, c := range calls {
		g := groups[c.instanceKey()]
		if g == nil {
			g = &instanceChanges{txn: store.NewTxn(s.kv), key: c.instanceKey()}
		}
		move, staged, err := s.stageChange(g.txn, c, tasks[i], taskRevs[i])
		if err != nil || !staged {
			c.done <- err // refused, or nothing to write
			continue
		}
		if groups[c.instanceKey()] == nil {
			groups[c.instanceKey()] = g
			order = append(order, g)
		}
		if move != nil {
			g.moves = append(g.moves, move)
		}
		g.calls = append(g.calls, c)
	}
	if len(order) == 0 {
		return
	}
	var moved []*instanceChanges
	var instKeys []string
	for _, g := range order {
		if len(g.moves) > 0 {
			moved = append(moved, g)
			instKeys = append(instKeys, g.key)
		}
	}
	if len(instKeys) > 0 {
		insts, instRevs, err := getMany[*storev1.ContainerInstanceRecord](ctx, s.kv, instKeys)
		if err != nil {
			b.alone(calls)
			return
		}
		for i, g := range moved {
			g.rec, g.rev = insts[i], instRevs[i]
			if g.rec == nil {
				continue // the instance is gone: its record stays unwritten
			}
			for _, move := range g.moves {
				move(g.rec)
			}
			g.rec.GetContainerInstance().Version++
			g.txn.Update(g.key, g.rev, g.rec)
		}
	}
	txns := make([]*store.Txn, len(order))
	for i, g := range order {
		txns[i] = g.txn
	}
	_, errs, err := store.CommitEach(ctx, s.kv, txns)
	if err != nil && len(calls) > 1 && errors.Is(err, rpctypes.ErrTooManyOps) {
		// Config.MaxTxnOps above the etcd cluster's: lower the bound (as a refused RunTask
		// group does) and let smaller batches take these changes again.
		limit := b.limit()
		if s.placing.tooManyOps(s.log, err); b.limit() < limit {
			b.requeue(calls)
			return
		}
	}
	var again []*stateCall
	for i, g := range order {
		switch {
		case err != nil:
			b.alone(g.calls)
		case errs[i] != nil:
			// Another writer (a placement, another replica) changed the instance or a
			// task since the read: the next batch reads them again.
			for _, c := range g.calls {
				if c.batches++; c.batches < stateBatchTries {
					again = append(again, c)
				} else {
					b.alone([]*stateCall{c})
				}
			}
		default:
			for _, c := range g.calls {
				c.done <- nil
			}
		}
	}
	if len(again) > 0 {
		b.requeue(again)
	}
}

// requeue puts calls back at the front of the queue, for the next batch.
func (b *stateBatcher) requeue(calls []*stateCall) {
	b.mu.Lock()
	b.queue = append(slices.Clone(calls), b.queue...)
	b.mu.Unlock()
}

// alone records calls on their own (applyStateChange, with its retries), one after
// another on a goroutine of their own, so that the batches go on and changes of one
// instance do not all conflict with each other.
func (b *stateBatcher) alone(calls []*stateCall) {
	go func() {
		for _, c := range calls {
			c.done <- b.s.applyStateChange(c.ctx, c)
		}
	}()
}

// stageChange adds to txn the writes of c's change to rec (the task record as read at
// rev): the task record and its index keys, and the inbox entry's delete when the task
// STOPPED. It returns staged false (nothing to write) for an older or late report or one
// that changes nothing, c.denied when the task is gone or on another instance, and else
// move: what the change does to its instance (task.ApplyInstanceDelta, and
// placement.Release of the task's demand when it STOPPED), whose record must then be
// written in the same txn; move is nil when the change leaves the instance as it is.
func (s *Server) stageChange(txn *store.Txn, c *stateCall, rec *storev1.TaskRecord, rev int64) (move func(*storev1.ContainerInstanceRecord), staged bool, err error) {
	if rec == nil || rec.GetContainerInstanceId() != c.instID {
		return nil, false, c.denied
	}
	if !task.Advances(rec.GetTask().GetLastStatus(), c.ch.GetLastStatus()) {
		return nil, false, nil // an older or late report: nothing to copy or write
	}
	old := proto.Clone(rec).(*storev1.TaskRecord)
	oldStatus, newStatus, changed := task.ApplyStateChange(rec, c.ch, s.now())
	if !changed {
		return nil, false, nil
	}
	stopped := newStatus == "STOPPED"
	if stopped {
		txn.Delete(keys.Inbox(c.account, c.instID, c.taskID))
	}
	task.WriteTxn(txn, c.account, old, rev, rec)
	if task.ActiveDelta(oldStatus, newStatus) == 0 && !stopped {
		// PENDING to RUNNING moves only the task's keys.InstanceRunning key (WriteTxn):
		// the instance record, which placements compare, stays as it is.
		return nil, true, nil
	}
	move = func(irec *storev1.ContainerInstanceRecord) {
		task.ApplyInstanceDelta(irec, oldStatus, newStatus)
		if stopped {
			placement.Release(irec.GetContainerInstance(), placement.TaskDemand(rec))
		}
	}
	return move, true, nil
}

// applyStateChange records one state change on its own: it reads the task record and,
// when the change moves the instance's counters or stops the task, the instance record,
// and writes them in one txn, retried on conflict (awsapi.Retry). See
// ApplyTaskStateChange.
func (s *Server) applyStateChange(ctx context.Context, c *stateCall) error {
	return awsapi.Retry(ctx, func() error {
		rec, rev, err := get[*storev1.TaskRecord](ctx, s.kv, c.taskKey())
		if err != nil {
			return err
		}
		txn := store.NewTxn(s.kv)
		move, staged, err := s.stageChange(txn, c, rec, rev)
		if err != nil || !staged {
			return err
		}
		if move != nil {
			irec, irev, err := get[*storev1.ContainerInstanceRecord](ctx, s.kv, c.instanceKey())
			if err != nil {
				return err
			}
			if irec != nil {
				move(irec)
				irec.GetContainerInstance().Version++
				txn.Update(c.instanceKey(), irev, irec)
			}
		}
		_, err = txn.Commit(ctx)
		return err
	})
}
