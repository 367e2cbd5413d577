package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestELBv2WithSDK drives the ELBv2 API (query protocol, XML) through the real gateway
// and scheduler with the AWS SDK for Go v2: load balancer, target group, listener and
// rule life cycles, target registration and health, attributes, tags and AWS's error
// codes.
func TestELBv2WithSDK(t *testing.T) {
	const acct = "333333333333"
	stack := startAPIStack(t, acct)
	c := elbv2.NewFromConfig(stack.awsConfig(acct, "us-east-1"))
	ctx := t.Context()

	lbOut, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web"), Subnets: []string{"subnet-a", "subnet-b"}})
	if err != nil {
		t.Fatal(err)
	}
	lb := lbOut.LoadBalancers[0]
	if lb.Type != elbtypes.LoadBalancerTypeEnumApplication || lb.Scheme != elbtypes.LoadBalancerSchemeEnumInternetFacing ||
		lb.State == nil || lb.State.Code != elbtypes.LoadBalancerStateEnumActive || len(lb.AvailabilityZones) != 2 ||
		!strings.HasPrefix(aws.ToString(lb.LoadBalancerArn), "arn:aws:elasticloadbalancing:us-east-1:"+acct+":loadbalancer/app/web/") {
		t.Errorf("CreateLoadBalancer = %+v", lb)
	}
	// Idempotent with the same settings; another type under the same name is a duplicate.
	if again, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web")}); err != nil || aws.ToString(again.LoadBalancers[0].LoadBalancerArn) != aws.ToString(lb.LoadBalancerArn) {
		t.Errorf("CreateLoadBalancer again: %v", err)
	}
	_, err = c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web"), Type: elbtypes.LoadBalancerTypeEnumNetwork})
	wantCode(t, err, "DuplicateLoadBalancerName")
	_, err = c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("-bad")})
	wantCode(t, err, "ValidationError")

	tgOut, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{
		Name: aws.String("web"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(8080), TargetType: elbtypes.TargetTypeEnumIp,
		VpcId: aws.String("vpc-1"), HealthCheckPath: aws.String("/health"), HealthCheckIntervalSeconds: aws.Int32(5),
		HealthCheckTimeoutSeconds: aws.Int32(2), HealthyThresholdCount: aws.Int32(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	tg := tgOut.TargetGroups[0]
	if aws.ToInt32(tg.HealthCheckIntervalSeconds) != 5 || aws.ToInt32(tg.UnhealthyThresholdCount) != 2 || aws.ToString(tg.Matcher.HttpCode) != "200" ||
		aws.ToString(tg.HealthCheckPort) != "traffic-port" || tg.TargetType != elbtypes.TargetTypeEnumIp {
		t.Errorf("CreateTargetGroup = %+v", tg)
	}
	_, err = c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("x"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(6)})
	wantCode(t, err, "InvalidConfigurationRequest")
	_, err = c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("x"), Protocol: elbtypes.ProtocolEnumHttps, Port: aws.Int32(443)})
	wantCode(t, err, "UnsupportedProtocol")

	// A target: an HTTP server the lb role (not running in this stack) would check.
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer backend.Close()
	port, _ := strconv.Atoi(backend.URL[strings.LastIndex(backend.URL, ":")+1:])
	_, err = c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroupArn, Targets: []elbtypes.TargetDescription{{Id: aws.String("127.0.0.1"), Port: aws.Int32(int32(port))}}})
	if err != nil {
		t.Fatal(err)
	}
	health := func(targets ...elbtypes.TargetDescription) []elbtypes.TargetHealthDescription {
		t.Helper()
		out, err := c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn, Targets: targets})
		if err != nil {
			t.Fatal(err)
		}
		return out.TargetHealthDescriptions
	}
	// No listener forwards to the group yet: unused / Target.NotInUse.
	if h := health(); len(h) != 1 || h[0].TargetHealth.State != elbtypes.TargetHealthStateEnumUnused || h[0].TargetHealth.Reason != elbtypes.TargetHealthReasonEnumNotInUse {
		t.Errorf("health before a listener: %+v", h)
	}
	if h := health(elbtypes.TargetDescription{Id: aws.String("10.0.0.9"), Port: aws.Int32(80)}); len(h) != 1 || h[0].TargetHealth.Reason != elbtypes.TargetHealthReasonEnumNotRegistered {
		t.Errorf("health of a target not registered: %+v", h)
	}
	_, err = c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroupArn, Targets: []elbtypes.TargetDescription{{Id: aws.String("not-an-ip")}}})
	wantCode(t, err, "InvalidTarget")

	lport := harness.FreePort(t)
	lnOut, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{
		LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(int32(lport)),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln := lnOut.Listeners[0]
	if aws.ToString(ln.DefaultActions[0].TargetGroupArn) != aws.ToString(tg.TargetGroupArn) {
		t.Errorf("listener actions %+v", ln.DefaultActions)
	}
	_, err = c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(int32(lport)),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumFixedResponse, FixedResponseConfig: &elbtypes.FixedResponseActionConfig{StatusCode: aws.String("200")}}}})
	wantCode(t, err, "InvalidLoadBalancerAction")
	// Weighted forward to two groups; a group serves one load balancer only.
	green, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("green"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(8080), TargetType: elbtypes.TargetTypeEnumIp})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := c.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: ln.ListenerArn, DefaultActions: []elbtypes.Action{{
		Type: elbtypes.ActionTypeEnumForward, ForwardConfig: &elbtypes.ForwardActionConfig{TargetGroups: []elbtypes.TargetGroupTuple{
			{TargetGroupArn: tg.TargetGroupArn, Weight: aws.Int32(3)}, {TargetGroupArn: green.TargetGroups[0].TargetGroupArn, Weight: aws.Int32(1)},
		}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if fc := mod.Listeners[0].DefaultActions[0].ForwardConfig; fc == nil || len(fc.TargetGroups) != 2 || aws.ToInt32(fc.TargetGroups[0].Weight) != 3 {
		t.Errorf("weighted forward: %+v", mod.Listeners[0].DefaultActions)
	}
	other, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("other")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: other.LoadBalancers[0].LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}})
	wantCode(t, err, "TargetGroupAssociationLimit")
	_, err = c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: other.LoadBalancers[0].LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(81),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}})
	wantCode(t, err, "IncompatibleProtocols")
	if _, err := c.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: ln.ListenerArn, DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: green.TargetGroups[0].TargetGroupArn}); err != nil {
		t.Errorf("DeleteTargetGroup of a group no longer forwarded to: %v", err)
	}
	if _, err := c.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: other.LoadBalancers[0].LoadBalancerArn}); err != nil {
		t.Fatal(err)
	}

	// In use now: initial, as nothing has checked it (the lb role is not part of this stack).
	if h := health(); h[0].TargetHealth.State != elbtypes.TargetHealthStateEnumInitial || h[0].TargetHealth.Reason != elbtypes.TargetHealthReasonEnumRegistrationInProgress {
		t.Errorf("health with a listener: %+v", h[0].TargetHealth)
	}
	desc, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(desc.TargetGroups) != 1 || len(desc.TargetGroups[0].LoadBalancerArns) != 1 {
		t.Errorf("DescribeTargetGroups by load balancer: %v %+v", err, desc)
	}
	_, err = c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn})
	wantCode(t, err, "ResourceInUse")

	ruleOut, err := c.CreateRule(ctx, &elbv2.CreateRuleInput{
		ListenerArn: ln.ListenerArn, Priority: aws.Int32(10),
		Conditions: []elbtypes.RuleCondition{{Field: aws.String("path-pattern"), PathPatternConfig: &elbtypes.PathPatternConditionConfig{Values: []string{"/api/*"}}}},
		Actions:    []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateRule(ctx, &elbv2.CreateRuleInput{
		ListenerArn: ln.ListenerArn, Priority: aws.Int32(10),
		Conditions: []elbtypes.RuleCondition{{Field: aws.String("host-header"), Values: []string{"a.example.com"}}},
		Actions:    []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}},
	})
	wantCode(t, err, "PriorityInUse")
	rules, err := c.DescribeRules(ctx, &elbv2.DescribeRulesInput{ListenerArn: ln.ListenerArn})
	if err != nil || len(rules.Rules) != 2 || aws.ToString(rules.Rules[0].Priority) != "10" || aws.ToString(rules.Rules[1].Priority) != "default" || !aws.ToBool(rules.Rules[1].IsDefault) {
		t.Errorf("DescribeRules: %v %+v", err, rules)
	}
	_, err = c.DeleteRule(ctx, &elbv2.DeleteRuleInput{RuleArn: rules.Rules[1].RuleArn})
	wantCode(t, err, "OperationNotPermitted")
	if _, err := c.DeleteRule(ctx, &elbv2.DeleteRuleInput{RuleArn: ruleOut.Rules[0].RuleArn}); err != nil {
		t.Error(err)
	}

	attrs, err := c.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: tg.TargetGroupArn,
		Attributes: []elbtypes.TargetGroupAttribute{{Key: aws.String("deregistration_delay.timeout_seconds"), Value: aws.String("10")}}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range attrs.Attributes {
		found = found || (aws.ToString(a.Key) == "deregistration_delay.timeout_seconds" && aws.ToString(a.Value) == "10")
	}
	if !found {
		t.Errorf("attributes %+v", attrs.Attributes)
	}
	_, err = c.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: tg.TargetGroupArn,
		Attributes: []elbtypes.TargetGroupAttribute{{Key: aws.String("no.such.key"), Value: aws.String("1")}}})
	wantCode(t, err, "ValidationError")

	if _, err := c.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{aws.ToString(lb.LoadBalancerArn), aws.ToString(tg.TargetGroupArn)}, Tags: []elbtypes.Tag{{Key: aws.String("team"), Value: aws.String("web")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{aws.ToString(tg.TargetGroupArn)}})
	if err != nil || len(tags.TagDescriptions) != 1 || len(tags.TagDescriptions[0].Tags) != 1 || aws.ToString(tags.TagDescriptions[0].Tags[0].Value) != "web" {
		t.Errorf("DescribeTags: %v %+v", err, tags)
	}

	// Deregistering drains; with no lb role the record stays draining.
	if _, err := c.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: tg.TargetGroupArn, Targets: []elbtypes.TargetDescription{{Id: aws.String("127.0.0.1"), Port: aws.Int32(int32(port))}}}); err != nil {
		t.Fatal(err)
	}
	if h := health(); len(h) != 1 || h[0].TargetHealth.State != elbtypes.TargetHealthStateEnumDraining || h[0].TargetHealth.Reason != elbtypes.TargetHealthReasonEnumDeregistrationInProgress {
		t.Errorf("health after deregistration: %+v", h)
	}
	_, err = c.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: tg.TargetGroupArn, Targets: []elbtypes.TargetDescription{{Id: aws.String("10.1.1.1")}}})
	wantCode(t, err, "InvalidTarget")

	_, err = c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{"nope"}})
	wantCode(t, err, "TargetGroupNotFound")
	if _, err := c.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil {
		t.Errorf("DeleteTargetGroup after its load balancer: %v", err)
	}
	all, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	if err != nil || len(all.LoadBalancers) != 0 {
		t.Errorf("DescribeLoadBalancers after delete: %v %+v", err, all)
	}
	_, err = c.DescribeListeners(ctx, &elbv2.DescribeListenersInput{ListenerArns: []string{aws.ToString(ln.ListenerArn)}})
	wantCode(t, err, "ListenerNotFound")
	// An action Berth does not implement.
	_, err = c.DescribeSSLPolicies(ctx, &elbv2.DescribeSSLPoliciesInput{})
	wantCode(t, err, "UnsupportedOperation")
}

// TestELBv2EmptyLists: where AWS returns a list member empty (<TargetGroups/>, a
// resource's <Tags/>, a group's <LoadBalancerArns/>, the default rule's <Conditions/>),
// the SDK for Go v2 parses an empty slice, not nil, and the AWS CLI prints [].
func TestELBv2EmptyLists(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "444444444444"
	stack := startAPIStack(t, acct)
	c := elbv2.NewFromConfig(stack.awsConfig(acct, "us-east-1"))
	ctx := t.Context()
	empty := func(what string, n int, isNil bool) {
		t.Helper()
		if n != 0 || isNil {
			t.Errorf("%s: %d items, nil %v; want an empty, non-nil list", what, n, isNil)
		}
	}
	lbs, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	if err != nil {
		t.Fatal(err)
	}
	empty("DescribeLoadBalancers.LoadBalancers", len(lbs.LoadBalancers), lbs.LoadBalancers == nil)
	tgs, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	empty("DescribeTargetGroups.TargetGroups", len(tgs.TargetGroups), tgs.TargetGroups == nil)

	lbOut, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("empty"), Subnets: []string{"subnet-a", "subnet-b"}})
	if err != nil {
		t.Fatal(err)
	}
	lbArn := lbOut.LoadBalancers[0].LoadBalancerArn
	tgOut, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("empty"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), VpcId: aws.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	tg := tgOut.TargetGroups[0]
	empty("CreateTargetGroup.TargetGroups[0].LoadBalancerArns", len(tg.LoadBalancerArns), tg.LoadBalancerArns == nil)
	tags, err := c.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{aws.ToString(lbArn)}})
	if err != nil || len(tags.TagDescriptions) != 1 {
		t.Fatalf("DescribeTags: %v %+v", err, tags)
	}
	empty("DescribeTags.TagDescriptions[0].Tags", len(tags.TagDescriptions[0].Tags), tags.TagDescriptions[0].Tags == nil)
	health, err := c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
	if err != nil {
		t.Fatal(err)
	}
	empty("DescribeTargetHealth.TargetHealthDescriptions", len(health.TargetHealthDescriptions), health.TargetHealthDescriptions == nil)
	ln, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lbArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(int32(harness.FreePort(t))),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := c.DescribeRules(ctx, &elbv2.DescribeRulesInput{ListenerArn: ln.Listeners[0].ListenerArn})
	if err != nil || len(rules.Rules) != 1 {
		t.Fatalf("DescribeRules: %v %+v", err, rules)
	}
	empty("DescribeRules.Rules[0].Conditions (default rule)", len(rules.Rules[0].Conditions), rules.Rules[0].Conditions == nil)

	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
	}
	spare, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("spare"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), VpcId: aws.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"elbv2", "describe-target-health", "--target-group-arn", aws.ToString(tg.TargetGroupArn)}, `"TargetHealthDescriptions": []`},
		{[]string{"elbv2", "describe-tags", "--resource-arns", aws.ToString(lbArn)}, `"Tags": []`},
		{[]string{"elbv2", "describe-rules", "--listener-arn", aws.ToString(ln.Listeners[0].ListenerArn)}, `"Conditions": []`},
		{[]string{"elbv2", "describe-target-groups", "--target-group-arns", aws.ToString(spare.TargetGroups[0].TargetGroupArn)}, `"LoadBalancerArns": []`},
	} {
		out, stderr, ok := stack.runCLI(t, acct, tc.args...)
		if !ok || !strings.Contains(out, tc.want) {
			t.Errorf("aws %s: ok %v, want %s in\n%s%s", strings.Join(tc.args, " "), ok, tc.want, out, stderr)
		}
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := apiErrorCode(err); got != code {
		t.Errorf("error %v: code %q, want %q", err, got, code)
	}
}
