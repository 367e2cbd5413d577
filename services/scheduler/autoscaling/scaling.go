package autoscaling

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Target tracking's alarm shapes, as AWS creates them for ECS: AlarmHigh breaches after 3
// one-minute datapoints above the target, AlarmLow after 15 below 90% of it.
const (
	highPoints   = 3
	lowPoints    = 15
	lowThreshold = 0.9
)

// metricSpec is the metric a target tracking policy reads.
type metricSpec struct {
	namespace, name, stat string
	dims                  map[string]string
}

func policyMetric(r resource, c *aasv1.TargetTrackingScalingPolicyConfiguration) metricSpec {
	svcDims := map[string]string{"ClusterName": r.cluster, "ServiceName": r.service}
	if pre := c.GetPredefinedMetricSpecification(); pre != nil {
		switch pre.GetPredefinedMetricType() {
		case ECSServiceAverageCPUUtilization:
			return metricSpec{"AWS/ECS", "CPUUtilization", "Average", svcDims}
		case ECSServiceAverageMemoryUtilization:
			return metricSpec{"AWS/ECS", "MemoryUtilization", "Average", svcDims}
		default: // ALBRequestCountPerTarget, checked at PutScalingPolicy
			tg, _ := targetGroupDimension(pre.GetResourceLabel())
			return metricSpec{"AWS/ApplicationELB", "RequestCountPerTarget", "Sum", map[string]string{"TargetGroup": tg}}
		}
	}
	cust := c.GetCustomizedMetricSpecification()
	dims := map[string]string{}
	for _, d := range cust.GetDimensions() {
		dims[d.GetName()] = d.GetValue()
	}
	return metricSpec{cust.GetNamespace(), cust.GetMetricName(), cust.GetStatistic(), dims}
}

// minutes reads the metric's last n one-minute datapoints, newest first; ok is false
// when one of them is missing (the alarm would lack data and not act).
func minutes(ctx context.Context, m MetricReader, s keys.Scope, spec metricSpec, now time.Time, n int) ([]float64, bool, error) {
	end := now.Truncate(time.Minute)
	out := make([]float64, 0, n)
	for i := range n {
		v, ok, err := m.Statistic(ctx, s, spec.namespace, spec.name, spec.dims, spec.stat, end.Add(-time.Duration(i+1)*time.Minute), end.Add(-time.Duration(i)*time.Minute))
		if err != nil || !ok {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, true, nil
}

// decision is what target tracking decided for a target.
type decision struct {
	desired int32
	out     bool   // a scale-out (else a scale-in)
	policy  string // the policy that decided it
	alarm   string // the alarm that stands for the breach (AlarmHigh / AlarmLow)
}

// decide evaluates a target's target tracking policies at now with current desired
// count cur, as AWS's target tracking does: a policy whose metric was above its target
// for 3 minutes asks for ceil(cur × metric / target) (at least cur+1), and the largest
// ask wins; a scale-in happens only when every policy's metric was below 90% of its
// target for 15 minutes and none disables scale-in, by at most 10% of the capacity (at
// least 1) a time, never below what the metric asks. The result is clamped into [min,
// max]; suspended directions and cooldowns (ScaleOutCooldown after a scale-out;
// ScaleInCooldown after a scale-in, and no scale-in within a scale-out's cooldown) hold it
// back. ok is false when nothing is to change.
func decide(ctx context.Context, m MetricReader, s keys.Scope, r resource, rec *storev1.ScalableTargetRecord, cur int32, now time.Time) (decision, bool, error) {
	t := rec.GetTarget()
	var out, in decision
	haveOut, allIn, tracked := false, true, false
	for _, p := range rec.GetPolicies() {
		if p.GetPolicyType() != TargetTrackingScaling {
			continue
		}
		tracked = true
		c := p.GetTargetTrackingScalingPolicyConfiguration()
		spec := policyMetric(r, c)
		target := c.GetTargetValue()
		high, low := TargetTrackingAlarmNames(r.id, policyID(p.GetPolicyArn()))
		pts, ok, err := minutes(ctx, m, s, spec, now, highPoints)
		if err != nil {
			return decision{}, false, err
		}
		if ok && pts[0] > target && pts[1] > target && pts[2] > target {
			want := int32(math.Ceil(float64(cur) * pts[0] / target))
			want = max(want, cur+1)
			if !haveOut || want > out.desired {
				out = decision{desired: want, out: true, policy: p.GetPolicyName(), alarm: high}
				haveOut = true
			}
			allIn = false
			continue
		}
		if c.GetDisableScaleIn() || !allIn {
			allIn = false
			continue
		}
		pts, ok, err = minutes(ctx, m, s, spec, now, lowPoints)
		if err != nil {
			return decision{}, false, err
		}
		below := ok
		for _, v := range pts {
			below = below && v < lowThreshold*target
		}
		if !below {
			allIn = false
			continue
		}
		want := int32(math.Ceil(float64(cur) * pts[0] / target))
		step := max(1, int32(math.Ceil(float64(cur)*0.1)))
		want = max(want, cur-step)
		if in.policy == "" || want > in.desired {
			in = decision{desired: want, policy: p.GetPolicyName(), alarm: low}
		}
	}
	st := t.GetSuspendedState()
	last := func(v float64) time.Time { return awsapi.FromEpoch(v) }
	cooldown := func(p string, out bool) time.Duration {
		for _, x := range rec.GetPolicies() {
			if x.GetPolicyName() == p {
				c := x.GetTargetTrackingScalingPolicyConfiguration()
				if out {
					return time.Duration(c.GetScaleOutCooldown()) * time.Second
				}
				return time.Duration(c.GetScaleInCooldown()) * time.Second
			}
		}
		return 0
	}
	switch {
	case haveOut:
		if st.GetDynamicScalingOutSuspended() || now.Before(last(rec.GetLastScaleOut()).Add(cooldown(out.policy, true))) {
			return decision{}, false, nil
		}
		out.desired = min(max(out.desired, t.GetMinCapacity()), t.GetMaxCapacity())
		return out, out.desired > cur, nil
	case tracked && allIn && in.policy != "":
		if st.GetDynamicScalingInSuspended() || now.Before(last(rec.GetLastScaleIn()).Add(cooldown(in.policy, false))) ||
			now.Before(last(rec.GetLastScaleOut()).Add(cooldown(in.policy, true))) {
			return decision{}, false, nil
		}
		in.desired = min(max(in.desired, t.GetMinCapacity()), t.GetMaxCapacity())
		return in, in.desired < cur, nil
	}
	return decision{}, false, nil
}

// Run is the leader's scaling loop: every tick it fires the scheduled actions that are
// due, and once a minute it evaluates the target tracking policies through Metrics. All
// its writes go through kv (the leader term's fenced client). It returns when ctx ends.
func (h *Handler) Run(ctx context.Context, kv clientv3.KV, tick time.Duration) error {
	if tick <= 0 {
		tick = 5 * time.Second
	}
	lh := &Handler{Logger: h.Logger, kv: kv, ecs: h.ecs, now: h.now}
	t := time.NewTicker(tick)
	defer t.Stop()
	var lastEval time.Time
	warned := false
	for {
		now := lh.now()
		lh.Metrics = h.Metrics
		evaluate := now.Sub(lastEval) >= time.Minute
		if evaluate {
			lastEval = now
		}
		lh.pass(ctx, now, evaluate, &warned)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pass is one round of Run at now: due scheduled actions of every target, and with
// evaluate its target tracking policies. *warned is set once the missing metrics source
// was logged.
func (h *Handler) pass(ctx context.Context, now time.Time, evaluate bool, warned *bool) {
	items, err := store.ListAll[*storev1.ScalableTargetRecord](ctx, h.kv, keys.AllScalableTargets())
	if err != nil && ctx.Err() == nil {
		h.log().Warn("autoscaling: list scalable targets", "err", err)
	}
	for _, it := range items {
		s, r, ok := targetOfKey(it.Key, it.Value)
		if !ok {
			continue
		}
		if err := h.fireScheduled(ctx, s, r, it.Value, now); err != nil && ctx.Err() == nil {
			h.log().Warn("autoscaling: scheduled actions", "scope", s, "resource", r.id, "err", err)
		}
		if !evaluate || !hasTargetTracking(it.Value) {
			continue
		}
		if h.Metrics == nil {
			if !*warned {
				h.log().Info("autoscaling: target tracking policies are stored but not evaluated: no metrics source is configured")
				*warned = true
			}
			continue
		}
		if err := h.trackTarget(ctx, s, r, now); err != nil && ctx.Err() == nil {
			h.log().Warn("autoscaling: target tracking", "scope", s, "resource", r.id, "err", err)
		}
	}
}

func hasTargetTracking(rec *storev1.ScalableTargetRecord) bool {
	for _, p := range rec.GetPolicies() {
		if p.GetPolicyType() == TargetTrackingScaling {
			return true
		}
	}
	return false
}

// targetOfKey recovers a target's scope and resource from its key and record.
func targetOfKey(key string, rec *storev1.ScalableTargetRecord) (keys.Scope, resource, bool) {
	rest := strings.TrimPrefix(key, keys.AllScalableTargets())
	p := strings.Split(rest, "/")
	if len(p) < 2 {
		return keys.Scope{}, resource{}, false
	}
	t := rec.GetTarget()
	r, err := checkResource(t.GetServiceNamespace(), t.GetResourceId(), t.GetScalableDimension())
	if err != nil {
		return keys.Scope{}, resource{}, false
	}
	return keys.Scope{Account: p[0], Region: p[1]}, r, true
}

// trackTarget evaluates a target's target tracking policies and scales the service when
// they decide so.
func (h *Handler) trackTarget(ctx context.Context, s keys.Scope, r resource, now time.Time) error {
	rec, _, err := h.getTarget(ctx, s, r)
	if err != nil {
		return err
	}
	cur, err := h.desiredCount(ctx, s, r)
	if err != nil {
		return err
	}
	d, ok, err := decide(ctx, h.Metrics, s, r, rec, cur, now)
	if err != nil || !ok {
		return err
	}
	cause := fmt.Sprintf("monitor alarm %s in state ALARM triggered policy %s", d.alarm, d.policy)
	return h.scaleTo(ctx, s, r, cur, d.desired, d.out, cause, now)
}

// scaleTo sets the service's desired count to n for a dynamic policy (out: a scale-out),
// recording the activity and the time for the cooldowns.
func (h *Handler) scaleTo(ctx context.Context, s keys.Scope, r resource, cur, n int32, out bool, cause string, now time.Time) error {
	err := h.setDesiredCount(ctx, s, r, n)
	act := activity(r, now, fmt.Sprintf("Setting desired count to %d.", n), cause, err, n)
	h.log().Info("autoscaling: scaling", "scope", s, "resource", r.id, "from", cur, "to", n, "cause", cause, "err", err)
	_, merr := h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
		addActivities(rec, now, act)
		if err == nil && out {
			rec.LastScaleOut = awsapi.Epoch(now)
		} else if err == nil {
			rec.LastScaleIn = awsapi.Epoch(now)
		}
		return nil
	})
	return merr
}

// fireScheduled runs rec's scheduled actions that are due at now: each sets the target's
// MinCapacity / MaxCapacity (raising or lowering the other bound when they would cross)
// and moves the service's desired count into them. With ScheduledScalingSuspended the
// due actions are skipped (they do not run late when resumed).
func (h *Handler) fireScheduled(ctx context.Context, s keys.Scope, r resource, rec *storev1.ScalableTargetRecord, now time.Time) error {
	var due []*aasv1.ScheduledAction
	for _, a := range rec.GetScheduledActions() {
		if n, ok := rec.GetScheduledNext()[a.GetScheduledActionName()]; ok && n <= awsapi.Epoch(now) {
			due = append(due, a)
		}
	}
	if len(due) == 0 {
		return nil
	}
	suspended := rec.GetTarget().GetSuspendedState().GetScheduledScalingSuspended()
	minC, maxC := rec.GetTarget().GetMinCapacity(), rec.GetTarget().GetMaxCapacity()
	var acts []*aasv1.ScalingActivity
	if !suspended {
		for _, a := range due {
			ta := a.GetScalableTargetAction()
			var parts []string
			if ta.MinCapacity != nil {
				minC = ta.GetMinCapacity()
				maxC = max(maxC, minC)
				parts = append(parts, fmt.Sprintf("min capacity to %d", minC))
			}
			if ta.MaxCapacity != nil {
				maxC = ta.GetMaxCapacity()
				minC = min(minC, maxC)
				parts = append(parts, fmt.Sprintf("max capacity to %d", maxC))
			}
			acts = append(acts, &aasv1.ScalingActivity{
				ActivityId:        proto.String(uuid.NewString()),
				ServiceNamespace:  proto.String(r.namespace),
				ResourceId:        proto.String(r.id),
				ScalableDimension: proto.String(r.dimension),
				Description:       proto.String("Setting " + strings.Join(parts, " and ")),
				Cause:             proto.String(fmt.Sprintf("scheduled action name %s was triggered", a.GetScheduledActionName())),
				StartTime:         proto.Float64(awsapi.Epoch(now)),
				EndTime:           proto.Float64(awsapi.Epoch(now)),
				StatusCode:        proto.String("Successful"),
				StatusMessage:     proto.String("Successfully set " + strings.Join(parts, " and ") + ". Change successfully fulfilled by ecs."),
			})
		}
		updated := proto.Clone(rec).(*storev1.ScalableTargetRecord)
		updated.Target.MinCapacity, updated.Target.MaxCapacity = proto.Int32(minC), proto.Int32(maxC)
		cur, err := h.desiredCount(ctx, s, r)
		if err != nil {
			acts = append(acts, &aasv1.ScalingActivity{
				ActivityId: proto.String(uuid.NewString()), ServiceNamespace: proto.String(r.namespace), ResourceId: proto.String(r.id),
				ScalableDimension: proto.String(r.dimension), Description: proto.String("Setting desired count."),
				Cause: proto.String("scheduled action was triggered"), StartTime: proto.Float64(awsapi.Epoch(now)), EndTime: proto.Float64(awsapi.Epoch(now)),
				StatusCode: proto.String("Failed"), StatusMessage: proto.String(errMessage(err)),
			})
		} else if _, act := h.clamp(ctx, s, r, updated, cur, now); act != nil {
			acts = append(acts, act)
		}
	}
	_, err := h.mutate(ctx, s, r, func(cur *storev1.ScalableTargetRecord) error {
		if !suspended {
			cur.Target.MinCapacity, cur.Target.MaxCapacity = proto.Int32(minC), proto.Int32(maxC)
		}
		addActivities(cur, now, acts...)
		for _, a := range due {
			name := a.GetScheduledActionName()
			var x *aasv1.ScheduledAction
			for _, y := range cur.GetScheduledActions() {
				if y.GetScheduledActionName() == name {
					x = y
				}
			}
			if x == nil {
				continue
			}
			sched, err := actionSchedule(x)
			if err != nil {
				delete(cur.ScheduledNext, name)
				continue
			}
			if n := nextFire(x, sched, now); n.IsZero() {
				delete(cur.ScheduledNext, name)
			} else {
				cur.ScheduledNext[name] = awsapi.Epoch(n)
			}
		}
		return nil
	})
	return err
}

// InvokeAlarmAction runs the scaling policy actionARN (a PolicyARN, as a CloudWatch
// alarm's action names it) for the alarm alarmName that entered newState. It is the hook
// CloudWatch alarms call: only "ALARM" acts (other states return nil). For a StepScaling
// policy, value is the breach — the metric's value minus the alarm's threshold — which
// the policy's step bounds are relative to (AWS's MetricIntervalLowerBound /
// UpperBound); the matching step's adjustment (ChangeInCapacity, ExactCapacity,
// PercentChangeInCapacity with MinAdjustmentMagnitude) gives the new desired count,
// clamped into [min, max], and is held back by the suspended state and by Cooldown after
// the previous dynamic scaling in the same direction (a scale-in also after a
// scale-out). Target tracking policies are evaluated by Run and return nil here. Errors:
// ObjectNotFoundException for a policy that does not exist, ValidationException for an
// ARN that is not a policy ARN of scope.
func (h *Handler) InvokeAlarmAction(ctx context.Context, scope keys.Scope, actionARN, alarmName, newState string, value float64) error {
	r, name, err := parsePolicyARN(scope, actionARN)
	if err != nil {
		return err
	}
	rec, _, err := h.getTarget(ctx, scope, r)
	if err != nil {
		return err
	}
	var p *aasv1.ScalingPolicy
	for _, x := range rec.GetPolicies() {
		if x.GetPolicyArn() == actionARN && x.GetPolicyName() == name {
			p = x
		}
	}
	if p == nil {
		return awserr.New("ObjectNotFoundException", "No scaling policy found for service namespace: %s, resource ID: %s, scalable dimension: %s, policy name: %s", r.namespace, r.id, r.dimension, name)
	}
	if newState != "ALARM" || p.GetPolicyType() != StepScaling {
		return nil
	}
	cur, err := h.desiredCount(ctx, scope, r)
	if err != nil {
		return err
	}
	c := p.GetStepScalingPolicyConfiguration()
	var step *aasv1.StepAdjustment
	for _, st := range c.GetStepAdjustments() {
		lo, hi := lower(st), upper(st)
		if value >= 0 && value >= lo && value < hi || value < 0 && value > lo && value <= hi {
			step = st
		}
	}
	if step == nil {
		return nil
	}
	n := stepCapacity(c, cur, step.GetScalingAdjustment())
	t := rec.GetTarget()
	n = min(max(n, t.GetMinCapacity()), t.GetMaxCapacity())
	if n == cur {
		return nil
	}
	out := n > cur
	st := t.GetSuspendedState()
	cool := time.Duration(c.GetCooldown()) * time.Second
	now := h.now()
	if out && (st.GetDynamicScalingOutSuspended() || now.Before(awsapi.FromEpoch(rec.GetLastScaleOut()).Add(cool))) {
		return nil
	}
	if !out && (st.GetDynamicScalingInSuspended() || now.Before(awsapi.FromEpoch(rec.GetLastScaleIn()).Add(cool)) ||
		now.Before(awsapi.FromEpoch(rec.GetLastScaleOut()).Add(cool))) {
		return nil
	}
	return h.scaleTo(ctx, scope, r, cur, n, out, fmt.Sprintf("monitor alarm %s in state ALARM triggered policy %s", alarmName, name), now)
}

// stepCapacity applies a step's adjustment to cur by the policy's AdjustmentType. A
// percentage is rounded as AWS rounds it for ECS: a change between -1 and 1 becomes ±1,
// a larger one is rounded toward zero; MinAdjustmentMagnitude is a floor on its size.
func stepCapacity(c *aasv1.StepScalingPolicyConfiguration, cur, adj int32) int32 {
	switch c.GetAdjustmentType() {
	case ExactCapacity:
		return adj
	case PercentChangeInCapacity:
		d := float64(cur) * float64(adj) / 100
		var delta int32
		switch {
		case d > 0 && d < 1:
			delta = 1
		case d < 0 && d > -1:
			delta = -1
		default:
			delta = int32(d) // toward zero
		}
		if m := c.GetMinAdjustmentMagnitude(); m > 0 && delta != 0 && abs(delta) < m {
			if delta > 0 {
				delta = m
			} else {
				delta = -m
			}
		}
		return max(cur+delta, 0)
	}
	return max(cur+adj, 0)
}

func abs(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// parsePolicyARN reads a scaling policy ARN of scope:
// arn:aws:autoscaling:{region}:{account}:scalingPolicy:{uuid}:resource/ecs/{resource id}:policyName/{name}.
func parsePolicyARN(scope keys.Scope, arn string) (resource, string, error) {
	bad := validation("%s is not a scaling policy ARN of this account and region.", arn)
	p := strings.SplitN(arn, ":", 6)
	if len(p) != 6 || p[0] != "arn" || p[2] != "autoscaling" || !scope.Owns(p[1], p[4], p[3]) {
		return resource{}, "", bad
	}
	rest, ok := strings.CutPrefix(p[5], "scalingPolicy:")
	if !ok {
		return resource{}, "", bad
	}
	_, rest, _ = strings.Cut(rest, ":")
	res, name, ok := strings.Cut(rest, ":policyName/")
	if !ok {
		return resource{}, "", bad
	}
	res, ok = strings.CutPrefix(res, "resource/"+NamespaceECS+"/")
	if !ok {
		return resource{}, "", bad
	}
	r, err := checkResource(NamespaceECS, res, DimensionDesiredCount)
	if err != nil {
		return resource{}, "", errors.Join(bad, err)
	}
	return r, name, nil
}
