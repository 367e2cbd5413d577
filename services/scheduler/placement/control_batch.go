package placement

import (
	"context"
	"slices"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/control"
	"github.com/berthhq/berth/services/scheduler/store"
	"google.golang.org/protobuf/proto"
)

// maxControlBatchTasks bounds a RunTask group commit: control.PlaceTxn writes about eight
// keys per task (task, id→cluster, index keys, inbox) plus each instance once and the
// cluster, and etcd refuses a txn of more than 128 operations by default.
const maxControlBatchTasks = 12

type ctlCall struct {
	ctx  context.Context //nolint:containedctx // the waiting caller's
	req  control.PlaceRequest
	done chan ctlResult
}

type ctlResult struct {
	res control.PlaceResult
	err error
}

type ctlQueue struct {
	calls   []*ctlCall
	running bool
}

// placeBatched queues req with concurrent ones of the same cluster and task definition;
// one goroutine per queue places them together with Placer.PlaceGroup and one
// control.PlaceTxn.
func (c *ControlPlacer) placeBatched(ctx context.Context, req control.PlaceRequest) (control.PlaceResult, error) {
	// A request that does not compile fails alone, before it can spoil a batch.
	if err := Compile(toRequest(req, nil)); err != nil {
		return control.PlaceResult{}, domainError(err)
	}
	k := req.Account.String() + "/" + req.Cluster + "/" + req.TaskDefinition.GetTaskDefinitionArn()
	call := &ctlCall{ctx: ctx, req: req, done: make(chan ctlResult, 1)}
	c.mu.Lock()
	if c.queues == nil {
		c.queues = map[string]*ctlQueue{}
	}
	q := c.queues[k]
	if q == nil {
		q = &ctlQueue{}
		c.queues[k] = q
	}
	q.calls = append(q.calls, call)
	if !q.running {
		q.running = true
		go c.runQueue(k, q)
	}
	c.mu.Unlock()
	select {
	case r := <-call.done:
		return r.res, r.err
	case <-ctx.Done():
		return control.PlaceResult{}, ctx.Err()
	}
}

func (c *ControlPlacer) runQueue(k string, q *ctlQueue) {
	for {
		c.mu.Lock()
		if len(q.calls) == 0 {
			q.running = false
			delete(c.queues, k)
			c.mu.Unlock()
			return
		}
		n, tasks := 0, 0
		for n < len(q.calls) && (n == 0 || tasks+len(q.calls[n].req.Tasks) <= maxControlBatchTasks) {
			tasks += len(q.calls[n].req.Tasks)
			n++
		}
		calls := slices.Clone(q.calls[:n])
		q.calls = slices.Delete(q.calls, 0, n)
		c.mu.Unlock()
		calls = slices.DeleteFunc(calls, func(cl *ctlCall) bool {
			if cl.ctx.Err() != nil {
				cl.done <- ctlResult{err: cl.ctx.Err()}
				return true
			}
			return false
		})
		if len(calls) > 0 {
			c.placeGroup(calls)
		}
	}
}

// placeGroup places calls (same account, cluster and task definition) in one txn.
func (c *ControlPlacer) placeGroup(calls []*ctlCall) {
	first := calls[0].req
	reqs := make([]Request, len(calls))
	for i, cl := range calls {
		reqs[i] = toRequest(cl.req, nil)
	}
	written := make([][]*storev1.TaskRecord, len(calls))
	var crec *storev1.ClusterRecord
	attempt := 0
	ctx := c.Placer.ctx // the batch outlives any one caller
	results, err := c.Placer.PlaceGroup(ctx, first.Account, first.Cluster, reqs, func(ctx context.Context, txn *store.Txn, placed [][]Placed) error {
		attempt++
		var crev int64
		var err error
		crec, crev, err = c.cluster(ctx, first.Account, first.Cluster, attempt > 1)
		if err != nil {
			return err
		}
		insts := map[string]*control.InstanceState{}
		var all []*storev1.TaskRecord
		for i, pl := range placed {
			written[i] = written[i][:0]
			for j, p := range pl {
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &control.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := proto.Clone(calls[i].req.Tasks[j]).(*storev1.TaskRecord)
				t.ContainerInstanceId = p.InstanceID
				written[i] = append(written[i], t)
				all = append(all, t)
			}
		}
		return control.PlaceTxn(txn, control.Placement{
			Account: first.Account, Cluster: crec, ClusterRev: crev, Instances: insts,
			Tasks: all, TaskDefinition: first.TaskDefinition,
		})
	})
	if err != nil {
		err = domainError(err)
		for _, cl := range calls {
			cl.done <- ctlResult{err: err}
		}
		return
	}
	rev := int64(0)
	for i, cl := range calls {
		out := control.PlaceResult{Failures: failures(results[i].Failures)}
		if len(results[i].Placed) > 0 {
			out.Placed = written[i]
			rev = results[i].Revision
		}
		cl.done <- ctlResult{res: out}
	}
	if rev > 0 {
		c.wrote(first.Account, first.Cluster, crec, rev)
	}
}
