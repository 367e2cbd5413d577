package service

import (
	"context"
	"math"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// hasAdvanced reports whether any load balancer of lbs has an advancedConfiguration
// (blue/green target groups and listener rules).
func hasAdvanced(lbs []*ecsv1.LoadBalancer) bool {
	return slices.ContainsFunc(lbs, func(l *ecsv1.LoadBalancer) bool { return l.AdvancedConfiguration != nil })
}

// sideLB returns l as the tasks of a deployment on the given side register with it: the
// alternate target group in place of targetGroupArn when alternate and l has one.
func sideLB(l *ecsv1.LoadBalancer, alternate bool) *ecsv1.LoadBalancer {
	if !alternate || l.GetAdvancedConfiguration().GetAlternateTargetGroupArn() == "" {
		return l
	}
	c := proto.Clone(l).(*ecsv1.LoadBalancer)
	c.TargetGroupArn = proto.String(l.GetAdvancedConfiguration().GetAlternateTargetGroupArn())
	return c
}

// lbTargetGroups returns the target groups of lbs, alternate ones included.
func lbTargetGroups(lbs []*ecsv1.LoadBalancer) []string {
	var out []string
	for _, l := range lbs {
		out = append(out, l.GetTargetGroupArn())
		if a := l.GetAdvancedConfiguration().GetAlternateTargetGroupArn(); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// findRecord returns the DeploymentRecord of id in rec, or nil (never adds one).
func findRecord(rec *storev1.ServiceRecord, id string) *storev1.DeploymentRecord {
	for _, dr := range rec.GetDeployments() {
		if dr.GetId() == id {
			return dr
		}
	}
	return nil
}

// recordLBs returns the load balancer entries of a service record: serviceLBs, except
// that a service whose loadBalancers have an advancedConfiguration gets one entry per
// deployment that is not INACTIVE, on that deployment's side (DeploymentRecord.alternate),
// so a traffic shift's new tasks register with the other target group than the old ones.
func recordLBs(rec *storev1.ServiceRecord) []lbEntry {
	s := rec.GetService()
	if !hasAdvanced(s.GetLoadBalancers()) {
		return serviceLBs(s)
	}
	var out []lbEntry
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == DeploymentInactive {
			continue
		}
		alt := findRecord(rec, d.GetId()).GetAlternate()
		for _, l := range s.GetLoadBalancers() {
			out = append(out, lbEntry{v: sideLB(l, alt), dep: d.GetId()})
		}
	}
	return out
}

// ruleWeights returns the forward weights each listener rule of the service's
// advancedConfigurations should have: during a traffic shift in progress the PRIMARY
// deployment's target group gets its requested production (test) share and the source's
// the rest; otherwise the PRIMARY deployment's target group gets all of it.
func ruleWeights(rec *storev1.ServiceRecord) map[string]map[string]int32 {
	s := rec.GetService()
	prim := primary(s)
	if prim == nil || !hasAdvanced(s.GetLoadBalancers()) {
		return nil
	}
	pdr := findRecord(rec, prim.GetId())
	prod, test := 100.0, 100.0
	if shiftInProgress(pdr) {
		prod, test = pdr.GetShift().GetProductionWeight(), pdr.GetShift().GetTestWeight()
	}
	out := map[string]map[string]int32{}
	for _, l := range s.GetLoadBalancers() {
		ac := l.GetAdvancedConfiguration()
		if ac == nil {
			continue
		}
		green, blue := sideLB(l, pdr.GetAlternate()).GetTargetGroupArn(), sideLB(l, !pdr.GetAlternate()).GetTargetGroupArn()
		set := func(rule string, pct float64) {
			if rule == "" {
				return
			}
			bw, gw := RuleWeights(math.Max(0, math.Min(100, pct)))
			out[rule] = map[string]int32{blue: bw, green: gw}
		}
		set(ac.GetProductionListenerRule(), prod)
		set(ac.GetTestListenerRule(), test)
	}
	return out
}

// syncWeights sets the listener rules of a service's advancedConfigurations to
// ruleWeights(rec). The reconciler calls it with the record a pass computed before it
// stops any task, so traffic leaves a revision before its targets drain.
func (r *Reconciler) syncWeights(ctx context.Context, account keys.Scope, rec *storev1.ServiceRecord) {
	svc := elb.New(r.cfg.Client)
	for rule, w := range ruleWeights(rec) {
		changed, err := svc.SetForwardWeights(ctx, account, rule, w)
		if err != nil {
			r.log.Warn("service: listener rule weights", "service", rec.GetService().GetServiceName(), "rule", rule, "err", err)
			continue
		}
		if changed {
			r.log.InfoContext(ctx, "service: listener rule weights", "service", rec.GetService().GetServiceName(), "rule", rule, "weights", w)
		}
	}
}

// validateAdvanced checks the advancedConfiguration of a service's load balancers as ECS
// does for the deployment strategy dc names: refused with ROLLING (Berth uses the
// alternate target group only to shift traffic); with BLUE_GREEN, LINEAR or CANARY each
// load balancer needs one, naming an alternate target group that exists, is not the
// primary one and has the same target type, and a productionListenerRule (and optional
// testListenerRule) that exists and forwards to both target groups and nothing else.
// roleArn is recorded (Berth has no IAM). AWS reference: AdvancedConfiguration.
func validateAdvanced(ctx context.Context, kv clientv3.KV, account keys.Scope, lbs []*ecsv1.LoadBalancer, dc *ecsv1.DeploymentConfiguration) error {
	svc := elb.New(kv)
	for _, l := range lbs {
		ac := l.GetAdvancedConfiguration()
		if !shifting(dc) {
			if ac != nil {
				return awserr.InvalidParameterf("advancedConfiguration is only supported for the BLUE_GREEN, LINEAR and CANARY deployment strategies (target group %s).", l.GetTargetGroupArn())
			}
			continue
		}
		if ac == nil {
			return awserr.InvalidParameterf("advancedConfiguration is required for target group %s: the %s deployment strategy shifts traffic between targetGroupArn and an alternateTargetGroupArn through listener rules.", l.GetTargetGroupArn(), dc.GetStrategy())
		}
		alt := ac.GetAlternateTargetGroupArn()
		if alt == "" || ac.GetProductionListenerRule() == "" {
			return awserr.InvalidParameterf("advancedConfiguration.alternateTargetGroupArn and advancedConfiguration.productionListenerRule are required.")
		}
		if alt == l.GetTargetGroupArn() {
			return awserr.InvalidParameterf("advancedConfiguration.alternateTargetGroupArn must differ from targetGroupArn %s.", alt)
		}
		primTG, err := svc.TargetGroup(ctx, account, l.GetTargetGroupArn())
		if err != nil {
			return err // validateLoadBalancers already checked it exists
		}
		altTG, err := svc.TargetGroup(ctx, account, alt)
		if elb.CodeOf(err) == elb.CodeTargetGroupNotFound {
			return awserr.InvalidParameterf("Unable to validate the specified alternateTargetGroupArn %s: the target group does not exist.", alt)
		}
		if err != nil {
			return err
		}
		if altTG.GetTargetType() != primTG.GetTargetType() {
			return awserr.InvalidParameterf("The alternate target group %s has target type %s, but target group %s has %s: both must have the same target type.", alt, altTG.GetTargetType(), l.GetTargetGroupArn(), primTG.GetTargetType())
		}
		for _, rule := range []struct{ name, arn string }{{"productionListenerRule", ac.GetProductionListenerRule()}, {"testListenerRule", ac.GetTestListenerRule()}} {
			if rule.arn == "" {
				continue
			}
			r, err := svc.RuleByARN(ctx, account, rule.arn)
			if elb.CodeOf(err) == elb.CodeRuleNotFound {
				return awserr.InvalidParameterf("Unable to validate the specified %s %s: the listener rule does not exist.", rule.name, rule.arn)
			}
			if err != nil {
				return err
			}
			groups, ok := elb.ForwardGroups(r)
			_, hasPrim := groups[l.GetTargetGroupArn()]
			_, hasAlt := groups[alt]
			if !ok || !hasPrim || !hasAlt || len(groups) != 2 {
				return awserr.InvalidParameterf("The %s %s must have one forward action to exactly the target groups %s and %s.", rule.name, rule.arn, l.GetTargetGroupArn(), alt)
			}
		}
		if ac.GetTestListenerRule() == ac.GetProductionListenerRule() {
			return awserr.InvalidParameterf("advancedConfiguration.testListenerRule must differ from productionListenerRule.")
		}
	}
	return nil
}

// validateShiftConfig checks the members of a deployment configuration that belong to
// the traffic-shifting strategies, with AWS's ranges: strategy is one of ROLLING,
// BLUE_GREEN, LINEAR, CANARY (REPLICA services only); linearConfiguration only with LINEAR
// (stepPercent 3.0–100.0, stepBakeTimeInMinutes 0–1440), canaryConfiguration only with
// CANARY (canaryPercent 0.1–100.0, canaryBakeTimeInMinutes 0–1440); bakeTimeInMinutes
// 0–1440; lifecycleHooks only with a traffic-shifting strategy, each of targetType PAUSE
// (Berth has no AWS Lambda: AWS_LAMBDA hooks, a hookTargetArn and hookDetails, their
// payload, are refused) with 1–8
// known lifecycleStages and a timeoutConfiguration of 1–20160 minutes.
func validateShiftConfig(scheduling string, dc *ecsv1.DeploymentConfiguration) error {
	strategy := dc.GetStrategy()
	switch strategy {
	case "", DeployRolling, DeployBlueGreen, DeployLinear, DeployCanary:
	default:
		return awserr.InvalidParameterf("Invalid deploymentConfiguration.strategy %q: valid values are ROLLING, BLUE_GREEN, LINEAR and CANARY.", strategy)
	}
	if shifting(dc) && scheduling == StrategyDaemon {
		return awserr.InvalidParameterf("The %s deployment strategy is not supported for services with the DAEMON scheduling strategy.", strategy)
	}
	if lc := dc.GetLinearConfiguration(); lc != nil {
		if strategy != DeployLinear {
			return awserr.InvalidParameterf("linearConfiguration is only valid with the LINEAR deployment strategy.")
		}
		if lc.GetStepPercent() != 0 && (lc.GetStepPercent() < minLinearStepPct || lc.GetStepPercent() > 100 || !tenths(lc.GetStepPercent())) {
			return awserr.InvalidParameterf("linearConfiguration.stepPercent must be a multiple of 0.1 from 3.0 to 100.0.")
		}
		if lc.GetStepBakeTimeInMinutes() < 0 || lc.GetStepBakeTimeInMinutes() > maxBakeMinutes {
			return awserr.InvalidParameterf("linearConfiguration.stepBakeTimeInMinutes must be between 0 and 1440.")
		}
	}
	if cc := dc.GetCanaryConfiguration(); cc != nil {
		if strategy != DeployCanary {
			return awserr.InvalidParameterf("canaryConfiguration is only valid with the CANARY deployment strategy.")
		}
		if cc.GetCanaryPercent() != 0 && (cc.GetCanaryPercent() < minCanaryPercentage || cc.GetCanaryPercent() > 100 || !tenths(cc.GetCanaryPercent())) {
			return awserr.InvalidParameterf("canaryConfiguration.canaryPercent must be a multiple of 0.1 from 0.1 to 100.0.")
		}
		if cc.GetCanaryBakeTimeInMinutes() < 0 || cc.GetCanaryBakeTimeInMinutes() > maxBakeMinutes {
			return awserr.InvalidParameterf("canaryConfiguration.canaryBakeTimeInMinutes must be between 0 and 1440.")
		}
	}
	if dc.BakeTimeInMinutes != nil && (dc.GetBakeTimeInMinutes() < 0 || dc.GetBakeTimeInMinutes() > maxBakeMinutes) {
		return awserr.InvalidParameterf("bakeTimeInMinutes must be between 0 and 1440.")
	}
	if len(dc.GetLifecycleHooks()) > 0 && !shifting(dc) {
		return awserr.InvalidParameterf("lifecycleHooks are only supported for the BLUE_GREEN, LINEAR and CANARY deployment strategies.")
	}
	for i, h := range dc.GetLifecycleHooks() {
		if h.GetTargetType() == hookLambda || h.GetHookTargetArn() != "" || h.GetTargetType() == "" {
			return awserr.New("UnsupportedFeatureException", "lifecycleHooks[%d]: Berth has no AWS Lambda, so hooks of targetType AWS_LAMBDA (a hookTargetArn) are not supported. Use targetType PAUSE, which waits at its stages for ContinueServiceDeployment.", i)
		}
		if h.HookDetails != nil {
			return awserr.InvalidParameterf("lifecycleHooks[%d].hookDetails is the payload of an AWS_LAMBDA hook; Berth's PAUSE hooks take none, leave it out.", i)
		}
		if h.GetTargetType() != hookPause {
			return awserr.InvalidParameterf("lifecycleHooks[%d].targetType must be AWS_LAMBDA or PAUSE.", i)
		}
		if len(h.GetLifecycleStages()) == 0 {
			return awserr.InvalidParameterf("lifecycleHooks[%d].lifecycleStages must name at least one stage.", i)
		}
		for _, st := range h.GetLifecycleStages() {
			if !slices.Contains(hookStages, st) {
				return awserr.InvalidParameterf("lifecycleHooks[%d].lifecycleStages: invalid stage %q.", i, st)
			}
		}
		if tc := h.GetTimeoutConfiguration(); tc != nil {
			if tc.TimeoutInMinutes != nil && (tc.GetTimeoutInMinutes() < 1 || tc.GetTimeoutInMinutes() > maxHookTimeoutMins) {
				return awserr.InvalidParameterf("lifecycleHooks[%d].timeoutConfiguration.timeoutInMinutes must be between 1 and 20160.", i)
			}
			if a := tc.GetAction(); a != "" && a != actionContinue && a != actionRollback {
				return awserr.InvalidParameterf("lifecycleHooks[%d].timeoutConfiguration.action must be ROLLBACK or CONTINUE.", i)
			}
		}
	}
	return nil
}

// tenths reports whether v is a multiple of 0.1.
func tenths(v float64) bool { return math.Abs(v*10-math.Round(v*10)) < 1e-6 }
