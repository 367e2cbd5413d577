package elb

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// RuleByARN returns the listener rule arn names: a rule of a listener, or a listener's
// default rule (whose actions are the listener's default actions). Errors: RuleNotFound.
func (s *Service) RuleByARN(ctx context.Context, sc keys.Scope, arn string) (Rule, error) {
	return s.ruleByARN(ctx, sc, arn)
}

// ForwardGroups returns the target groups the forward action of a rule's actions sends
// to, with their weights (a plain TargetGroupArn forward counts as weight 1), and whether
// the rule has exactly one action and it is a forward.
func ForwardGroups(r Rule) (map[string]int32, bool) {
	acts := r.Record.GetActions()
	if len(acts) != 1 || acts[0].GetType() != "forward" {
		return nil, false
	}
	out := map[string]int32{}
	for _, g := range acts[0].GetTargetGroups() {
		w := g.GetWeight()
		if acts[0].GetPlainTargetGroupArn() && len(acts[0].GetTargetGroups()) == 1 && w == 0 {
			w = 1
		}
		out[g.GetTargetGroupArn()] = w
	}
	return out, true
}

// SetForwardWeights sets the weights of the target groups of a rule's forward action (a
// listener's default rule included), as ModifyRule / ModifyListener with a ForwardConfig
// would: the groups of weights are forwarded to with those weights (0-999) and the
// groups the action named but weights does not keep theirs. The action is written as a
// ForwardConfig. It writes nothing when the weights are already those and reports
// whether it changed the rule. ECS's blue/green, linear and canary deployments shift
// traffic through it. Errors: RuleNotFound, ValidationError (a weight out of range, or
// the rule has no single forward action).
func (s *Service) SetForwardWeights(ctx context.Context, sc keys.Scope, ruleArn string, weights map[string]int32) (bool, error) {
	for _, w := range weights {
		if w < 0 || w > 999 {
			return false, validation("Weight must be between 0 and 999")
		}
	}
	r, err := s.ruleByARN(ctx, sc, ruleArn)
	if err != nil {
		return false, err
	}
	if _, ok := ForwardGroups(r); !ok {
		return false, validation("Rule '%s' does not have a single forward action", ruleArn)
	}
	apply := func(acts []*storev1.ElbAction) ([]*storev1.ElbAction, bool) {
		if len(acts) != 1 || acts[0].GetType() != "forward" {
			return acts, false
		}
		a := proto.Clone(acts[0]).(*storev1.ElbAction)
		if len(a.GetTargetGroups()) == 1 && a.GetPlainTargetGroupArn() && a.TargetGroups[0].GetWeight() == 0 {
			a.TargetGroups[0].Weight = 1
		}
		for tg, w := range weights {
			i := slices.IndexFunc(a.GetTargetGroups(), func(g *storev1.ElbWeightedTargetGroup) bool { return g.GetTargetGroupArn() == tg })
			if i < 0 {
				a.TargetGroups = append(a.TargetGroups, &storev1.ElbWeightedTargetGroup{TargetGroupArn: tg, Weight: w})
				continue
			}
			a.TargetGroups[i].Weight = w
		}
		a.PlainTargetGroupArn = false
		if proto.Equal(a, acts[0]) {
			return acts, false
		}
		return []*storev1.ElbAction{a}, true
	}
	changed := false
	if r.IsDefault {
		p, _ := parseARN(sc, r.Record.GetListenerArn())
		_, _, err = store.Mutate(ctx, s.kv, keys.ElbListener(sc, p.segs[1], p.segs[3]), func(rec *storev1.ListenerRecord) error {
			rec.DefaultActions, changed = apply(rec.GetDefaultActions())
			if !changed {
				return errUnchanged
			}
			return nil
		})
	} else {
		p, _ := parseARN(sc, ruleArn)
		_, _, err = store.Mutate(ctx, s.kv, keys.ElbRule(sc, p.segs[1], p.segs[3], p.segs[4]), func(rec *storev1.RuleRecord) error {
			rec.Actions, changed = apply(rec.GetActions())
			if !changed {
				return errUnchanged
			}
			return nil
		})
	}
	if errors.Is(err, errUnchanged) {
		return false, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, errorf(CodeRuleNotFound, "One or more rules not found")
	}
	return changed, err
}

// errUnchanged aborts a Mutate that would write the record unchanged.
var errUnchanged = errors.New("elb: unchanged")
