package elb_test

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// countPrefix returns how many keys etcd holds under prefix.
func countPrefix(t *testing.T, e env, prefix string) int64 {
	t.Helper()
	resp, err := e.kv.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// The test etcd keeps etcd's default --max-txn-ops (128), as `berth scheduler` does: a
// call on AWS's largest shapes (1,000 targets per group, 50 listeners of 100 rules per
// load balancer) must not need a bigger transaction.
func TestManyTargetsWithinMaxTxnOps(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tg := e.tg(t, "many", "HTTP")
	arn := tg.GetTargetGroupArn()
	targets := make([]elb.TargetInput, 1000)
	for i := range targets {
		targets[i] = elb.TargetInput{ID: fmt.Sprintf("10.1.%d.%d", i/200, i%200+1)}
	}
	if err := e.s.RegisterTargets(ctx, scope, arn, targets[:200]); err != nil {
		t.Fatalf("RegisterTargets of 200: %v", err)
	}
	// The rest, overlapping what is registered (registered again: unchanged).
	if err := e.s.RegisterTargets(ctx, scope, arn, targets[100:]); err != nil {
		t.Fatalf("RegisterTargets up to 1000: %v", err)
	}
	if n := len(healthOf(t, e, arn)); n != 1000 {
		t.Fatalf("%d targets, want 1000", n)
	}
	wantCode(t, e.s.RegisterTargets(ctx, scope, arn, []elb.TargetInput{{ID: "10.2.0.1"}}), elb.CodeTooManyTargets, "(1000)")

	// The lb role's health records, one a target.
	for _, tgt := range targets {
		if _, err := store.NewTxn(e.kv).Put(keys.ElbTargetHealth(scope, "many", tgt.ID, 8080), &storev1.TargetHealthRecord{State: elb.StateHealthy}).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.DeregisterTargets(ctx, scope, arn, targets[:300]); err != nil {
		t.Fatalf("DeregisterTargets of 300: %v", err)
	}
	draining := 0
	for _, h := range healthOf(t, e, arn) {
		if h.State == elb.StateDraining {
			draining++
		}
	}
	if draining != 300 {
		t.Fatalf("%d targets draining, want 300", draining)
	}

	if err := e.s.DeleteTargetGroup(ctx, scope, arn); err != nil {
		t.Fatalf("DeleteTargetGroup of 1000 targets: %v", err)
	}
	_, err := e.s.TargetGroup(ctx, scope, arn)
	wantCode(t, err, elb.CodeTargetGroupNotFound, "")
	if n := countPrefix(t, e, keys.ElbTarget(scope, "many", "", 0)); n != 0 {
		t.Errorf("%d target records left", n)
	}
	if n := countPrefix(t, e, keys.ElbTargetHealth(scope, "many", "", 0)); n != 0 {
		t.Errorf("%d health records left", n)
	}
}

func TestDeleteLoadBalancerManyListenersAndRules(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb, tg := e.lb(t, "big", ""), e.tg(t, "tg", "HTTP")
	other := e.lb(t, "bigger", "") // a name the first is a prefix of keeps its listeners
	kept := e.listener(t, other, 80, e.tg(t, "tg2", "HTTP").GetTargetGroupArn())
	var first *storev1.ListenerRecord
	for p := int32(1); p <= 50; p++ {
		l := e.listener(t, lb, 1000+p, tg.GetTargetGroupArn())
		if first == nil {
			first = l
		}
	}
	for p := int32(1); p <= 100; p++ {
		if _, err := e.s.CreateRule(ctx, scope, elb.RuleInput{ListenerArn: first.GetListenerArn(), Priority: p,
			Conditions: []elb.ConditionInput{{Field: "path-pattern", Values: []string{"/x"}}}, Actions: forward(tg.GetTargetGroupArn())}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.DeleteLoadBalancer(ctx, scope, lb.GetLoadBalancerArn()); err != nil {
		t.Fatalf("DeleteLoadBalancer of 50 listeners and 100 rules: %v", err)
	}
	if n := countPrefix(t, e, keys.ElbListener(scope, "big", "")); n != 0 {
		t.Errorf("%d listener records left", n)
	}
	if n := countPrefix(t, e, keys.ElbRule(scope, "big", "", "")); n != 0 {
		t.Errorf("%d rule records left", n)
	}
	if _, err := e.s.DescribeListeners(ctx, scope, "", []string{kept.GetListenerArn()}); err != nil {
		t.Fatalf("the other load balancer's listener: %v", err)
	}
}
