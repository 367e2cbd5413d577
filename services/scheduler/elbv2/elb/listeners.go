package elb

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ActionInput is one Action of a listener or rule.
type ActionInput struct {
	Type           string
	Order          int32
	TargetGroupArn string
	// ForwardGroups is ForwardConfig.TargetGroups; nil when ForwardConfig was not given.
	ForwardGroups      []WeightedInput
	StickinessEnabled  bool
	StickinessDuration int32
	// Other names an action config Berth does not serve (RedirectConfig, ...), if given.
	Other string
}

// WeightedInput is one ForwardConfig TargetGroupTuple; Weight nil means 1.
type WeightedInput struct {
	TargetGroupArn string
	Weight         *int32
}

// ListenerInput is CreateListener's and ModifyListener's request.
type ListenerInput struct {
	LoadBalancerArn string
	Protocol        string
	Port            *int32
	DefaultActions  []ActionInput
	// Certificates, SslPolicy and AlpnPolicy are refused when given: Berth serves
	// neither HTTPS nor TLS listeners.
	Certificates []string
	SslPolicy    string
	AlpnPolicy   []string
	Tags         []Tag
}

// usage maps each target group ARN of the scope to the load balancers whose listeners or
// rules forward to it.
func (s *Service) usage(ctx context.Context, sc keys.Scope) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(lb string, acts []*storev1.ElbAction) {
		for _, a := range acts {
			for _, g := range a.GetTargetGroups() {
				if !slices.Contains(out[g.GetTargetGroupArn()], lb) {
					out[g.GetTargetGroupArn()] = append(out[g.GetTargetGroupArn()], lb)
				}
			}
		}
	}
	ls, err := store.ListAll[*storev1.ListenerRecord](ctx, s.kv, keys.ElbListener(sc, "", ""))
	if err != nil {
		return nil, err
	}
	lbOf := map[string]string{}
	for _, l := range ls {
		lbOf[l.Value.GetListenerArn()] = l.Value.GetLoadBalancerArn()
		add(l.Value.GetLoadBalancerArn(), l.Value.GetDefaultActions())
	}
	rs, err := store.ListAll[*storev1.RuleRecord](ctx, s.kv, keys.ElbRules(sc))
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		add(lbOf[r.Value.GetListenerArn()], r.Value.GetActions())
	}
	return out, nil
}

// InUse reports whether a listener or rule forwards to the target group arn.
func (s *Service) InUse(ctx context.Context, sc keys.Scope, arn string) (bool, error) {
	use, err := s.usage(ctx, sc)
	return len(use[arn]) > 0, err
}

// actions validates actions for a load balancer of type lbType and returns them as
// stored: forward only (Type forward with TargetGroupArn or ForwardConfig of 1-5 groups,
// weights 0-999), target groups that exist, whose protocol fits the load balancer, and
// that no other load balancer uses.
func (s *Service) actions(ctx context.Context, sc keys.Scope, lb *storev1.LoadBalancerRecord, in []ActionInput) ([]*storev1.ElbAction, error) {
	if len(in) == 0 {
		return nil, validation("At least one action must be specified")
	}
	if len(in) > 1 {
		return nil, errorf(CodeTooManyActions, "Berth serves one forward action per listener or rule")
	}
	use, err := s.usage(ctx, sc)
	if err != nil {
		return nil, err
	}
	var out []*storev1.ElbAction
	for _, a := range in {
		if a.Type != "forward" || a.Other != "" {
			return nil, errorf(CodeInvalidLoadBalancerAction, "Action type '%s' is not supported by Berth: forward is", cmpOr(a.Type, a.Other))
		}
		act := &storev1.ElbAction{Type: "forward", Order: a.Order}
		switch {
		case a.ForwardGroups == nil && a.TargetGroupArn == "":
			return nil, validation("A target group ARN must be specified for a forward action")
		case a.ForwardGroups == nil:
			act.PlainTargetGroupArn = true
			act.TargetGroups = []*storev1.ElbWeightedTargetGroup{{TargetGroupArn: a.TargetGroupArn, Weight: 1}}
		default:
			if len(a.ForwardGroups) == 0 || len(a.ForwardGroups) > 5 {
				return nil, validation("A forward action must have between 1 and 5 target groups")
			}
			if a.TargetGroupArn != "" && (len(a.ForwardGroups) != 1 || a.ForwardGroups[0].TargetGroupArn != a.TargetGroupArn) {
				return nil, errorf(CodeInvalidLoadBalancerAction, "You cannot specify both a target group ARN and a forward config with a different target group")
			}
			if a.StickinessEnabled {
				return nil, errorf(CodeInvalidConfigurationRequest, "Target group stickiness is not supported by Berth")
			}
			for _, g := range a.ForwardGroups {
				w := int32(1)
				if g.Weight != nil {
					w = *g.Weight
				}
				if w < 0 || w > 999 {
					return nil, validation("Target group weight '%d' must be between 0 and 999", w)
				}
				act.TargetGroups = append(act.TargetGroups, &storev1.ElbWeightedTargetGroup{TargetGroupArn: g.TargetGroupArn, Weight: w})
			}
		}
		for _, g := range act.GetTargetGroups() {
			tg, _, err := s.targetGroupByARN(ctx, sc, g.GetTargetGroupArn())
			if err != nil {
				return nil, err
			}
			if (lb.GetType() == TypeApplication) != (tg.GetProtocol() == "HTTP") {
				return nil, errorf(CodeIncompatibleProtocols, "The target group '%s' uses protocol %s, which is incompatible with a load balancer of type %s", tg.GetTargetGroupArn(), tg.GetProtocol(), lb.GetType())
			}
			for _, other := range use[g.GetTargetGroupArn()] {
				if other != lb.GetLoadBalancerArn() {
					return nil, errorf(CodeTargetGroupAssociationLimit, "The following target groups cannot be associated with more than one load balancer: %s", g.GetTargetGroupArn())
				}
			}
		}
		out = append(out, act)
	}
	return out, nil
}

func (s *Service) listenerByARN(ctx context.Context, sc keys.Scope, arn string) (*storev1.ListenerRecord, int64, string, error) {
	p, ok := parseARN(sc, arn)
	if ok && p.kind == "listener" {
		rec, rev, err := store.Get[*storev1.ListenerRecord](ctx, s.kv, keys.ElbListener(sc, p.segs[1], p.segs[3]))
		if err == nil && rec.GetListenerArn() == arn {
			return rec, rev, p.segs[1], nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, 0, "", err
		}
	}
	return nil, 0, "", errorf(CodeListenerNotFound, "Listener '%s' not found", arn)
}

func checkListenerProtocol(lb *storev1.LoadBalancerRecord, protocol string) error {
	switch {
	case protocol == "HTTP" && lb.GetType() == TypeApplication, protocol == "TCP" && lb.GetType() == TypeNetwork:
		return nil
	case protocol == "HTTPS" || protocol == "TLS" || protocol == "UDP" || protocol == "TCP_UDP":
		return errorf(CodeUnsupportedProtocol, "Protocol '%s' is not supported by Berth: HTTP (application) and TCP (network) are", protocol)
	case protocol == "HTTP" || protocol == "TCP":
		return errorf(CodeIncompatibleProtocols, "Protocol '%s' is not compatible with a load balancer of type %s", protocol, lb.GetType())
	}
	return validation("Protocol '%s' is not valid", protocol)
}

// CreateListener adds a listener to a load balancer (HTTP on application, TCP on
// network). A port already used by another listener of the load balancer is
// DuplicateListener; the same settings again return the existing listener.
func (s *Service) CreateListener(ctx context.Context, sc keys.Scope, in ListenerInput) (*storev1.ListenerRecord, error) {
	lb, _, err := s.loadBalancerByARN(ctx, sc, in.LoadBalancerArn)
	if err != nil {
		return nil, err
	}
	if len(in.Certificates) > 0 || in.SslPolicy != "" || len(in.AlpnPolicy) > 0 {
		return nil, errorf(CodeInvalidConfigurationRequest, "Certificates, SslPolicy and AlpnPolicy are not supported by Berth: it serves HTTP and TCP listeners")
	}
	protocol := in.Protocol
	if protocol == "" {
		protocol = map[string]string{TypeApplication: "HTTP", TypeNetwork: "TCP"}[lb.GetType()]
	}
	if err := checkListenerProtocol(lb, protocol); err != nil {
		return nil, err
	}
	port := int32(80)
	if in.Port != nil {
		port = *in.Port
	}
	if port < 1 || port > 65535 {
		return nil, validation("Port '%d' must be between 1 and 65535", port)
	}
	acts, err := s.actions(ctx, sc, lb, in.DefaultActions)
	if err != nil {
		return nil, err
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return nil, err
	}
	lbName, lbID := lb.GetLoadBalancerName(), lbIDOf(lb)
	existing, err := store.ListAll[*storev1.ListenerRecord](ctx, s.kv, keys.ElbListener(sc, lbName, ""))
	if err != nil {
		return nil, err
	}
	if len(existing) >= 50 {
		return nil, errorf("TooManyListeners", "You've reached the limit on the number of listeners per load balancer (50)")
	}
	for _, e := range existing {
		if e.Value.GetPort() == port {
			if e.Value.GetProtocol() == protocol && actionsEqual(e.Value.GetDefaultActions(), acts) {
				return e.Value, nil
			}
			return nil, errorf(CodeDuplicateListener, "A listener already exists on this port for this load balancer '%s'", lb.GetLoadBalancerArn())
		}
	}
	id := newID()
	rec := &storev1.ListenerRecord{
		ListenerArn:     arnPrefix(sc) + "listener/" + lbShort(lb.GetType()) + "/" + lbName + "/" + lbID + "/" + id,
		LoadBalancerArn: lb.GetLoadBalancerArn(),
		Protocol:        protocol,
		Port:            port,
		DefaultActions:  acts,
		Tags:            tags,
	}
	_, err = store.NewTxn(s.kv).
		IfModRevision(keys.ElbLoadBalancer(sc, lbName), mustRev(ctx, s, keys.ElbLoadBalancer(sc, lbName))).
		Create(keys.ElbListener(sc, lbName, id), rec).Commit(ctx)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return nil, errorf(CodeLoadBalancerNotFound, "Load balancer '%s' not found", in.LoadBalancerArn)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// mustRev returns key's ModRevision, or 1 when it cannot be read (the commit's compare
// then fails as not found or conflicting).
func mustRev(ctx context.Context, s *Service, key string) int64 {
	_, rev, err := store.Get[*storev1.LoadBalancerRecord](ctx, s.kv, key)
	if err != nil {
		return 1
	}
	return rev
}

func lbIDOf(lb *storev1.LoadBalancerRecord) string {
	arn := lb.GetLoadBalancerArn()
	return arn[strings.LastIndex(arn, "/")+1:]
}

func actionsEqual(a, b []*storev1.ElbAction) bool {
	return slices.EqualFunc(a, b, func(x, y *storev1.ElbAction) bool {
		return slices.EqualFunc(x.GetTargetGroups(), y.GetTargetGroups(), func(p, q *storev1.ElbWeightedTargetGroup) bool {
			return p.GetTargetGroupArn() == q.GetTargetGroupArn() && p.GetWeight() == q.GetWeight()
		})
	})
}

// DescribeListeners returns the listeners of a load balancer or the named ones, in port
// order.
func (s *Service) DescribeListeners(ctx context.Context, sc keys.Scope, lbArn string, arns []string) ([]*storev1.ListenerRecord, error) {
	if (lbArn == "") == (len(arns) == 0) {
		return nil, validation("You must specify either listener ARNs or a load balancer ARN")
	}
	var out []*storev1.ListenerRecord
	if lbArn != "" {
		lb, _, err := s.loadBalancerByARN(ctx, sc, lbArn)
		if err != nil {
			return nil, err
		}
		items, err := store.ListAll[*storev1.ListenerRecord](ctx, s.kv, keys.ElbListener(sc, lb.GetLoadBalancerName(), ""))
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			out = append(out, it.Value)
		}
		slices.SortFunc(out, func(a, b *storev1.ListenerRecord) int { return cmp.Compare(a.GetPort(), b.GetPort()) })
		return out, nil
	}
	for _, a := range arns {
		rec, _, _, err := s.listenerByARN(ctx, sc, a)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// ModifyListener changes a listener's port, protocol or default actions.
func (s *Service) ModifyListener(ctx context.Context, sc keys.Scope, arn string, in ListenerInput) (*storev1.ListenerRecord, error) {
	cur, _, lbName, err := s.listenerByARN(ctx, sc, arn)
	if err != nil {
		return nil, err
	}
	lb, _, err := s.loadBalancerByARN(ctx, sc, cur.GetLoadBalancerArn())
	if err != nil {
		return nil, err
	}
	if len(in.Certificates) > 0 || in.SslPolicy != "" || len(in.AlpnPolicy) > 0 {
		return nil, errorf(CodeInvalidConfigurationRequest, "Certificates, SslPolicy and AlpnPolicy are not supported by Berth: it serves HTTP and TCP listeners")
	}
	if in.Protocol != "" {
		if err := checkListenerProtocol(lb, in.Protocol); err != nil {
			return nil, err
		}
	}
	var acts []*storev1.ElbAction
	if in.DefaultActions != nil {
		if acts, err = s.actions(ctx, sc, lb, in.DefaultActions); err != nil {
			return nil, err
		}
	}
	if in.Port != nil {
		if *in.Port < 1 || *in.Port > 65535 {
			return nil, validation("Port '%d' must be between 1 and 65535", *in.Port)
		}
		others, err := store.ListAll[*storev1.ListenerRecord](ctx, s.kv, keys.ElbListener(sc, lbName, ""))
		if err != nil {
			return nil, err
		}
		for _, o := range others {
			if o.Value.GetListenerArn() != arn && o.Value.GetPort() == *in.Port {
				return nil, errorf(CodeDuplicateListener, "A listener already exists on this port for this load balancer '%s'", lb.GetLoadBalancerArn())
			}
		}
	}
	p, _ := parseARN(sc, arn)
	rec, _, err := store.Mutate(ctx, s.kv, keys.ElbListener(sc, lbName, p.segs[3]), func(rec *storev1.ListenerRecord) error {
		if in.Protocol != "" {
			rec.Protocol = in.Protocol
		}
		if in.Port != nil {
			rec.Port = *in.Port
		}
		if acts != nil {
			rec.DefaultActions = acts
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(CodeListenerNotFound, "Listener '%s' not found", arn)
	}
	return rec, err
}

// DeleteListener deletes a listener and its rules; the lb role closes it after the
// requests in flight finish.
func (s *Service) DeleteListener(ctx context.Context, sc keys.Scope, arn string) error {
	_, rev, lbName, err := s.listenerByARN(ctx, sc, arn)
	if err != nil {
		return err
	}
	p, _ := parseARN(sc, arn)
	key := keys.ElbListener(sc, lbName, p.segs[3])
	err = s.deleteWith(ctx, key, rev, keys.ElbRule(sc, lbName, p.segs[3], ""))
	if errors.Is(err, store.ErrConflict) {
		return s.DeleteListener(ctx, sc, arn) // changed meanwhile (a rule added): again
	}
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeListenerNotFound, "Listener '%s' not found", arn)
	}
	return err
}

// ConditionInput is one rule condition: Field with Values (or the field's config's
// Values); Other names a condition config Berth does not serve.
type ConditionInput struct {
	Field  string
	Values []string
	Other  string
}

// RuleInput is CreateRule's request.
type RuleInput struct {
	ListenerArn string
	Priority    int32
	Conditions  []ConditionInput
	Actions     []ActionInput
	Tags        []Tag
}

// Rule is a rule as DescribeRules answers: a stored rule, or a listener's default rule.
type Rule struct {
	// Record is the rule; for the default rule, its actions are the listener's.
	Record *storev1.RuleRecord
	// IsDefault marks the listener's default rule (priority "default").
	IsDefault bool
}

// CreateRule adds a path-pattern / host-header rule to an HTTP listener.
func (s *Service) CreateRule(ctx context.Context, sc keys.Scope, in RuleInput) (*storev1.RuleRecord, error) {
	l, lrev, lbName, err := s.listenerByARN(ctx, sc, in.ListenerArn)
	if err != nil {
		return nil, err
	}
	lb, _, err := s.loadBalancerByARN(ctx, sc, l.GetLoadBalancerArn())
	if err != nil {
		return nil, err
	}
	if lb.GetType() != TypeApplication {
		return nil, errorf(CodeInvalidConfigurationRequest, "Rules can only be created on listeners of application load balancers")
	}
	if in.Priority < 1 || in.Priority > 50000 {
		return nil, validation("Priority '%d' must be between 1 and 50000", in.Priority)
	}
	if len(in.Conditions) == 0 {
		return nil, validation("A rule must have at least one condition")
	}
	var conds []*storev1.ElbRuleCondition
	total := 0
	for _, c := range in.Conditions {
		if c.Other != "" || (c.Field != "path-pattern" && c.Field != "host-header") {
			return nil, errorf(CodeInvalidConfigurationRequest, "Condition '%s' is not supported by Berth: path-pattern and host-header are", cmpOr(c.Field, c.Other))
		}
		if len(c.Values) == 0 {
			return nil, validation("A '%s' condition must have at least one value", c.Field)
		}
		for _, v := range c.Values {
			if len(v) > 128 {
				return nil, validation("Condition value '%s' must be at most 128 characters", v)
			}
		}
		total += len(c.Values)
		conds = append(conds, &storev1.ElbRuleCondition{Field: c.Field, Values: c.Values})
	}
	if total > 5 {
		return nil, errorf("TooManyConditionValues", "A rule can have at most 5 condition values")
	}
	acts, err := s.actions(ctx, sc, lb, in.Actions)
	if err != nil {
		return nil, err
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return nil, err
	}
	p, _ := parseARN(sc, in.ListenerArn)
	lid := p.segs[3]
	existing, err := store.ListAll[*storev1.RuleRecord](ctx, s.kv, keys.ElbRule(sc, lbName, lid, ""))
	if err != nil {
		return nil, err
	}
	for _, e := range existing {
		if e.Value.GetPriority() == in.Priority {
			return nil, errorf(CodePriorityInUse, "Priority '%d' is currently in use", in.Priority)
		}
	}
	if len(existing) >= 100 {
		return nil, errorf("TooManyRules", "You've reached the limit on the number of rules per listener (100)")
	}
	id := newID()
	rec := &storev1.RuleRecord{
		RuleArn:     arnPrefix(sc) + "listener-rule/" + lbShort(lb.GetType()) + "/" + lbName + "/" + lbIDOf(lb) + "/" + lid + "/" + id,
		ListenerArn: in.ListenerArn,
		Priority:    in.Priority,
		Conditions:  conds,
		Actions:     acts,
		Tags:        tags,
	}
	// The listener is rewritten (unchanged) in the same txn, so two concurrent CreateRule
	// calls cannot both pass the priority check: the second one conflicts and retries.
	_, err = store.NewTxn(s.kv).Update(keys.ElbListener(sc, lbName, lid), lrev, l).Create(keys.ElbRule(sc, lbName, lid, id), rec).Commit(ctx)
	switch {
	case errors.Is(err, store.ErrConflict):
		return s.CreateRule(ctx, sc, in)
	case errors.Is(err, store.ErrNotFound):
		return nil, errorf(CodeListenerNotFound, "Listener '%s' not found", in.ListenerArn)
	case err != nil:
		return nil, err
	}
	return rec, nil
}

// defaultRuleArn is the listener's default rule's ARN: stable, derived from the listener.
func defaultRuleArn(l *storev1.ListenerRecord) string {
	sum := sha256.Sum256([]byte(l.GetListenerArn()))
	return strings.Replace(l.GetListenerArn(), ":listener/", ":listener-rule/", 1) + "/" + hex.EncodeToString(sum[:8])
}

// DescribeRules returns a listener's rules by priority with its default rule last, or
// the named rules.
func (s *Service) DescribeRules(ctx context.Context, sc keys.Scope, listenerArn string, arns []string) ([]Rule, error) {
	if (listenerArn == "") == (len(arns) == 0) {
		return nil, validation("You must specify either listener ARN or rule ARNs")
	}
	if listenerArn != "" {
		l, _, lbName, err := s.listenerByARN(ctx, sc, listenerArn)
		if err != nil {
			return nil, err
		}
		p, _ := parseARN(sc, listenerArn)
		items, err := store.ListAll[*storev1.RuleRecord](ctx, s.kv, keys.ElbRule(sc, lbName, p.segs[3], ""))
		if err != nil {
			return nil, err
		}
		var out []Rule
		for _, it := range items {
			out = append(out, Rule{Record: it.Value})
		}
		slices.SortFunc(out, func(a, b Rule) int { return cmp.Compare(a.Record.GetPriority(), b.Record.GetPriority()) })
		return append(out, Rule{IsDefault: true, Record: &storev1.RuleRecord{RuleArn: defaultRuleArn(l), ListenerArn: listenerArn, Actions: l.GetDefaultActions()}}), nil
	}
	var out []Rule
	for _, a := range arns {
		r, err := s.ruleByARN(ctx, sc, a)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Service) ruleByARN(ctx context.Context, sc keys.Scope, arn string) (Rule, error) {
	p, ok := parseARN(sc, arn)
	if ok && p.kind == "listener-rule" {
		rec, _, err := store.Get[*storev1.RuleRecord](ctx, s.kv, keys.ElbRule(sc, p.segs[1], p.segs[3], p.segs[4]))
		if err == nil && rec.GetRuleArn() == arn {
			return Rule{Record: rec}, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Rule{}, err
		}
		// The default rule?
		lArn := strings.Replace(arn[:strings.LastIndex(arn, "/")], ":listener-rule/", ":listener/", 1)
		if l, _, _, err := s.listenerByARN(ctx, sc, lArn); err == nil && defaultRuleArn(l) == arn {
			return Rule{IsDefault: true, Record: &storev1.RuleRecord{RuleArn: arn, ListenerArn: lArn, Actions: l.GetDefaultActions()}}, nil
		}
	}
	return Rule{}, errorf(CodeRuleNotFound, "One or more rules not found")
}

// DeleteRule deletes a rule; the default rule cannot be deleted (OperationNotPermitted).
func (s *Service) DeleteRule(ctx context.Context, sc keys.Scope, arn string) error {
	r, err := s.ruleByARN(ctx, sc, arn)
	if err != nil {
		return err
	}
	if r.IsDefault {
		return errorf(CodeOperationNotPermitted, "Default rule '%s' cannot be deleted", arn)
	}
	p, _ := parseARN(sc, arn)
	_, err = store.Delete(ctx, s.kv, keys.ElbRule(sc, p.segs[1], p.segs[3], p.segs[4]), 0)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeRuleNotFound, "One or more rules not found")
	}
	return err
}
