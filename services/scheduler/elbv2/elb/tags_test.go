package elb_test

import (
	"maps"
	"testing"

	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

func TestTags(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb, tg := e.lb(t, "web", ""), e.tg(t, "tg", "HTTP")
	l := e.listener(t, lb, 80, tg.GetTargetGroupArn())
	r, err := e.s.CreateRule(ctx, scope, elb.RuleInput{ListenerArn: l.GetListenerArn(), Priority: 1,
		Conditions: []elb.ConditionInput{{Field: "path-pattern", Values: []string{"/x"}}}, Actions: forward(tg.GetTargetGroupArn())})
	if err != nil {
		t.Fatal(err)
	}
	arns := []string{lb.GetLoadBalancerArn(), tg.GetTargetGroupArn(), l.GetListenerArn(), r.GetRuleArn()}

	asMap := func(ts []elb.Tag) map[string]string {
		out := map[string]string{}
		for _, tg := range ts {
			out[tg.Key] = tg.Value
		}
		return out
	}
	if err := e.s.AddTags(ctx, scope, arns, []elb.Tag{{Key: "env", Value: "dev"}, {Key: "team", Value: "red"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.AddTags(ctx, scope, arns[:1], []elb.Tag{{Key: "env", Value: "prod"}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.DescribeTags(ctx, scope, arns)
	if err != nil {
		t.Fatal(err)
	}
	for i, arn := range arns {
		want := map[string]string{"env": "dev", "team": "red"}
		if i == 0 {
			want["env"] = "prod" // overwritten
		}
		if !maps.Equal(asMap(got[arn]), want) {
			t.Errorf("tags of %s = %v, want %v", arn, got[arn], want)
		}
	}
	if err := e.s.RemoveTags(ctx, scope, arns[1:], []string{"team", "absent"}); err != nil {
		t.Fatal(err)
	}
	got, _ = e.s.DescribeTags(ctx, scope, arns)
	if m := asMap(got[tg.GetTargetGroupArn()]); !maps.Equal(m, map[string]string{"env": "dev"}) {
		t.Errorf("tags after remove = %v", m)
	}
	if m := asMap(got[lb.GetLoadBalancerArn()]); len(m) != 2 {
		t.Errorf("RemoveTags touched a resource it was not given: %v", m)
	}

	// 50 tags per resource, counting those it has.
	wantCode(t, e.s.AddTags(ctx, scope, arns[:1], tags(49)), elb.CodeTooManyTags, "(50)")
	if err := e.s.AddTags(ctx, scope, arns[:1], tags(48)); err != nil {
		t.Fatalf("up to 50 tags: %v", err)
	}
	wantCode(t, e.s.AddTags(ctx, scope, arns[:1], []elb.Tag{{Key: "aws:x"}}), elb.CodeValidation, "reserved")
	wantCode(t, e.s.AddTags(ctx, scope, arns[:1], []elb.Tag{{Key: "k"}, {Key: "k"}}), elb.CodeDuplicateTagKeys, "")

	many := make([]string, 21)
	for i := range many {
		many[i] = lb.GetLoadBalancerArn()
	}
	_, err = e.s.DescribeTags(ctx, scope, many)
	wantCode(t, err, elb.CodeValidation, "At most 20 resource ARNs can be specified")

	for _, tc := range []struct{ arn, code string }{
		{arnPrefix + "loadbalancer/app/nope/0123456789abcdef", elb.CodeLoadBalancerNotFound},
		{arnPrefix + "targetgroup/nope/0123456789abcdef", elb.CodeTargetGroupNotFound},
		{arnPrefix + "targetgroup/tg/0123456789abcdef", elb.CodeTargetGroupNotFound}, // the name exists, the id does not
		{l.GetListenerArn() + "0", elb.CodeListenerNotFound},
		{r.GetRuleArn() + "0", elb.CodeRuleNotFound},
		{arnPrefix + "certificate/x", elb.CodeValidation},
		{"tg", elb.CodeValidation},
	} {
		_, err := e.s.DescribeTags(ctx, scope, []string{tc.arn})
		wantCode(t, err, tc.code, "")
		wantCode(t, e.s.AddTags(ctx, scope, []string{tc.arn}, []elb.Tag{{Key: "k"}}), tc.code, "")
		wantCode(t, e.s.RemoveTags(ctx, scope, []string{tc.arn}, []string{"k"}), tc.code, "")
	}
}
