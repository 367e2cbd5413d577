package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/arn"
	"github.com/berthhq/berth/services/scheduler/control"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/placement"
	"github.com/berthhq/berth/services/scheduler/store"
)

// Stop codes and reasons the service scheduler writes on the tasks it stops.
const (
	StopCodeScheduler = "ServiceSchedulerInitiated"
	// ReasonScaleIn is the stoppedReason of tasks stopped to converge on the desired
	// count or to finish a deployment.
	ReasonScaleIn = "Scaling activity initiated by (deployment %s)"
	// ReasonUnhealthy is the stoppedReason of tasks stopped for failing container health
	// checks; such stops count as failed tasks.
	ReasonUnhealthy = "Task failed container health checks"
	// ReasonDraining is the stoppedReason of tasks stopped because their container
	// instance is draining.
	ReasonDraining = "Container instance is draining"
	// ReasonServiceDeleted is the stoppedReason of tasks of a deleted service.
	ReasonServiceDeleted = "Service is being deleted"
)

// ReconcilerConfig configures a Reconciler.
type ReconcilerConfig struct {
	// Client is the etcd client. Required.
	Client store.Client
	// Placer places service tasks (the same Placer RunTask uses). Required.
	Placer *placement.Placer
	// Logger receives what the loop does and its faults; nil discards.
	Logger *slog.Logger
	// Now is the clock (launch backoff, events, timestamps); nil means time.Now.
	Now func() time.Time
	// NewID returns a new task id; nil means control.NewID.
	NewID func() string
	// Fence is added to every write (the leader term's store.Fence). Nil writes unfenced,
	// for tests.
	Fence []clientv3.Cmp
	// Interval is the time between passes in Run. Default 1s.
	Interval time.Duration
	// Kick, when set, wakes Run for a pass before the interval ends (the Handler kicks it
	// after each write).
	Kick *Kicker
	// BackoffAfter, BackoffBase and BackoffCap shape the launch backoff (see
	// LaunchDelay). Defaults DefaultBackoffAfter, DefaultBackoffBase and DefaultBackoffCap
	// (27 minutes, as AWS).
	BackoffAfter            int
	BackoffBase, BackoffCap time.Duration
	// BreakerMinThreshold is the floor of the circuit breaker threshold. Default
	// DefaultBreakerMinThreshold.
	BreakerMinThreshold int
	// StableAfter is how long a task without health-checked essential containers must
	// have been RUNNING before it counts as started successfully: toward
	// minimumHealthyPercent, its deployment's completion and the service's steady state,
	// and as the success that resets the launch backoff (a health-checked task counts once
	// HEALTHY). A task that was only placed, or that crashes right after starting, never
	// counts. Default DefaultStableAfter (40 s, as AWS); negative disables the wait.
	StableAfter time.Duration
	// InactiveRetention is how long an INACTIVE service stays describable before its
	// record is deleted. Default 1 hour.
	InactiveRetention time.Duration
	// FullPassEvery bounds how long Run goes without a full pass (one that reads every
	// cluster whether or not the watch saw a change). Default 1 minute.
	FullPassEvery time.Duration
}

// Reconciler is the leader's service loop: each pass converges every service of every
// account on its desired state (see Pass). Run it only on the leader, with the leader
// term's fence in ReconcilerConfig.Fence and a context cancelled when leadership ends;
// build a new one per term. Safe for one Run or Pass at a time.
type Reconciler struct {
	cfg ReconcilerConfig
	log *slog.Logger

	mu  sync.Mutex
	tds map[string]*storev1.TaskDefinitionRecord // by ARN; task definitions never change but for status

	// Change tracking for Run: clusters ("account/cluster") whose tasks or instances
	// changed since they were last reconciled, as reported by the watch; all is set until
	// the watch is established and after it breaks.
	dmu      sync.Mutex
	dirty    map[string]bool            // whole clusters (instances changed, a task deleted)
	dirtySvc map[string]map[string]bool // cluster → services whose tasks or record changed; "" = a standalone task
	allDirty bool
	wake     chan struct{}
	// meta holds what the last pass read of every service record (nil before the first
	// pass), so a selective pass reads only the clusters that changed.
	meta map[string]svcMeta
	// clustersRead and servicesRead count the clusters and the services a pass
	// reconciled (for tests).
	clustersRead, servicesRead int
}

// NewReconciler returns a Reconciler for cfg.
func NewReconciler(cfg ReconcilerConfig) *Reconciler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = control.NewID
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BackoffAfter <= 0 {
		cfg.BackoffAfter = DefaultBackoffAfter
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffCap <= 0 {
		cfg.BackoffCap = DefaultBackoffCap
	}
	if cfg.BreakerMinThreshold <= 0 {
		cfg.BreakerMinThreshold = DefaultBreakerMinThreshold
	}
	if cfg.StableAfter == 0 {
		cfg.StableAfter = DefaultStableAfter
	}
	if cfg.InactiveRetention <= 0 {
		cfg.InactiveRetention = time.Hour
	}
	if cfg.FullPassEvery <= 0 {
		cfg.FullPassEvery = time.Minute
	}
	return &Reconciler{
		cfg: cfg, log: cfg.Logger, tds: map[string]*storev1.TaskDefinitionRecord{},
		dirty: map[string]bool{}, dirtySvc: map[string]map[string]bool{}, allDirty: true, wake: make(chan struct{}, 1),
	}
}

// Run reconciles until ctx ends, and returns ctx's error. It watches the task, container
// instance and service records of every account and reconciles only what changed: a
// service whose record or one of whose tasks changed (its tasks read through the ListTasks
// index), every service of a cluster whose instances changed, every service not in
// steady state (still converging: waiting for capacity, a health check grace period, a
// rollout), and a service whose launch backoff ran out. Passes run at most every Interval and sooner on a kick or a watched
// change, one at a time; a full pass (every cluster, every task) runs at least every
// FullPassEvery and whenever a watch broke. A pass that fails is logged and the loop goes
// on, except when the fence failed (store.ErrPreconditionFailed): this replica no longer
// leads, and Run returns that error.
func (r *Reconciler) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// Services too: an API call on another replica does not kick this one.
	for _, prefix := range []string{store.MustKeyPrefix("tasks"), store.MustKeyPrefix("instances"), store.MustKeyPrefix("services")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.watch(wctx, prefix)
		}()
	}
	defer wg.Wait()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	lastFull := time.Time{}
	for {
		full := time.Since(lastFull) >= r.cfg.FullPassEvery
		if full {
			lastFull = time.Now()
		}
		if err := r.pass(ctx, !full); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, store.ErrPreconditionFailed) {
				return err
			}
			r.log.ErrorContext(ctx, "service reconcile pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-r.cfg.Kick.C():
		case <-r.wake:
			// Let a burst of changes (an agent's reports, our own writes) land first.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(r.cfg.Interval/10, 50*time.Millisecond)):
			}
		}
	}
}

// watch marks clusters dirty as records under prefix (tasks/, instances/ or services/ of
// every account) change, from the current revision on; after a broken watch it marks every
// cluster dirty and watches again.
func (r *Reconciler) watch(ctx context.Context, prefix string) {
	for ctx.Err() == nil {
		resp, err := r.cfg.Client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			if sleepCtx(ctx, time.Second) != nil {
				return
			}
			continue
		}
		wch := r.cfg.Client.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		r.markAll(false)
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			r.dmu.Lock()
			for _, ev := range wr.Events {
				// {prefix}{account}/{region}/{cluster}/{id or name}
				rest := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				i := strings.LastIndexByte(rest, '/')
				if i <= 0 {
					continue
				}
				g := rest[:i]
				switch {
				case strings.HasSuffix(prefix, "/services/"):
					r.markService(g, rest[i+1:])
				case strings.HasSuffix(prefix, "/tasks/") && ev.Type == clientv3.EventTypePut:
					rec := &storev1.TaskRecord{}
					if proto.Unmarshal(ev.Kv.Value, rec) != nil {
						r.dirty[g] = true
						continue
					}
					r.markService(g, rec.GetServiceName())
				default:
					// Instances changed (joins, drains, capacity) or a task record was
					// deleted: the whole cluster.
					r.dirty[g] = true
				}
			}
			r.dmu.Unlock()
			r.signal()
		}
		r.markAll(true)
	}
}

// markService marks one service of cluster g (account/region/cluster) dirty (name "" for a
// standalone task, which concerns no service: the services still converging are
// reconciled on every pass anyway). The caller holds dmu.
func (r *Reconciler) markService(g, name string) {
	m := r.dirtySvc[g]
	if m == nil {
		m = map[string]bool{}
		r.dirtySvc[g] = m
	}
	m[name] = true
}

// restoreDirty puts back change marks a failed pass took.
func (r *Reconciler) restoreDirty(dirty map[string]bool, dirtySvc map[string]map[string]bool) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	for g := range dirty {
		r.dirty[g] = true
	}
	for g, names := range dirtySvc {
		for n := range names {
			r.markService(g, n)
		}
	}
}

// markAll sets or clears the "everything is dirty" flag (set while a watch is down).
func (r *Reconciler) markAll(v bool) {
	r.dmu.Lock()
	r.allDirty = v
	r.dmu.Unlock()
	if v {
		r.signal()
	}
}

func (r *Reconciler) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// takeDirty returns the dirty clusters, the dirty services by cluster and whether
// everything is dirty, clearing the sets.
func (r *Reconciler) takeDirty() (map[string]bool, map[string]map[string]bool, bool) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	d, ds := r.dirty, r.dirtySvc
	r.dirty, r.dirtySvc = map[string]bool{}, map[string]map[string]bool{}
	return d, ds, r.allDirty
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// serviceItem is a service record as listed, with the account from its key.
type serviceItem struct {
	account keys.Scope
	key     string
	rec     *storev1.ServiceRecord
	rev     int64
}

// Pass reconciles every service once: it lists the service records of every account,
// then per cluster the cluster's task records and container instances, and for each
// service recomputes its counts, replaces stopped and unhealthy tasks, rolls deployments
// forward within minimumHealthyPercent/maximumPercent, applies the launch backoff and the
// circuit breaker, follows DAEMON instances, finishes deletions and writes the service
// record when it changed. Errors of single services are joined and returned after the
// others were reconciled; a fence failure returns at once (wrapping
// store.ErrPreconditionFailed).
func (r *Reconciler) Pass(ctx context.Context) error { return r.pass(ctx, false) }

// svcMeta is what a selective pass remembers of a service record it read.
type svcMeta struct {
	rev        int64
	inactive   bool
	expiresAt  time.Time // INACTIVE: when the record may be deleted
	nextLaunch time.Time // PRIMARY deployment's launch backoff deadline; zero if none
	waiting    bool      // not in steady state: reconciled on every pass
}

func (r *Reconciler) metaOf(rec *storev1.ServiceRecord, rev int64) svcMeta {
	m := svcMeta{rev: rev, inactive: rec.GetService().GetStatus() == StatusInactive}
	if m.inactive {
		m.expiresAt = inactiveSince(rec).Add(r.cfg.InactiveRetention)
	}
	m.waiting = !steadyRecord(rec)
	if p := primary(rec.GetService()); p != nil {
		for _, dr := range rec.GetDeployments() {
			if dr.GetId() == p.GetId() && dr.NextLaunchAt != nil {
				m.nextLaunch = dr.GetNextLaunchAt().AsTime()
			}
		}
	}
	return m
}

// steadyRecord reports whether a service record says the service is in steady state:
// ACTIVE, one deployment, COMPLETED, running == desired, nothing pending.
func steadyRecord(rec *storev1.ServiceRecord) bool {
	s := rec.GetService()
	n := 0
	for _, d := range s.GetDeployments() {
		if d.GetStatus() != DeploymentInactive {
			n++
		}
	}
	p := primary(s)
	return s.GetStatus() == StatusActive && n == 1 && p != nil && p.GetRolloutState() == RolloutCompleted &&
		s.GetRunningCount() == s.GetDesiredCount() && s.GetPendingCount() == 0
}

// groupOf returns "account/region/cluster" (the group: one cluster of one scope) and the
// scope of a service key.
func groupOf(key string) (group string, account keys.Scope, ok bool) {
	rest := strings.TrimPrefix(key, store.Prefix+"services/")
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", keys.Scope{}, false
	}
	account, _, ok = splitGroup(rest[:i])
	return rest[:i], account, ok
}

// splitGroup parses a group ("account/region/cluster") into its scope and cluster.
func splitGroup(g string) (account keys.Scope, cluster string, ok bool) {
	parts := strings.Split(g, "/")
	if len(parts) != 3 {
		return keys.Scope{}, "", false
	}
	return keys.Scope{Account: parts[0], Region: parts[1]}, parts[2], true
}

// pass is Pass; selective (Run between full passes) reads only the service keys and
// their revisions, and then the records and tasks of the clusters that changed since
// they were last reconciled: a service record changed, the watch saw a task or instance
// change, or a launch backoff ran out.
func (r *Reconciler) pass(ctx context.Context, selective bool) (err error) {
	dirty, dirtySvc, all := r.takeDirty()
	defer func() {
		if err != nil && r.meta != nil {
			r.restoreDirty(dirty, dirtySvc) // what this pass did not get to
		}
	}()
	selective = selective && !all && r.meta != nil
	now := r.cfg.Now()
	groups := map[string][]serviceItem{}
	var order []string
	var errs []error
	add := func(prefix string) error {
		token := ""
		for {
			items, next, err := store.List[*storev1.ServiceRecord](ctx, r.cfg.Client, prefix, store.MaxListLimit, token)
			if err != nil {
				return fmt.Errorf("service: list services: %w", err)
			}
			for _, it := range items {
				g, account, ok := groupOf(it.Key)
				if !ok {
					continue
				}
				if _, seen := groups[g]; !seen {
					order = append(order, g)
				}
				groups[g] = append(groups[g], serviceItem{account: account, key: it.Key, rec: it.Value, rev: it.ModRevision})
			}
			if next == "" {
				return nil
			}
			token = next
		}
	}
	meta := map[string]svcMeta{}
	// wanted, for a selective pass, names the services of each changed cluster to
	// reconcile (nil: all of them, reading all the cluster's tasks).
	var wanted map[string]map[string]bool
	if !selective {
		if err := add(store.MustKeyPrefix("services")); err != nil {
			return err
		}
	} else {
		revs, lerr := r.serviceRevisions(ctx)
		if lerr != nil {
			return lerr
		}
		wanted = map[string]map[string]bool{}
		changed := map[string]bool{}
		var changedOrder []string
		for _, kr := range revs {
			g, _, ok := groupOf(kr.key)
			if !ok {
				continue
			}
			m, known := r.meta[kr.key]
			name := lastSegment(kr.key)
			switch {
			case !known || m.rev != kr.rev || dirty[g] || dirtySvc[g][name] || m.waiting ||
				(!m.inactive && !m.nextLaunch.IsZero() && !now.Before(m.nextLaunch)):
				if !changed[g] {
					changed[g] = true
					changedOrder = append(changedOrder, g)
				}
				if wanted[g] == nil {
					wanted[g] = map[string]bool{}
				}
				wanted[g][name] = true
			case m.inactive && now.After(m.expiresAt):
				if _, err := store.Delete(ctx, r.cfg.Client, kr.key, kr.rev, store.If(r.cfg.Fence...)); err != nil {
					if errors.Is(err, store.ErrPreconditionFailed) {
						return err
					}
					if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
						errs = append(errs, fmt.Errorf("service: delete inactive %s: %w", kr.key, err))
					}
				}
				continue
			default:
				meta[kr.key] = m
			}
		}
		for _, g := range changedOrder {
			account, cluster, _ := splitGroup(g)
			if dirty[g] {
				if err := add(keys.Services(account, cluster)); err != nil {
					return err
				}
				continue
			}
			// Only the services that changed or are still converging.
			names := make([]string, 0, len(wanted[g]))
			for n := range wanted[g] {
				names = append(names, n)
			}
			slices.Sort(names)
			for i := 0; i < len(names); i += 100 {
				ops := make([]clientv3.Op, 0, 100)
				for _, n := range names[i:min(i+100, len(names))] {
					ops = append(ops, clientv3.OpGet(keys.Service(account, cluster, n)))
				}
				resp, err := r.cfg.Client.Txn(ctx).Then(ops...).Commit()
				if err != nil {
					return fmt.Errorf("service: read services of %s: %w", g, err)
				}
				for _, rr := range resp.Responses {
					for _, kvp := range rr.GetResponseRange().GetKvs() {
						rec := &storev1.ServiceRecord{}
						if err := proto.Unmarshal(kvp.Value, rec); err != nil {
							return fmt.Errorf("service: decode %s: %w", kvp.Key, err)
						}
						if _, seen := groups[g]; !seen {
							order = append(order, g)
						}
						groups[g] = append(groups[g], serviceItem{account: account, key: string(kvp.Key), rec: rec, rev: kvp.ModRevision})
					}
				}
			}
		}
	}
	for _, g := range order {
		var live []serviceItem
		subset := wanted != nil && !dirty[g]
		for _, it := range groups[g] {
			m := r.metaOf(it.rec, it.rev)
			if subset && !wanted[g][lastSegment(it.key)] && !m.waiting {
				// Unchanged: keep what the last pass knew (its revision) so a later change
				// is still seen.
				if old, ok := r.meta[it.key]; ok {
					meta[it.key] = old
				}
				continue
			}
			meta[it.key] = m
			if it.rec.GetService().GetStatus() == StatusInactive {
				if err := r.expire(ctx, it, now); err != nil {
					if errors.Is(err, store.ErrPreconditionFailed) {
						return err
					}
					errs = append(errs, err)
				}
				continue
			}
			live = append(live, it)
		}
		if err := r.passCluster(ctx, live, !subset); err != nil {
			if errors.Is(err, store.ErrPreconditionFailed) || ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
			r.dmu.Lock()
			r.dirty[g] = true // try again next pass
			r.dmu.Unlock()
		}
	}
	r.meta = meta
	return errors.Join(errs...)
}

// keyRev is a key and its ModRevision.
type keyRev struct {
	key string
	rev int64
}

// serviceRevisions lists every service key with its ModRevision, without values, 1,000
// keys per request.
func (r *Reconciler) serviceRevisions(ctx context.Context) ([]keyRev, error) {
	prefix := store.MustKeyPrefix("services")
	end := clientv3.GetPrefixRangeEnd(prefix)
	var out []keyRev
	from := prefix
	for {
		resp, err := r.cfg.Client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(store.MaxListLimit))
		if err != nil {
			return nil, fmt.Errorf("service: list service keys: %w", err)
		}
		for _, kv := range resp.Kvs {
			out = append(out, keyRev{key: string(kv.Key), rev: kv.ModRevision})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// listAll reads every record under prefix, page by page.
func listAll[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string) ([]store.Item[T], error) {
	var out []store.Item[T]
	token := ""
	for {
		items, next, err := store.List[T](ctx, kv, prefix, store.MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// clusterState is what a pass reads once per cluster.
type clusterState struct {
	account       keys.Scope
	cluster       string
	tasks         map[string][]store.Item[*storev1.TaskRecord] // by service name
	instances     map[string]store.Item[*storev1.ContainerInstanceRecord]
	instanceOrder []string
}

// expire deletes the record of an INACTIVE service whose retention has passed.
func (r *Reconciler) expire(ctx context.Context, s serviceItem, now time.Time) error {
	if !inactiveSince(s.rec).Add(r.cfg.InactiveRetention).Before(now) {
		return nil
	}
	if _, err := store.Delete(ctx, r.cfg.Client, s.key, s.rev, store.If(r.cfg.Fence...)); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("service: delete inactive %s: %w", s.key, err)
	}
	return nil
}

// passCluster reconciles the given services (not INACTIVE) of one cluster. whole reads
// every task of the cluster at once (a full pass, or most services changed); otherwise
// each service's tasks are read through the ListTasks index.
func (r *Reconciler) passCluster(ctx context.Context, svcs []serviceItem, whole bool) error {
	if len(svcs) == 0 {
		return nil
	}
	account, cluster := svcs[0].account, svcs[0].rec.GetClusterName()
	r.clustersRead++
	cs := &clusterState{account: account, cluster: cluster, tasks: map[string][]store.Item[*storev1.TaskRecord]{}, instances: map[string]store.Item[*storev1.ContainerInstanceRecord]{}}
	if whole {
		tasks, err := listAll[*storev1.TaskRecord](ctx, r.cfg.Client, keys.Tasks(account, cluster))
		if err != nil {
			return fmt.Errorf("service: list tasks of %s/%s: %w", account, cluster, err)
		}
		for _, t := range tasks {
			if n := t.Value.GetServiceName(); n != "" {
				cs.tasks[n] = append(cs.tasks[n], t)
			}
		}
	} else {
		for _, sv := range svcs {
			name := sv.rec.GetService().GetServiceName()
			tasks, err := serviceTasks(ctx, r.cfg.Client, account, cluster, name)
			if err != nil {
				return err
			}
			cs.tasks[name] = tasks
		}
	}
	insts, err := listAll[*storev1.ContainerInstanceRecord](ctx, r.cfg.Client, keys.Instances(account, cluster))
	if err != nil {
		return fmt.Errorf("service: list instances of %s/%s: %w", account, cluster, err)
	}
	for _, in := range insts {
		id := lastSegment(in.Key)
		cs.instances[id] = in
		cs.instanceOrder = append(cs.instanceOrder, id)
	}
	var errs []error
	for _, s := range svcs {
		if err := r.reconcile(ctx, cs, s); err != nil {
			if errors.Is(err, store.ErrPreconditionFailed) {
				return err
			}
			errs = append(errs, fmt.Errorf("service %s/%s/%s: %w", account, cluster, s.rec.GetService().GetServiceName(), err))
		}
	}
	return errors.Join(errs...)
}

// inactiveSince is when the service became INACTIVE: the latest updatedAt of its
// deployments.
func inactiveSince(rec *storev1.ServiceRecord) time.Time {
	var t float64
	for _, d := range rec.GetService().GetDeployments() {
		t = max(t, d.GetUpdatedAt())
	}
	return fromEpoch(t)
}

func lastSegment(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// taskDef returns a task definition record by ARN, cached.
func (r *Reconciler) taskDef(ctx context.Context, account keys.Scope, tdARN string) (*storev1.TaskDefinitionRecord, error) {
	r.mu.Lock()
	td := r.tds[tdARN]
	r.mu.Unlock()
	if td != nil {
		return td, nil
	}
	a, err := arn.Parse(tdARN)
	if err != nil || a.Type != arn.TaskDefinition {
		return nil, fmt.Errorf("service: bad task definition ARN %q", tdARN)
	}
	td, _, err = store.Get[*storev1.TaskDefinitionRecord](ctx, r.cfg.Client, keys.TaskDefinition(account, a.Name, a.Revision))
	if err != nil {
		return nil, fmt.Errorf("service: read task definition %s: %w", tdARN, err)
	}
	r.mu.Lock()
	r.tds[tdARN] = td
	r.mu.Unlock()
	return td, nil
}

// view is one task of a service as the reconciler sees it.
type view struct {
	item      store.Item[*storev1.TaskRecord]
	id        string
	dep       string
	created   float64
	live      bool // desired RUNNING, not STOPPED
	stopping  bool // desired STOPPED, not yet STOPPED
	stopped   bool
	running   bool
	pending   bool
	healthy   bool
	stable    bool // healthy, and HEALTHY by its health checks or RUNNING for StableAfter: started successfully
	unhealthy bool
	draining  bool // its instance is not ACTIVE (draining, deregistered, gone)
	failed    bool // stopped by itself (not by a user or the scheduler), or for health checks
	success   bool // started successfully: healthy now, or ran and was stopped on purpose
	instance  string
}

// healthChecked returns the names of the essential containers with a health check.
func healthChecked(td *ecsv1.TaskDefinition) map[string]bool {
	out := map[string]bool{}
	for _, c := range td.GetContainerDefinitions() {
		if c.GetHealthCheck() != nil && len(c.GetHealthCheck().GetCommand()) > 0 && (c.Essential == nil || c.GetEssential()) {
			out[c.GetName()] = true
		}
	}
	return out
}

// views classifies a service's tasks. An UNHEALTHY task inside the service's
// healthCheckGracePeriodSeconds (counted from its startedAt) is only not healthy yet, as
// AWS ignores failing container health checks during the grace period.
func (r *Reconciler) views(ctx context.Context, account keys.Scope, cs *clusterState, svc *ecsv1.Service, items []store.Item[*storev1.TaskRecord]) ([]*view, error) {
	grace := time.Duration(svc.GetHealthCheckGracePeriodSeconds()) * time.Second
	now := r.cfg.Now()
	out := make([]*view, 0, len(items))
	for _, it := range items {
		t := it.Value.GetTask()
		v := &view{item: it, id: control.TaskID(it.Value), dep: it.Value.GetDeploymentId(), created: t.GetCreatedAt(), instance: it.Value.GetContainerInstanceId()}
		if v.dep == "" {
			v.dep = t.GetStartedBy()
		}
		last := t.GetLastStatus()
		v.stopped = last == "STOPPED"
		v.live = !v.stopped && t.GetDesiredStatus() == "RUNNING"
		v.stopping = !v.stopped && t.GetDesiredStatus() != "RUNNING"
		p, run := control.TaskCounts(last)
		v.pending, v.running = p == 1, run == 1
		checked := false // an essential container has a health check
		if v.running {
			td, err := r.taskDef(ctx, account, t.GetTaskDefinitionArn())
			if err != nil {
				return nil, err
			}
			hc := healthChecked(td.GetTaskDefinition())
			checked = len(hc) > 0
			v.healthy = true
			for _, c := range t.GetContainers() {
				if !hc[c.GetName()] {
					continue
				}
				switch c.GetHealthStatus() {
				case "HEALTHY":
				case "UNHEALTHY":
					v.healthy = false
					v.unhealthy = grace <= 0 || t.StartedAt == nil || !now.Before(fromEpoch(t.GetStartedAt()).Add(grace))
				default:
					v.healthy = false
				}
			}
		}
		if v.live {
			in, ok := cs.instances[v.instance]
			st := in.Value.GetContainerInstance().GetStatus()
			v.draining = !ok || st != StatusActive || in.Value.GetOperatorDrain() || in.Value.GetInvoluntaryDrain()
		}
		if v.stopped {
			code, reason := t.GetStopCode(), t.GetStoppedReason()
			switch {
			case code == "UserInitiated" || code == "TerminationNotice" || code == "SpotInterruption" ||
				(code == StopCodeScheduler && reason != ReasonUnhealthy):
				// Stopped on purpose, or its host was lost: not a failure of the task.
				v.success = t.StartedAt != nil
			default:
				// TaskFailedToStart, EssentialContainerExited, failed health checks, or
				// no code at all: the task failed.
				v.failed = true
			}
		}
		// A task RUNNING for an instant (a crash loop: PENDING, RUNNING, STOPPED within a
		// second) has not started successfully: only one that stayed up StableAfter has.
		// One with health-checked essential containers counts once they are HEALTHY, as
		// AWS counts it toward minimumHealthyPercent (DeploymentConfiguration in the ECS
		// API reference).
		v.stable = v.healthy && (r.cfg.StableAfter < 0 || checked ||
			(t.StartedAt != nil && !now.Before(fromEpoch(t.GetStartedAt()).Add(r.cfg.StableAfter))))
		if v.live && v.stable {
			v.success = true
		}
		out = append(out, v)
	}
	return out, nil
}

// reconcile converges one service; see Pass.
func (r *Reconciler) reconcile(ctx context.Context, cs *clusterState, it serviceItem) error {
	r.servicesRead++
	now := r.cfg.Now()
	rec := proto.Clone(it.rec).(*storev1.ServiceRecord)
	s := rec.GetService()
	name := s.GetServiceName()
	views, err := r.views(ctx, cs.account, cs, s, cs.tasks[name])
	if err != nil {
		return err
	}
	ev := &events{svc: name, now: now}
	prim := primary(s)
	if prim == nil {
		return fmt.Errorf("service: %s has no PRIMARY deployment", name)
	}
	daemon := s.GetSchedulingStrategy() == StrategyDaemon
	deleting := s.GetStatus() == StatusDraining

	// DAEMON: the desired count is the number of eligible instances.
	var eligible []string
	if daemon && !deleting {
		td, err := r.taskDef(ctx, cs.account, prim.GetTaskDefinition())
		if err != nil {
			return err
		}
		eligible = r.eligibleInstances(cs, s, td.GetTaskDefinition())
		s.DesiredCount = int32(len(eligible))
		prim.DesiredCount = s.DesiredCount
	}
	desired := s.GetDesiredCount()
	if deleting {
		desired = 0
	}

	// Per-deployment failure accounting and launch backoff.
	byDep := map[string][]*view{}
	for _, v := range views {
		byDep[v.dep] = append(byDep[v.dep], v)
	}
	dc := s.GetDeploymentConfiguration()
	dr := deploymentRecord(rec, prim.GetId())
	failed, consecutive := failureCounts(byDep[prim.GetId()])
	prim.FailedTasks = max(prim.GetFailedTasks(), int32(failed))
	switch {
	case consecutive == 0:
		dr.FailedLaunches, dr.NextLaunchAt = 0, nil
	case consecutive > int(dr.GetFailedLaunches()):
		dr.FailedLaunches = int32(consecutive)
		if d := LaunchDelay(consecutive, r.cfg.BackoffAfter, r.cfg.BackoffBase, r.cfg.BackoffCap); d > 0 {
			dr.NextLaunchAt = ts(now.Add(d))
			ev.add(fmt.Sprintf("(service %s) is unable to consistently start tasks successfully. For more information, see the Troubleshooting section.", name))
		}
	default:
		dr.FailedLaunches = int32(consecutive)
	}
	for _, d := range s.GetDeployments() {
		if d.GetId() != prim.GetId() && d.GetStatus() != DeploymentInactive {
			f, _ := failureCounts(byDep[d.GetId()])
			d.FailedTasks = max(d.GetFailedTasks(), int32(f))
		}
	}

	// Circuit breaker.
	if cb := dc.GetDeploymentCircuitBreaker(); cb.GetEnable() && !deleting && prim.GetRolloutState() == RolloutInProgress &&
		int(prim.GetFailedTasks()) >= BreakerThreshold(desired, r.cfg.BreakerMinThreshold) {
		prim.RolloutState = proto.String(RolloutFailed)
		prim.RolloutStateReason = proto.String("ECS deployment circuit breaker: tasks failed to start.")
		prim.UpdatedAt = proto.Float64(epoch(now))
		dr.FinishedAt, dr.NextLaunchAt = ts(now), nil // a FAILED deployment launches no more
		ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment failed: tasks failed to start.", name, prim.GetId()))
		if cb.GetRollback() {
			if target := lastCompleted(s, prim.GetId()); target != nil {
				id := startDeployment(rec, cs.account, target.GetTaskDefinition(), true, now)
				ev.add(fmt.Sprintf("(service %s) rolling back to deployment %s.", name, target.GetId()))
				r.log.InfoContext(ctx, "service deployment rolled back", "service", name, "failed", prim.GetId(), "to", target.GetId(), "new", id)
				prim = primary(s)
				dr = deploymentRecord(rec, prim.GetId())
			}
		}
	}

	minHealthy := MinHealthy(desired, dc.GetMinimumHealthyPercent())
	maxTotal := MaxTotal(desired, dc.GetMaximumPercent())
	if daemon {
		maxTotal = max(maxTotal, int(desired))
	}

	// Choose the tasks to keep: up to desired live primary tasks on ACTIVE instances,
	// healthy first, then the oldest; for DAEMON one per eligible instance.
	var keep, surplus []*view
	healthyLive, total := 0, 0
	for _, v := range views {
		if v.live || v.stopping {
			total++
		}
		// Only tasks that stayed up count toward minimumHealthyPercent: old tasks are not
		// stopped for new ones that are RUNNING for an instant in a crash loop.
		if v.live && v.stable {
			healthyLive++
		}
	}
	cands := make([]*view, 0, len(views))
	for _, v := range views {
		if v.live {
			cands = append(cands, v)
		}
	}
	slices.SortStableFunc(cands, func(a, b *view) int {
		if a.healthy != b.healthy {
			if a.healthy {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.created, b.created)
	})
	elig := map[string]bool{}
	for _, id := range eligible {
		elig[id] = true
	}
	onInstance := map[string]bool{} // DAEMON: an eligible instance already holding a kept task
	for _, v := range cands {
		ok := v.dep == prim.GetId() && !v.draining && !v.unhealthy
		if daemon {
			ok = ok && elig[v.instance] && !onInstance[v.instance]
		} else {
			ok = ok && len(keep) < int(desired)
		}
		if ok && !deleting {
			keep = append(keep, v)
			onInstance[v.instance] = true
		} else {
			surplus = append(surplus, v)
		}
	}

	// Stop surplus tasks: unhealthy and not-yet-healthy ones freely, healthy ones while
	// the healthy count stays at or above the minimum. Tasks on instances a DAEMON service
	// no longer targets go at once, as do the tasks of a deleted service.
	slices.SortStableFunc(surplus, func(a, b *view) int {
		if a.healthy != b.healthy {
			if a.healthy {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.created, b.created)
	})
	primFailed := prim.GetRolloutState() == RolloutFailed
	var stopped []string
	for _, v := range surplus {
		reason := fmt.Sprintf(ReasonScaleIn, prim.GetId())
		// A task not yet RUNNING, or failing its health checks, goes at once. A RUNNING one that has not yet
		// counted toward minimumHealthyPercent (RUNNING for less than StableAfter, health
		// checks not yet passed) is no more free: stopping it lowers the running count, so
		// it goes only while the tasks that do count already reach the minimum. Stopping
		// such tasks freely took a service to zero when a second update superseded a
		// rollout whose tasks had just started.
		free := !v.running || v.unhealthy
		counted := v.stable
		switch {
		case v.unhealthy:
			reason = ReasonUnhealthy
			ev.add(fmt.Sprintf("(service %s) (task %s) failed container health checks.", name, v.id))
		case deleting:
			reason, free = ReasonServiceDeleted, true
		case daemon && !elig[v.instance]:
			free = true
			if v.draining {
				reason = ReasonDraining
			}
		case v.draining:
			reason = ReasonDraining
		}
		if !free {
			if primFailed && v.dep != prim.GetId() {
				continue // a failed deployment without rollback stops launching; keep the old tasks
			}
			left := healthyLive
			if counted {
				left--
			}
			if left < minHealthy {
				continue
			}
			healthyLive = left
		}
		if err := r.stopTask(ctx, cs.account, v.item, reason); err != nil {
			return err
		}
		v.live, v.stopping = false, true
		stopped = append(stopped, v.id)
	}
	if len(stopped) > 0 {
		ev.add(fmt.Sprintf("(service %s) has stopped %d running tasks: %s.", name, len(stopped), taskList(stopped)))
	}

	// Launch what is missing, within maximumPercent, unless backing off or failed.
	need := int(desired) - len(keep)
	room := maxTotal - total
	if daemon {
		room = need // one task per instance is the DAEMON bound
	}
	launch := min(need, room)
	backoff := dr.NextLaunchAt != nil && now.Before(dr.GetNextLaunchAt().AsTime())
	if launch > 0 && !deleting && !primFailed && !backoff {
		td, err := r.taskDef(ctx, cs.account, prim.GetTaskDefinition())
		if err != nil {
			return err
		}
		var targets []string
		if daemon {
			busy := map[string]bool{}
			for _, v := range views {
				if v.live || v.stopping {
					busy[v.instance] = true
				}
			}
			for _, id := range eligible {
				if !busy[id] {
					targets = append(targets, id)
				}
			}
			launch = len(targets)
		}
		if launch > 0 {
			placed, failures, err := r.launch(ctx, cs, rec, td, prim.GetId(), launch, targets)
			if err != nil {
				return err
			}
			if len(placed) > 0 {
				ev.add(fmt.Sprintf("(service %s) has started %d tasks: %s.", name, len(placed), taskList(placed)))
			}
			if len(placed) < launch {
				ev.add(placementMessage(name, failures))
			}
			for range placed {
				total++
			}
		}
	}

	// Counts, deployment states, events, deletion.
	r.updateCounts(s, views)
	allQuiet := true // no task of a non-primary deployment is left
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == DeploymentActive {
			if d.GetRunningCount()+d.GetPendingCount() == 0 && !hasStopping(byDep[d.GetId()]) {
				d.Status = proto.String(DeploymentInactive)
				d.UpdatedAt = proto.Float64(epoch(now))
			} else {
				allQuiet = false
				d.DesiredCount = d.GetRunningCount() + d.GetPendingCount()
			}
		}
	}
	// Steady (and the deployment COMPLETED) only once every kept task has stayed RUNNING
	// and healthy for StableAfter and nothing is pending: a crash loop's tasks, RUNNING for
	// an instant, never get there, so its deployment stays IN_PROGRESS for the breaker.
	steady := allQuiet && prim.GetRunningCount() == desired && prim.GetPendingCount() == 0 &&
		len(keep) == int(desired) && countStable(keep) == int(desired) && !hasStopping(views)
	if steady && prim.GetRolloutState() == RolloutInProgress && !deleting {
		prim.RolloutState = proto.String(RolloutCompleted)
		prim.RolloutStateReason = proto.String("ECS deployment " + prim.GetId() + " completed.")
		prim.UpdatedAt = proto.Float64(epoch(now))
		dr.FinishedAt = ts(now)
		ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment completed.", name, prim.GetId()))
	}
	if steady && !deleting {
		ev.steady(s)
	}
	if deleting && total == 0 && !hasStopping(views) {
		s.Status = proto.String(StatusInactive)
		for _, d := range s.GetDeployments() {
			if d.GetStatus() != DeploymentInactive {
				d.UpdatedAt = proto.Float64(epoch(now))
			}
		}
		prim.UpdatedAt = proto.Float64(epoch(now))
	}
	ev.apply(s)
	trimHistory(rec)
	if proto.Equal(rec, it.rec) {
		return nil
	}
	if _, err := store.Update(ctx, r.cfg.Client, it.key, it.rev, rec, store.If(r.cfg.Fence...)); err != nil {
		if errors.Is(err, store.ErrConflict) {
			// An API call changed the service during the pass; the next pass recomputes.
			return nil
		}
		return fmt.Errorf("service: write %s: %w", name, err)
	}
	return nil
}

func hasStopping(vs []*view) bool {
	return slices.ContainsFunc(vs, func(v *view) bool { return v.stopping })
}

func countStable(vs []*view) int {
	n := 0
	for _, v := range vs {
		if v.stable {
			n++
		}
	}
	return n
}

// failureCounts returns a deployment's failed tasks, and the failed tasks created after
// its latest successful one (the consecutive failures the launch backoff counts).
func failureCounts(vs []*view) (failed, consecutive int) {
	var lastSuccess float64 = -1
	for _, v := range vs {
		if v.success {
			lastSuccess = max(lastSuccess, v.created)
		}
	}
	for _, v := range vs {
		if v.failed {
			failed++
			if v.created > lastSuccess {
				consecutive++
			}
		}
	}
	return failed, consecutive
}

// lastCompleted returns the most recent COMPLETED deployment other than exclude.
func lastCompleted(s *ecsv1.Service, exclude string) *ecsv1.Deployment {
	var best *ecsv1.Deployment
	for _, d := range s.GetDeployments() {
		if d.GetId() != exclude && d.GetRolloutState() == RolloutCompleted && (best == nil || d.GetCreatedAt() > best.GetCreatedAt()) {
			best = d
		}
	}
	return best
}

// updateCounts sets the service's and each deployment's running and pending counts from
// the task records: a task counts by its lastStatus (PROVISIONING, PENDING, ACTIVATING
// are pending; RUNNING is running), whatever its desiredStatus, as the cluster's counters
// do.
func (r *Reconciler) updateCounts(s *ecsv1.Service, views []*view) {
	type c struct{ run, pend int32 }
	by := map[string]*c{}
	var all c
	for _, v := range views {
		x := by[v.dep]
		if x == nil {
			x = &c{}
			by[v.dep] = x
		}
		if v.running {
			x.run++
			all.run++
		}
		if v.pending {
			x.pend++
			all.pend++
		}
	}
	s.RunningCount, s.PendingCount = all.run, all.pend
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == DeploymentInactive {
			continue
		}
		x := by[d.GetId()]
		if x == nil {
			x = &c{}
		}
		d.RunningCount, d.PendingCount = x.run, x.pend
	}
}

// eligibleInstances returns, in id order, the instances a DAEMON service runs on
// (placement.DaemonInstances: ACTIVE, not draining, matching the service's and the task
// definition's memberOf constraints and required attributes). A constraint that does not
// parse (CreateService refuses them) makes no instance eligible, and is logged.
func (r *Reconciler) eligibleInstances(cs *clusterState, s *ecsv1.Service, td *ecsv1.TaskDefinition) []string {
	views := make([]*placement.Instance, 0, len(cs.instanceOrder))
	for _, id := range cs.instanceOrder {
		in := cs.instances[id]
		views = append(views, placement.FromRecord(id, in.Value, in.ModRevision))
	}
	cons := append(placement.ConstraintsFrom(s.GetPlacementConstraints(), td.GetPlacementConstraints()), placement.RequiresAttributes(td)...)
	out, err := placement.DaemonInstances(views, cons)
	if err != nil {
		r.log.Error("service: DAEMON placement constraints", "service", s.GetServiceArn(), "err", err)
		return nil
	}
	return out
}

// launch places n tasks of the deployment (on the named instances for DAEMON) through the
// Placer, writing them with control.PlaceTxn and the fence; it returns the ids placed and
// the placement failures.
func (r *Reconciler) launch(ctx context.Context, cs *clusterState, rec *storev1.ServiceRecord, tdRec *storev1.TaskDefinitionRecord, depID string, n int, instances []string) ([]string, []placement.Failure, error) {
	td := tdRec.GetTaskDefinition()
	s := rec.GetService()
	demand, err := placement.DemandOf(td, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("service: demand of %s: %w", td.GetTaskDefinitionArn(), err)
	}
	req := placement.Request{
		Demand:      demand,
		Count:       n,
		Group:       "service:" + s.GetServiceName(),
		Constraints: append(placement.ConstraintsFrom(s.GetPlacementConstraints(), td.GetPlacementConstraints()), placement.RequiresAttributes(td)...),
		Strategy:    placement.StrategiesFrom(s.GetPlacementStrategy()),
	}
	if len(instances) > 0 {
		req.Instances = instances
		req.Constraints = append(req.Constraints, placement.Constraint{Type: placement.ConstraintDistinctInstance})
	}
	var written []*storev1.TaskRecord
	res, err := r.cfg.Placer.Place(ctx, placement.PlaceRequest{
		Account: cs.account, Cluster: cs.cluster, Request: req, CommitWritesInstances: true, If: r.cfg.Fence, KV: r.cfg.Client,
		Commit: func(ctx context.Context, txn *store.Txn, placed []placement.Placed) error {
			crec, crev, err := store.Get[*storev1.ClusterRecord](ctx, r.cfg.Client, keys.Cluster(cs.account, cs.cluster))
			if err != nil {
				return fmt.Errorf("service: read cluster: %w", err)
			}
			insts := map[string]*control.InstanceState{}
			written = written[:0]
			for _, p := range placed {
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &control.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := r.newTask(cs.account, cs.cluster, rec, tdRec, depID)
				t.ContainerInstanceId = p.InstanceID
				written = append(written, t)
			}
			return control.PlaceTxn(txn, control.Placement{
				Account: cs.account, Cluster: crec, ClusterRev: crev, Instances: insts,
				Tasks: written, TaskDefinition: td,
			})
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("service: place: %w", err)
	}
	ids := make([]string, 0, len(res.Placed))
	if len(res.Placed) > 0 {
		for _, t := range written {
			ids = append(ids, control.TaskID(t))
		}
	}
	return ids, res.Failures, nil
}

// newTask builds a PENDING service task record (not yet placed): startedBy and
// deployment_id the deployment, group "service:<name>", tags propagated as the service
// says, reservations from the task definition.
func (r *Reconciler) newTask(account keys.Scope, cluster string, rec *storev1.ServiceRecord, tdRec *storev1.TaskDefinitionRecord, depID string) *storev1.TaskRecord {
	s := rec.GetService()
	var tags []*ecsv1.Tag
	switch s.GetPropagateTags() {
	case "SERVICE":
		tags = append(tags, s.GetTags()...)
	case "TASK_DEFINITION":
		tags = append(tags, tdRec.GetTags()...)
	}
	if s.GetEnableEcsManagedTags() {
		tags = append(tags,
			&ecsv1.Tag{Key: proto.String("aws:ecs:clusterName"), Value: proto.String(cluster)},
			&ecsv1.Tag{Key: proto.String("aws:ecs:serviceName"), Value: proto.String(s.GetServiceName())})
	}
	t := control.NewTaskRecord(control.TaskTemplate{
		Region: account.Region, Account: account.Account, Cluster: cluster, LongARN: true, NewID: r.cfg.NewID, Now: r.cfg.Now(),
		TaskDefinition: tdRec.GetTaskDefinition(), Group: "service:" + s.GetServiceName(), LaunchType: s.GetLaunchType(),
		StartedBy: depID, Tags: tags, EnableExecuteCommand: s.GetEnableExecuteCommand(),
	})
	t.ServiceName, t.DeploymentId = s.GetServiceName(), depID
	return t
}

// stopTask stops a task as control's StopTask does (control.StopTaskTxn: desiredStatus
// STOPPED, stopCode ServiceSchedulerInitiated, the reason, a StopOrder in the agent's
// inbox; a task not placed goes straight to STOPPED with the cluster's counters), fenced,
// retried on conflict. A task already STOPPED is left alone.
func (r *Reconciler) stopTask(ctx context.Context, account keys.Scope, it store.Item[*storev1.TaskRecord], reason string) error {
	if it.Value.GetTask().GetLastStatus() == "STOPPED" {
		return nil
	}
	if _, err := control.StopTaskTxn(ctx, r.cfg.Client, r.cfg.Now, account, it.Key, StopCodeScheduler, reason, r.cfg.Fence...); err != nil {
		return fmt.Errorf("service: stop task %s: %w", control.TaskID(it.Value), err)
	}
	return nil
}
