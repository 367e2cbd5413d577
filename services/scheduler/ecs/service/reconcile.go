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

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
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
	// MaxTxnOps is the etcd cluster's --max-txn-ops; a pass launches at most as many
	// tasks of a service as fit one txn (control.TasksPerTxn). 0 means etcd's default 128.
	MaxTxnOps int
	// Logger receives what the loop does and its faults; nil discards.
	Logger *slog.Logger
	// Now is the clock (launch backoff, events, timestamps); nil means time.Now.
	Now func() time.Time
	// OnRolloutDone, when set, is called once for each deployment whose rolloutState a
	// committed pass moved from IN_PROGRESS to COMPLETED or FAILED, with that state and
	// the time since the deployment's createdAt (the app's deployment duration metric).
	OnRolloutDone func(state string, d time.Duration)
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
	// BakeMinute is the length of a minute of the bake times and lifecycle hook timeouts
	// of BLUE_GREEN, LINEAR and CANARY deployments. Default time.Minute; `berth dev`
	// shortens it with BERTH_DEV_BAKE_MINUTE for tests (docs/deployments.md).
	BakeMinute time.Duration
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

	// Change tracking for Run: clusters whose tasks or instances changed since they were
	// last reconciled, as reported by the watch; allDirty is set until the watch is
	// established and after it breaks, full (once) when a watch lost events to a
	// compaction or was established again.
	dmu      sync.Mutex
	dirty    map[keys.ClusterRef]bool            // whole clusters (instances changed, a task deleted)
	dirtySvc map[keys.ClusterRef]map[string]bool // cluster → services whose tasks or record changed; "" = a standalone task
	allDirty bool
	full     bool
	wake     chan struct{}
	// meta holds what the last pass read of every service record (nil before the first
	// pass), so a selective pass reads only the clusters that changed.
	meta map[string]svcMeta
	// lbs keeps services' tasks registered with their target groups.
	lbs *lbSync
	// sds keeps services' tasks registered with their Cloud Map services.
	sds *sdSync
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
		cfg: cfg, log: cfg.Logger, tds: map[string]*storev1.TaskDefinitionRecord{}, lbs: newLBSync(cfg.Client), sds: newSDSync(cfg.Client),
		dirty: map[keys.ClusterRef]bool{}, dirtySvc: map[keys.ClusterRef]map[string]bool{}, allDirty: true, wake: make(chan struct{}, 1),
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
	for _, w := range []func(context.Context) error{r.watchTasks, r.watchInstances, r.watchServices} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.watch(wctx, w)
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

// watch runs one of the watches (watchTasks, watchInstances, watchServices) until ctx
// ends. store.Watch resumes by itself after a lost connection, without missing or
// repeating a change; when it ends otherwise (a value that does not decode) every
// cluster is dirty until it is back.
func (r *Reconciler) watch(ctx context.Context, w func(context.Context) error) {
	for ctx.Err() == nil {
		err := w(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.WarnContext(ctx, "service reconciler watch ended", "err", err)
		r.markAll(true)
		if sleepCtx(ctx, time.Second) != nil {
			return
		}
	}
}

// watchTasks marks a service dirty when one of its tasks is written (a standalone task
// concerns no service) and the whole cluster when a task record is deleted.
// The records are read as Empty and only their serviceName is parsed (taskServiceName):
// every placement writes a task, and a full decode here cost as much as the choice.
func (r *Reconciler) watchTasks(ctx context.Context) error {
	return store.Watch(ctx, r.cfg.Client, keys.AllTasks(), 0, func(ev store.Event[*emptypb.Empty]) error {
		return r.changed(ev.Type, ev.Item.Key, keys.ParseTask, func(c keys.ClusterRef, _ string) {
			if ev.Type == store.EventPut {
				r.markService(c, taskServiceName(ev.Item.Value.ProtoReflect().GetUnknown()))
			} else {
				r.dirty[c] = true
			}
		})
	})
}

// taskServiceField is TaskRecord.service_name's field number.
var taskServiceField = (&storev1.TaskRecord{}).ProtoReflect().Descriptor().Fields().ByName("service_name").Number()

// taskServiceName returns the serviceName of an encoded TaskRecord (the last one, as
// proto.Unmarshal keeps), or "" when it has none or does not parse.
func taskServiceName(b []byte) string {
	name := ""
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == taskServiceField && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return ""
			}
			name, b = string(v), b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return ""
		}
		b = b[m:]
	}
	return name
}

// watchInstances marks a cluster dirty when one of its instances changes (joins,
// drains, capacity). Only the key matters: the records are read as Empty (their fields
// kept unparsed), which costs far less than decoding every placement's instance write.
func (r *Reconciler) watchInstances(ctx context.Context) error {
	return store.Watch(ctx, r.cfg.Client, keys.AllInstances(), 0, func(ev store.Event[*emptypb.Empty]) error {
		return r.changed(ev.Type, ev.Item.Key, keys.ParseInstance, func(c keys.ClusterRef, _ string) { r.dirty[c] = true })
	})
}

// watchServices marks a service dirty when its record changes.
func (r *Reconciler) watchServices(ctx context.Context) error {
	return store.Watch(ctx, r.cfg.Client, keys.AllServices(), 0, func(ev store.Event[*storev1.ServiceRecord]) error {
		return r.changed(ev.Type, ev.Item.Key, keys.ParseService, r.markService)
	})
}

// changed records one watch event: a resync (the first one, when the watch is
// established, and after a compaction cost it events) clears allDirty and asks for one
// full pass; a put or delete calls mark with the key's cluster and last part, under dmu.
// Keys of another shape are ignored.
func (r *Reconciler) changed(typ store.EventType, key string, parse func(string) (keys.ClusterRef, string, bool), mark func(keys.ClusterRef, string)) error {
	r.dmu.Lock()
	if typ == store.EventResync {
		r.allDirty, r.full = false, true
	} else if c, last, ok := parse(key); ok {
		mark(c, last)
	}
	r.dmu.Unlock()
	r.signal()
	return nil
}

// markService marks one service of cluster g dirty (name "" for a standalone task, which
// concerns no service: the services still converging are reconciled on every pass
// anyway). The caller holds dmu.
func (r *Reconciler) markService(g keys.ClusterRef, name string) {
	m := r.dirtySvc[g]
	if m == nil {
		m = map[string]bool{}
		r.dirtySvc[g] = m
	}
	m[name] = true
}

// restoreDirty puts back change marks a failed pass took.
func (r *Reconciler) restoreDirty(dirty map[keys.ClusterRef]bool, dirtySvc map[keys.ClusterRef]map[string]bool) {
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
// everything is dirty, clearing the sets and the one-time full mark.
func (r *Reconciler) takeDirty() (map[keys.ClusterRef]bool, map[keys.ClusterRef]map[string]bool, bool) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	d, ds, all := r.dirty, r.dirtySvc, r.allDirty || r.full
	r.dirty, r.dirtySvc, r.full = map[keys.ClusterRef]bool{}, map[keys.ClusterRef]map[string]bool{}, false
	return d, ds, all
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

// serviceItem is a service record as listed, with its cluster and name from its key.
type serviceItem struct {
	account keys.Scope
	name    string
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
	if external(rec.GetService()) {
		// The earliest launch backoff deadline of its task sets.
		for _, set := range rec.GetService().GetTaskSets() {
			for _, dr := range rec.GetDeployments() {
				if dr.GetId() == set.GetId() && dr.NextLaunchAt != nil {
					if t := dr.GetNextLaunchAt().AsTime(); m.nextLaunch.IsZero() || t.Before(m.nextLaunch) {
						m.nextLaunch = t
					}
				}
			}
		}
	} else if p := primary(rec.GetService()); p != nil {
		for _, dr := range rec.GetDeployments() {
			if dr.GetId() == p.GetId() && dr.NextLaunchAt != nil {
				m.nextLaunch = dr.GetNextLaunchAt().AsTime()
			}
		}
	}
	return m
}

// steadyRecord reports whether a service record says the service is in steady state:
// ACTIVE, one deployment, COMPLETED, running == desired, nothing pending; under the
// EXTERNAL controller: ACTIVE with every task set in STEADY_STATE and none DRAINING.
func steadyRecord(rec *storev1.ServiceRecord) bool {
	s := rec.GetService()
	if external(s) {
		for _, set := range s.GetTaskSets() {
			if set.GetStatus() == TaskSetDraining || set.GetStabilityStatus() != StabilitySteady {
				return false
			}
		}
		return s.GetStatus() == StatusActive
	}
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
	groups := map[keys.ClusterRef][]serviceItem{}
	var order []keys.ClusterRef
	var errs []error
	add := func(prefix string) error {
		token := ""
		for {
			items, next, err := store.List[*storev1.ServiceRecord](ctx, r.cfg.Client, prefix, store.MaxListLimit, token)
			if err != nil {
				return fmt.Errorf("service: list services: %w", err)
			}
			for _, it := range items {
				g, name, ok := keys.ParseService(it.Key)
				if !ok {
					continue
				}
				if _, seen := groups[g]; !seen {
					order = append(order, g)
				}
				groups[g] = append(groups[g], serviceItem{account: g.Scope, name: name, key: it.Key, rec: it.Value, rev: it.ModRevision})
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
	var wanted map[keys.ClusterRef]map[string]bool
	if !selective {
		if err := add(keys.AllServices()); err != nil {
			return err
		}
	} else {
		revs, lerr := r.serviceRevisions(ctx)
		if lerr != nil {
			return lerr
		}
		wanted = map[keys.ClusterRef]map[string]bool{}
		changed := map[keys.ClusterRef]bool{}
		var changedOrder []keys.ClusterRef
		for _, kr := range revs {
			g, name, ok := keys.ParseService(kr.Key)
			if !ok {
				continue
			}
			m, known := r.meta[kr.Key]
			switch {
			case !known || m.rev != kr.ModRevision || dirty[g] || dirtySvc[g][name] || m.waiting ||
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
				if _, err := store.Delete(ctx, r.cfg.Client, kr.Key, kr.ModRevision, store.If(r.cfg.Fence...)); err != nil {
					if errors.Is(err, store.ErrPreconditionFailed) {
						return err
					}
					if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
						errs = append(errs, fmt.Errorf("service: delete inactive %s: %w", kr.Key, err))
					}
				}
				continue
			default:
				meta[kr.Key] = m
			}
		}
		for _, g := range changedOrder {
			if dirty[g] {
				if err := add(keys.Services(g.Scope, g.Cluster)); err != nil {
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
			ks := make([]string, len(names))
			for i, n := range names {
				ks[i] = keys.Service(g.Scope, g.Cluster, n)
			}
			items, err := store.GetMany[*storev1.ServiceRecord](ctx, r.cfg.Client, ks)
			if err != nil {
				return fmt.Errorf("service: read services of %s: %w", g, err)
			}
			for i, it := range items {
				if it.Value == nil {
					continue // deleted since listed
				}
				if _, seen := groups[g]; !seen {
					order = append(order, g)
				}
				groups[g] = append(groups[g], serviceItem{account: g.Scope, name: names[i], key: it.Key, rec: it.Value, rev: it.ModRevision})
			}
		}
	}
	for _, g := range order {
		var live []serviceItem
		subset := wanted != nil && !dirty[g]
		for _, it := range groups[g] {
			m := r.metaOf(it.rec, it.rev)
			if subset && !wanted[g][it.name] && !m.waiting {
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

// serviceRevisions lists every service key with its ModRevision, without values, 1,000
// keys per request.
func (r *Reconciler) serviceRevisions(ctx context.Context) ([]store.KeyRevision, error) {
	var out []store.KeyRevision
	token := ""
	for {
		page, next, err := store.ListRevisions(ctx, r.cfg.Client, keys.AllServices(), store.MaxListLimit, token)
		if err != nil {
			return nil, fmt.Errorf("service: list service keys: %w", err)
		}
		out = append(out, page...)
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
	protected     map[string]time.Time // scale-in protection expiry by task id
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
		tasks, err := store.ListAll[*storev1.TaskRecord](ctx, r.cfg.Client, keys.Tasks(account, cluster))
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
	insts, err := store.ListAll[*storev1.ContainerInstanceRecord](ctx, r.cfg.Client, keys.Instances(account, cluster))
	if err != nil {
		return fmt.Errorf("service: list instances of %s/%s: %w", account, cluster, err)
	}
	for _, in := range insts {
		_, id, ok := keys.ParseInstance(in.Key)
		if !ok {
			continue
		}
		cs.instances[id] = in
		cs.instanceOrder = append(cs.instanceOrder, id)
	}
	prots, err := store.ListAll[*ecsv1.ProtectedTask](ctx, r.cfg.Client, keys.Protections(account, cluster))
	if err != nil {
		return fmt.Errorf("service: list task protection of %s/%s: %w", account, cluster, err)
	}
	cs.protected = map[string]time.Time{}
	for _, p := range prots {
		if p.Value.GetProtectionEnabled() {
			cs.protected[p.Key[strings.LastIndexByte(p.Key, '/')+1:]] = awsapi.FromEpoch(p.Value.GetExpirationDate())
		}
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
	return awsapi.FromEpoch(t)
}

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

// reconcile converges one service (see Pass): it reads what Compute needs beyond the
// cluster's state (task definitions, through the cache), computes the plan and applies
// it.
func (r *Reconciler) reconcile(ctx context.Context, cs *clusterState, it serviceItem) error {
	r.servicesRead++
	st, err := r.state(ctx, cs, it)
	if err != nil {
		return err
	}
	if len(serviceLBs(it.rec.GetService())) > 0 {
		st.Targets = r.lbs.sync(ctx, r, st)
	}
	if len(serviceRegistries(it.rec.GetService())) > 0 {
		r.sds.sync(ctx, r, st)
	}
	plan, err := Compute(st, r.policy())
	if err != nil {
		return err
	}
	// Traffic moves first (blue/green, linear, canary): a revision's tasks stop only
	// after the listener rules stopped sending it requests.
	r.syncWeights(ctx, st.Account, plan.Record)
	return r.Apply(ctx, plan)
}

// policy returns the tunables of r's configuration for Compute.
func (r *Reconciler) policy() Policy {
	return Policy{
		StableAfter: r.cfg.StableAfter, BackoffAfter: r.cfg.BackoffAfter, BackoffBase: r.cfg.BackoffBase,
		BackoffCap: r.cfg.BackoffCap, BreakerMinThreshold: r.cfg.BreakerMinThreshold,
		BakeMinute: r.cfg.BakeMinute,
	}
}

// state gathers Compute's input for one service of a cluster read by passCluster: its
// tasks, the cluster's instances, the task definitions of its RUNNING tasks and, for a
// DAEMON service not being deleted, the instances it is eligible for.
func (r *Reconciler) state(ctx context.Context, cs *clusterState, it serviceItem) (State, error) {
	s := it.rec.GetService()
	st := State{
		Account: cs.account,
		Service: store.Item[*storev1.ServiceRecord]{Key: it.key, Value: it.rec, ModRevision: it.rev},
		Tasks:   cs.tasks[s.GetServiceName()], Instances: cs.instances,
		TaskDefinitions: map[string]*ecsv1.TaskDefinition{}, Now: r.cfg.Now(), Protected: cs.protected,
	}
	for _, t := range st.Tasks {
		if _, run := task.Counts(t.Value.GetTask().GetLastStatus()); run == 0 {
			continue
		}
		arn := t.Value.GetTask().GetTaskDefinitionArn()
		if st.TaskDefinitions[arn] != nil {
			continue
		}
		td, err := r.taskDef(ctx, cs.account, arn)
		if err != nil {
			return State{}, err
		}
		st.TaskDefinitions[arn] = td.GetTaskDefinition()
	}
	if prim := primary(s); prim != nil && s.GetSchedulingStrategy() == StrategyDaemon && s.GetStatus() != StatusDraining {
		td, err := r.taskDef(ctx, cs.account, prim.GetTaskDefinition())
		if err != nil {
			return State{}, err
		}
		st.Eligible = r.eligibleInstances(cs, s, td.GetTaskDefinition())
	}
	firing, err := r.alarmsInAlarm(ctx, cs.account, s)
	if err != nil {
		return State{}, err
	}
	st.AlarmsInAlarm = firing
	return st, nil
}

// Apply carries out a plan Compute made: it stops the tasks of plan.Stop (as StopTask
// does, fenced), places plan.Launch's tasks through the Placer (written with
// task.PlaceTxn and the fence) and adds their events, then writes the service record
// with the events when it changed, against the revision read. A conflict on the service
// record (an API call changed it meanwhile) is not an error: the next pass recomputes. It
// returns the first write error, wrapping store.ErrPreconditionFailed when the fence
// failed. It adds the events to plan.Record in place; apply a plan once.
func (r *Reconciler) Apply(ctx context.Context, plan Plan) error {
	rec := plan.Record
	s := rec.GetService()
	name := s.GetServiceName()
	if b := plan.Breaker; b != nil && b.NewID != "" {
		r.log.InfoContext(ctx, "service deployment rolled back", "service", name, "failed", b.Failed, "to", b.RolledBackTo, "new", b.NewID)
	}
	hasLB := len(serviceLBs(s)) > 0
	stopping := map[string]bool{}
	for _, st := range plan.Stop {
		if len(taskLBs(s, st.Task.Value)) > 0 && st.Task.Value.GetTask().GetLastStatus() != "STOPPED" {
			// Deregistered first: the task stops once its targets have drained (the
			// requests in flight finished, or the deregistration delay passed). Until
			// then the next passes find it again and wait.
			stopping[st.Task.Value.GetTask().GetTaskArn()] = true
			ok, first, err := r.lbs.drained(ctx, plan.Account, s, st.Task.Value, st.Reason)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			st.Reason = first
		}
		if len(taskRegistries(s, st.Task.Value)) > 0 && st.Task.Value.GetTask().GetLastStatus() != "STOPPED" {
			// Out of DNS before its containers get SIGTERM, as ECS deregisters first.
			r.sds.release(ctx, r, plan.Account, s, st.Task.Value)
		}
		if err := r.stopTask(ctx, plan.Account, st.Task, st.Reason); err != nil {
			return err
		}
	}
	if hasLB {
		r.lbs.keepOnly(s.GetServiceArn(), stopping)
	}
	ev := &events{svc: name, now: r.cfg.Now(), msgs: plan.Events}
	for _, l := range append([]Launch{plan.Launch}, plan.More...) {
		if l.Count <= 0 {
			continue
		}
		td, err := r.taskDef(ctx, plan.Account, l.TaskDefinition)
		if err != nil {
			return err
		}
		// Tasks of a capacity provider strategy are placed per provider, each in its pool.
		groups, order := map[string]int{}, []string{}
		for _, p := range l.Providers {
			if groups[p] == 0 {
				order = append(order, p)
			}
			groups[p]++
		}
		if len(order) == 0 {
			order, groups[""] = []string{""}, l.Count
		}
		var placed, unplaced []string
		for _, p := range order {
			got, count, failures, err := r.launch(ctx, plan.Account, rec, td, l, groups[p], l.Instances, p)
			if err != nil {
				return err
			}
			placed = append(placed, got...)
			if len(got) < count {
				msg := placementMessage(name, failures)
				if p != "" {
					msg = strings.Replace(msg, "was unable to place a task", "was unable to place a task on capacity provider "+p, 1)
				}
				unplaced = append(unplaced, msg)
			}
		}
		if len(placed) > 0 {
			ev.add(fmt.Sprintf("(service %s) has started %d tasks: %s.", name, len(placed), taskList(placed)))
		}
		for _, m := range unplaced {
			ev.add(m)
		}
	}
	ev.msgs = append(ev.msgs, plan.After...)
	ev.apply(s)
	trimHistory(rec)
	if proto.Equal(rec, plan.Service.Value) {
		return nil
	}
	if _, err := store.Update(ctx, r.cfg.Client, plan.Service.Key, plan.Service.ModRevision, rec, store.If(r.cfg.Fence...)); err != nil {
		if errors.Is(err, store.ErrConflict) {
			// An API call changed the service during the pass; the next pass recomputes.
			return nil
		}
		return fmt.Errorf("service: write %s: %w", name, err)
	}
	r.rolloutsDone(plan.Service.Value, rec)
	return nil
}

// rolloutsDone reports each deployment of after whose rollout finished since before
// to ReconcilerConfig.OnRolloutDone.
func (r *Reconciler) rolloutsDone(before, after *storev1.ServiceRecord) {
	if r.cfg.OnRolloutDone == nil {
		return
	}
	was := map[string]string{}
	for _, d := range before.GetService().GetDeployments() {
		was[d.GetId()] = d.GetRolloutState()
	}
	for _, d := range after.GetService().GetDeployments() {
		st := d.GetRolloutState()
		if (st == RolloutCompleted || st == RolloutFailed) && was[d.GetId()] == RolloutInProgress {
			created := time.Unix(0, int64(d.GetCreatedAt()*1e9))
			r.cfg.OnRolloutDone(st, max(r.cfg.Now().Sub(created), 0))
		}
	}
}

// MaxLaunchPerPass is the most tasks one reconcile pass places for one service, however
// many one etcd txn could hold (each task writes its record, its inbox entry and its
// index keys; control.TasksPerTxn). A service wanting more reaches its count over
// consecutive passes.
const MaxLaunchPerPass = 50

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

// launch places up to n tasks of the launch's deployment or task set (on the named instances for DAEMON)
// through the Placer, writing them with task.PlaceTxn and the fence; it returns the ids
// placed, how many it tried (n capped to one txn's worth) and the placement failures.
//
// provider, when set, is the capacity provider the tasks are placed through: they are
// placed in its pool (capacity.PoolConstraint) and show it as capacityProviderName.
func (r *Reconciler) launch(ctx context.Context, account keys.Scope, rec *storev1.ServiceRecord, tdRec *storev1.TaskDefinitionRecord, l Launch, n int, instances []string, provider string) ([]string, int, []placement.Failure, error) {
	td := tdRec.GetTaskDefinition()
	s := rec.GetService()
	if provider == "" && s.GetLaunchType() == "FARGATE" {
		provider = capacity.ProviderFargate // launchType FARGATE places on the Fargate pool
	}
	// One task as it would be written gives the demand (computed once, by task.NewRecord)
	// and the size of a task in the txn. At most one txn's worth of tasks per pass (etcd's
	// --max-txn-ops and request size): a larger launch failed every pass ("too many
	// operations in txn request" past ~15 tasks at etcd's default 128; "message larger than
	// max" near 750 with berth dev's 1,024). The service is not in steady state, so the
	// next pass launches the rest.
	sample := r.newTask(account, rec.GetClusterName(), rec, tdRec, l, provider)
	perTxn := min(MaxLaunchPerPass, control.TasksPerTxn(account, sample, td, r.cfg.MaxTxnOps))
	n = min(n, perTxn)
	if len(instances) > perTxn {
		instances = instances[:perTxn]
	}
	req := placement.Request{
		Demand:      placement.TaskDemand(sample),
		Count:       n,
		Group:       "service:" + s.GetServiceName(),
		Constraints: append(placement.ConstraintsFrom(s.GetPlacementConstraints(), td.GetPlacementConstraints()), placement.RequiresAttributes(td)...),
		Strategy:    placement.StrategiesFrom(s.GetPlacementStrategy()),
	}
	if provider != "" {
		req.Constraints = append(req.Constraints, capacity.PoolConstraint(provider))
	}
	if len(instances) > 0 {
		req.Instances = instances
		req.Constraints = append(req.Constraints, placement.Constraint{Type: placement.ConstraintDistinctInstance})
	}
	var written []*storev1.TaskRecord
	res, err := r.cfg.Placer.Place(ctx, placement.PlaceRequest{
		Account: account, Cluster: rec.GetClusterName(), Request: req, If: r.cfg.Fence, KV: r.cfg.Client,
		Commit: func(ctx context.Context, txn *store.Txn, placed []placement.Placed) error {
			crec, crev, err := store.Get[*storev1.ClusterRecord](ctx, r.cfg.Client, keys.Cluster(account, rec.GetClusterName()))
			if err != nil {
				return fmt.Errorf("service: read cluster: %w", err)
			}
			insts := map[string]*task.InstanceState{}
			written = written[:0]
			for _, p := range placed {
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &task.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := r.newTask(account, rec.GetClusterName(), rec, tdRec, l, provider)
				t.ContainerInstanceId = p.InstanceID
				written = append(written, t)
			}
			return task.PlaceTxn(txn, task.Placement{
				Account: account, Cluster: crec, ClusterRev: crev, Instances: insts,
				Tasks: written, TaskDefinition: td,
			})
		},
	})
	if err != nil {
		return nil, n, nil, fmt.Errorf("service: place: %w", err)
	}
	ids := make([]string, 0, len(res.Placed))
	if len(res.Placed) > 0 {
		for _, t := range written {
			ids = append(ids, task.ID(t))
		}
	}
	return ids, n, res.Failures, nil
}

// newTask builds a PENDING service task record (not yet placed) with task.NewRecord:
// startedBy and deployment_id the launch's deployment or task set, the launch's launch
// type, group "service:<name>", tags propagated as the service says (task.Tags),
// reservations from the task definition.
func (r *Reconciler) newTask(account keys.Scope, cluster string, rec *storev1.ServiceRecord, tdRec *storev1.TaskDefinitionRecord, l Launch, provider string) *storev1.TaskRecord {
	s := rec.GetService()
	depID := l.Deployment
	launch := s.GetLaunchType()
	if st := s.GetCapacityProviderStrategy(); len(st) > 0 {
		launch = capacity.StrategyLaunchType(st)
	}
	launch = cmp.Or(l.LaunchType, launch) // a task set's own launch type wins
	if launch == "FARGATE" && provider == "" {
		provider = capacity.ProviderFargate
	}
	var platform *string
	if d := findDeployment(s, depID); d != nil && d.PlatformVersion != nil {
		platform = d.PlatformVersion
	}
	return task.NewRecord(task.Template{
		Region: account.Region, Account: account.Account, Cluster: cluster, LongARN: true, NewID: r.cfg.NewID, Now: r.cfg.Now(),
		TaskDefinition: tdRec.GetTaskDefinition(), LaunchType: launch, StartedBy: depID,
		PropagateTags: s.GetPropagateTags(), TaskDefinitionTags: tdRec.GetTags(), ServiceTags: s.GetTags(),
		ManagedTags: s.GetEnableEcsManagedTags(), ServiceName: s.GetServiceName(), DeploymentID: depID,
		EnableExecuteCommand: s.GetEnableExecuteCommand(), CapacityProviderName: provider, PlatformVersion: platform,
		NetworkConfiguration: deploymentNetwork(s, depID),
	})
}

// stopTask stops a task as control's StopTask does (task.StopTxn: desiredStatus
// STOPPED, stopCode ServiceSchedulerInitiated, the reason, a StopOrder in the agent's
// inbox; a task not placed goes straight to STOPPED), fenced,
// retried on conflict. A task already STOPPED is left alone.
func (r *Reconciler) stopTask(ctx context.Context, account keys.Scope, it store.Item[*storev1.TaskRecord], reason string) error {
	if it.Value.GetTask().GetLastStatus() == "STOPPED" {
		return nil
	}
	if _, err := task.StopTxn(ctx, r.cfg.Client, r.cfg.Now, account, it.Key, StopCodeScheduler, reason, r.cfg.Fence...); err != nil {
		return fmt.Errorf("service: stop task %s: %w", task.ID(it.Value), err)
	}
	return nil
}

// deploymentNetwork returns the networkConfiguration of the service's deployment or task
// set depID (the one its tasks are started with), else the service's.
func deploymentNetwork(s *ecsv1.Service, depID string) *ecsv1.NetworkConfiguration {
	for _, d := range s.GetDeployments() {
		if d.GetId() == depID && d.GetNetworkConfiguration() != nil {
			return d.GetNetworkConfiguration()
		}
	}
	for _, ts := range s.GetTaskSets() {
		if ts.GetId() == depID && ts.GetNetworkConfiguration() != nil {
			return ts.GetNetworkConfiguration()
		}
	}
	return s.GetNetworkConfiguration()
}
