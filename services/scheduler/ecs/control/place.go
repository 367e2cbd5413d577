package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// RunTask's and StartTask's placement: the placement package chooses (its Placer, over a
// cache of the cluster's instances) and control writes (task.PlaceTxn: the tasks, their
// reservations and inbox entries in one txn, comparing the cluster record). Concurrent RunTask
// calls of one cluster and task definition share a txn (group commit, placeBatched): an
// etcd txn costs far more than a choice, so sharing one is what makes thousands of
// placements a second possible.

// errClientTokenUsed is returned (wrapped) by place when placeRequest.clientToken was
// recorded meanwhile, by a concurrent RunTask with the same token; RunTask then answers
// with the tasks the token started.
var errClientTokenUsed = errors.New("control: client token already used")

// DefaultMaxTxnOps is etcd's default --max-txn-ops: the most compares, and the most
// writes, one txn may hold. Config.MaxTxnOps is this unless the etcd cluster allows more.
const DefaultMaxTxnOps = 128

// groupFixedOps are the writes of a group commit besides its tasks': the cluster record,
// plus room for the leader fence's compare and a client token.
const groupFixedOps = 3

// groupByteBudget bounds the estimated size of a group commit's txn, below etcd's
// default --max-request-bytes (1.5 MiB) and the client's 2 MiB send limit: every task is
// written twice (its record and its inbox entry).
const groupByteBudget = 1 << 20

// groupCost returns an upper bound of the writes (each task: the task, id→cluster, its
// index keys with the instance's, the inbox entry, its instance at most once; compares
// are fewer) and an estimate of the bytes task.PlaceTxn puts in a txn for req.
func groupCost(req placeRequest) (ops, bytes int) {
	t0 := req.tasks[0]
	perTask := 5 + len(task.IndexKeys(req.account, t0))
	// + the instance record and keys, and the instance record again as the value a
	// group chained on a commit in flight compares (placement.Placer)
	perBytes := 2*proto.Size(t0) + 3072
	return perTask * len(req.tasks), perBytes * len(req.tasks)
}

// TasksPerTxn returns how many tasks like task (of td, in account) one placement txn holds
// within maxOps operations (etcd's --max-txn-ops; 0 means DefaultMaxTxnOps) and the byte
// budget etcd's request limits leave; at least 1. The service reconciler launches at most
// this many tasks of a service per pass.
func TasksPerTxn(account keys.Scope, task *storev1.TaskRecord, td *ecsv1.TaskDefinition, maxOps int) int {
	if maxOps <= 0 {
		maxOps = DefaultMaxTxnOps
	}
	ops, bytes := groupCost(placeRequest{account: account, tasks: []*storev1.TaskRecord{task}, td: td})
	return max(1, min((maxOps-groupFixedOps)/ops, groupByteBudget/bytes))
}

// placeRequest is what RunTask and StartTask place.
type placeRequest struct {
	account keys.Scope
	cluster string
	// tasks are the tasks to place (the RunTask count is len(tasks)), not yet stored:
	// lastStatus PENDING, desiredStatus RUNNING, no container instance, their demand set
	// (task.NewRecord). Every task has the same demand and group.
	tasks []*storev1.TaskRecord
	td    *ecsv1.TaskDefinition
	// constraints and strategy are RunTask's (the task definition's own constraints are
	// added from td).
	constraints []*ecsv1.PlacementConstraint
	strategy    []*ecsv1.PlacementStrategy
	// instanceIDs, for StartTask, names the instance of each task: tasks[i] goes on
	// instanceIDs[i] or fails.
	instanceIDs []string
	// clientToken, when set, is recorded with the placed tasks (RunTask idempotency).
	clientToken string
	// pool, when set, is the capacity provider whose pool the tasks are placed in
	// (capacity.PoolConstraint); failures then name it.
	pool string
}

// placeResult is what was placed (written, with the container instance set) and why
// the rest was not (AWS failures[]).
type placeResult struct {
	placed   []*storev1.TaskRecord
	failures []*ecsv1.Failure
}

// placing is the Server's placement state: the Placer, the last cluster record this
// replica wrote per cluster (so a commit compares against it without reading it first),
// and the group-commit queues.
type placing struct {
	placer *placement.Placer
	// maxOps is the etcd cluster's --max-txn-ops (Config.MaxTxnOps): a group commit
	// holds as many RunTask calls as fit in it.
	maxOps int

	mu       sync.Mutex
	clusters map[string]clusterState // by account/cluster, under mu
	queues   map[string]*placeQueue  // by account/cluster/task definition, under mu
}

type clusterState struct {
	rec *storev1.ClusterRecord
	rev int64
}

type placeCall struct {
	ctx  context.Context //nolint:containedctx // the waiting caller's
	req  placeRequest
	done chan placeOutcome
}

type placeOutcome struct {
	res placeResult
	err error
}

type placeQueue struct {
	calls    []*placeCall
	running  bool
	inflight int           // group commits placing now (at most groupsInFlight)
	wake     chan struct{} // the runner's: a call arrived or a group ended
}

// groupsInFlight bounds the group commits one queue keeps placing at once. The Placer
// sends a group whose instances are settled in etcd at once and one that builds on
// another's instances as soon as that one lands, so a queue's groups overlap on etcd's
// round trip instead of taking turns; more calls queue meanwhile and go in the next
// groups, as large as fits. Two, not more: the RunTask path is bound by the scheduler's
// CPU, not by etcd's round trip, so more groups in flight only make them smaller; with
// the agents reporting each task RUNNING, 4 placed 4,794–4,983/s against 2's
// 5,135–5,519/s, at twice the p99 (make bench, part placement-path-reporting).
const groupsInFlight = 2

func clusterKey(account keys.Scope, cluster string) string { return account.String() + "/" + cluster }

// place places req: StartTask's tasks each on its named instance in its own txn (one
// full instance fails only its own task, as on AWS), RunTask's without a client token
// through the group commit, with one through a txn of its own (its token is created in
// it). It returns ClusterNotFoundException when the cluster is not ACTIVE,
// InvalidParameterException for a bad constraint or strategy, errClientTokenUsed, or an
// internal error; nothing is written then.
func (s *Server) place(ctx context.Context, req placeRequest) (placeResult, error) {
	if len(req.tasks) == 0 {
		return placeResult{}, nil
	}
	if req.instanceIDs != nil {
		var out placeResult
		for i, id := range req.instanceIDs {
			if i >= len(req.tasks) {
				break
			}
			one := req
			one.tasks = req.tasks[i : i+1]
			one.instanceIDs = nil
			res, err := s.placeOne(ctx, one, []string{id})
			if err != nil {
				return out, err
			}
			out.placed = append(out.placed, res.placed...)
			out.failures = append(out.failures, res.failures...)
		}
		return out, nil
	}
	if req.clientToken == "" {
		return s.placeBatched(ctx, req)
	}
	return s.placeOne(ctx, req, nil)
}

// placeOne places req.tasks in one txn, on the named instances only when instances is
// not nil.
func (s *Server) placeOne(ctx context.Context, req placeRequest, instances []string) (placeResult, error) {
	r := engineRequest(req, instances)
	var written []*storev1.TaskRecord
	var crec *storev1.ClusterRecord
	attempt := 0
	res, err := s.placing.placer.Place(ctx, placement.PlaceRequest{
		Account: req.account, Cluster: req.cluster, Request: r, KV: s.kv,
		Commit: func(ctx context.Context, txn *store.Txn, placed []placement.Placed) error {
			attempt++
			var crev int64
			var err error
			crec, crev, err = s.attemptCluster(ctx, req.account, req.cluster, req.clientToken, attempt)
			if err != nil {
				return err
			}
			insts := map[string]*task.InstanceState{}
			written = written[:0]
			var parents []string
			if tp := TraceParent(ctx); tp != "" {
				parents = slices.Repeat([]string{tp}, len(placed))
			}
			for i, p := range placed {
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &task.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := proto.Clone(req.tasks[i]).(*storev1.TaskRecord)
				t.ContainerInstanceId = p.InstanceID
				written = append(written, t)
			}
			return task.PlaceTxn(txn, task.Placement{
				Account: req.account, Cluster: crec, ClusterRev: crev, Instances: insts,
				Tasks: written, TaskDefinition: req.td, ClientToken: req.clientToken, TraceParents: parents,
			})
		},
	})
	if req.clientToken != "" && errors.Is(err, store.ErrExists) {
		// The token key (task.PlaceTxn creates it only when absent) was created meanwhile by
		// a concurrent RunTask with the same token.
		return placeResult{}, errClientTokenUsed
	}
	if err != nil {
		return placeResult{}, placementError(err)
	}
	out := placeResult{failures: failures(res.Failures)}
	if len(res.Placed) > 0 {
		out.placed = written
	}
	return out, nil
}

// engineRequest converts a control request for the placement engine: the demand stored
// on the tasks (all alike), RunTask's constraints, the task definition's and its
// requiresAttributes, and the strategy.
func engineRequest(req placeRequest, instances []string) placement.Request {
	t0 := req.tasks[0]
	cons := append(placement.ConstraintsFrom(req.constraints, req.td.GetPlacementConstraints()),
		placement.RequiresAttributes(req.td)...)
	if req.pool != "" {
		cons = append(cons, capacity.PoolConstraint(req.pool))
	}
	return placement.Request{
		Demand:      placement.TaskDemand(t0),
		Count:       len(req.tasks),
		Group:       t0.GetTask().GetGroup(),
		Constraints: cons,
		Strategy:    placement.StrategiesFrom(req.strategy),
		Instances:   instances,
	}
}

// placeByProvider places RunTask's tasks, each in the pool of its capacity provider
// (capacityProviderName; none: any instance). Tasks of one provider go through place as
// before; tasks of several providers are placed together in one txn (placeProviders), so
// the call's client token covers them all. Failures name the provider in their detail.
func (s *Server) placeByProvider(ctx context.Context, req placeRequest) (placeResult, error) {
	var order []string
	byProvider := map[string][]*storev1.TaskRecord{}
	for _, t := range req.tasks {
		p := t.GetTask().GetCapacityProviderName()
		if _, ok := byProvider[p]; !ok {
			order = append(order, p)
		}
		byProvider[p] = append(byProvider[p], t)
	}
	if len(order) <= 1 {
		if len(order) == 1 {
			req.pool = order[0]
		}
		res, err := s.place(ctx, req)
		nameProvider(res.failures, req.pool)
		return res, err
	}
	reqs := make([]placeRequest, len(order))
	for i, p := range order {
		reqs[i] = req
		reqs[i].tasks, reqs[i].pool = byProvider[p], p
	}
	return s.placeProviders(ctx, reqs)
}

// nameProvider prefixes the failures' details with the capacity provider they were
// placed through (none when provider is "").
func nameProvider(fs []*ecsv1.Failure, provider string) {
	if provider == "" {
		return
	}
	for _, f := range fs {
		f.Detail = proto.String(fmt.Sprintf("Capacity provider %s: %s", provider, f.GetDetail()))
	}
}

// placeProviders places reqs (one RunTask's tasks split by capacity provider: same
// account, cluster, task definition, constraints and client token) in one txn.
// attemptCluster is the start of a placement commit hook's attempt (1, 2, …): from the
// second attempt on, a clientToken ("" for none) that a concurrent RunTask has since
// created fails with errClientTokenUsed (a conflict may be that RunTask's); then the
// cluster record and its ModRevision, re-read from etcd after the first attempt.
func (s *Server) attemptCluster(ctx context.Context, account keys.Scope, cluster, clientToken string, attempt int) (*storev1.ClusterRecord, int64, error) {
	if attempt > 1 && clientToken != "" {
		v, _, err := get[*wrapperspb.StringValue](ctx, s.kv, keys.ClientToken(account, cluster, clientToken))
		if err != nil {
			return nil, 0, err
		}
		if v != nil {
			return nil, 0, errClientTokenUsed
		}
	}
	return s.placing.cluster(ctx, s.kv, account, cluster, attempt > 1)
}

func (s *Server) placeProviders(ctx context.Context, reqs []placeRequest) (placeResult, error) {
	first := reqs[0]
	ereqs := make([]placement.Request, len(reqs))
	for i, r := range reqs {
		ereqs[i] = engineRequest(r, nil)
		if err := placement.Compile(ereqs[i]); err != nil {
			return placeResult{}, placementError(err)
		}
	}
	written := make([][]*storev1.TaskRecord, len(reqs))
	var crec *storev1.ClusterRecord
	attempt := 0
	results, err := s.placing.placer.PlaceGroup(ctx, s.kv, first.account, first.cluster, ereqs, func(ctx context.Context, txn *store.Txn, placed [][]placement.Placed) error {
		attempt++
		var crev int64
		var err error
		crec, crev, err = s.attemptCluster(ctx, first.account, first.cluster, first.clientToken, attempt)
		if err != nil {
			return err
		}
		insts := map[string]*task.InstanceState{}
		var all []*storev1.TaskRecord
		for i, pl := range placed {
			written[i] = written[i][:0]
			for j, p := range pl {
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &task.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := proto.Clone(reqs[i].tasks[j]).(*storev1.TaskRecord)
				t.ContainerInstanceId = p.InstanceID
				written[i] = append(written[i], t)
				all = append(all, t)
			}
		}
		if len(all) == 0 {
			return nil
		}
		return task.PlaceTxn(txn, task.Placement{
			Account: first.account, Cluster: crec, ClusterRev: crev, Instances: insts,
			Tasks: all, TaskDefinition: first.td, ClientToken: first.clientToken,
		})
	})
	if first.clientToken != "" && errors.Is(err, store.ErrExists) {
		return placeResult{}, errClientTokenUsed
	}
	if err != nil {
		return placeResult{}, placementError(err)
	}
	var out placeResult
	for i, r := range results {
		fs := failures(r.Failures)
		nameProvider(fs, reqs[i].pool)
		out.failures = append(out.failures, fs...)
		if len(r.Placed) > 0 {
			out.placed = append(out.placed, written[i]...)
		}
	}
	return out, nil
}

// placementError turns a placement error into what control returns: ECS exceptions and
// errClientTokenUsed as they are, a bad constraint or strategy as
// InvalidParameterException, anything else wrapped.
func placementError(err error) error {
	var e *awserr.Error
	if errors.As(err, &e) || errors.Is(err, errClientTokenUsed) {
		return err
	}
	if errors.Is(err, placement.ErrInvalid) || errors.Is(err, placement.ErrExpression) {
		return awserr.InvalidParameterf("%s", strings.TrimPrefix(err.Error(), "placement: "))
	}
	return fmt.Errorf("placement: %w", err)
}

// failures converts engine failures to ECS ones, one per instance and reason.
func failures(fs []placement.Failure) []*ecsv1.Failure {
	var out []*ecsv1.Failure
	seen := map[string]bool{}
	for _, f := range fs {
		if seen[f.Arn+f.Reason] {
			continue
		}
		seen[f.Arn+f.Reason] = true
		out = append(out, &ecsv1.Failure{Arn: proto.String(f.Arn), Reason: proto.String(f.Reason), Detail: proto.String(f.Detail)})
	}
	return out
}

// txnOps returns the etcd cluster's --max-txn-ops as the replica knows it now
// (tooManyOps may lower it).
func (p *placing) txnOps() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxOps
}

// tooManyOps lowers the group commit's bound to DefaultMaxTxnOps after etcd refused a
// group as too many operations (Config.MaxTxnOps above the cluster's --max-txn-ops),
// and says so once.
func (p *placing) tooManyOps(log *slog.Logger, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxOps > DefaultMaxTxnOps {
		log.Warn("control: etcd refused a RunTask group commit as too many operations; placing up to its default --max-txn-ops from now on: set the scheduler's --etcd-max-txn-ops to the etcd cluster's",
			"maxTxnOps", p.maxOps, "fallback", DefaultMaxTxnOps, "error", err)
		p.maxOps = DefaultMaxTxnOps
	}
}

// cluster returns the cluster record a placement txn compares (task.PlaceTxn reads it
// and compares its ModRevision, never writes it): the one this replica last read, unless
// fresh asks for a read (a retry after a conflict). The record is shared: callers must
// not change it. It returns ClusterNotFoundException when the cluster is absent or not
// ACTIVE.
func (p *placing) cluster(ctx context.Context, kv clientv3.KV, account keys.Scope, name string, fresh bool) (*storev1.ClusterRecord, int64, error) {
	k := clusterKey(account, name)
	if !fresh {
		p.mu.Lock()
		cur, ok := p.clusters[k]
		p.mu.Unlock()
		if ok {
			return cur.rec, cur.rev, nil
		}
	}
	rec, rev, err := store.Get[*storev1.ClusterRecord](ctx, kv, keys.Cluster(account, name))
	p.mu.Lock()
	defer p.mu.Unlock()
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.GetCluster().GetStatus() != statusActive) {
		delete(p.clusters, k)
		return nil, 0, awserr.ClusterNotFoundError()
	}
	if err != nil {
		return nil, 0, err
	}
	if p.clusters == nil {
		p.clusters = map[string]clusterState{}
	}
	if cur, ok := p.clusters[k]; !ok || cur.rev < rev {
		p.clusters[k] = clusterState{rec: rec, rev: rev}
	}
	return rec, rev, nil
}

// placeBatched queues req with concurrent ones of the same cluster and task definition;
// one goroutine per queue places them together with Placer.PlaceGroup and one task.PlaceTxn.
func (s *Server) placeBatched(ctx context.Context, req placeRequest) (placeResult, error) {
	// A request that does not compile fails alone, before it can spoil a batch.
	if err := placement.Compile(engineRequest(req, nil)); err != nil {
		return placeResult{}, placementError(err)
	}
	k := clusterKey(req.account, req.cluster) + "/" + req.td.GetTaskDefinitionArn() + "/" + req.pool
	call := &placeCall{ctx: ctx, req: req, done: make(chan placeOutcome, 1)}
	p := s.placing
	p.mu.Lock()
	if p.queues == nil {
		p.queues = map[string]*placeQueue{}
	}
	q := p.queues[k]
	if q == nil {
		q = &placeQueue{wake: make(chan struct{}, 1)}
		p.queues[k] = q
	}
	q.calls = append(q.calls, call)
	if !q.running {
		q.running = true
		go s.runQueue(k, q)
	} else {
		q.signal()
	}
	p.mu.Unlock()
	select {
	case r := <-call.done:
		return r.res, r.err
	case <-ctx.Done():
		return placeResult{}, ctx.Err()
	}
}

// signal wakes the queue's runner if it waits.
func (q *placeQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// runQueue places the queue's calls, as many a txn as fit in etcd's limits (maxOps
// writes, groupByteBudget bytes; one call always goes), up to groupsInFlight groups at
// once, until it is empty and no group is placing.
func (s *Server) runQueue(k string, q *placeQueue) {
	p := s.placing
	for {
		p.mu.Lock()
		if len(q.calls) == 0 && q.inflight == 0 {
			q.running = false
			delete(p.queues, k)
			p.mu.Unlock()
			return
		}
		if len(q.calls) == 0 || q.inflight >= groupsInFlight {
			p.mu.Unlock()
			<-q.wake
			continue
		}
		n, ops, size := 0, groupFixedOps, 0
		for n < len(q.calls) {
			o, b := groupCost(q.calls[n].req)
			if n > 0 && (ops+o > p.maxOps || size+b > groupByteBudget) {
				break
			}
			ops, size = ops+o, size+b
			n++
		}
		calls := slices.Clone(q.calls[:n])
		q.calls = slices.Delete(q.calls, 0, n)
		q.inflight++
		p.mu.Unlock()
		calls = slices.DeleteFunc(calls, func(cl *placeCall) bool {
			if cl.ctx.Err() != nil {
				cl.done <- placeOutcome{err: cl.ctx.Err()}
				return true
			}
			return false
		})
		go func() {
			if len(calls) > 0 {
				s.placeGroup(calls)
			}
			p.mu.Lock()
			q.inflight--
			p.mu.Unlock()
			q.signal()
		}()
	}
}

// placeGroup places calls (same account, cluster and task definition) in one txn.
func (s *Server) placeGroup(calls []*placeCall) {
	first := calls[0].req
	reqs := make([]placement.Request, len(calls))
	for i, cl := range calls {
		reqs[i] = engineRequest(cl.req, nil)
	}
	written := make([][]*storev1.TaskRecord, len(calls))
	var crec *storev1.ClusterRecord
	attempt := 0
	// The batch outlives any one caller: it runs to its end and each caller waits for it
	// or leaves.
	ctx := context.WithoutCancel(calls[0].ctx)
	results, err := s.placing.placer.PlaceGroup(ctx, s.kv, first.account, first.cluster, reqs, func(ctx context.Context, txn *store.Txn, placed [][]placement.Placed) error {
		attempt++
		var crev int64
		var err error
		crec, crev, err = s.attemptCluster(ctx, first.account, first.cluster, "", attempt)
		if err != nil {
			return err
		}
		insts := map[string]*task.InstanceState{}
		var all []*storev1.TaskRecord
		var parents []string
		for i, pl := range placed {
			written[i] = written[i][:0]
			tp := TraceParent(calls[i].ctx)
			for j, p := range pl {
				parents = append(parents, tp)
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &task.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := proto.Clone(calls[i].req.tasks[j]).(*storev1.TaskRecord)
				t.ContainerInstanceId = p.InstanceID
				written[i] = append(written[i], t)
				all = append(all, t)
			}
		}
		return task.PlaceTxn(txn, task.Placement{
			Account: first.account, Cluster: crec, ClusterRev: crev, Instances: insts,
			Tasks: all, TaskDefinition: first.td, TraceParents: parents,
		})
	})
	if err != nil && len(calls) > 1 && errors.Is(err, rpctypes.ErrTooManyOps) {
		// etcd allows fewer operations than Config.MaxTxnOps said: nothing was written;
		// fall back to etcd's default and place these calls one by one.
		s.placing.tooManyOps(s.log, err)
		for _, cl := range calls {
			s.placeGroup([]*placeCall{cl})
		}
		return
	}
	if err != nil {
		err = placementError(err)
		for _, cl := range calls {
			cl.done <- placeOutcome{err: err}
		}
		return
	}
	for i, cl := range calls {
		out := placeResult{failures: failures(results[i].Failures)}
		if len(results[i].Placed) > 0 {
			out.placed = written[i]
		}
		cl.done <- placeOutcome{res: out}
	}
}
