package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/capacity"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/service"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ReconcilerConfig configures a Reconciler.
type ReconcilerConfig struct {
	// Client is the etcd client (the leader term's fenced client). Required.
	Client store.Client
	// Placer places daemon tasks (the Placer RunTask and services use). Required.
	Placer *placement.Placer
	// MaxTxnOps is etcd's --max-txn-ops (service.ReconcilerConfig.MaxTxnOps).
	MaxTxnOps int
	// Fence is added to every write; nil writes unfenced (tests).
	Fence []clientv3.Cmp
	// Logger receives what the loop does; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Interval is the time between passes in Run. Default 1 s.
	Interval time.Duration
	// Kick, when it delivers, wakes Run for a pass before the interval ends.
	Kick <-chan struct{}
	// StableAfter is service.ReconcilerConfig.StableAfter: how long a task without
	// health checks must have run to count as started. Default service.DefaultStableAfter;
	// negative counts it at once.
	StableAfter time.Duration
	// BreakerMinThreshold is the floor of the circuit breaker's threshold. Default
	// service.DefaultBreakerMinThreshold.
	BreakerMinThreshold int
}

// Reconciler is the leader's daemon loop: each pass converges every daemon of every
// account (see the package comment). Run it only on the leader, with the term's fenced
// client; build one per term. Safe for one Run or Pass at a time.
type Reconciler struct {
	cfg   ReconcilerConfig
	log   *slog.Logger
	exec  *service.Reconciler
	mu    sync.Mutex
	tds   map[string]*storev1.DaemonTaskDefinitionRecord // by account and ARN
	pol   service.Policy
	count int // daemons reconciled (tests)
}

// NewReconciler returns a Reconciler for cfg.
func NewReconciler(cfg ReconcilerConfig) *Reconciler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.StableAfter == 0 {
		cfg.StableAfter = service.DefaultStableAfter
	}
	if cfg.BreakerMinThreshold <= 0 {
		cfg.BreakerMinThreshold = service.DefaultBreakerMinThreshold
	}
	return &Reconciler{
		cfg: cfg, log: cfg.Logger, tds: map[string]*storev1.DaemonTaskDefinitionRecord{},
		exec: service.NewReconciler(service.ReconcilerConfig{
			Client: cfg.Client, Placer: cfg.Placer, MaxTxnOps: cfg.MaxTxnOps, Logger: cfg.Logger, Now: cfg.Now, Fence: cfg.Fence,
		}),
		pol: service.Policy{
			StableAfter: cfg.StableAfter, BackoffAfter: service.DefaultBackoffAfter, BackoffBase: service.DefaultBackoffBase,
			BackoffCap: service.DefaultBackoffCap, BreakerMinThreshold: cfg.BreakerMinThreshold, NewDeploymentID: newID,
		},
	}
}

// Run passes every Interval (or when kicked) until ctx ends; it returns ctx's error, or
// the error of a write the fence refused (leadership lost).
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if err := r.Pass(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, store.ErrPreconditionFailed) {
				return err
			}
			r.log.ErrorContext(ctx, "daemon reconcile pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-r.cfg.Kick:
		}
	}
}

// cluster is what a pass reads once per cluster.
type cluster struct {
	account   keys.Scope
	name      string
	instances map[string]store.Item[*storev1.ContainerInstanceRecord]
	order     []string
	tasks     map[string][]store.Item[*storev1.TaskRecord] // by service name: every task of the cluster
}

// Pass reconciles every daemon once.
func (r *Reconciler) Pass(ctx context.Context) error {
	items, err := store.ListAll[*storev1.DaemonRecord](ctx, r.cfg.Client, keys.AllDaemons())
	if err != nil {
		return fmt.Errorf("daemon: list daemons: %w", err)
	}
	clusters := map[keys.ClusterRef]*cluster{}
	var errs []error
	for _, it := range items {
		scope, cname, _, ok := keys.ParseDaemon(it.Key)
		if !ok {
			continue
		}
		ref := keys.ClusterRef{Scope: scope, Cluster: cname}
		c := clusters[ref]
		if c == nil {
			if c, err = r.readCluster(ctx, scope, cname); err != nil {
				errs = append(errs, err)
				continue
			}
			clusters[ref] = c
		}
		if err := r.reconcile(ctx, c, it); err != nil {
			if errors.Is(err, store.ErrPreconditionFailed) {
				return err
			}
			errs = append(errs, fmt.Errorf("daemon %s: %w", it.Value.GetDaemonArn(), err))
		}
	}
	return errors.Join(errs...)
}

// readCluster reads a cluster's instances and tasks.
func (r *Reconciler) readCluster(ctx context.Context, account keys.Scope, name string) (*cluster, error) {
	c := &cluster{account: account, name: name, instances: map[string]store.Item[*storev1.ContainerInstanceRecord]{}, tasks: map[string][]store.Item[*storev1.TaskRecord]{}}
	insts, err := store.ListAll[*storev1.ContainerInstanceRecord](ctx, r.cfg.Client, keys.Instances(account, name))
	if err != nil {
		return nil, fmt.Errorf("daemon: list instances of %s: %w", name, err)
	}
	for _, in := range insts {
		if _, id, ok := keys.ParseInstance(in.Key); ok {
			c.instances[id] = in
			c.order = append(c.order, id)
		}
	}
	tasks, err := store.ListAll[*storev1.TaskRecord](ctx, r.cfg.Client, keys.Tasks(account, name))
	if err != nil {
		return nil, fmt.Errorf("daemon: list tasks of %s: %w", name, err)
	}
	for _, t := range tasks {
		c.tasks[t.Value.GetServiceName()] = append(c.tasks[t.Value.GetServiceName()], t)
	}
	return c, nil
}

// taskDefinition reads a daemon task definition by ARN, through the cache (a revision's
// content never changes).
func (r *Reconciler) taskDefinition(ctx context.Context, account keys.Scope, a string) (*storev1.DaemonTaskDefinitionRecord, error) {
	k := account.String() + "/" + a
	r.mu.Lock()
	td := r.tds[k]
	r.mu.Unlock()
	if td != nil {
		return td, nil
	}
	family, rev, ok := parseRef(account, a)
	if !ok || rev == 0 {
		return nil, fmt.Errorf("daemon: bad daemon task definition ARN %q", a)
	}
	td, _, err := store.Get[*storev1.DaemonTaskDefinitionRecord](ctx, r.cfg.Client, keys.DaemonTaskDefinition(account, family, rev))
	if err != nil {
		return nil, fmt.Errorf("daemon: read %s: %w", a, err)
	}
	r.mu.Lock()
	r.tds[k] = td
	r.mu.Unlock()
	return td, nil
}

// Hosts is the per-host decision of one daemon: which instances it runs on, the
// capacity provider of each, and the instances whose draining waits for their other
// tasks.
type Hosts struct {
	// Eligible are the ids of the instances the daemon runs one task on, in id order:
	// ACTIVE instances of one of its capacity providers that meet the task definition's
	// requirements, plus draining ones that still hold its task and other tasks.
	Eligible []string
	// ProviderOf names each eligible instance's capacity provider (the first of the
	// daemon's that it belongs to).
	ProviderOf map[string]string
	// Held are the draining instances whose daemon task is kept until their other tasks
	// have stopped.
	Held map[string]bool
}

// ChooseHosts decides where a daemon runs: on every ACTIVE instance of the snapshot in
// one of the capacity provider pools named by providers (placement.DaemonInstances with
// capacity.PoolConstraint and the task definition's requirements), and on draining
// instances that still run both a live task of the daemon (daemonOn) and other live
// tasks (othersOn), so a drained host loses its daemon task last.
func ChooseHosts(snapshot []*placement.Instance, providers []string, td *ecsv1.TaskDefinition, daemonOn, othersOn map[string]bool) (Hosts, error) {
	h := Hosts{ProviderOf: map[string]string{}, Held: map[string]bool{}}
	for _, p := range providers {
		ids, err := placement.DaemonInstances(snapshot, append([]placement.Constraint{capacity.PoolConstraint(p)}, placement.RequiresAttributes(td)...))
		if err != nil {
			return Hosts{}, err
		}
		for _, id := range ids {
			if _, ok := h.ProviderOf[id]; !ok {
				h.ProviderOf[id] = p
			}
		}
	}
	for _, in := range snapshot {
		if _, ok := h.ProviderOf[in.ID]; ok {
			continue
		}
		if daemonOn[in.ID] && othersOn[in.ID] && in.Status == "DRAINING" {
			if p := in.Attributes[capacity.PoolAttribute]; slices.Contains(providers, p) {
				h.ProviderOf[in.ID] = p
				h.Held[in.ID] = true
			}
		}
	}
	for id := range h.ProviderOf {
		h.Eligible = append(h.Eligible, id)
	}
	slicesSort(h.Eligible)
	return h, nil
}

// MinHealthyPercent is the minimumHealthyPercent that lets a deployment of a daemon on
// hosts instances replace the tasks of drainPercent of them at a time: at least one
// host, and never all of them unless there is one.
func MinHealthyPercent(hosts int, drainPercent float64) int32 {
	if hosts <= 1 {
		return 0
	}
	batch := max(1, int(math.Floor(float64(hosts)*drainPercent/100)))
	batch = min(batch, hosts)
	return int32(math.Floor(float64(hosts-batch) * 100 / float64(hosts)))
}

// reconcile converges one daemon.
func (r *Reconciler) reconcile(ctx context.Context, c *cluster, it store.Item[*storev1.DaemonRecord]) error {
	r.count++
	d := proto.Clone(it.Value).(*storev1.DaemonRecord)
	svcRec := d.GetService()
	svc := svcRec.GetService()
	name := svc.GetServiceName()
	tasks := c.tasks[name]
	now := r.cfg.Now()
	// The task definitions of the live deployments and of the RUNNING tasks.
	tds := map[string]*ecsv1.TaskDefinition{}
	recs := map[string]*storev1.DaemonTaskDefinitionRecord{}
	need := func(a string) error {
		if a == "" || recs[a] != nil {
			return nil
		}
		td, err := r.taskDefinition(ctx, c.account, a)
		if err != nil {
			return err
		}
		recs[a], tds[a] = td, td.GetTaskDefinition()
		return nil
	}
	for _, dep := range svc.GetDeployments() {
		if dep.GetStatus() != service.DeploymentInactive {
			if err := need(dep.GetTaskDefinition()); err != nil {
				return err
			}
		}
	}
	daemonOn, othersOn := map[string]bool{}, map[string]bool{}
	for n, ts := range c.tasks {
		for _, t := range ts {
			if t.Value.GetTask().GetLastStatus() == "STOPPED" || t.Value.GetTask().GetDesiredStatus() == "STOPPED" {
				continue
			}
			if n == name {
				daemonOn[t.Value.GetContainerInstanceId()] = true
				if err := need(t.Value.GetTask().GetTaskDefinitionArn()); err != nil {
					return err
				}
			} else if t.Value.GetContainerInstanceId() != "" {
				othersOn[t.Value.GetContainerInstanceId()] = true
			}
		}
	}
	st := service.State{
		Account: c.account, Service: store.Item[*storev1.ServiceRecord]{Key: it.Key, Value: svcRec, ModRevision: it.ModRevision},
		Tasks: tasks, Instances: c.instances, TaskDefinitions: tds, Now: now,
	}
	var hosts Hosts
	if svc.GetStatus() != service.StatusDraining {
		views := make([]*placement.Instance, 0, len(c.order))
		for _, id := range c.order {
			in := c.instances[id]
			views = append(views, placement.FromRecord(id, in.Value, in.ModRevision))
		}
		var names []string
		for _, a := range d.GetCapacityProviderArns() {
			if n, ok := capacity.RefName(c.account, a); ok {
				names = append(names, n)
			}
		}
		var prim *ecsv1.TaskDefinition
		if p := primaryOf(svc); p != nil {
			prim = tds[p.GetTaskDefinition()]
		}
		h, err := ChooseHosts(views, names, prim, daemonOn, othersOn)
		if err != nil {
			return err
		}
		hosts = h
		st.Eligible = h.Eligible
		// A held (draining) instance counts as ACTIVE for the decision, so its daemon task
		// is kept rather than replaced.
		if len(h.Held) > 0 {
			insts := make(map[string]store.Item[*storev1.ContainerInstanceRecord], len(c.instances))
			for id, in := range c.instances {
				if h.Held[id] {
					cp := proto.Clone(in.Value).(*storev1.ContainerInstanceRecord)
					cp.GetContainerInstance().Status = proto.String("ACTIVE")
					cp.OperatorDrain, cp.InvoluntaryDrain = false, false
					in.Value = cp
				}
				insts[id] = in
			}
			st.Instances = insts
		}
		svc.DeploymentConfiguration.MinimumHealthyPercent = proto.Int32(MinHealthyPercent(len(h.Eligible), d.GetDeploymentConfiguration().GetDrainPercent()))
	}
	plan, err := service.Compute(st, r.pol)
	if err != nil {
		return err
	}
	// No launch onto a held instance: its daemon task is kept, never started there.
	if len(hosts.Held) > 0 && plan.Launch.Count > 0 {
		var keep []string
		for _, id := range plan.Launch.Instances {
			if !hosts.Held[id] {
				keep = append(keep, id)
			}
		}
		plan.Launch.Instances, plan.Launch.Count = keep, len(keep)
	}
	var launchTD *storev1.TaskDefinitionRecord
	if l := plan.Launch; l.Count > 0 {
		if err := need(l.TaskDefinition); err != nil {
			return err
		}
		rec := recs[l.TaskDefinition]
		launchTD = &storev1.TaskDefinitionRecord{TaskDefinition: rec.GetTaskDefinition(), Tags: rec.GetTags()}
	}
	placed, unplaced, err := r.exec.Execute(ctx, plan, launchTD, hosts.ProviderOf)
	if err != nil {
		return err
	}
	if len(placed) > 0 || unplaced > 0 || len(plan.Stop) > 0 {
		r.log.InfoContext(ctx, "daemon reconciled", "daemon", d.GetDaemonArn(), "started", len(placed), "unplaced", unplaced, "stopped", len(plan.Stop))
	}
	d.Service = plan.Record
	return r.write(ctx, c, it, d, plan, tasks, now)
}

// primaryOf returns the PRIMARY deployment of a service.
func primaryOf(s *ecsv1.Service) *ecsv1.Deployment {
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == service.DeploymentPrimary {
			return d
		}
	}
	return nil
}

// findDeployment returns the deployment id of a service.
func findDeployment(s *ecsv1.Service, id string) *ecsv1.Deployment {
	for _, d := range s.GetDeployments() {
		if d.GetId() == id {
			return d
		}
	}
	return nil
}

// write records what a pass decided: the deployments' statuses and counts, the
// daemon's service state, and — once a deleted daemon has no task left — the deletion of
// its records, in one transaction against the daemon record's revision.
func (r *Reconciler) write(ctx context.Context, c *cluster, it store.Item[*storev1.DaemonRecord], d *storev1.DaemonRecord, plan service.Plan, tasks []store.Item[*storev1.TaskRecord], now time.Time) error {
	txn := store.NewTxn(r.cfg.Client).If(r.cfg.Fence...)
	deps, err := store.ListAll[*storev1.DaemonDeploymentRecord](ctx, r.cfg.Client, keys.DaemonDeployments(c.account, c.name, d.GetDaemonName()))
	if err != nil {
		return err
	}
	if d.GetService().GetService().GetStatus() == service.StatusInactive {
		// Deleted and no task left: the daemon goes with its deployments and revisions.
		revs, _, err := store.ListRevisions(ctx, r.cfg.Client, keys.DaemonRevisions(c.account, c.name, d.GetDaemonName()), store.MaxListLimit, "")
		if err != nil {
			return err
		}
		txn.IfModRevision(it.Key, it.ModRevision).Delete(it.Key)
		for _, dep := range deps {
			txn.Delete(dep.Key)
		}
		for _, rv := range revs {
			txn.Delete(rv.Key)
		}
		_, err = txn.Commit(ctx)
		return ignoreConflict(err)
	}
	if d.RevisionOf == nil {
		d.RevisionOf = map[string]string{}
	}
	if b := plan.Breaker; b != nil && b.NewID != "" {
		d.RevisionOf[b.NewID] = d.GetRevisionOf()[b.RolledBackTo]
	}
	running := runningByDeployment(tasks)
	svc := d.GetService().GetService()
	changed := false
	for _, it := range deps {
		rec := proto.Clone(it.Value).(*storev1.DaemonDeploymentRecord)
		advance(rec, d, svc, plan, running, now, r.cfg.BreakerMinThreshold)
		if !proto.Equal(rec, it.Value) {
			txn.Update(it.Key, it.ModRevision, rec)
			changed = true
		}
	}
	if !changed && proto.Equal(d, it.Value) {
		return nil
	}
	// The daemon record is written (against the revision read) with its deployments.
	txn.Update(it.Key, it.ModRevision, d)
	_, err = txn.Commit(ctx)
	return ignoreConflict(err)
}

// ignoreConflict drops a CAS conflict (an API call changed the daemon during the pass:
// the next pass recomputes); a fence failure stays an error.
func ignoreConflict(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// runningByDeployment counts the RUNNING tasks of each deployment by capacity provider.
func runningByDeployment(tasks []store.Item[*storev1.TaskRecord]) map[string]map[string]int32 {
	out := map[string]map[string]int32{}
	for _, t := range tasks {
		if t.Value.GetTask().GetLastStatus() != "RUNNING" || t.Value.GetTask().GetDesiredStatus() != "RUNNING" {
			continue
		}
		dep := t.Value.GetDeploymentId()
		if out[dep] == nil {
			out[dep] = map[string]int32{}
		}
		out[dep][t.Value.GetTask().GetCapacityProviderName()]++
	}
	return out
}

// advance moves one daemon deployment along what its service deployment did in this
// pass: PENDING → IN_PROGRESS → SUCCESSFUL (bakeTimeInMinutes after every host runs the
// target), or, when the circuit breaker tripped, ROLLBACK_IN_PROGRESS →
// ROLLBACK_SUCCESSFUL (or ROLLBACK_FAILED); a deployment no longer PRIMARY is STOPPED.
func advance(rec *storev1.DaemonDeploymentRecord, d *storev1.DaemonRecord, svc *ecsv1.Service, plan service.Plan, running map[string]map[string]int32, now time.Time, minThreshold int) {
	dep := rec.GetDeployment()
	id := deploymentID(dep.GetDaemonDeploymentArn())
	epoch := awsapi.Epoch(now)
	sd := findDeployment(svc, id)
	st := dep.GetStatus()
	// Counts of the target revision's hosts.
	if t := dep.GetTargetDaemonRevision(); t != nil && (st == DeploymentPending || st == DeploymentInProgress) {
		t.CapacityProviders = []*ecsv1.DaemonDeploymentCapacityProvider{}
		total := int32(0)
		for _, p := range sortedKeys(running[id]) {
			n := running[id][p]
			t.CapacityProviders = append(t.CapacityProviders, &ecsv1.DaemonDeploymentCapacityProvider{Arn: proto.String(capacityARN(svc, p)), RunningInstanceCount: proto.Int32(n), DrainingInstanceCount: proto.Int32(0)})
			total += n
		}
		t.TotalRunningInstanceCount, t.TotalDrainingInstanceCount = proto.Int32(total), proto.Int32(0)
	}
	if sd != nil && (st == DeploymentPending || st == DeploymentInProgress) {
		dep.CircuitBreaker = &ecsv1.DaemonCircuitBreaker{
			Status: proto.String("MONITORING"), FailureCount: sd.GetFailedTasks(),
			Threshold: int32(service.BreakerThreshold(svc.GetDesiredCount(), minThreshold)),
		}
	}
	switch {
	case st == DeploymentPending && sd != nil && sd.GetStatus() == service.DeploymentPrimary:
		dep.Status, dep.StartedAt = proto.String(DeploymentInProgress), proto.Float64(epoch)
		dep.StatusReason = proto.String("Daemon deployment in progress.")
		fallthrough
	case st == DeploymentInProgress:
		b := plan.Breaker
		switch {
		case b != nil && b.Failed == id:
			dep.CircuitBreaker.Status = proto.String("TRIGGERED")
			reason := fmt.Sprintf("Daemon deployment failed: %d tasks failed to start (threshold %d).", b.FailedTasks, b.Threshold)
			if b.NewID == "" {
				dep.Status, dep.StatusReason, dep.FinishedAt = proto.String(DeploymentRollbackFailed), proto.String(reason+" There is no successful revision to roll back to."), proto.Float64(epoch)
				return
			}
			rec.RollbackId = b.NewID
			dep.Status, dep.StatusReason = proto.String(DeploymentRollbackInProgress), proto.String(reason)
			dep.Rollback = &ecsv1.DaemonRollback{
				Reason: proto.String(reason), StartedAt: proto.Float64(epoch),
				RollbackTargetDaemonRevisionArn: proto.String(d.GetRevisionOf()[b.RolledBackTo]),
				RollbackCapacityProviders:       d.GetCapacityProviderArns(),
			}
		case sd == nil || sd.GetStatus() == service.DeploymentInactive || (sd.GetStatus() == service.DeploymentActive && sd.GetRolloutState() != service.RolloutCompleted):
			dep.Status, dep.StatusReason, dep.StoppedAt = proto.String(DeploymentStopped), proto.String("Superseded by a newer daemon deployment."), proto.Float64(epoch)
		case sd.GetRolloutState() == service.RolloutCompleted:
			if rec.BakedAt == 0 {
				rec.BakedAt = epoch
			}
			bake := time.Duration(dep.GetDeploymentConfiguration().GetBakeTimeInMinutes()) * time.Minute
			if !now.Before(awsapi.FromEpoch(rec.GetBakedAt()).Add(bake)) {
				dep.Status, dep.StatusReason, dep.FinishedAt = proto.String(DeploymentSuccessful), proto.String("Daemon deployment completed."), proto.Float64(epoch)
				dep.CircuitBreaker.Status = proto.String("MONITORING_COMPLETE")
			}
		}
	case st == DeploymentRollbackInProgress:
		rb := findDeployment(svc, rec.GetRollbackId())
		switch {
		case rb == nil:
			dep.Status, dep.FinishedAt = proto.String(DeploymentRollbackFailed), proto.Float64(epoch)
		case rb.GetRolloutState() == service.RolloutCompleted:
			dep.Status, dep.StatusReason, dep.FinishedAt = proto.String(DeploymentRollbackSuccessful), proto.String("Rolled back to the last successful revision."), proto.Float64(epoch)
		case rb.GetRolloutState() == service.RolloutFailed:
			dep.Status, dep.StatusReason, dep.FinishedAt = proto.String(DeploymentRollbackFailed), proto.String("The rollback's tasks failed to start."), proto.Float64(epoch)
		}
	}
}

// deploymentID returns the id of a daemon deployment ARN (its last part).
func deploymentID(a string) string {
	_, id := splitChild(a)
	return id
}

// capacityARN returns the ARN of capacity provider name in the service's account and
// region ("" for none).
func capacityARN(svc *ecsv1.Service, name string) string {
	if name == "" {
		return ""
	}
	p, err := parseScope(svc.GetServiceArn())
	if err != nil {
		return name
	}
	return capacity.ARN(p, name)
}
