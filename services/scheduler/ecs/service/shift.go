package service

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Deployment strategies (deploymentConfiguration.strategy). BLUE_GREEN, LINEAR and CANARY
// are ECS's traffic-shifting strategies (docs/deployments.md).
const (
	DeployRolling   = "ROLLING"
	DeployBlueGreen = "BLUE_GREEN"
	DeployLinear    = "LINEAR"
	DeployCanary    = "CANARY"
)

// The lifecycle stages a traffic-shifting deployment goes through, in order (AWS's
// ServiceDeploymentLifecycleStage, plus the hook stage PRE_PRODUCTION_TRAFFIC_SHIFT,
// which DescribeServiceDeployments reports as PRODUCTION_TRAFFIC_SHIFT).
const (
	StageReconcile      = "RECONCILE_SERVICE"
	StagePreScaleUp     = "PRE_SCALE_UP"
	StageScaleUp        = "SCALE_UP"
	StagePostScaleUp    = "POST_SCALE_UP"
	StageTestShift      = "TEST_TRAFFIC_SHIFT"
	StagePostTestShift  = "POST_TEST_TRAFFIC_SHIFT"
	StagePreProdShift   = "PRE_PRODUCTION_TRAFFIC_SHIFT"
	StageProdShift      = "PRODUCTION_TRAFFIC_SHIFT"
	StagePostProdShift  = "POST_PRODUCTION_TRAFFIC_SHIFT"
	StageBakeTime       = "BAKE_TIME"
	StageCleanUp        = "CLEAN_UP"
	hookPause           = "PAUSE"
	hookLambda          = "AWS_LAMBDA"
	hookAwaiting        = "AWAITING_ACTION"
	hookSucceeded       = "SUCCEEDED"
	hookFailed          = "FAILED"
	hookTimedOut        = "TIMED_OUT"
	actionContinue      = "CONTINUE"
	actionRollback      = "ROLLBACK"
	defaultHookTimeout  = 1440 // minutes (DeploymentLifecycleHookTimeoutConfiguration)
	defaultLinearStep   = 10.0 // LinearConfiguration.stepPercent
	defaultLinearBake   = 6    // LinearConfiguration.stepBakeTimeInMinutes
	defaultCanaryPct    = 5.0  // CanaryConfiguration.canaryPercent
	defaultCanaryBake   = 10   // CanaryConfiguration.canaryBakeTimeInMinutes
	maxBakeMinutes      = 1440 // bakeTimeInMinutes, step and canary bake times
	maxHookTimeoutMins  = 20160
	minLinearStepPct    = 3.0
	minCanaryPercentage = 0.1
)

// hookStages are the stages a lifecycle hook may name (DeploymentLifecycleHookStage).
var hookStages = []string{StageReconcile, StagePreScaleUp, StagePostScaleUp, StageTestShift, StagePostTestShift, StagePreProdShift, StageProdShift, StagePostProdShift}

// shifting reports whether dc asks for a traffic-shifting strategy.
func shifting(dc *ecsv1.DeploymentConfiguration) bool {
	switch dc.GetStrategy() {
	case DeployBlueGreen, DeployLinear, DeployCanary:
		return true
	}
	return false
}

// Step is one production traffic shift of a deployment: the percent of production
// traffic the new revision gets, and how long to bake before the next step.
type Step struct {
	// Percent is the new revision's share of production traffic after the step (0-100).
	Percent float64
	// Bake is the wait after the step before the next one (none after 100%).
	Bake time.Duration
}

// ProductionSteps returns the production traffic steps a deployment configuration's
// strategy takes, ending at 100%: BLUE_GREEN one step to 100; LINEAR steps of
// stepPercent (default 10) with stepBakeTimeInMinutes (default 6) between them; CANARY
// canaryPercent (default 5), canaryBakeTimeInMinutes (default 10), then 100. A minute
// lasts minute (time.Minute in production). AWS references: LinearConfiguration,
// CanaryConfiguration.
func ProductionSteps(dc *ecsv1.DeploymentConfiguration, minute time.Duration) []Step {
	switch dc.GetStrategy() {
	case DeployLinear:
		pct, bake := defaultLinearStep, int32(defaultLinearBake)
		if lc := dc.GetLinearConfiguration(); lc != nil {
			// Unboxed in the model, so without presence: a percent of 0 (invalid) reads as
			// not given; a bake time of 0 is 0.
			if lc.GetStepPercent() > 0 {
				pct = lc.GetStepPercent()
			}
			bake = lc.GetStepBakeTimeInMinutes()
		}
		var out []Step
		for k := 1; ; k++ {
			p := math.Round(float64(k)*pct*10) / 10
			if p >= 100 {
				return append(out, Step{Percent: 100})
			}
			out = append(out, Step{Percent: p, Bake: time.Duration(bake) * minute})
		}
	case DeployCanary:
		pct, bake := defaultCanaryPct, int32(defaultCanaryBake)
		if cc := dc.GetCanaryConfiguration(); cc != nil {
			if cc.GetCanaryPercent() > 0 {
				pct = cc.GetCanaryPercent()
			}
			bake = cc.GetCanaryBakeTimeInMinutes()
		}
		if pct >= 100 {
			return []Step{{Percent: 100}}
		}
		return []Step{{Percent: pct, Bake: time.Duration(bake) * minute}, {Percent: 100}}
	}
	return []Step{{Percent: 100}}
}

// RuleWeights returns the forward weights (0-999) of the blue and green target groups
// for a green share of pct percent: whole percents as themselves (100 and 0 at the
// ends), tenths of a percent in thousandths (5.5% is 945 and 55).
func RuleWeights(pct float64) (blue, green int32) {
	if pct == math.Trunc(pct) {
		return int32(100 - pct), int32(pct)
	}
	g := int32(math.Round(pct * 10))
	return 1000 - g, g
}

// ShiftInput is what Advance decides a traffic-shifting deployment's next stage from.
type ShiftInput struct {
	// Now is the decision's time; bake times and hook timeouts count against it.
	Now time.Time
	// Config is the service's deployment configuration.
	Config *ecsv1.DeploymentConfiguration
	// GreenReady reports whether the new revision's tasks are all up and healthy (its
	// target groups' health included): SCALE_UP ends then.
	GreenReady bool
	// Reconcile reports whether the deployment started with more than one older revision
	// still running (the RECONCILE_SERVICE stage runs then).
	Reconcile bool
	// Minute is the length of a minute of bake time (time.Minute).
	Minute time.Duration
	// NewHookID returns the id of a new hook run; nil means a random "ecs-pause-…" id.
	NewHookID func() string
}

// ShiftResult is what Advance did.
type ShiftResult struct {
	// Events are service events, oldest first.
	Events []string
	// Rollback is set when a hook's timeout action rolls the deployment back; Reason says why.
	Rollback bool
	Reason   string
}

// Advance moves a traffic-shifting deployment's state st through its lifecycle stages as
// far as it can at in.Now: a stage with PAUSE hooks waits for ContinueServiceDeployment
// (or the hook's timeout); SCALE_UP waits for GreenReady; TEST_TRAFFIC_SHIFT moves all
// test traffic to the new revision; PRODUCTION_TRAFFIC_SHIFT takes ProductionSteps one by
// one, each after the previous one's bake (PAUSE hooks at PRODUCTION_TRAFFIC_SHIFT run at
// each step, as AWS re-invokes hooks of that stage); BAKE_TIME waits bakeTimeInMinutes;
// CLEAN_UP is the end (the reconciler then stops the old revision's tasks). It changes st
// in place.
func Advance(st *storev1.ShiftState, in ShiftInput) ShiftResult {
	var res ShiftResult
	minute := in.Minute
	if minute <= 0 {
		minute = time.Minute
	}
	enter := func(stage string) {
		st.Stage, st.StageSince = stage, ts(in.Now)
	}
	if st.GetStage() == "" {
		if in.Reconcile {
			enter(StageReconcile)
		} else {
			enter(StagePreScaleUp)
		}
	}
	steps := ProductionSteps(in.Config, minute)
	for range 64 { // a bound, never reached: each turn moves at least one stage on or returns
		stage := st.GetStage()
		step := int32(0)
		if stage == StageProdShift {
			step = int32(slices.IndexFunc(steps, func(s Step) bool { return s.Percent == st.GetProductionWeight() })) + 1
		}
		switch stage {
		case StageScaleUp:
			if !in.GreenReady {
				return res
			}
			enter(StagePostScaleUp)
			continue
		case StageTestShift:
			st.TestWeight = 100
		case StageProdShift:
			if step == 0 { // no step taken yet
				st.ProductionWeight = steps[0].Percent
				st.StageSince = ts(in.Now)
				res.Events = append(res.Events, fmt.Sprintf("production traffic shifted: %g%% to the new revision.", st.GetProductionWeight()))
				continue
			}
		case StageBakeTime:
			bake := time.Duration(in.Config.GetBakeTimeInMinutes()) * minute
			if in.Now.Before(st.GetStageSince().AsTime().Add(bake)) {
				return res
			}
			enter(StageCleanUp)
			continue
		case StageCleanUp:
			return res
		}
		// The stage's own work is done: its hooks, then the next stage.
		wait, rb := runHooks(st, in, stage, step)
		if rb != "" {
			res.Rollback, res.Reason = true, rb
			return res
		}
		if wait {
			return res
		}
		switch stage {
		case StageReconcile:
			enter(StagePreScaleUp)
		case StagePreScaleUp:
			enter(StageScaleUp)
		case StagePostScaleUp:
			enter(StageTestShift)
		case StageTestShift:
			enter(StagePostTestShift)
		case StagePostTestShift:
			enter(StagePreProdShift)
		case StagePreProdShift:
			enter(StageProdShift)
		case StageProdShift:
			cur := steps[step-1]
			if cur.Percent >= 100 {
				enter(StagePostProdShift)
				continue
			}
			if in.Now.Before(st.GetStageSince().AsTime().Add(cur.Bake)) {
				return res
			}
			st.ProductionWeight = steps[step].Percent
			st.StageSince = ts(in.Now)
			res.Events = append(res.Events, fmt.Sprintf("production traffic shifted: %g%% to the new revision.", st.GetProductionWeight()))
		case StagePostProdShift:
			enter(StageBakeTime)
		default:
			return res
		}
	}
	return res
}

// runHooks runs the PAUSE hooks configured for stage (at production step step): each
// one in turn waits AWAITING_ACTION until ContinueServiceDeployment resolves it or its
// timeout passes. It reports whether the deployment waits, or the reason to roll back.
func runHooks(st *storev1.ShiftState, in ShiftInput, stage string, step int32) (bool, string) {
	var hooks []*ecsv1.DeploymentLifecycleHook
	for _, h := range in.Config.GetLifecycleHooks() {
		if slices.Contains(h.GetLifecycleStages(), stage) {
			hooks = append(hooks, h)
		}
	}
	var runs []*storev1.HookRun
	for _, r := range st.GetHooks() {
		if r.GetStage() == stage && r.GetStep() == step {
			runs = append(runs, r)
		}
	}
	for _, r := range runs {
		if r.GetStatus() != hookAwaiting {
			continue
		}
		if in.Now.Before(r.GetExpiresAt().AsTime()) {
			return true, ""
		}
		r.Status = hookTimedOut
		if r.GetTimeoutAction() != actionContinue {
			return false, fmt.Sprintf("the lifecycle hook %s timed out at stage %s.", r.GetHookId(), stage)
		}
	}
	if len(runs) >= len(hooks) {
		return false, ""
	}
	h := hooks[len(runs)]
	timeout, action := int32(defaultHookTimeout), actionRollback
	if tc := h.GetTimeoutConfiguration(); tc != nil {
		if tc.TimeoutInMinutes != nil {
			timeout = tc.GetTimeoutInMinutes()
		}
		if tc.GetAction() != "" {
			action = tc.GetAction()
		}
	}
	id := newHookID()
	if in.NewHookID != nil {
		id = in.NewHookID()
	}
	minute := in.Minute
	if minute <= 0 {
		minute = time.Minute
	}
	st.Hooks = append(st.Hooks, &storev1.HookRun{
		HookId: id, Stage: stage, Step: step, TargetType: hookPause, Status: hookAwaiting,
		ExpiresAt: ts(in.Now.Add(time.Duration(timeout) * minute)), TimeoutAction: action,
	})
	return true, ""
}

// newHookID returns a pause hook id in AWS's form: "ecs-pause-" and 43 base64url chars.
func newHookID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "ecs-pause-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// awaitingHook returns the hook run of st awaiting action with id hookID, or nil.
func awaitingHook(st *storev1.ShiftState, hookID string) *storev1.HookRun {
	for _, r := range st.GetHooks() {
		if r.GetHookId() == hookID && r.GetStatus() == hookAwaiting {
			return r
		}
	}
	return nil
}

// reportedStage is the lifecycleStage DescribeServiceDeployments shows for a stage.
func reportedStage(stage string) string {
	if stage == StagePreProdShift {
		return StageProdShift
	}
	return stage
}

// shiftSource picks the deployment a new traffic-shifting deployment shifts from: the
// newest other deployment that still has live tasks (the one that served production),
// or nil.
func shiftSource(s *ecsv1.Service, prim *ecsv1.Deployment, live map[string]int) *ecsv1.Deployment {
	var best *ecsv1.Deployment
	better := func(a, b *ecsv1.Deployment) bool {
		ac, bc := a.GetRolloutState() == RolloutCompleted, b.GetRolloutState() == RolloutCompleted
		if ac != bc {
			return ac
		}
		return a.GetCreatedAt() > b.GetCreatedAt()
	}
	for _, d := range s.GetDeployments() {
		if d.GetId() == prim.GetId() || d.GetStatus() == DeploymentInactive || live[d.GetId()] == 0 {
			continue
		}
		if best == nil || better(d, best) {
			best = d
		}
	}
	return best
}

// rollbackShift rolls a traffic-shifting deployment d of rec back in place: its source
// deployment, whose tasks still run, becomes PRIMARY again and serves all traffic (the
// reconciler moves the listener rules' weights back before it stops d's tasks); d is
// marked FAILED and rolled back, so ListServiceDeployments shows it
// ROLLBACK_IN_PROGRESS until its tasks are gone, then ROLLBACK_SUCCESSFUL. It reports
// false, changing nothing, when d is not shifting or its source is gone.
func rollbackShift(rec *storev1.ServiceRecord, d *ecsv1.Deployment, reason string, now time.Time) bool {
	s := rec.GetService()
	dr := deploymentRecord(rec, d.GetId())
	sh := dr.GetShift()
	if sh == nil || sh.GetRolledBack() || sh.GetSource() == "" || d.GetStatus() != DeploymentPrimary {
		return false
	}
	src := findDeployment(s, sh.GetSource())
	if src == nil || src.GetStatus() == DeploymentInactive {
		return false
	}
	sh.RolledBack, sh.RollbackAt, sh.RollbackReason = true, ts(now), reason
	d.Status = proto.String(DeploymentActive)
	d.RolloutState = proto.String(RolloutFailed)
	d.RolloutStateReason = proto.String("ECS deployment " + d.GetId() + " rolled back: " + reason)
	d.UpdatedAt = proto.Float64(awsapi.Epoch(now))
	dr.FinishedAt, dr.NextLaunchAt = ts(now), nil
	src.Status = proto.String(DeploymentPrimary)
	src.DesiredCount = s.GetDesiredCount()
	src.UpdatedAt = proto.Float64(awsapi.Epoch(now))
	s.TaskDefinition = src.TaskDefinition
	return true
}

// shiftInProgress reports whether dr is a traffic-shifting deployment that has not yet
// reached CLEAN_UP and was not rolled back: its source's tasks are held and it does not
// complete.
func shiftInProgress(dr *storev1.DeploymentRecord) bool {
	sh := dr.GetShift()
	return sh != nil && !sh.GetRolledBack() && sh.GetStage() != StageCleanUp
}

// shift runs the PRIMARY deployment's traffic-shifting strategy for one pass: it starts
// the shift state of a new deployment (its source, the target group side opposite the
// source's), advances it (Advance) and rolls it back in place when a hook's timeout says
// so. A deployment with no source running (the service's first) is deployed as a rolling
// one on the primary side.
func (d *decision) shift() {
	dc := d.s.GetDeploymentConfiguration()
	prim, dr := d.prim, d.dr
	if d.deleting || prim.GetRolloutState() != RolloutInProgress || dr.GetRollback() {
		return
	}
	if dr.Shift == nil {
		if !shifting(dc) {
			return
		}
		live := map[string]int{}
		for _, v := range d.views {
			if v.live {
				live[v.dep]++
			}
		}
		src := shiftSource(d.s, prim, live)
		if src == nil {
			return
		}
		active := 0
		for _, o := range d.s.GetDeployments() {
			if o.GetId() != prim.GetId() && live[o.GetId()] > 0 {
				active++
			}
		}
		dr.Alternate = !deploymentRecord(d.rec, src.GetId()).GetAlternate()
		dr.Shift = &storev1.ShiftState{Source: src.GetId()}
		d.reconcileStage = active > 1
		d.ev.add(fmt.Sprintf("(service %s) (deployment %s) %s deployment started from deployment %s.", d.name, prim.GetId(), dc.GetStrategy(), src.GetId()))
	}
	if !shiftInProgress(dr) {
		return
	}
	ready := 0
	pending := false
	for _, v := range d.byDep[prim.GetId()] {
		if v.live && v.stable && !v.draining {
			ready++
		}
		pending = pending || v.pending
	}
	before := dr.Shift.GetStage()
	res := Advance(dr.Shift, ShiftInput{
		Now: d.now, Config: dc, GreenReady: ready >= int(d.desired) && !pending,
		Reconcile: d.reconcileStage, Minute: d.pol.BakeMinute, NewHookID: d.pol.NewHookID,
	})
	for _, e := range res.Events {
		d.ev.add(fmt.Sprintf("(service %s) (deployment %s) %s", d.name, prim.GetId(), e))
	}
	if st := dr.Shift.GetStage(); st != before {
		d.ev.add(fmt.Sprintf("(service %s) (deployment %s) entered lifecycle stage %s.", d.name, prim.GetId(), reportedStage(st)))
	}
	if res.Rollback {
		d.rollbackInPlace(res.Reason)
	}
}

// rollbackInPlace rolls the PRIMARY traffic-shifting deployment back (rollbackShift) and
// makes its source the decision's PRIMARY; false when it cannot.
func (d *decision) rollbackInPlace(reason string) bool {
	old := d.prim
	if !rollbackShift(d.rec, old, reason, d.now) {
		return false
	}
	d.ev.add(fmt.Sprintf("(service %s) (deployment %s) rolling back to deployment %s: %s", d.name, old.GetId(), d.dr.GetShift().GetSource(), reason))
	d.prim = primary(d.s)
	d.dr = deploymentRecord(d.rec, d.prim.GetId())
	return true
}

// heldSource returns the id of the deployment whose tasks a traffic shift in progress
// keeps running (the source), or "".
func (d *decision) heldSource() string {
	if shiftInProgress(d.dr) && !d.deleting {
		return d.dr.GetShift().GetSource()
	}
	return ""
}

// describeShift adds what DescribeServiceDeployments shows of a traffic-shifting
// deployment to sd: its lifecycleStage, the lifecycle hooks it ran
// (lifecycleHookDetails), the production and test traffic weights the target revision
// and its source were asked for, and the rollback when it was rolled back in place.
func describeShift(sd *ecsv1.ServiceDeployment, account keys.Scope, rec *storev1.ServiceRecord, d *ecsv1.Deployment) {
	sh := findRecord(rec, d.GetId()).GetShift()
	if sh == nil {
		return
	}
	if sh.GetStage() != "" {
		sd.LifecycleStage = proto.String(reportedStage(sh.GetStage()))
	}
	sd.LifecycleHookDetails = []*ecsv1.DeploymentLifecycleHookDetail{}
	for _, r := range sh.GetHooks() {
		sd.LifecycleHookDetails = append(sd.LifecycleHookDetails, &ecsv1.DeploymentLifecycleHookDetail{
			HookId: proto.String(r.GetHookId()), TargetType: proto.String(r.GetTargetType()), Status: proto.String(r.GetStatus()),
			ExpiresAt: proto.Float64(awsapi.Epoch(r.GetExpiresAt().AsTime())), TimeoutAction: proto.String(r.GetTimeoutAction()),
		})
	}
	prod, test := sh.GetProductionWeight(), sh.GetTestWeight()
	if !shiftInProgress(findRecord(rec, d.GetId())) && !sh.GetRolledBack() {
		prod, test = 100, 100
	}
	if sh.GetRolledBack() {
		prod, test = 0, 0
	}
	if t := sd.GetTargetServiceRevision(); t != nil {
		t.RequestedProductionTrafficWeight, t.RequestedTestTrafficWeight = prod, test
	}
	s := rec.GetService()
	srcArn := serviceRevisionARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), sh.GetSource())
	for _, src := range sd.GetSourceServiceRevisions() {
		if src.GetArn() == srcArn {
			src.RequestedProductionTrafficWeight, src.RequestedTestTrafficWeight = 100-prod, 100-test
		}
	}
	if sh.GetRolledBack() {
		sd.Rollback = &ecsv1.Rollback{
			Reason:             proto.String(sh.GetRollbackReason()),
			StartedAt:          proto.Float64(awsapi.Epoch(sh.GetRollbackAt().AsTime())),
			ServiceRevisionArn: proto.String(srcArn),
		}
	}
}

// resolvedConfiguration is a service revision's resolvedConfiguration: for a service
// whose load balancers have an advancedConfiguration, the target group the revision's
// tasks register with (its side) and the production listener rule; nil otherwise.
func resolvedConfiguration(rec *storev1.ServiceRecord, d *ecsv1.Deployment) *ecsv1.ResolvedConfiguration {
	s := rec.GetService()
	if !hasAdvanced(s.GetLoadBalancers()) {
		return nil
	}
	alt := findRecord(rec, d.GetId()).GetAlternate()
	out := &ecsv1.ResolvedConfiguration{LoadBalancers: []*ecsv1.ServiceRevisionLoadBalancer{}}
	for _, l := range s.GetLoadBalancers() {
		lb := &ecsv1.ServiceRevisionLoadBalancer{TargetGroupArn: proto.String(sideLB(l, alt).GetTargetGroupArn())}
		if r := l.GetAdvancedConfiguration().GetProductionListenerRule(); r != "" {
			lb.ProductionListenerRule = proto.String(r)
		}
		out.LoadBalancers = append(out.LoadBalancers, lb)
	}
	return out
}
