package elb_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestLoadBalancerNames(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"my-lb-1", true},
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false},
		{"", false},
		{"-lb", false},
		{"lb-", false},
		{"my_lb", false},
		{"my.lb", false},
		{"internal-lb", false}, // AWS reserves the prefix
		{"internallb", true},
	} {
		_, err := e.s.CreateLoadBalancer(t.Context(), scope, elb.CreateLoadBalancerInput{Name: tc.name})
		if tc.ok {
			if err != nil {
				t.Errorf("name %q: %v", tc.name, err)
			}
			continue
		}
		wantCode(t, err, elb.CodeValidation, "is not valid: up to 32 alphanumeric characters or hyphens, not beginning or ending with a hyphen, and not beginning with 'internal-'")
	}
}

func TestCreateLoadBalancer(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, tc := range []struct {
		in             elb.CreateLoadBalancerInput
		arn, dns       *regexp.Regexp
		typ, scheme    string
		subnets, group []string
	}{
		{
			in:  elb.CreateLoadBalancerInput{Name: "web", Subnets: []string{"subnet-1", "subnet-2"}, SecurityGroups: []string{"sg-1"}},
			arn: regexp.MustCompile(`^` + arnPrefix + `loadbalancer/app/web/[0-9a-f]{16}$`),
			dns: regexp.MustCompile(`^web-[0-9a-f]{10}\.us-east-1\.elb\.amazonaws\.com$`),
			typ: elb.TypeApplication, scheme: "internet-facing", subnets: []string{"subnet-1", "subnet-2"}, group: []string{"sg-1"},
		},
		{
			in:  elb.CreateLoadBalancerInput{Name: "inside", Scheme: "internal"},
			arn: regexp.MustCompile(`^` + arnPrefix + `loadbalancer/app/inside/[0-9a-f]{16}$`),
			dns: regexp.MustCompile(`^internal-inside-[0-9a-f]{10}\.us-east-1\.elb\.amazonaws\.com$`),
			typ: elb.TypeApplication, scheme: "internal",
		},
		{
			in:  elb.CreateLoadBalancerInput{Name: "tcp", Type: elb.TypeNetwork, IPAddressType: "ipv4"},
			arn: regexp.MustCompile(`^` + arnPrefix + `loadbalancer/net/tcp/[0-9a-f]{16}$`),
			dns: regexp.MustCompile(`^tcp-[0-9a-f]{10}\.elb\.us-east-1\.amazonaws\.com$`),
			typ: elb.TypeNetwork, scheme: "internet-facing",
		},
	} {
		t.Run(tc.in.Name, func(t *testing.T) {
			r, err := e.s.CreateLoadBalancer(ctx, scope, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.arn.MatchString(r.GetLoadBalancerArn()) || !tc.dns.MatchString(r.GetDnsName()) {
				t.Fatalf("ARN %s, DNS name %s", r.GetLoadBalancerArn(), r.GetDnsName())
			}
			if r.GetType() != tc.typ || r.GetScheme() != tc.scheme || r.GetState() != "active" || r.GetIpAddressType() != "ipv4" ||
				r.GetVpcId() != "vpc-berth" || r.GetAttributes()["deletion_protection.enabled"] != "false" || r.GetCreatedTime() <= 0 ||
				!slices.Equal(r.GetSubnets(), tc.subnets) || !slices.Equal(r.GetSecurityGroups(), tc.group) {
				t.Fatalf("load balancer = %v", r)
			}
			// The same request again answers the same load balancer (CreateLoadBalancer is
			// idempotent on AWS).
			again, err := e.s.CreateLoadBalancer(ctx, scope, tc.in)
			if err != nil || again.GetLoadBalancerArn() != r.GetLoadBalancerArn() {
				t.Fatalf("repeat = %v, %v; want %s", again.GetLoadBalancerArn(), err, r.GetLoadBalancerArn())
			}
		})
	}

	for _, tc := range []struct {
		name      string
		in        elb.CreateLoadBalancerInput
		code, msg string
	}{
		{"gateway", elb.CreateLoadBalancerInput{Name: "gw", Type: "gateway"}, elb.CodeOperationNotPermitted, "Load balancer type 'gateway' is not supported by Berth"},
		{"scheme", elb.CreateLoadBalancerInput{Name: "s", Scheme: "public"}, elb.CodeValidation, "Scheme 'public' is not valid"},
		{"dualstack", elb.CreateLoadBalancerInput{Name: "d", IPAddressType: "dualstack"}, elb.CodeInvalidConfigurationRequest, "IP address type 'dualstack' is not supported"},
		{"same name, other scheme", elb.CreateLoadBalancerInput{Name: "web", Scheme: "internal"}, elb.CodeDuplicateLoadBalancerName, "A load balancer with the same name 'web' exists, but with different settings"},
		{"same name, other type", elb.CreateLoadBalancerInput{Name: "web", Type: elb.TypeNetwork}, elb.CodeDuplicateLoadBalancerName, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.CreateLoadBalancer(ctx, scope, tc.in)
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func tags(n int) []elb.Tag {
	out := make([]elb.Tag, n)
	for i := range out {
		out[i] = elb.Tag{Key: fmt.Sprint("k", i), Value: "v"}
	}
	return out
}

func TestTagRules(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name      string
		tags      []elb.Tag
		code, msg string
	}{
		{"51 tags", tags(51), elb.CodeTooManyTags, "You've reached the limit on the number of tags for this resource (50)"},
		{"duplicate key", []elb.Tag{{Key: "k"}, {Key: "k", Value: "2"}}, elb.CodeDuplicateTagKeys, "Tag key 'k' is duplicated"},
		{"reserved prefix", []elb.Tag{{Key: "AWS:name"}}, elb.CodeValidation, "Tag keys starting with 'aws:' are reserved for internal use"},
		{"empty key", []elb.Tag{{Key: ""}}, elb.CodeValidation, "must be 1-128 characters"},
		{"long key", []elb.Tag{{Key: strings.Repeat("k", 129)}}, elb.CodeValidation, "must be 1-128 characters"},
		{"long value", []elb.Tag{{Key: "k", Value: strings.Repeat("v", 257)}}, elb.CodeValidation, "its value up to 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.CreateLoadBalancer(t.Context(), scope, elb.CreateLoadBalancerInput{Name: "lb", Tags: tc.tags})
			wantCode(t, err, tc.code, tc.msg)
			// CreateTargetGroup's model lists TooManyTags but not DuplicateTagKeys.
			code := tc.code
			if code == elb.CodeDuplicateTagKeys {
				code = ""
			}
			_, err = e.s.CreateTargetGroup(t.Context(), scope, elb.TargetGroupInput{Name: "tg", Protocol: "HTTP", Port: port(80), Tags: tc.tags})
			wantCode(t, err, code, tc.msg)
		})
	}
	r, err := e.s.CreateLoadBalancer(t.Context(), scope, elb.CreateLoadBalancerInput{Name: "lb", Tags: append(tags(49), elb.Tag{Key: strings.Repeat("k", 128), Value: strings.Repeat("v", 256)})})
	if err != nil || len(r.GetTags()) != 50 {
		t.Fatalf("50 tags at the limits: %v (%d tags)", err, len(r.GetTags()))
	}
}

func TestDescribeLoadBalancers(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	b, a := e.lb(t, "b", ""), e.lb(t, "a", elb.TypeNetwork)
	names := func(rs []*storev1.LoadBalancerRecord) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.GetLoadBalancerName())
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		arns, names []string
		want        []string
	}{
		{"all, in name order", nil, nil, []string{"a", "b"}},
		{"by name, in the order asked", nil, []string{"b", "a"}, []string{"b", "a"}},
		{"by ARN", []string{a.GetLoadBalancerArn()}, nil, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := e.s.DescribeLoadBalancers(ctx, scope, tc.arns, tc.names)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(rs); !slices.Equal(got, tc.want) {
				t.Fatalf("load balancers = %v, want %v", got, tc.want)
			}
		})
	}
	wrongID := strings.TrimSuffix(b.GetLoadBalancerArn(), b.GetLoadBalancerArn()[len(b.GetLoadBalancerArn())-4:]) + "ffff"
	if wrongID == b.GetLoadBalancerArn() {
		wrongID = strings.TrimSuffix(wrongID, "ffff") + "eeee"
	}
	for _, tc := range []struct {
		name        string
		arns, names []string
		code, msg   string
	}{
		{"both", []string{a.GetLoadBalancerArn()}, []string{"a"}, elb.CodeValidation, "Load balancer names and load balancer ARNs cannot be specified at the same time"},
		{"missing name", nil, []string{"a", "zzz"}, elb.CodeLoadBalancerNotFound, "Load balancers '[zzz]' not found"},
		{"empty name", nil, []string{""}, elb.CodeLoadBalancerNotFound, "Load balancers '[]' not found"},
		{"name with a slash", nil, []string{"a/b"}, elb.CodeLoadBalancerNotFound, "Load balancers '[a/b]' not found"},
		{"id of no load balancer", []string{wrongID}, nil, elb.CodeLoadBalancerNotFound, "Load balancer '" + wrongID + "' not found"},
		{"other region", []string{strings.Replace(a.GetLoadBalancerArn(), "us-east-1", "eu-west-1", 1)}, nil, elb.CodeLoadBalancerNotFound, ""},
		{"target group ARN", []string{arnPrefix + "targetgroup/a/0123456789abcdef"}, nil, elb.CodeLoadBalancerNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.DescribeLoadBalancers(ctx, scope, tc.arns, tc.names)
			wantCode(t, err, tc.code, tc.msg)
		})
	}
	// Another account sees none of them.
	if rs, err := e.s.DescribeLoadBalancers(ctx, keys.Scope{Account: "999999999999", Region: "us-east-1"}, nil, nil); err != nil || len(rs) != 0 {
		t.Fatalf("another account's load balancers = %v, %v", names(rs), err)
	}
}

func TestDeleteLoadBalancer(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb := e.lb(t, "web", "")
	tg := e.tg(t, "tg", "HTTP")
	l := e.listener(t, lb, 80, tg.GetTargetGroupArn())
	rule, err := e.s.CreateRule(ctx, scope, elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: 1,
		Conditions: []elb.ConditionInput{{Field: "path-pattern", Values: []string{"/api/*"}}}, Actions: forward(tg.GetTargetGroupArn())})
	if err != nil {
		t.Fatal(err)
	}

	// Deletion protection refuses the delete.
	if _, _, err := store.Mutate(ctx, e.kv, keys.ElbLoadBalancer(scope, "web"), func(r *storev1.LoadBalancerRecord) error {
		r.Attributes["deletion_protection.enabled"] = "true"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.s.DeleteLoadBalancer(ctx, scope, lb.GetLoadBalancerArn()), elb.CodeOperationNotPermitted, "cannot be deleted because deletion protection is enabled")
	if _, _, err := store.Mutate(ctx, e.kv, keys.ElbLoadBalancer(scope, "web"), func(r *storev1.LoadBalancerRecord) error {
		r.Attributes["deletion_protection.enabled"] = "false"
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if err := e.s.DeleteLoadBalancer(ctx, scope, lb.GetLoadBalancerArn()); err != nil {
		t.Fatal(err)
	}
	// Its listeners and rules went with it, and the target group is free.
	_, err = e.s.DescribeListeners(ctx, scope, "", []string{l.GetListenerArn()})
	wantCode(t, err, elb.CodeListenerNotFound, "")
	_, err = e.s.DescribeRules(ctx, scope, "", []string{rule.GetRuleArn()})
	wantCode(t, err, elb.CodeRuleNotFound, "One or more rules not found")
	if inUse, err := e.s.InUse(ctx, scope, tg.GetTargetGroupArn()); err != nil || inUse {
		t.Fatalf("target group in use after its load balancer's deletion: %v %v", inUse, err)
	}
	// Deleting what is gone succeeds, as on AWS; a malformed ARN does not.
	if err := e.s.DeleteLoadBalancer(ctx, scope, lb.GetLoadBalancerArn()); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	wantCode(t, e.s.DeleteLoadBalancer(ctx, scope, "arn:aws:elasticloadbalancing:us-east-1:"+account+":loadbalancer/app/web"), elb.CodeValidation, "is not a valid load balancer ARN")
	wantCode(t, e.s.DeleteLoadBalancer(ctx, scope, "web"), elb.CodeValidation, "")
}
