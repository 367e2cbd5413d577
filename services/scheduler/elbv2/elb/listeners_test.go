package elb_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

func TestCreateListener(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	alb, nlb := e.lb(t, "web", ""), e.lb(t, "tcp", elb.TypeNetwork)
	httpTG, tcpTG, other := e.tg(t, "http-tg", "HTTP"), e.tg(t, "tcp-tg", "TCP"), e.tg(t, "other", "HTTP")
	albID := alb.GetLoadBalancerArn()[strings.LastIndex(alb.GetLoadBalancerArn(), "/")+1:]

	l, err := e.s.CreateListener(ctx, scope, elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), DefaultActions: forward(httpTG.GetTargetGroupArn()),
		Tags: []elb.Tag{{Key: "env", Value: "dev"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^` + arnPrefix + `listener/app/web/` + albID + `/[0-9a-f]{16}$`).MatchString(l.GetListenerArn()) {
		t.Fatalf("listener ARN = %s", l.GetListenerArn())
	}
	// Protocol defaults to the load balancer's (HTTP), port to 80.
	if l.GetProtocol() != "HTTP" || l.GetPort() != 80 || l.GetLoadBalancerArn() != alb.GetLoadBalancerArn() || len(l.GetTags()) != 1 {
		t.Fatalf("listener = %v", l)
	}
	if a := l.GetDefaultActions(); len(a) != 1 || a[0].GetType() != "forward" || !a[0].GetPlainTargetGroupArn() ||
		len(a[0].GetTargetGroups()) != 1 || a[0].GetTargetGroups()[0].GetWeight() != 1 || a[0].GetTargetGroups()[0].GetTargetGroupArn() != httpTG.GetTargetGroupArn() {
		t.Fatalf("default actions = %v", a)
	}
	nl, err := e.s.CreateListener(ctx, scope, elb.ListenerInput{LoadBalancerArn: nlb.GetLoadBalancerArn(), Port: port(5432), DefaultActions: forward(tcpTG.GetTargetGroupArn())})
	if err != nil || nl.GetProtocol() != "TCP" || !strings.Contains(nl.GetListenerArn(), ":listener/net/tcp/") {
		t.Fatalf("network listener = %v, %v", nl, err)
	}
	// The same listener again is the same listener.
	again, err := e.s.CreateListener(ctx, scope, elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Protocol: "HTTP", Port: port(80), DefaultActions: forward(httpTG.GetTargetGroupArn())})
	if err != nil || again.GetListenerArn() != l.GetListenerArn() {
		t.Fatalf("repeat = %v, %v", again.GetListenerArn(), err)
	}

	weighted := func(groups ...elb.WeightedInput) []elb.ActionInput {
		return []elb.ActionInput{{Type: "forward", ForwardGroups: groups}}
	}
	six := make([]elb.WeightedInput, 6)
	for i := range six {
		six[i] = elb.WeightedInput{TargetGroupArn: httpTG.GetTargetGroupArn()}
	}
	missingTG := arnPrefix + "targetgroup/nope/0123456789abcdef"
	albIn := func(p int32, acts []elb.ActionInput) elb.ListenerInput {
		return elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Port: port(p), DefaultActions: acts}
	}
	for _, tc := range []struct {
		name      string
		in        elb.ListenerInput
		code, msg string
	}{
		{"missing load balancer", elb.ListenerInput{LoadBalancerArn: arnPrefix + "loadbalancer/app/nope/0123456789abcdef", DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeLoadBalancerNotFound, "not found"},
		{"HTTPS", elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Protocol: "HTTPS", Port: port(443), DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeUnsupportedProtocol, "Protocol 'HTTPS' is not supported by Berth"},
		{"TLS", elb.ListenerInput{LoadBalancerArn: nlb.GetLoadBalancerArn(), Protocol: "TLS", Port: port(443), DefaultActions: forward(tcpTG.GetTargetGroupArn())}, elb.CodeUnsupportedProtocol, "TLS"},
		{"TCP on an ALB", elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Protocol: "TCP", Port: port(81), DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeIncompatibleProtocols, "Protocol 'TCP' is not compatible with a load balancer of type application"},
		{"HTTP on an NLB", elb.ListenerInput{LoadBalancerArn: nlb.GetLoadBalancerArn(), Protocol: "HTTP", Port: port(81), DefaultActions: forward(tcpTG.GetTargetGroupArn())}, elb.CodeIncompatibleProtocols, "network"},
		{"unknown protocol", elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Protocol: "SMTP", Port: port(25), DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeValidation, "Protocol 'SMTP' is not valid"},
		{"port 0", albIn(0, forward(httpTG.GetTargetGroupArn())), elb.CodeValidation, "Port '0' must be between 1 and 65535"},
		{"port 65536", albIn(65536, forward(httpTG.GetTargetGroupArn())), elb.CodeValidation, "Port '65536'"},
		{"certificates", elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Port: port(81), Certificates: []string{"arn:aws:acm:::certificate/x"}, DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeInvalidConfigurationRequest, "Certificates, SslPolicy and AlpnPolicy are not supported by Berth"},
		{"ssl policy", elb.ListenerInput{LoadBalancerArn: alb.GetLoadBalancerArn(), Port: port(81), SslPolicy: "ELBSecurityPolicy-2016-08", DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeInvalidConfigurationRequest, ""},
		{"no actions", albIn(81, nil), elb.CodeValidation, "At least one action must be specified"},
		{"two actions", albIn(81, append(forward(httpTG.GetTargetGroupArn()), forward(other.GetTargetGroupArn())...)), elb.CodeTooManyActions, ""},
		{"redirect", albIn(81, []elb.ActionInput{{Type: "redirect", Other: "redirect"}}), elb.CodeInvalidLoadBalancerAction, "Action type 'redirect' is not supported by Berth: forward is"},
		{"fixed response", albIn(81, []elb.ActionInput{{Type: "fixed-response"}}), elb.CodeInvalidLoadBalancerAction, "fixed-response"},
		{"forward with another config", albIn(81, []elb.ActionInput{{Type: "forward", TargetGroupArn: httpTG.GetTargetGroupArn(), Other: "redirect"}}), elb.CodeInvalidLoadBalancerAction, ""},
		{"forward nowhere", albIn(81, []elb.ActionInput{{Type: "forward"}}), elb.CodeValidation, "A target group ARN must be specified for a forward action"},
		{"empty forward config", albIn(81, []elb.ActionInput{{Type: "forward", ForwardGroups: []elb.WeightedInput{}}}), elb.CodeValidation, "A forward action must have between 1 and 5 target groups"},
		{"six groups", albIn(81, weighted(six...)), elb.CodeValidation, "between 1 and 5 target groups"},
		{"weight 1000", albIn(81, weighted(elb.WeightedInput{TargetGroupArn: httpTG.GetTargetGroupArn(), Weight: port(1000)})), elb.CodeValidation, "Target group weight '1000' must be between 0 and 999"},
		{"weight -1", albIn(81, weighted(elb.WeightedInput{TargetGroupArn: httpTG.GetTargetGroupArn(), Weight: port(-1)})), elb.CodeValidation, "weight '-1'"},
		{"stickiness", albIn(81, []elb.ActionInput{{Type: "forward", ForwardGroups: []elb.WeightedInput{{TargetGroupArn: httpTG.GetTargetGroupArn()}}, StickinessEnabled: true}}), elb.CodeInvalidConfigurationRequest, "Target group stickiness is not supported by Berth"},
		{"ARN and another config", albIn(81, []elb.ActionInput{{Type: "forward", TargetGroupArn: httpTG.GetTargetGroupArn(), ForwardGroups: []elb.WeightedInput{{TargetGroupArn: other.GetTargetGroupArn()}}}}), elb.CodeInvalidLoadBalancerAction, "You cannot specify both a target group ARN and a forward config with a different target group"},
		{"missing target group", albIn(81, forward(missingTG)), elb.CodeTargetGroupNotFound, missingTG},
		{"TCP group behind an ALB", albIn(81, forward(tcpTG.GetTargetGroupArn())), elb.CodeIncompatibleProtocols, "uses protocol TCP, which is incompatible with a load balancer of type application"},
		{"HTTP group behind an NLB", elb.ListenerInput{LoadBalancerArn: nlb.GetLoadBalancerArn(), Port: port(81), DefaultActions: forward(httpTG.GetTargetGroupArn())}, elb.CodeIncompatibleProtocols, "network"},
		{"port taken, other actions", albIn(80, forward(other.GetTargetGroupArn())), elb.CodeDuplicateListener, "A listener already exists on this port for this load balancer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.CreateListener(ctx, scope, tc.in)
			wantCode(t, err, tc.code, tc.msg)
		})
	}

	// A weighted forward to two groups of the same load balancer.
	wl, err := e.s.CreateListener(ctx, scope, albIn(8080, weighted(elb.WeightedInput{TargetGroupArn: httpTG.GetTargetGroupArn(), Weight: port(3)}, elb.WeightedInput{TargetGroupArn: other.GetTargetGroupArn()})))
	if err != nil {
		t.Fatal(err)
	}
	groups := wl.GetDefaultActions()[0].GetTargetGroups()
	if wl.GetDefaultActions()[0].GetPlainTargetGroupArn() || len(groups) != 2 || groups[0].GetWeight() != 3 || groups[1].GetWeight() != 1 {
		t.Fatalf("weighted action = %v", wl.GetDefaultActions())
	}
	// A target group serves one load balancer only.
	alb2 := e.lb(t, "web2", "")
	_, err = e.s.CreateListener(ctx, scope, elb.ListenerInput{LoadBalancerArn: alb2.GetLoadBalancerArn(), Port: port(80), DefaultActions: forward(other.GetTargetGroupArn())})
	wantCode(t, err, elb.CodeTargetGroupAssociationLimit, "The following target groups cannot be associated with more than one load balancer: "+other.GetTargetGroupArn())
}

func TestListenerLimit(t *testing.T) {
	e := newEnv(t)
	lb, tg := e.lb(t, "web", ""), e.tg(t, "tg", "HTTP")
	for p := int32(1); p <= 50; p++ {
		e.listener(t, lb, 1000+p, tg.GetTargetGroupArn())
	}
	_, err := e.s.CreateListener(t.Context(), scope, elb.ListenerInput{LoadBalancerArn: lb.GetLoadBalancerArn(), Port: port(2000), DefaultActions: forward(tg.GetTargetGroupArn())})
	wantCode(t, err, "TooManyListeners", "You've reached the limit on the number of listeners per load balancer (50)")
}

func TestDescribeModifyDeleteListener(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb, tg, tg2 := e.lb(t, "web", ""), e.tg(t, "tg", "HTTP"), e.tg(t, "tg2", "HTTP")
	l8080, l80 := e.listener(t, lb, 8080, tg.GetTargetGroupArn()), e.listener(t, lb, 80, tg.GetTargetGroupArn())

	ports := func(ls []*storev1.ListenerRecord) []int32 {
		var out []int32
		for _, l := range ls {
			out = append(out, l.GetPort())
		}
		return out
	}
	ls, err := e.s.DescribeListeners(ctx, scope, lb.GetLoadBalancerArn(), nil)
	if err != nil || !slices.Equal(ports(ls), []int32{80, 8080}) {
		t.Fatalf("listeners by load balancer = %v, %v; want ports 80, 8080", ports(ls), err)
	}
	ls, err = e.s.DescribeListeners(ctx, scope, "", []string{l8080.GetListenerArn(), l80.GetListenerArn()})
	if err != nil || !slices.Equal(ports(ls), []int32{8080, 80}) {
		t.Fatalf("listeners by ARN = %v, %v", ports(ls), err)
	}
	for _, tc := range []struct {
		lb        string
		arns      []string
		code, msg string
	}{
		{"", nil, elb.CodeValidation, "You must specify either listener ARNs or a load balancer ARN"},
		{lb.GetLoadBalancerArn(), []string{l80.GetListenerArn()}, elb.CodeValidation, "either"},
		{"", []string{l80.GetListenerArn() + "0"}, elb.CodeListenerNotFound, "Listener '" + l80.GetListenerArn() + "0' not found"},
		{"", []string{lb.GetLoadBalancerArn()}, elb.CodeListenerNotFound, ""},
		{arnPrefix + "loadbalancer/app/nope/0123456789abcdef", nil, elb.CodeLoadBalancerNotFound, ""},
	} {
		_, err := e.s.DescribeListeners(ctx, scope, tc.lb, tc.arns)
		wantCode(t, err, tc.code, tc.msg)
	}

	// Modify: port and actions; the port of another listener is taken.
	m, err := e.s.ModifyListener(ctx, scope, l8080.GetListenerArn(), elb.ListenerInput{Port: port(9090), DefaultActions: forward(tg2.GetTargetGroupArn())})
	if err != nil {
		t.Fatal(err)
	}
	if m.GetPort() != 9090 || m.GetProtocol() != "HTTP" || m.GetDefaultActions()[0].GetTargetGroups()[0].GetTargetGroupArn() != tg2.GetTargetGroupArn() {
		t.Fatalf("modified listener = %v", m)
	}
	// Its own port is no conflict.
	if _, err := e.s.ModifyListener(ctx, scope, l8080.GetListenerArn(), elb.ListenerInput{Port: port(9090)}); err != nil {
		t.Fatalf("modify to its own port: %v", err)
	}
	for _, tc := range []struct {
		in        elb.ListenerInput
		code, msg string
	}{
		{elb.ListenerInput{Port: port(80)}, elb.CodeDuplicateListener, "A listener already exists on this port"},
		{elb.ListenerInput{Port: port(0)}, elb.CodeValidation, "Port '0'"},
		{elb.ListenerInput{Protocol: "TCP"}, elb.CodeIncompatibleProtocols, ""},
		{elb.ListenerInput{Protocol: "HTTPS"}, elb.CodeUnsupportedProtocol, ""},
		{elb.ListenerInput{SslPolicy: "x"}, elb.CodeInvalidConfigurationRequest, ""},
		{elb.ListenerInput{DefaultActions: []elb.ActionInput{}}, elb.CodeValidation, "At least one action"},
	} {
		_, err := e.s.ModifyListener(ctx, scope, l8080.GetListenerArn(), tc.in)
		wantCode(t, err, tc.code, tc.msg)
	}
	if ls, _ := e.s.DescribeListeners(ctx, scope, "", []string{l8080.GetListenerArn()}); ls[0].GetPort() != 9090 || ls[0].GetProtocol() != "HTTP" {
		t.Fatalf("refused modifies changed the listener: %v", ls[0])
	}
	_, err = e.s.ModifyListener(ctx, scope, arnPrefix+"listener/app/web/0123456789abcdef/0123456789abcdef", elb.ListenerInput{Port: port(1)})
	wantCode(t, err, elb.CodeListenerNotFound, "")

	// Delete takes the listener's rules with it.
	r, err := e.s.CreateRule(ctx, scope, elb.RuleInput{ListenerArn: l80.GetListenerArn(), Priority: 5,
		Conditions: []elb.ConditionInput{{Field: "host-header", Values: []string{"a.example.com"}}}, Actions: forward(tg.GetTargetGroupArn())})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteListener(ctx, scope, l80.GetListenerArn()); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.DescribeRules(ctx, scope, "", []string{r.GetRuleArn()})
	wantCode(t, err, elb.CodeRuleNotFound, "")
	wantCode(t, e.s.DeleteListener(ctx, scope, l80.GetListenerArn()), elb.CodeListenerNotFound, "")
	ls, _ = e.s.DescribeListeners(ctx, scope, lb.GetLoadBalancerArn(), nil)
	if !slices.Equal(ports(ls), []int32{9090}) {
		t.Fatalf("listeners after delete = %v", ports(ls))
	}
	// tg is no longer forwarded to; tg2 still is.
	if inUse, _ := e.s.InUse(ctx, scope, tg.GetTargetGroupArn()); inUse {
		t.Error("tg in use after its listener and rule were deleted")
	}
	if inUse, _ := e.s.InUse(ctx, scope, tg2.GetTargetGroupArn()); !inUse {
		t.Error("tg2 not in use")
	}
}

func TestRules(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb, nlb := e.lb(t, "web", ""), e.lb(t, "tcp", elb.TypeNetwork)
	tg, api, tcpTG := e.tg(t, "tg", "HTTP"), e.tg(t, "api", "HTTP"), e.tg(t, "tcp-tg", "TCP")
	l := e.listener(t, lb, 80, tg.GetTargetGroupArn())
	nl := e.listener(t, nlb, 80, tcpTG.GetTargetGroupArn())

	rule := func(p int32, conds ...elb.ConditionInput) elb.RuleInput {
		return elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: p, Conditions: conds, Actions: forward(api.GetTargetGroupArn())}
	}
	path := func(values ...string) elb.ConditionInput {
		return elb.ConditionInput{Field: "path-pattern", Values: values}
	}
	r10, err := e.s.CreateRule(ctx, scope, rule(10, path("/api/*"), elb.ConditionInput{Field: "host-header", Values: []string{"example.com"}}))
	if err != nil {
		t.Fatal(err)
	}
	lID := l.GetListenerArn()[strings.LastIndex(l.GetListenerArn(), "/")+1:]
	if !regexp.MustCompile(`^`+arnPrefix+`listener-rule/app/web/[0-9a-f]{16}/`+lID+`/[0-9a-f]{16}$`).MatchString(r10.GetRuleArn()) ||
		r10.GetPriority() != 10 || len(r10.GetConditions()) != 2 || r10.GetListenerArn() != l.GetListenerArn() {
		t.Fatalf("rule = %v", r10)
	}
	r2, err := e.s.CreateRule(ctx, scope, rule(2, path("/a", "/b", "/c", "/d", "/e")))
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		in        elb.RuleInput
		code, msg string
	}{
		{"priority 0", rule(0, path("/x")), elb.CodeValidation, "Priority '0' must be between 1 and 50000"},
		{"priority 50001", rule(50001, path("/x")), elb.CodeValidation, "Priority '50001'"},
		{"no conditions", rule(3), elb.CodeValidation, "A rule must have at least one condition"},
		{"http-header", rule(3, elb.ConditionInput{Field: "http-header", Values: []string{"x"}}), elb.CodeInvalidConfigurationRequest, "Condition 'http-header' is not supported by Berth: path-pattern and host-header are"},
		{"regex values", rule(3, elb.ConditionInput{Field: "path-pattern", Other: "path-pattern regex values"}), elb.CodeInvalidConfigurationRequest, "is not supported by Berth"},
		{"no values", rule(3, path()), elb.CodeValidation, "A 'path-pattern' condition must have at least one value"},
		{"129 characters", rule(3, path("/"+strings.Repeat("p", 128))), elb.CodeValidation, "must be at most 128 characters"},
		{"priority in use", rule(10, path("/x")), elb.CodePriorityInUse, "Priority '10' is currently in use"},
		{"redirect", elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: 3, Conditions: []elb.ConditionInput{path("/x")}, Actions: []elb.ActionInput{{Type: "redirect"}}}, elb.CodeInvalidLoadBalancerAction, ""},
		{"network listener", elb.RuleInput{ListenerArn: nl.GetListenerArn(), Priority: 1, Conditions: []elb.ConditionInput{path("/x")}, Actions: forward(tcpTG.GetTargetGroupArn())}, elb.CodeInvalidConfigurationRequest, "Rules can only be created on listeners of application load balancers"},
		{"missing listener", elb.RuleInput{ListenerArn: l.GetListenerArn() + "f", Priority: 1, Conditions: []elb.ConditionInput{path("/x")}, Actions: forward(tg.GetTargetGroupArn())}, elb.CodeListenerNotFound, ""},
		{"reserved tag", elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: 3, Conditions: []elb.ConditionInput{path("/x")}, Actions: forward(tg.GetTargetGroupArn()), Tags: []elb.Tag{{Key: "aws:x"}}}, elb.CodeValidation, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.CreateRule(ctx, scope, tc.in)
			wantCode(t, err, tc.code, tc.msg)
		})
	}

	// At most 5 condition values a rule (AWS's quota). The code Berth answers,
	// TooManyConditionValues, is not one of the elbv2 model's, so only the refusal is
	// checked here.
	if _, err := e.s.CreateRule(ctx, scope, rule(3, path("/a", "/b", "/c"), elb.ConditionInput{Field: "host-header", Values: []string{"a", "b", "c"}})); err == nil ||
		!strings.Contains(err.Error(), "A rule can have at most 5 condition values") {
		t.Fatalf("six condition values: %v", err)
	}

	// DescribeRules: by priority, then the default rule, which forwards as the listener.
	rs, err := e.s.DescribeRules(ctx, scope, l.GetListenerArn(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].Record.GetRuleArn() != r2.GetRuleArn() || rs[1].Record.GetRuleArn() != r10.GetRuleArn() || rs[0].IsDefault || rs[1].IsDefault || !rs[2].IsDefault {
		t.Fatalf("rules = %v", rs)
	}
	def := rs[2].Record
	if !strings.HasPrefix(def.GetRuleArn(), strings.Replace(l.GetListenerArn(), ":listener/", ":listener-rule/", 1)+"/") ||
		def.GetActions()[0].GetTargetGroups()[0].GetTargetGroupArn() != tg.GetTargetGroupArn() {
		t.Fatalf("default rule = %v", def)
	}
	// The default rule's ARN is stable and names it.
	byARN, err := e.s.DescribeRules(ctx, scope, "", []string{def.GetRuleArn(), r10.GetRuleArn()})
	if err != nil || len(byARN) != 2 || !byARN[0].IsDefault || byARN[1].Record.GetPriority() != 10 {
		t.Fatalf("rules by ARN = %v, %v", byARN, err)
	}
	for _, tc := range []struct {
		listener  string
		arns      []string
		code, msg string
	}{
		{"", nil, elb.CodeValidation, "You must specify either listener ARN or rule ARNs"},
		{l.GetListenerArn(), []string{r10.GetRuleArn()}, elb.CodeValidation, ""},
		{"", []string{r10.GetRuleArn() + "0"}, elb.CodeRuleNotFound, "One or more rules not found"},
		{"", []string{tg.GetTargetGroupArn()}, elb.CodeRuleNotFound, ""},
	} {
		_, err := e.s.DescribeRules(ctx, scope, tc.listener, tc.arns)
		wantCode(t, err, tc.code, tc.msg)
	}

	// The default rule cannot be deleted; others can, once.
	wantCode(t, e.s.DeleteRule(ctx, scope, def.GetRuleArn()), elb.CodeOperationNotPermitted, "cannot be deleted")
	if err := e.s.DeleteRule(ctx, scope, r10.GetRuleArn()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.s.DeleteRule(ctx, scope, r10.GetRuleArn()), elb.CodeRuleNotFound, "")
	// Its priority is free again.
	if _, err := e.s.CreateRule(ctx, scope, rule(10, path("/again"))); err != nil {
		t.Fatal(err)
	}
}

func TestRuleLimit(t *testing.T) {
	e := newEnv(t)
	lb, tg := e.lb(t, "web", ""), e.tg(t, "tg", "HTTP")
	l := e.listener(t, lb, 80, tg.GetTargetGroupArn())
	for p := int32(1); p <= 100; p++ {
		if _, err := e.s.CreateRule(t.Context(), scope, elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: p,
			Conditions: []elb.ConditionInput{{Field: "path-pattern", Values: []string{"/x"}}}, Actions: forward(tg.GetTargetGroupArn())}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.s.CreateRule(t.Context(), scope, elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: 101,
		Conditions: []elb.ConditionInput{{Field: "path-pattern", Values: []string{"/x"}}}, Actions: forward(tg.GetTargetGroupArn())})
	wantCode(t, err, "TooManyRules", "You've reached the limit on the number of rules per listener (100)")
}
