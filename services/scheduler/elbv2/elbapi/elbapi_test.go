package elbapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	elbv2 "github.com/berthhq/berth/gen/berth/elbv2/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elbapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

const account = "111122223333"

var scope = keys.Scope{Account: account, Region: "us-east-1"}

type env struct {
	h   *elbapi.Handler
	kv  *clientv3.Client
	ctx context.Context
}

func newEnv(t *testing.T) env {
	t.Helper()
	kv := etcdtest.Start(t)
	return env{h: elbapi.New(kv, elbapi.InstanceHost(kv)), kv: kv, ctx: caller.With(t.Context(), caller.Identity{Account: account, Region: scope.Region})}
}

func str(s string) *string { return &s }

// wantErr fails unless err carries the ELBv2 error code (as the AWS exception type the
// gateway writes) whose message contains msg.
func wantErr(t *testing.T, err error, code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	e, ok := awserr.FromConnect(err)
	if !ok {
		t.Fatalf("error %v carries no AWS exception, want %s", err, code)
	}
	if e.Type != code || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = %s: %q, want %s containing %q", e.Type, e.Message, code, msg)
	}
}

func call[Req, Res any](t *testing.T, e env, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) *Res {
	t.Helper()
	res, err := fn(e.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return res.Msg
}

func (e env) lb(t *testing.T, name, typ string, subnets ...string) *elbv2.LoadBalancer {
	t.Helper()
	req := &elbv2.CreateLoadBalancerRequest{Name: str(name), Subnets: subnets}
	if typ != "" {
		req.Type = str(typ)
	}
	return call(t, e, e.h.CreateLoadBalancer, req).GetLoadBalancers()[0]
}

func (e env) tg(t *testing.T, name, protocol, targetType string) *elbv2.TargetGroup {
	t.Helper()
	return call(t, e, e.h.CreateTargetGroup, &elbv2.CreateTargetGroupRequest{Name: str(name), Protocol: str(protocol), Port: 8080, TargetType: str(targetType)}).GetTargetGroups()[0]
}

func forward(arn string) []*elbv2.Action {
	return []*elbv2.Action{{Type: str("forward"), TargetGroupArn: str(arn)}}
}

func TestLoadBalancerShape(t *testing.T) {
	e := newEnv(t)
	lb := e.lb(t, "web", "", "subnet-a", "subnet-b")
	if lb.GetLoadBalancerName() != "web" || lb.GetType() != "application" || lb.GetScheme() != "internet-facing" || lb.GetIpAddressType() != "ipv4" ||
		lb.GetState().GetCode() != "active" || lb.GetVpcId() != "vpc-berth" || lb.GetCanonicalHostedZoneId() == "" || lb.GetCreatedTime() <= 0 ||
		!strings.HasPrefix(lb.GetLoadBalancerArn(), "arn:aws:elasticloadbalancing:us-east-1:"+account+":loadbalancer/app/web/") ||
		!strings.HasSuffix(lb.GetDnsName(), ".us-east-1.elb.amazonaws.com") {
		t.Fatalf("load balancer = %v", lb)
	}
	var zones []string
	for _, z := range lb.GetAvailabilityZones() {
		zones = append(zones, z.GetSubnetId()+"@"+z.GetZoneName())
	}
	if want := []string{"subnet-a@us-east-1a", "subnet-b@us-east-1b"}; !slices.Equal(zones, want) {
		t.Errorf("AvailabilityZones = %v, want %v", zones, want)
	}
	if bare := e.lb(t, "bare", "network"); bare.AvailabilityZones == nil || len(bare.AvailabilityZones) != 0 || bare.GetType() != "network" {
		t.Errorf("load balancer without subnets: AvailabilityZones %#v", bare.AvailabilityZones)
	}

	for _, tc := range []struct {
		name      string
		req       *elbv2.CreateLoadBalancerRequest
		code, msg string
	}{
		{"subnet mappings", &elbv2.CreateLoadBalancerRequest{Name: str("x"), SubnetMappings: []*elbv2.SubnetMapping{{SubnetId: str("s")}}}, "InvalidConfigurationRequest", "SubnetMappings, CustomerOwnedIpv4Pool, IpamPools and EnablePrefixForIpv6SourceNat are not supported by Berth"},
		{"customer owned pool", &elbv2.CreateLoadBalancerRequest{Name: str("x"), CustomerOwnedIpv4Pool: str("pool")}, "InvalidConfigurationRequest", ""},
		{"bad name", &elbv2.CreateLoadBalancerRequest{Name: str("-x")}, "ValidationError", "The load balancer name '-x' is not valid"},
		{"other settings", &elbv2.CreateLoadBalancerRequest{Name: str("web"), Scheme: str("internal")}, "DuplicateLoadBalancerName", "A load balancer with the same name 'web' exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.CreateLoadBalancer(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.code, tc.msg)
		})
	}

	call(t, e, e.h.DeleteLoadBalancer, &elbv2.DeleteLoadBalancerRequest{LoadBalancerArn: lb.LoadBalancerArn})
	_, err := e.h.DescribeLoadBalancers(e.ctx, connect.NewRequest(&elbv2.DescribeLoadBalancersRequest{LoadBalancerArns: []string{lb.GetLoadBalancerArn()}}))
	wantErr(t, err, "LoadBalancerNotFound", lb.GetLoadBalancerArn())
	_, err = e.h.DeleteLoadBalancer(e.ctx, connect.NewRequest(&elbv2.DeleteLoadBalancerRequest{LoadBalancerArn: str("web")}))
	wantErr(t, err, "ValidationError", "is not a valid load balancer ARN")
}

func TestPaging(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"e", "d", "c", "b", "a"} {
		e.lb(t, n, "")
	}
	var names, markers []string
	req := &elbv2.DescribeLoadBalancersRequest{PageSize: 2}
	for page := 0; ; page++ {
		if page == 10 {
			t.Fatal("paging does not end")
		}
		res := call(t, e, e.h.DescribeLoadBalancers, req)
		for _, lb := range res.GetLoadBalancers() {
			names = append(names, lb.GetLoadBalancerName())
		}
		if res.NextMarker == nil {
			break
		}
		markers = append(markers, res.GetNextMarker())
		req.Marker = res.NextMarker
	}
	if !slices.Equal(names, []string{"a", "b", "c", "d", "e"}) || len(markers) != 2 {
		t.Fatalf("paged names %v with markers %v", names, markers)
	}
	// Without PageSize one page holds them all (up to 400), with no marker.
	if res := call(t, e, e.h.DescribeLoadBalancers, &elbv2.DescribeLoadBalancersRequest{}); len(res.GetLoadBalancers()) != 5 || res.NextMarker != nil {
		t.Fatalf("unpaged: %d load balancers, marker %v", len(res.GetLoadBalancers()), res.NextMarker)
	}
	for _, tc := range []struct {
		name string
		req  *elbv2.DescribeLoadBalancersRequest
		msg  string
	}{
		{"marker not issued", &elbv2.DescribeLoadBalancersRequest{Marker: str("abc")}, "The marker 'abc' is not valid"},
		{"marker past the end", &elbv2.DescribeLoadBalancersRequest{Marker: str("6")}, "The marker '6' is not valid"},
		{"negative marker", &elbv2.DescribeLoadBalancersRequest{Marker: str("-1")}, "not valid"},
		{"page size 401", &elbv2.DescribeLoadBalancersRequest{PageSize: 401}, "Page size must be between 1 and 400"},
		{"negative page size", &elbv2.DescribeLoadBalancersRequest{PageSize: -1}, "Page size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.DescribeLoadBalancers(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, "ValidationError", tc.msg)
		})
	}
	_, err := e.h.DescribeLoadBalancers(e.ctx, connect.NewRequest(&elbv2.DescribeLoadBalancersRequest{Names: []string{"a"}, LoadBalancerArns: []string{"x"}}))
	wantErr(t, err, "ValidationError", "cannot be specified at the same time")

	// The other Describe actions page the same way.
	tgReq := &elbv2.DescribeTargetGroupsRequest{PageSize: 1}
	for i := range 3 {
		e.tg(t, fmt.Sprint("tg", i), "HTTP", "ip")
	}
	seen := 0
	for page := 0; ; page++ {
		if page == 10 {
			t.Fatal("paging does not end")
		}
		res := call(t, e, e.h.DescribeTargetGroups, tgReq)
		seen += len(res.GetTargetGroups())
		if res.NextMarker == nil {
			break
		}
		tgReq.Marker = res.NextMarker
	}
	if seen != 3 {
		t.Fatalf("paged target groups: %d, want 3", seen)
	}
	_, err = e.h.DescribeTargetGroups(e.ctx, connect.NewRequest(&elbv2.DescribeTargetGroupsRequest{Marker: str("x")}))
	wantErr(t, err, "ValidationError", "marker")
}

func TestTargetGroupShape(t *testing.T) {
	e := newEnv(t)
	http := call(t, e, e.h.CreateTargetGroup, &elbv2.CreateTargetGroupRequest{Name: str("web"), Protocol: str("HTTP"), Port: 80,
		HealthCheckPath: str("/healthz"), Matcher: &elbv2.Matcher{HttpCode: str("200-299")}, HealthyThresholdCount: 3,
		Tags: []*elbv2.Tag{{Key: str("env"), Value: str("dev")}}}).GetTargetGroups()[0]
	// Unboxed members left at 0 are "not given": the group keeps AWS's defaults.
	if http.GetProtocol() != "HTTP" || http.GetPort() != 80 || http.GetTargetType() != "instance" || http.GetProtocolVersion() != "HTTP1" ||
		http.GetHealthCheckPath() != "/healthz" || http.GetMatcher().GetHttpCode() != "200-299" || http.GetHealthyThresholdCount() != 3 ||
		http.GetUnhealthyThresholdCount() != 2 || http.GetHealthCheckIntervalSeconds() != 30 || !http.GetHealthCheckEnabled() ||
		http.GetHealthCheckPort() != "traffic-port" || http.GetIpAddressType() != "ipv4" || http.LoadBalancerArns == nil || len(http.LoadBalancerArns) != 0 {
		t.Fatalf("HTTP target group = %v", http)
	}
	tcp := e.tg(t, "tcp", "TCP", "ip")
	if tcp.Matcher != nil || tcp.HealthCheckPath != nil || tcp.ProtocolVersion != nil || tcp.GetHealthCheckProtocol() != "TCP" || tcp.GetHealthCheckTimeoutSeconds() != 10 {
		t.Fatalf("TCP target group = %v", tcp)
	}
	for _, tc := range []struct {
		name      string
		req       *elbv2.CreateTargetGroupRequest
		code, msg string
	}{
		{"target control port", &elbv2.CreateTargetGroupRequest{Name: str("x"), Protocol: str("HTTP"), Port: 80, TargetControlPort: 9000}, "InvalidConfigurationRequest", "TargetControlPort is not supported by Berth"},
		{"no port", &elbv2.CreateTargetGroupRequest{Name: str("x"), Protocol: str("HTTP")}, "ValidationError", "A port must be specified"},
		{"gRPC matcher", &elbv2.CreateTargetGroupRequest{Name: str("x"), Protocol: str("HTTP"), Port: 80, Matcher: &elbv2.Matcher{GrpcCode: str("12")}}, "InvalidConfigurationRequest", "gRPC"},
		{"timeout over interval", &elbv2.CreateTargetGroupRequest{Name: str("x"), Protocol: str("HTTP"), Port: 80, HealthCheckIntervalSeconds: 5, HealthCheckTimeoutSeconds: 6}, "InvalidConfigurationRequest", "Health check interval must be greater than the timeout."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.CreateTargetGroup(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.code, tc.msg)
		})
	}

	m := call(t, e, e.h.ModifyTargetGroup, &elbv2.ModifyTargetGroupRequest{TargetGroupArn: http.TargetGroupArn, HealthCheckIntervalSeconds: 10,
		HealthCheckTimeoutSeconds: 4, Matcher: &elbv2.Matcher{HttpCode: str("200,301")}}).GetTargetGroups()[0]
	if m.GetHealthCheckIntervalSeconds() != 10 || m.GetHealthCheckTimeoutSeconds() != 4 || m.GetMatcher().GetHttpCode() != "200,301" || m.GetHealthCheckPath() != "/healthz" || m.GetHealthyThresholdCount() != 3 {
		t.Fatalf("modified = %v", m)
	}
	_, err := e.h.ModifyTargetGroup(e.ctx, connect.NewRequest(&elbv2.ModifyTargetGroupRequest{TargetGroupArn: str("arn:aws:elasticloadbalancing:us-east-1:" + account + ":targetgroup/web/0123456789abcdef")}))
	wantErr(t, err, "TargetGroupNotFound", "")

	attrs := call(t, e, e.h.ModifyTargetGroupAttributes, &elbv2.ModifyTargetGroupAttributesRequest{TargetGroupArn: http.TargetGroupArn,
		Attributes: []*elbv2.TargetGroupAttribute{{Key: str("deregistration_delay.timeout_seconds"), Value: str("30")}}}).GetAttributes()
	var keys []string
	for _, a := range attrs {
		keys = append(keys, a.GetKey()+"="+a.GetValue())
	}
	if !slices.IsSorted(keys) || !slices.Contains(keys, "deregistration_delay.timeout_seconds=30") || len(keys) != 6 {
		t.Fatalf("attributes = %v, want the 6 of an HTTP group sorted by key", keys)
	}
	described := call(t, e, e.h.DescribeTargetGroupAttributes, &elbv2.DescribeTargetGroupAttributesRequest{TargetGroupArn: http.TargetGroupArn}).GetAttributes()
	if len(described) != 6 || described[0].GetKey() != "deregistration_delay.connection_termination.enabled" {
		t.Fatalf("DescribeTargetGroupAttributes = %v", described)
	}
	_, err = e.h.ModifyTargetGroupAttributes(e.ctx, connect.NewRequest(&elbv2.ModifyTargetGroupAttributesRequest{TargetGroupArn: http.TargetGroupArn,
		Attributes: []*elbv2.TargetGroupAttribute{{Key: str("stickiness.enabled"), Value: str("true")}}}))
	wantErr(t, err, "InvalidConfigurationRequest", "stickiness.enabled")

	call(t, e, e.h.DeleteTargetGroup, &elbv2.DeleteTargetGroupRequest{TargetGroupArn: tcp.TargetGroupArn})
	_, err = e.h.DescribeTargetGroups(e.ctx, connect.NewRequest(&elbv2.DescribeTargetGroupsRequest{Names: []string{"tcp"}}))
	wantErr(t, err, "TargetGroupNotFound", "Target groups '[tcp]' not found")
}

func TestListenersAndRules(t *testing.T) {
	e := newEnv(t)
	lb := e.lb(t, "web", "")
	tg, api := e.tg(t, "tg", "HTTP", "ip"), e.tg(t, "api", "HTTP", "ip")
	l := call(t, e, e.h.CreateListener, &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Protocol: str("HTTP"), Port: 80,
		DefaultActions: forward(tg.GetTargetGroupArn())}).GetListeners()[0]
	// A plain TargetGroupArn action is written back with it and as a ForwardConfig of
	// weight 1, as AWS does.
	a := l.GetDefaultActions()[0]
	if l.GetPort() != 80 || l.GetProtocol() != "HTTP" || l.GetLoadBalancerArn() != lb.GetLoadBalancerArn() || a.GetType() != "forward" ||
		a.GetTargetGroupArn() != tg.GetTargetGroupArn() || len(a.GetForwardConfig().GetTargetGroups()) != 1 ||
		a.GetForwardConfig().GetTargetGroups()[0].GetWeight() != 1 || a.GetForwardConfig().GetTargetGroupStickinessConfig().GetEnabled() {
		t.Fatalf("listener = %v", l)
	}
	// A weighted forward is written back without TargetGroupArn.
	wl := call(t, e, e.h.CreateListener, &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 8080, DefaultActions: []*elbv2.Action{{
		Type: str("forward"), ForwardConfig: &elbv2.ForwardActionConfig{TargetGroups: []*elbv2.TargetGroupTuple{
			{TargetGroupArn: tg.TargetGroupArn, Weight: 80}, {TargetGroupArn: api.TargetGroupArn, Weight: 20}}}}}}).GetListeners()[0]
	wa := wl.GetDefaultActions()[0]
	if wa.TargetGroupArn != nil || len(wa.GetForwardConfig().GetTargetGroups()) != 2 || wa.GetForwardConfig().GetTargetGroups()[0].GetWeight() != 80 || wa.GetForwardConfig().GetTargetGroups()[1].GetWeight() != 20 {
		t.Fatalf("weighted action = %v", wa)
	}

	for _, tc := range []struct {
		name      string
		req       *elbv2.CreateListenerRequest
		code, msg string
	}{
		{"mutual TLS", &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 81, DefaultActions: forward(tg.GetTargetGroupArn()), MutualAuthentication: &elbv2.MutualAuthenticationAttributes{Mode: str("verify")}}, "InvalidConfigurationRequest", "MutualAuthentication is not supported by Berth"},
		{"certificates", &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 81, DefaultActions: forward(tg.GetTargetGroupArn()), Certificates: []*elbv2.Certificate{{CertificateArn: str("arn:aws:acm:us-east-1:" + account + ":certificate/x")}}}, "InvalidConfigurationRequest", "Certificates, SslPolicy and AlpnPolicy"},
		{"redirect", &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 81, DefaultActions: []*elbv2.Action{{Type: str("redirect"), RedirectConfig: &elbv2.RedirectActionConfig{StatusCode: str("HTTP_301")}}}}, "InvalidLoadBalancerAction", "Action type 'redirect' is not supported by Berth"},
		{"fixed response", &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 81, DefaultActions: []*elbv2.Action{{Type: str("fixed-response"), FixedResponseConfig: &elbv2.FixedResponseActionConfig{StatusCode: str("200")}}}}, "InvalidLoadBalancerAction", ""},
		{"stickiness", &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 81, DefaultActions: []*elbv2.Action{{Type: str("forward"), ForwardConfig: &elbv2.ForwardActionConfig{
			TargetGroups: []*elbv2.TargetGroupTuple{{TargetGroupArn: tg.TargetGroupArn, Weight: 1}}, TargetGroupStickinessConfig: &elbv2.TargetGroupStickinessConfig{Enabled: true, DurationSeconds: 60}}}}}, "InvalidConfigurationRequest", "stickiness"},
		{"duplicate port", &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 80, DefaultActions: forward(api.GetTargetGroupArn())}, "DuplicateListener", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.CreateListener(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.code, tc.msg)
		})
	}

	// ModifyListener: port 0 means "not given".
	ml := call(t, e, e.h.ModifyListener, &elbv2.ModifyListenerRequest{ListenerArn: wl.ListenerArn, DefaultActions: forward(api.GetTargetGroupArn())}).GetListeners()[0]
	if ml.GetPort() != 8080 || ml.GetDefaultActions()[0].GetTargetGroupArn() != api.GetTargetGroupArn() {
		t.Fatalf("modified listener = %v", ml)
	}
	_, err := e.h.ModifyListener(e.ctx, connect.NewRequest(&elbv2.ModifyListenerRequest{ListenerArn: wl.ListenerArn, MutualAuthentication: &elbv2.MutualAuthenticationAttributes{}}))
	wantErr(t, err, "InvalidConfigurationRequest", "MutualAuthentication")
	ls := call(t, e, e.h.DescribeListeners, &elbv2.DescribeListenersRequest{LoadBalancerArn: lb.LoadBalancerArn}).GetListeners()
	if len(ls) != 2 || ls[0].GetPort() != 80 || ls[1].GetPort() != 8080 {
		t.Fatalf("listeners = %v", ls)
	}

	// Rules: conditions come in Values or in the field's config.
	r := call(t, e, e.h.CreateRule, &elbv2.CreateRuleRequest{ListenerArn: l.ListenerArn, Priority: 7, Actions: forward(api.GetTargetGroupArn()), Conditions: []*elbv2.RuleCondition{
		{Field: str("path-pattern"), PathPatternConfig: &elbv2.PathPatternConditionConfig{Values: []string{"/api/*"}}},
		{Field: str("host-header"), Values: []string{"api.example.com"}},
	}}).GetRules()[0]
	if r.GetPriority() != "7" || r.GetIsDefault() || len(r.GetConditions()) != 2 ||
		!slices.Equal(r.GetConditions()[0].GetPathPatternConfig().GetValues(), []string{"/api/*"}) || !slices.Equal(r.GetConditions()[0].GetValues(), []string{"/api/*"}) ||
		!slices.Equal(r.GetConditions()[1].GetHostHeaderConfig().GetValues(), []string{"api.example.com"}) {
		t.Fatalf("rule = %v", r)
	}
	rules := call(t, e, e.h.DescribeRules, &elbv2.DescribeRulesRequest{ListenerArn: l.ListenerArn}).GetRules()
	if len(rules) != 2 || rules[0].GetPriority() != "7" || rules[1].GetPriority() != "default" || !rules[1].GetIsDefault() || rules[1].Conditions == nil || len(rules[1].Conditions) != 0 ||
		rules[1].GetActions()[0].GetTargetGroupArn() != tg.GetTargetGroupArn() {
		t.Fatalf("rules = %v", rules)
	}
	for _, tc := range []struct {
		name      string
		req       *elbv2.CreateRuleRequest
		code, msg string
	}{
		{"transforms", &elbv2.CreateRuleRequest{ListenerArn: l.ListenerArn, Priority: 8, Actions: forward(api.GetTargetGroupArn()),
			Conditions: []*elbv2.RuleCondition{{Field: str("path-pattern"), Values: []string{"/x"}}}, Transforms: []*elbv2.RuleTransform{{Type: str("url-rewrite")}}}, "InvalidConfigurationRequest", "Rule transforms are not supported by Berth"},
		{"regex path", &elbv2.CreateRuleRequest{ListenerArn: l.ListenerArn, Priority: 8, Actions: forward(api.GetTargetGroupArn()),
			Conditions: []*elbv2.RuleCondition{{Field: str("path-pattern"), PathPatternConfig: &elbv2.PathPatternConditionConfig{RegexValues: []string{"^/x$"}}}}}, "InvalidConfigurationRequest", "is not supported by Berth"},
		{"regex host", &elbv2.CreateRuleRequest{ListenerArn: l.ListenerArn, Priority: 8, Actions: forward(api.GetTargetGroupArn()),
			Conditions: []*elbv2.RuleCondition{{Field: str("host-header"), HostHeaderConfig: &elbv2.HostHeaderConditionConfig{RegexValues: []string{"^a$"}}}}}, "InvalidConfigurationRequest", ""},
		{"http header", &elbv2.CreateRuleRequest{ListenerArn: l.ListenerArn, Priority: 8, Actions: forward(api.GetTargetGroupArn()),
			Conditions: []*elbv2.RuleCondition{{Field: str("http-header"), HttpHeaderConfig: &elbv2.HttpHeaderConditionConfig{HttpHeaderName: str("X"), Values: []string{"y"}}}}}, "InvalidConfigurationRequest", ""},
		{"priority in use", &elbv2.CreateRuleRequest{ListenerArn: l.ListenerArn, Priority: 7, Actions: forward(api.GetTargetGroupArn()),
			Conditions: []*elbv2.RuleCondition{{Field: str("path-pattern"), Values: []string{"/y"}}}}, "PriorityInUse", "Priority '7' is currently in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.CreateRule(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.code, tc.msg)
		})
	}
	_, err = e.h.DeleteRule(e.ctx, connect.NewRequest(&elbv2.DeleteRuleRequest{RuleArn: rules[1].RuleArn}))
	wantErr(t, err, "OperationNotPermitted", "cannot be deleted")
	call(t, e, e.h.DeleteRule, &elbv2.DeleteRuleRequest{RuleArn: r.RuleArn})
	call(t, e, e.h.DeleteListener, &elbv2.DeleteListenerRequest{ListenerArn: wl.ListenerArn})
	_, err = e.h.DescribeListeners(e.ctx, connect.NewRequest(&elbv2.DescribeListenersRequest{ListenerArns: []string{wl.GetListenerArn()}}))
	wantErr(t, err, "ListenerNotFound", "")

	// DescribeTargetGroups by load balancer names what forwards to each group.
	tgs := call(t, e, e.h.DescribeTargetGroups, &elbv2.DescribeTargetGroupsRequest{LoadBalancerArn: lb.LoadBalancerArn}).GetTargetGroups()
	if len(tgs) != 1 || tgs[0].GetTargetGroupName() != "tg" || !slices.Equal(tgs[0].GetLoadBalancerArns(), []string{lb.GetLoadBalancerArn()}) {
		t.Fatalf("target groups of the load balancer = %v", tgs)
	}
}

func TestTargetsAndHealth(t *testing.T) {
	e := newEnv(t)
	lb := e.lb(t, "web", "")
	ips := e.tg(t, "ips", "HTTP", "ip")
	call(t, e, e.h.CreateListener, &elbv2.CreateListenerRequest{LoadBalancerArn: lb.LoadBalancerArn, Port: 80, DefaultActions: forward(ips.GetTargetGroupArn())})
	call(t, e, e.h.RegisterTargets, &elbv2.RegisterTargetsRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{
		{Id: str("10.0.0.1")}, {Id: str("10.0.0.2"), Port: 9000, AvailabilityZone: str("us-east-1b")}}})

	health := call(t, e, e.h.DescribeTargetHealth, &elbv2.DescribeTargetHealthRequest{TargetGroupArn: ips.TargetGroupArn}).GetTargetHealthDescriptions()
	got := map[string]*elbv2.TargetHealthDescription{}
	for _, d := range health {
		got[fmt.Sprintf("%s:%d", d.GetTarget().GetId(), d.GetTarget().GetPort())] = d
	}
	if d := got["10.0.0.1:8080"]; d == nil || d.GetTargetHealth().GetState() != "initial" || d.GetTargetHealth().GetReason() != "Elb.RegistrationInProgress" ||
		d.GetTargetHealth().GetDescription() != "Target registration is in progress" || d.GetHealthCheckPort() != "8080" || d.GetTarget().AvailabilityZone != nil {
		t.Fatalf("10.0.0.1:8080 = %v", d)
	}
	if d := got["10.0.0.2:9000"]; d == nil || d.GetTarget().GetAvailabilityZone() != "us-east-1b" || d.GetHealthCheckPort() != "9000" {
		t.Fatalf("10.0.0.2:9000 = %v", d)
	}
	// A healthy target has no reason or description.
	if _, err := store.NewTxn(e.kv).Put(keys.ElbTargetHealth(scope, "ips", "10.0.0.1", 8080), &storev1.TargetHealthRecord{State: "healthy"}).Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	one := call(t, e, e.h.DescribeTargetHealth, &elbv2.DescribeTargetHealthRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("10.0.0.1")}}}).GetTargetHealthDescriptions()
	if len(one) != 1 || one[0].GetTargetHealth().GetState() != "healthy" || one[0].GetTargetHealth().Reason != nil || one[0].GetTargetHealth().Description != nil {
		t.Fatalf("healthy target = %v", one)
	}

	call(t, e, e.h.DeregisterTargets, &elbv2.DeregisterTargetsRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("10.0.0.2"), Port: 9000}}})
	d := call(t, e, e.h.DescribeTargetHealth, &elbv2.DescribeTargetHealthRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("10.0.0.2"), Port: 9000}}}).GetTargetHealthDescriptions()
	if d[0].GetTargetHealth().GetState() != "draining" || d[0].GetTargetHealth().GetReason() != "Target.DeregistrationInProgress" {
		t.Fatalf("deregistered target = %v", d[0])
	}

	_, err := e.h.RegisterTargets(e.ctx, connect.NewRequest(&elbv2.RegisterTargetsRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("10.0.0.3"), QuicServerId: str("q")}}}))
	wantErr(t, err, "InvalidTarget", "QuicServerId is not supported by Berth")
	_, err = e.h.RegisterTargets(e.ctx, connect.NewRequest(&elbv2.RegisterTargetsRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("host.local")}}}))
	wantErr(t, err, "InvalidTarget", "The IP address 'host.local' is not a valid IPv4 address")
	_, err = e.h.DeregisterTargets(e.ctx, connect.NewRequest(&elbv2.DeregisterTargetsRequest{TargetGroupArn: ips.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("10.9.9.9")}}}))
	wantErr(t, err, "InvalidTarget", "'Id=10.9.9.9,Port=8080'")
	for _, inc := range [][]string{{"All"}, {"AnomalyDetection"}} {
		if _, err := e.h.DescribeTargetHealth(e.ctx, connect.NewRequest(&elbv2.DescribeTargetHealthRequest{TargetGroupArn: ips.TargetGroupArn, Include: inc})); err != nil {
			t.Errorf("Include %v: %v", inc, err)
		}
	}
	_, err = e.h.DescribeTargetHealth(e.ctx, connect.NewRequest(&elbv2.DescribeTargetHealthRequest{TargetGroupArn: ips.TargetGroupArn, Include: []string{"Everything"}}))
	wantErr(t, err, "ValidationError", "Include value 'Everything' is not valid")
}

func TestInstanceHost(t *testing.T) {
	e := newEnv(t)
	put := func(cluster, id, ec2ID, status string) {
		t.Helper()
		rec := &storev1.ContainerInstanceRecord{ClusterName: cluster, ContainerInstance: &ecsv1.ContainerInstance{Ec2InstanceId: str(ec2ID), Status: str(status)}}
		if _, err := store.Create(e.ctx, e.kv, keys.Instance(scope, cluster, id), rec); err != nil {
			t.Fatal(err)
		}
	}
	put("default", "ci-1", "i-0aaa", "ACTIVE")
	put("other", "ci-2", "i-0bbb", "DRAINING")
	put("default", "ci-3", "i-0ccc", "INACTIVE")

	host := elbapi.InstanceHost(e.kv)
	for id, want := range map[string]string{"i-0aaa": "127.0.0.1", "i-0bbb": "127.0.0.1"} {
		got, err := host(e.ctx, scope, id)
		if err != nil || got != want {
			t.Errorf("InstanceHost(%s) = %q, %v; want %q", id, got, err, want)
		}
	}
	for _, tc := range []struct {
		sc keys.Scope
		id string
	}{
		{scope, "i-0ccc"}, // deregistered
		{scope, "i-0ddd"},
		{keys.Scope{Account: account, Region: "eu-west-1"}, "i-0aaa"}, // another region's
	} {
		_, err := host(e.ctx, tc.sc, tc.id)
		if err == nil || !strings.Contains(err.Error(), "InvalidTarget") || !strings.Contains(err.Error(), "'"+tc.id+"'") {
			t.Errorf("InstanceHost(%s in %s) = %v, want InvalidTarget", tc.id, tc.sc, err)
		}
	}

	// Through the API: an instance target registers with the instance's host.
	inst := e.tg(t, "inst", "HTTP", "instance")
	call(t, e, e.h.RegisterTargets, &elbv2.RegisterTargetsRequest{TargetGroupArn: inst.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("i-0aaa"), Port: 32768}}})
	_, err := e.h.RegisterTargets(e.ctx, connect.NewRequest(&elbv2.RegisterTargetsRequest{TargetGroupArn: inst.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("i-0ccc")}}}))
	wantErr(t, err, "InvalidTarget", "The following targets are not valid instances: 'i-0ccc'")
	// Without a resolver instance targets cannot be registered.
	bare := elbapi.New(e.kv, nil)
	_, err = bare.RegisterTargets(e.ctx, connect.NewRequest(&elbv2.RegisterTargetsRequest{TargetGroupArn: inst.TargetGroupArn, Targets: []*elbv2.TargetDescription{{Id: str("i-0aaa")}}}))
	wantErr(t, err, "InvalidTarget", "'i-0aaa'")
}

func TestTagsAPI(t *testing.T) {
	e := newEnv(t)
	lb := e.lb(t, "web", "")
	tg := e.tg(t, "tg", "HTTP", "ip")
	arns := []string{lb.GetLoadBalancerArn(), tg.GetTargetGroupArn()}
	call(t, e, e.h.AddTags, &elbv2.AddTagsRequest{ResourceArns: arns, Tags: []*elbv2.Tag{{Key: str("env"), Value: str("dev")}, {Key: str("team"), Value: str("red")}}})
	call(t, e, e.h.RemoveTags, &elbv2.RemoveTagsRequest{ResourceArns: arns[1:], TagKeys: []string{"team"}})
	tds := call(t, e, e.h.DescribeTags, &elbv2.DescribeTagsRequest{ResourceArns: arns}).GetTagDescriptions()
	if len(tds) != 2 || tds[0].GetResourceArn() != arns[0] || tds[1].GetResourceArn() != arns[1] {
		t.Fatalf("tag descriptions = %v", tds)
	}
	count := func(td *elbv2.TagDescription) int { return len(td.GetTags()) }
	if count(tds[0]) != 2 || count(tds[1]) != 1 || tds[1].GetTags()[0].GetKey() != "env" || tds[1].GetTags()[0].GetValue() != "dev" {
		t.Fatalf("tags = %v", tds)
	}
	_, err := e.h.AddTags(e.ctx, connect.NewRequest(&elbv2.AddTagsRequest{ResourceArns: arns, Tags: []*elbv2.Tag{{Key: str("k")}, {Key: str("k")}}}))
	wantErr(t, err, "DuplicateTagKeys", "Tag key 'k' is duplicated")
	_, err = e.h.DescribeTags(e.ctx, connect.NewRequest(&elbv2.DescribeTagsRequest{ResourceArns: []string{"arn:aws:elasticloadbalancing:us-east-1:" + account + ":loadbalancer/app/nope/0123456789abcdef"}}))
	wantErr(t, err, "LoadBalancerNotFound", "")
}

func TestCallerAndUnservedActions(t *testing.T) {
	e := newEnv(t)
	// Without a caller identity the call is refused (AccessDenied, or the
	// AccessDeniedException of the shared handler plumbing).
	_, err := e.h.DescribeLoadBalancers(t.Context(), connect.NewRequest(&elbv2.DescribeLoadBalancersRequest{}))
	if ex, ok := awserr.FromConnect(err); !ok || !strings.HasPrefix(ex.Type, "AccessDenied") {
		t.Fatalf("without an identity: %v, want AccessDenied", err)
	}
	// Another account sees nothing of this one.
	e.lb(t, "web", "")
	other := caller.With(t.Context(), caller.Identity{Account: "999999999999", Region: scope.Region})
	res, err := e.h.DescribeLoadBalancers(other, connect.NewRequest(&elbv2.DescribeLoadBalancersRequest{}))
	if err != nil || len(res.Msg.GetLoadBalancers()) != 0 {
		t.Fatalf("another account's DescribeLoadBalancers = %v, %v", res, err)
	}
	_, err = e.h.DescribeLoadBalancerAttributes(e.ctx, connect.NewRequest(&elbv2.DescribeLoadBalancerAttributesRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("DescribeLoadBalancerAttributes err = %v, want CodeUnimplemented", err)
	}
}

// failingKV is an etcd whose reads fail with an error text that must not reach clients.
type failingKV struct{ clientv3.KV }

func (failingKV) Get(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return nil, fmt.Errorf("etcdserver: too many operations in txn request (internal detail)")
}

// A fault that is not an ELBv2 error leaves as the internal error (ServerException, which
// the gateway's query protocol writes as InternalFailure, HTTP 500) with a generic
// message: no Go error text reaches the client.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	e := newEnv(t)
	h := elbapi.New(failingKV{e.kv}, nil)
	_, err := h.DescribeLoadBalancers(e.ctx, connect.NewRequest(&elbv2.DescribeLoadBalancersRequest{}))
	wantErr(t, err, "ServerException", "An internal error occurred.")
	if strings.Contains(err.Error(), "etcdserver") || strings.Contains(err.Error(), "internal detail") {
		t.Fatalf("error %q leaks the internal fault", err)
	}
}
