package service

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Policy holds the tunables Compute applies; ReconcilerConfig carries them (see there for
// each one's meaning and default). Compute takes them as given: zero values are not
// replaced by defaults here.
type Policy struct {
	// StableAfter: how long a RUNNING task without health-checked essential containers
	// must have run to count as started; negative counts it at once.
	StableAfter time.Duration
	// BackoffAfter, BackoffBase and BackoffCap shape the launch backoff (LaunchDelay).
	BackoffAfter            int
	BackoffBase, BackoffCap time.Duration
	// BreakerMinThreshold is the floor of the circuit breaker's threshold.
	BreakerMinThreshold int
	// NewDeploymentID returns the id of a rollback deployment; nil means
	// NewDeploymentID (random), a fixed one makes Compute deterministic.
	NewDeploymentID func() string
	// BakeMinute is the length of one minute of the bake times and hook timeouts of
	// traffic-shifting deployments; 0 means time.Minute.
	BakeMinute time.Duration
	// NewHookID returns the id of a lifecycle hook run; nil means a random one.
	NewHookID func() string
}

// State is everything Compute decides one service from, as read at one time: the
// service record (with its deployments and their DeploymentRecords), the service's task
// records (both desiredStatus values), the cluster's container instances and the task
// definitions the decision needs. Compute does not modify any of it.
type State struct {
	// Account is the service's scope (the ARN of a rollback deployment names it).
	Account keys.Scope
	// Service is the service record as read, with its key and ModRevision (Apply writes
	// back against that revision).
	Service store.Item[*storev1.ServiceRecord]
	// Tasks are the service's task records, any status.
	Tasks []store.Item[*storev1.TaskRecord]
	// Instances are the cluster's container instances by id. A live task on an instance
	// missing here, not ACTIVE or being drained is replaced.
	Instances map[string]store.Item[*storev1.ContainerInstanceRecord]
	// Eligible are, for a DAEMON service that is not being deleted, the ids of the
	// instances it runs on, in id order (Reconciler.eligibleInstances); its desired count
	// is their number. Ignored for REPLICA.
	Eligible []string
	// TaskDefinitions are task definitions by ARN: at least those of the RUNNING tasks,
	// whose health checks decide whether a task is healthy.
	TaskDefinitions map[string]*ecsv1.TaskDefinition
	// Now is the time of the decision (grace periods, StableAfter, backoff deadlines,
	// timestamps written).
	Now time.Time
	// Protected holds the scale-in protection of tasks (UpdateTaskProtection) by task id:
	// when it expires. A task protected past Now is kept over unprotected ones when the
	// service scales in, and a healthy one is not stopped by scale-in or a deployment
	// until its protection expires (AWS's task scale-in protection); unhealthy tasks,
	// tasks on draining instances and the tasks of a deleted service still go.
	Protected map[string]time.Time
	// Targets is, for a service with loadBalancers, the health of each task's targets by
	// task ARN: such a task is healthy only when its targets are, and one whose target is
	// unhealthy after the grace period is replaced.
	Targets map[string]TaskTargets
	// AlarmsInAlarm names the service's deployment alarms in ALARM during a deployment
	// (alarms.go): the deployment fails, and rolls back with alarms.rollback.
	AlarmsInAlarm []string
}

// Plan is what Compute decided for one service; Apply carries it out in this order:
// Stop, Launch, then the service record with the events.
type Plan struct {
	// Account is the service's scope.
	Account keys.Scope
	// Service is the record as read (State.Service): Apply writes Record only when it
	// differs, against Service.ModRevision.
	Service store.Item[*storev1.ServiceRecord]
	// Record is the service record to write: running and pending counts of the service
	// and its deployments, deployment status, rollout state, failed tasks, desired count
	// (DAEMON), launch backoff, a rollback deployment, INACTIVE status once a deleted
	// service has no task left. Events are not applied to it yet (see Events, After).
	Record *storev1.ServiceRecord
	// Stop lists the tasks to stop, each with its stoppedReason, in order.
	Stop []Stop
	// Launch says how many tasks of which deployment to start (Count 0: none).
	Launch Launch
	// More are further launches after Launch, for a service under the EXTERNAL
	// deployment controller (one per task set short of tasks); nil otherwise.
	More []Launch
	// Events are the service events that precede the launch's own ("has started",
	// placement failures), oldest first; After are those that follow it.
	Events, After []string
	// Breaker is set when the circuit breaker marked the PRIMARY deployment FAILED in
	// this pass.
	Breaker *BreakerTrip
}

// Stop is one task Compute decided to stop with stopCode ServiceSchedulerInitiated.
type Stop struct {
	// Task is the task record as read (Apply stops it by key, retrying on conflict).
	Task store.Item[*storev1.TaskRecord]
	// ID is the task id.
	ID string
	// Reason is the stoppedReason (ReasonScaleIn, ReasonUnhealthy, ReasonDraining,
	// ReasonServiceDeleted).
	Reason string
}

// Launch is the tasks Compute decided to start.
type Launch struct {
	// Deployment is the id of the deployment the tasks belong to (the PRIMARY one).
	Deployment string
	// TaskDefinition is the ARN of the deployment's task definition.
	TaskDefinition string
	// Count is how many tasks to place; 0 means none.
	Count int
	// Instances are, for DAEMON, the instances to place one task each on; nil lets
	// placement choose.
	Instances []string
	// Providers names, for a service with a capacity provider strategy, the capacity
	// provider of each task to start (capacity.Distribute over the PRIMARY deployment's
	// live tasks by provider); nil without a strategy.
	Providers []string
	// LaunchType is the tasks' launch type when it is not the service's (a task set's);
	// empty means the service's.
	LaunchType string
}

// BreakerTrip is a circuit breaker decision: the deployment marked FAILED, its failed
// tasks and the threshold they reached and, when the service rolls back, the COMPLETED
// deployment rolled back to and the new deployment of its task definition (both empty
// without rollback, or when no deployment has COMPLETED).
type BreakerTrip struct {
	// Failed is the id of the deployment marked FAILED.
	Failed string
	// FailedTasks is its failed task count and Threshold the BreakerThreshold it reached.
	FailedTasks, Threshold int
	// RolledBackTo is the id of the COMPLETED deployment rolled back to and NewID the id
	// of the new PRIMARY deployment of its task definition; both empty without rollback.
	RolledBackTo, NewID string
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
	targets   TaskTargets // its load balancer targets' health, for a service with loadBalancers
	// drainingTargets: its targets are draining, so it is on its way out.
	drainingTargets bool
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

// classify returns the views of a service's tasks. An UNHEALTHY task inside the service's
// healthCheckGracePeriodSeconds (counted from its startedAt) is only not healthy yet, as
// AWS ignores failing container health checks during the grace period. It fails when the
// task definition of a RUNNING task is not in st.TaskDefinitions.
func classify(st State, pol Policy, svc *ecsv1.Service) ([]*view, error) {
	grace := time.Duration(svc.GetHealthCheckGracePeriodSeconds()) * time.Second
	now := st.Now
	out := make([]*view, 0, len(st.Tasks))
	hcs := map[string]map[string]bool{} // health-checked containers by task definition ARN
	for _, it := range st.Tasks {
		t := it.Value.GetTask()
		v := &view{item: it, id: task.ID(it.Value), dep: it.Value.GetDeploymentId(), created: t.GetCreatedAt(), instance: it.Value.GetContainerInstanceId()}
		if v.dep == "" {
			v.dep = t.GetStartedBy()
		}
		last := t.GetLastStatus()
		v.stopped = last == "STOPPED"
		v.live = !v.stopped && t.GetDesiredStatus() == "RUNNING"
		v.stopping = !v.stopped && t.GetDesiredStatus() != "RUNNING"
		p, run := task.Counts(last)
		v.pending, v.running = p == 1, run == 1
		checked := false // an essential container has a health check
		if v.running {
			arn := t.GetTaskDefinitionArn()
			hc, ok := hcs[arn]
			if !ok {
				td := st.TaskDefinitions[arn]
				if td == nil {
					return nil, fmt.Errorf("service: task definition %s of task %s not read", arn, v.id)
				}
				hc = healthChecked(td)
				hcs[arn] = hc
			}
			checked = len(hc) > 0
			v.healthy = true
			if len(taskLBs(svc, it.Value)) > 0 {
				// Healthy only once its targets pass the load balancer's health checks;
				// an unhealthy target is ignored for the grace period, as AWS does.
				checked = true
				v.targets = st.Targets[t.GetTaskArn()]
				switch v.targets.State {
				case elb.StateHealthy:
				case elb.StateDraining:
					// Deregistered on its way out (its stop waits for the drain): it is
					// not kept, whatever the pass that decided its stop saw.
					v.healthy = false
					v.drainingTargets = true
				case elb.StateUnhealthy:
					v.healthy = false
					v.unhealthy = grace <= 0 || t.StartedAt == nil || !now.Before(awsapi.FromEpoch(t.GetStartedAt()).Add(grace))
				default:
					v.healthy = false
				}
			}
			for _, c := range t.GetContainers() {
				if !hc[c.GetName()] {
					continue
				}
				switch c.GetHealthStatus() {
				case "HEALTHY":
				case "UNHEALTHY":
					v.healthy = false
					v.unhealthy = grace <= 0 || t.StartedAt == nil || !now.Before(awsapi.FromEpoch(t.GetStartedAt()).Add(grace))
				default:
					v.healthy = false
				}
			}
		}
		if v.live {
			in, ok := st.Instances[v.instance]
			status := in.Value.GetContainerInstance().GetStatus()
			v.draining = !ok || status != StatusActive || in.Value.GetOperatorDrain() || in.Value.GetInvoluntaryDrain() || v.drainingTargets
		}
		if v.stopped {
			code, reason := t.GetStopCode(), t.GetStoppedReason()
			switch {
			case code == "UserInitiated" || code == "TerminationNotice" || code == "SpotInterruption" ||
				(code == StopCodeScheduler && reason != ReasonUnhealthy && !strings.HasPrefix(reason, elbUnhealthyPrefix)):
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
		v.stable = v.healthy && (pol.StableAfter < 0 || checked ||
			(t.StartedAt != nil && !now.Before(awsapi.FromEpoch(t.GetStartedAt()).Add(pol.StableAfter))))
		if v.live && v.stable {
			v.success = true
		}
		out = append(out, v)
	}
	return out, nil
}

// Compute decides what one reconcile pass does to a service, from st alone: no I/O, no
// clock but st.Now (a rollback deployment's id comes from pol.NewDeploymentID). It
// recomputes the counts, accounts failed tasks and the launch backoff, trips the circuit
// breaker (and starts the rollback deployment), chooses the tasks to keep and those to
// stop within minimumHealthyPercent, the number to launch within maximumPercent, moves
// deployments to INACTIVE and COMPLETED and a deleted service to INACTIVE, and collects
// the events; see the package documentation for the rules. A service under the EXTERNAL
// deployment controller is reconciled task set by task set instead (computeExternal). It
// returns an error when the service has no PRIMARY deployment or a task definition it needs is missing from st.
func Compute(st State, pol Policy) (Plan, error) {
	if external(st.Service.Value.GetService()) {
		return computeExternal(st, pol)
	}
	d, err := newDecision(st, pol)
	if err != nil {
		return Plan{}, err
	}
	d.failures()
	d.breaker()
	d.deploymentAlarms()
	d.shift()
	keep, surplus := d.choose()
	d.stop(surplus)
	d.launch(keep)
	// The launch's events (Apply's) come here, between what was decided before and after.
	split := len(d.ev.msgs)
	d.finish(keep)
	d.plan.Events, d.plan.After = d.ev.msgs[:split:split], d.ev.msgs[split:]
	return d.plan, nil
}

// decision is one Compute call's working state.
type decision struct {
	st       State
	pol      Policy
	now      time.Time
	plan     Plan
	rec      *storev1.ServiceRecord // the clone Compute changes (plan.Record)
	s        *ecsv1.Service
	name     string
	ev       *events
	views    []*view
	byDep    map[string][]*view
	prim     *ecsv1.Deployment
	dr       *storev1.DeploymentRecord // the PRIMARY deployment's record
	daemon   bool
	deleting bool
	eligible map[string]bool // DAEMON: the instances it runs on
	desired  int32
	// healthyLive counts the live tasks that count toward minimumHealthyPercent (stable);
	// total the tasks not STOPPED (live or being stopped), both before this plan's stops.
	healthyLive, total int
	// reconcileStage: a traffic shift starting this pass found several older revisions running.
	reconcileStage bool
}

// newDecision clones the record, classifies the tasks, finds the PRIMARY deployment and
// the desired count (DAEMON: the eligible instances; a deleted service: 0).
func newDecision(st State, pol Policy) (*decision, error) {
	rec := proto.Clone(st.Service.Value).(*storev1.ServiceRecord)
	s := rec.GetService()
	d := &decision{st: st, pol: pol, now: st.Now, rec: rec, s: s, name: s.GetServiceName()}
	d.plan = Plan{Account: st.Account, Service: st.Service, Record: rec}
	views, err := classify(st, pol, s)
	if err != nil {
		return nil, err
	}
	d.views = views
	d.ev = &events{svc: d.name, now: d.now}
	if d.prim = primary(s); d.prim == nil {
		return nil, fmt.Errorf("service: %s has no PRIMARY deployment", d.name)
	}
	d.daemon = s.GetSchedulingStrategy() == StrategyDaemon
	d.deleting = s.GetStatus() == StatusDraining
	d.eligible = map[string]bool{}
	if d.daemon && !d.deleting {
		for _, id := range st.Eligible {
			d.eligible[id] = true
		}
		s.DesiredCount = int32(len(st.Eligible))
		d.prim.DesiredCount = s.DesiredCount
	}
	d.desired = s.GetDesiredCount()
	if d.deleting {
		d.desired = 0
	}
	d.byDep = map[string][]*view{}
	for _, v := range views {
		d.byDep[v.dep] = append(d.byDep[v.dep], v)
	}
	d.dr = deploymentRecord(rec, d.prim.GetId())
	return d, nil
}

// failures records each deployment's failed tasks and the PRIMARY one's launch backoff.
func (d *decision) failures() {
	prim, dr := d.prim, d.dr
	failed, consecutive := failureCounts(d.byDep[prim.GetId()])
	prim.FailedTasks = max(prim.GetFailedTasks(), int32(failed))
	switch {
	case consecutive == 0:
		dr.FailedLaunches, dr.NextLaunchAt = 0, nil
	case consecutive > int(dr.GetFailedLaunches()):
		dr.FailedLaunches = int32(consecutive)
		if delay := LaunchDelay(consecutive, d.pol.BackoffAfter, d.pol.BackoffBase, d.pol.BackoffCap); delay > 0 {
			dr.NextLaunchAt = ts(d.now.Add(delay))
			d.ev.add(fmt.Sprintf("(service %s) is unable to consistently start tasks successfully. For more information, see the Troubleshooting section.", d.name))
		}
	default:
		dr.FailedLaunches = int32(consecutive)
	}
	for _, dep := range d.s.GetDeployments() {
		if dep.GetId() != prim.GetId() && dep.GetStatus() != DeploymentInactive {
			f, _ := failureCounts(d.byDep[dep.GetId()])
			dep.FailedTasks = max(dep.GetFailedTasks(), int32(f))
		}
	}
}

// breaker marks the PRIMARY deployment FAILED once its failed tasks reach the threshold
// and, with rollback, starts a deployment of the last COMPLETED one's task definition.
func (d *decision) breaker() {
	cb, threshold := d.s.GetDeploymentConfiguration().GetDeploymentCircuitBreaker(), BreakerThreshold(d.desired, d.pol.BreakerMinThreshold)
	prim := d.prim
	if !cb.GetEnable() || d.deleting || prim.GetRolloutState() != RolloutInProgress || int(prim.GetFailedTasks()) < threshold {
		return
	}
	d.plan.Breaker = &BreakerTrip{Failed: prim.GetId(), FailedTasks: int(prim.GetFailedTasks()), Threshold: threshold}
	if cb.GetRollback() && shiftInProgress(d.dr) {
		// A traffic-shifting deployment rolls back in place: its source still runs.
		if d.rollbackInPlace("ECS deployment circuit breaker: tasks failed to start.") {
			d.plan.Breaker.RolledBackTo = d.prim.GetId()
			return
		}
	}
	prim.RolloutState = proto.String(RolloutFailed)
	prim.RolloutStateReason = proto.String("ECS deployment circuit breaker: tasks failed to start.")
	prim.UpdatedAt = proto.Float64(awsapi.Epoch(d.now))
	d.dr.FinishedAt, d.dr.NextLaunchAt = ts(d.now), nil // a FAILED deployment launches no more
	d.ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment failed: tasks failed to start.", d.name, prim.GetId()))
	if !cb.GetRollback() {
		return
	}
	target := lastCompleted(d.s, prim.GetId())
	if target == nil {
		return
	}
	newID := NewDeploymentID
	if d.pol.NewDeploymentID != nil {
		newID = d.pol.NewDeploymentID
	}
	id := newID()
	startDeploymentID(d.rec, d.st.Account, id, target.GetTaskDefinition(), true, d.now)
	d.ev.add(fmt.Sprintf("(service %s) rolling back to deployment %s.", d.name, target.GetId()))
	d.plan.Breaker.RolledBackTo, d.plan.Breaker.NewID = target.GetId(), id
	d.prim = primary(d.s)
	d.dr = deploymentRecord(d.rec, d.prim.GetId())
}

// choose splits the live tasks into those to keep — up to desired live PRIMARY tasks on
// ACTIVE instances, healthy first, then the oldest; for DAEMON one per eligible instance
// — and the surplus; and counts healthyLive and total.
func (d *decision) choose() (keep, surplus []*view) {
	for _, v := range d.views {
		if v.live || v.stopping {
			d.total++
		}
		// Only tasks that stayed up count toward minimumHealthyPercent: old tasks are not
		// stopped for new ones that are RUNNING for an instant in a crash loop.
		if v.live && v.stable {
			d.healthyLive++
		}
	}
	cands := liveInKeepOrder(d.views, d.protected)
	onInstance := map[string]bool{} // DAEMON: an eligible instance already holding a kept task
	for _, v := range cands {
		ok := v.dep == d.prim.GetId() && !v.draining && !v.unhealthy
		if d.daemon {
			ok = ok && d.eligible[v.instance] && !onInstance[v.instance]
		} else {
			ok = ok && len(keep) < int(d.desired)
		}
		if ok && !d.deleting {
			keep = append(keep, v)
			onInstance[v.instance] = true
		} else {
			surplus = append(surplus, v)
		}
	}
	return keep, surplus
}

// liveInKeepOrder returns the live tasks of vs in the order they are kept when there are
// more than wanted: healthy ones first, then protected ones (protected reports scale-in
// protection; nil means none is), then the oldest first.
func liveInKeepOrder(vs []*view, protected func(*view) bool) []*view {
	cands := make([]*view, 0, len(vs))
	for _, v := range vs {
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
		if protected != nil {
			if pa, pb := protected(a), protected(b); pa != pb {
				if pa {
					return -1
				}
				return 1
			}
		}
		return cmp.Compare(a.created, b.created)
	})
	return cands
}

// stop decides which surplus tasks to stop: unhealthy and not-yet-RUNNING ones freely,
// RUNNING ones while the tasks that count stay at or above the minimum. Tasks on
// instances a DAEMON service no longer targets go at once, as do the tasks of a deleted
// service.
func (d *decision) stop(surplus []*view) {
	slices.SortStableFunc(surplus, func(a, b *view) int {
		if a.healthy != b.healthy {
			if a.healthy {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.created, b.created)
	})
	minHealthy := MinHealthy(d.desired, d.s.GetDeploymentConfiguration().GetMinimumHealthyPercent())
	primFailed := d.prim.GetRolloutState() == RolloutFailed
	heldSrc := d.heldSource() // a traffic shift in progress keeps its source running
	var stopped []string
	held := 0
	for _, v := range surplus {
		reason := fmt.Sprintf(ReasonScaleIn, d.prim.GetId())
		// A task not yet RUNNING, or failing its health checks, goes at once. A RUNNING one
		// that has not yet counted toward minimumHealthyPercent (RUNNING for less than
		// StableAfter, health checks not yet passed) is no more free: stopping it lowers
		// the running count, so it goes only while the tasks that do count already reach
		// the minimum. Stopping such tasks freely took a service to zero when a second
		// update superseded a rollout whose tasks had just started.
		// A task whose targets drain was already decided to stop (it waits for the
		// drain): it no longer counts, so it goes freely.
		free := !v.running || v.unhealthy || v.drainingTargets
		switch {
		case v.unhealthy && v.targets.State == elb.StateUnhealthy:
			reason = fmt.Sprintf(ReasonELBUnhealthy, v.targets.TargetGroupArn)
			d.ev.add(unhealthyEvent(d.name, v.targets))
		case v.unhealthy:
			reason = ReasonUnhealthy
			d.ev.add(fmt.Sprintf("(service %s) (task %s) failed container health checks.", d.name, v.id))
		case d.deleting:
			reason, free = ReasonServiceDeleted, true
		case d.daemon && !d.eligible[v.instance]:
			free = true
			if v.draining {
				reason = ReasonDraining
			}
		case v.draining:
			reason = ReasonDraining
		}
		if !free && !v.draining && d.protected(v) {
			held++ // scale-in protection: kept until it expires
			continue
		}
		if !free {
			if primFailed && v.dep != d.prim.GetId() {
				continue // a failed deployment without rollback stops launching; keep the old tasks
			}
			if heldSrc != "" && v.dep == heldSrc {
				continue
			}
			left := d.healthyLive
			if v.stable {
				left--
			}
			if left < minHealthy {
				continue
			}
			d.healthyLive = left
		}
		d.plan.Stop = append(d.plan.Stop, Stop{Task: v.item, ID: v.id, Reason: reason})
		v.live, v.stopping = false, true
		if !v.drainingTargets { // announced by the pass that started its drain
			stopped = append(stopped, v.id)
		}
	}
	if len(stopped) > 0 {
		d.ev.add(fmt.Sprintf("(service %s) has stopped %d running tasks: %s.", d.name, len(stopped), taskList(stopped)))
	}
	if held > 0 {
		d.ev.add(fmt.Sprintf("(service %s) was unable to scale in due to (reason: %d tasks under protection).", d.name, held))
	}
}

// protected reports whether v's scale-in protection lasts past the decision's time.
func (d *decision) protected(v *view) bool {
	exp, ok := d.st.Protected[v.id]
	return ok && exp.After(d.now)
}

// launch decides how many tasks are missing and may start: within maximumPercent
// (counting the tasks before this plan's stops, which still run), not while backing off,
// failed or deleted; for DAEMON one on each eligible instance without a task.
func (d *decision) launch(keep []*view) {
	maxTotal := MaxTotal(d.desired, d.s.GetDeploymentConfiguration().GetMaximumPercent())
	need := int(d.desired) - len(keep)
	room := maxTotal - d.total
	if d.daemon || d.heldSource() != "" {
		room = need // one task per instance is the DAEMON bound; a traffic shift scales the new revision up in full beside the old
	}
	n := min(need, room)
	backoff := d.dr.NextLaunchAt != nil && d.now.Before(d.dr.GetNextLaunchAt().AsTime())
	if n <= 0 || d.deleting || d.prim.GetRolloutState() == RolloutFailed || backoff {
		return
	}
	var targets []string
	if d.daemon {
		busy := map[string]bool{}
		for _, v := range d.views {
			if v.live || v.stopping {
				busy[v.instance] = true
			}
		}
		for _, id := range d.st.Eligible {
			if !busy[id] {
				targets = append(targets, id)
			}
		}
		n = len(targets)
	}
	if n > 0 {
		d.plan.Launch = Launch{Deployment: d.prim.GetId(), TaskDefinition: d.prim.GetTaskDefinition(), Count: n, Instances: targets}
		if st := d.s.GetCapacityProviderStrategy(); len(st) > 0 && !d.daemon {
			counts := map[string]int{}
			for _, v := range d.views {
				if v.live && v.dep == d.prim.GetId() {
					counts[v.item.Value.GetTask().GetCapacityProviderName()]++
				}
			}
			d.plan.Launch.Providers = capacity.Distribute(st, counts, n)
		}
	}
}

// finish records the counts (tasks launched by this plan are counted by the next pass),
// retires deployments without tasks, completes the PRIMARY deployment once the service is
// steady, and marks a deleted service without tasks INACTIVE.
func (d *decision) finish(keep []*view) {
	s, prim, now := d.s, d.prim, d.now
	updateCounts(s, d.views)
	allQuiet := true // no task of a non-primary deployment is left
	for _, dep := range s.GetDeployments() {
		if dep.GetStatus() == DeploymentActive {
			if dep.GetRunningCount()+dep.GetPendingCount() == 0 && !hasStopping(d.byDep[dep.GetId()]) {
				dep.Status = proto.String(DeploymentInactive)
				dep.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			} else {
				allQuiet = false
				dep.DesiredCount = dep.GetRunningCount() + dep.GetPendingCount()
			}
		}
	}
	// Steady (and the deployment COMPLETED) only once every kept task has stayed RUNNING
	// and healthy for StableAfter and nothing is pending: a crash loop's tasks, RUNNING for
	// an instant, never get there, so its deployment stays IN_PROGRESS for the breaker.
	steady := allQuiet && prim.GetRunningCount() == d.desired && prim.GetPendingCount() == 0 &&
		len(keep) == int(d.desired) && countStable(keep) == int(d.desired) && !hasStopping(d.views) &&
		!shiftInProgress(d.dr)
	if steady && prim.GetRolloutState() == RolloutInProgress && !d.deleting {
		prim.RolloutState = proto.String(RolloutCompleted)
		prim.RolloutStateReason = proto.String("ECS deployment " + prim.GetId() + " completed.")
		prim.UpdatedAt = proto.Float64(awsapi.Epoch(now))
		d.dr.FinishedAt = ts(now)
		d.ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment completed.", d.name, prim.GetId()))
	}
	if steady && !d.deleting {
		// Never in the same pass as a launch (steady keeps desired tasks: nothing to
		// launch), so the launch's events cannot come between.
		d.ev.steady(s)
	}
	if d.deleting && d.total == 0 && !hasStopping(d.views) {
		s.Status = proto.String(StatusInactive)
		for _, dep := range s.GetDeployments() {
			if dep.GetStatus() != DeploymentInactive {
				dep.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			}
		}
		prim.UpdatedAt = proto.Float64(awsapi.Epoch(now))
	}
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
// are pending; RUNNING is running), whatever its desiredStatus, as the instances' (and so
// the cluster's) counters do.
func updateCounts(s *ecsv1.Service, views []*view) {
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
