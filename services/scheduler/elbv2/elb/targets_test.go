package elb_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func healthOf(t *testing.T, e env, arn string, targets ...elb.TargetInput) map[string]elb.TargetHealth {
	t.Helper()
	hs, err := e.s.DescribeTargetHealth(t.Context(), scope, arn, targets)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]elb.TargetHealth{}
	for _, h := range hs {
		out[fmt.Sprintf("%s:%d", h.ID, h.Port)] = h
	}
	return out
}

func TestRegisterTargets(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tg := e.tg(t, "ips", "HTTP") // ip targets, port 8080
	if err := e.s.RegisterTargets(ctx, scope, tg.GetTargetGroupArn(), []elb.TargetInput{
		{ID: "10.0.0.1"}, {ID: "10.0.0.2", Port: port(9000), AvailabilityZone: "us-east-1a"},
		{ID: "10.0.0.3", Address: "127.0.0.1:31000", TaskArn: "arn:aws:ecs:us-east-1:" + account + ":task/c/t1"},
	}); err != nil {
		t.Fatal(err)
	}
	hs := healthOf(t, e, tg.GetTargetGroupArn())
	for key, want := range map[string]string{"10.0.0.1:8080": "10.0.0.1:8080", "10.0.0.2:9000": "10.0.0.2:9000", "10.0.0.3:8080": "127.0.0.1:31000"} {
		if h, ok := hs[key]; !ok || h.Address != want {
			t.Errorf("target %s: %+v, want address %s", key, h, want)
		}
	}
	if h := hs["10.0.0.2:9000"]; h.AvailabilityZone != "us-east-1a" || h.HealthCheckPort != "9000" {
		t.Errorf("target 10.0.0.2:9000 = %+v", h)
	}
	if h := hs["10.0.0.3:8080"]; h.TaskArn != "arn:aws:ecs:us-east-1:"+account+":task/c/t1" {
		t.Errorf("TaskArn = %q", h.TaskArn)
	}
	if len(hs) != 3 {
		t.Fatalf("%d targets, want 3", len(hs))
	}
	// Registering a registered target again changes nothing.
	if err := e.s.RegisterTargets(ctx, scope, tg.GetTargetGroupArn(), []elb.TargetInput{{ID: "10.0.0.1", Port: port(8080)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(healthOf(t, e, tg.GetTargetGroupArn())); n != 3 {
		t.Fatalf("%d targets after a repeated registration, want 3", n)
	}

	for _, tc := range []struct {
		name      string
		targets   []elb.TargetInput
		code, msg string
	}{
		{"none", nil, elb.CodeValidation, "At least one target must be specified"},
		{"no id", []elb.TargetInput{{ID: ""}}, elb.CodeValidation, "A target ID must be specified"},
		{"port 0", []elb.TargetInput{{ID: "10.0.0.9", Port: port(0)}}, elb.CodeValidation, "Port '0' must be between 1 and 65535"},
		{"port 65536", []elb.TargetInput{{ID: "10.0.0.9", Port: port(65536)}}, elb.CodeValidation, "Port '65536'"},
		{"host name", []elb.TargetInput{{ID: "db.local"}}, elb.CodeInvalidTarget, "The IP address 'db.local' is not a valid IPv4 address"},
		{"IPv6", []elb.TargetInput{{ID: "fd00::1"}}, elb.CodeInvalidTarget, "is not a valid IPv4 address"},
		{"one bad of two", []elb.TargetInput{{ID: "10.0.0.9"}, {ID: "bad"}}, elb.CodeInvalidTarget, "'bad'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, e.s.RegisterTargets(ctx, scope, tg.GetTargetGroupArn(), tc.targets), tc.code, tc.msg)
		})
	}
	if n := len(healthOf(t, e, tg.GetTargetGroupArn())); n != 3 {
		t.Fatalf("refused registrations changed the targets: %d", n)
	}
	wantCode(t, e.s.RegisterTargets(ctx, scope, arnPrefix+"targetgroup/nope/0123456789abcdef", []elb.TargetInput{{ID: "10.0.0.1"}}), elb.CodeTargetGroupNotFound, "")
}

func TestInstanceTargets(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tg, err := e.s.CreateTargetGroup(ctx, scope, elb.TargetGroupInput{Name: "inst", Protocol: "HTTP", Port: port(80)})
	if err != nil {
		t.Fatal(err)
	}
	// Without a resolver no instance is known.
	wantCode(t, e.s.RegisterTargets(ctx, scope, tg.GetTargetGroupArn(), []elb.TargetInput{{ID: "i-0abc"}}), elb.CodeInvalidTarget, "The following targets are not valid instances: 'i-0abc'")

	var asked []string
	s := elb.New(e.kv).WithInstanceHost(func(_ context.Context, sc keys.Scope, id string) (string, error) {
		asked = append(asked, sc.Account+"/"+id)
		if id == "i-0abc" {
			return "192.168.1.5", nil
		}
		return "", &elb.Error{Code: elb.CodeInvalidTarget, Message: "The following targets are not valid instances: '" + id + "'", Status: 400}
	})
	if err := s.RegisterTargets(ctx, scope, tg.GetTargetGroupArn(), []elb.TargetInput{{ID: "i-0abc", Port: port(32768)}}); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != account+"/i-0abc" {
		t.Fatalf("resolver asked %v", asked)
	}
	if h := healthOf(t, e, tg.GetTargetGroupArn())["i-0abc:32768"]; h.Address != "192.168.1.5:32768" {
		t.Fatalf("instance target = %+v, want address 192.168.1.5:32768", h)
	}
	wantCode(t, s.RegisterTargets(ctx, scope, tg.GetTargetGroupArn(), []elb.TargetInput{{ID: "i-gone"}}), elb.CodeInvalidTarget, "'i-gone'")
}

func TestTargetLimit(t *testing.T) {
	e := newEnv(t)
	tg := e.tg(t, "ips", "HTTP")
	targets := make([]elb.TargetInput, 1001)
	for i := range targets {
		targets[i] = elb.TargetInput{ID: fmt.Sprintf("10.0.%d.%d", i/200, i%200+1)}
	}
	wantCode(t, e.s.RegisterTargets(t.Context(), scope, tg.GetTargetGroupArn(), targets), elb.CodeTooManyTargets, "You've reached the limit on the number of targets per target group (1000)")
	if n := len(healthOf(t, e, tg.GetTargetGroupArn())); n != 0 {
		t.Fatalf("a refused registration left %d targets", n)
	}
}

func TestTargetHealthStates(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb, tg := e.lb(t, "web", ""), e.tg(t, "ips", "HTTP")
	arn := tg.GetTargetGroupArn()
	a, b, c := elb.TargetInput{ID: "10.0.0.1"}, elb.TargetInput{ID: "10.0.0.2"}, elb.TargetInput{ID: "10.0.0.3"}
	if err := e.s.RegisterTargets(ctx, scope, arn, []elb.TargetInput{a, b, c}); err != nil {
		t.Fatal(err)
	}
	type sr struct{ state, reason, desc string }
	check := func(t *testing.T, want map[string]sr, targets ...elb.TargetInput) {
		t.Helper()
		got := healthOf(t, e, arn, targets...)
		if len(got) != len(want) {
			t.Fatalf("health of %d targets, want %d: %v", len(got), len(want), got)
		}
		for k, w := range want {
			h := got[k]
			if h.State != w.state || h.Reason != w.reason || h.Description != w.desc {
				t.Errorf("%s = %s/%s %q, want %s/%s %q", k, h.State, h.Reason, h.Description, w.state, w.reason, w.desc)
			}
		}
	}
	notInUse := sr{elb.StateUnused, elb.ReasonNotInUse, "Target group is not configured to receive traffic from the load balancer"}
	// No listener forwards to the group: every target is unused.
	check(t, map[string]sr{"10.0.0.1:8080": notInUse, "10.0.0.2:8080": notInUse, "10.0.0.3:8080": notInUse})

	// Once a listener forwards to it, targets the lb role has not checked are initial;
	// then they are what it observed.
	e.listener(t, lb, 80, arn)
	putHealth := func(id, state, reason, desc string) {
		t.Helper()
		rec := &storev1.TargetHealthRecord{State: state, Reason: reason, Description: desc}
		if _, err := store.NewTxn(e.kv).Put(keys.ElbTargetHealth(scope, "ips", id, 8080), rec).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	putHealth("10.0.0.1", elb.StateHealthy, "", "")
	putHealth("10.0.0.2", elb.StateUnhealthy, elb.ReasonResponseCodeMismatch, "Health checks failed with these codes: [503]")
	putHealth("10.0.0.3", elb.StateUnhealthy, elb.ReasonTimeout, "")
	check(t, map[string]sr{
		"10.0.0.1:8080": {elb.StateHealthy, "", ""},
		"10.0.0.2:8080": {elb.StateUnhealthy, elb.ReasonResponseCodeMismatch, "Health checks failed with these codes: [503]"},
		"10.0.0.3:8080": {elb.StateUnhealthy, elb.ReasonTimeout, "Request timed out"},
	})
	// A stale "unused" record from before the group was in use reads as initial.
	putHealth("10.0.0.1", elb.StateUnused, elb.ReasonNotInUse, "")
	check(t, map[string]sr{"10.0.0.1:8080": {elb.StateInitial, elb.ReasonRegistrationInProgress, "Target registration is in progress"}}, a)

	// Deregistration drains; asking for a target never registered answers unused.
	if err := e.s.DeregisterTargets(ctx, scope, arn, []elb.TargetInput{b}); err != nil {
		t.Fatal(err)
	}
	check(t, map[string]sr{
		"10.0.0.2:8080": {elb.StateDraining, elb.ReasonDeregistrationInProgress, "Target deregistration is in progress"},
		"10.0.0.9:8080": {elb.StateUnused, elb.ReasonNotRegistered, "Target is not registered to the target group"},
		"10.0.0.1:9999": {elb.StateUnused, elb.ReasonNotRegistered, "Target is not registered to the target group"},
	}, b, elb.TargetInput{ID: "10.0.0.9"}, elb.TargetInput{ID: "10.0.0.1", Port: port(9999)})
	// Deregistering a draining target again is accepted; registering it again ends the drain.
	if err := e.s.DeregisterTargets(ctx, scope, arn, []elb.TargetInput{b}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RegisterTargets(ctx, scope, arn, []elb.TargetInput{b}); err != nil {
		t.Fatal(err)
	}
	if h := healthOf(t, e, arn, b)["10.0.0.2:8080"]; h.State != elb.StateUnhealthy {
		t.Fatalf("re-registered target = %s/%s, want the observed unhealthy", h.State, h.Reason)
	}

	wantCode(t, e.s.DeregisterTargets(ctx, scope, arn, []elb.TargetInput{{ID: "10.0.0.9"}}), elb.CodeInvalidTarget,
		"The following targets are not registered in target group '"+arn+"': 'Id=10.0.0.9,Port=8080'")
	wantCode(t, e.s.DeregisterTargets(ctx, scope, arn, nil), elb.CodeValidation, "At least one target must be specified")
	wantCode(t, e.s.DeregisterTargets(ctx, scope, arn, []elb.TargetInput{{ID: "10.0.0.1", Port: port(0)}}), elb.CodeValidation, "Port '0'")
	_, err := e.s.DescribeTargetHealth(ctx, scope, arn, []elb.TargetInput{{ID: ""}})
	wantCode(t, err, elb.CodeValidation, "A target ID must be specified")
	_, err = e.s.DescribeTargetHealth(ctx, scope, arnPrefix+"targetgroup/nope/0123456789abcdef", nil)
	wantCode(t, err, elb.CodeTargetGroupNotFound, "")

	// An explicit health check port is reported as such.
	if _, err := e.s.ModifyTargetGroup(ctx, scope, arn, elb.TargetGroupInput{HealthCheckPort: ptr("9100")}); err != nil {
		t.Fatal(err)
	}
	if h := healthOf(t, e, arn, a)["10.0.0.1:8080"]; h.HealthCheckPort != "9100" {
		t.Fatalf("HealthCheckPort = %q, want 9100", h.HealthCheckPort)
	}
	if s := healthOf(t, e, arn, c)["10.0.0.3:8080"].String(); s != "10.0.0.3:8080 unhealthy/Target.Timeout" {
		t.Errorf("String() = %q", s)
	}
}

func TestDescribeReasons(t *testing.T) {
	for reason, want := range map[string]string{
		elb.ReasonRegistrationInProgress:   "Target registration is in progress",
		elb.ReasonInitialHealthChecking:    "Initial health checks in progress",
		elb.ReasonTimeout:                  "Request timed out",
		elb.ReasonFailedHealthChecks:       "Health checks failed",
		elb.ReasonNotRegistered:            "Target is not registered to the target group",
		elb.ReasonNotInUse:                 "Target group is not configured to receive traffic from the load balancer",
		elb.ReasonDeregistrationInProgress: "Target deregistration is in progress",
		elb.ReasonHealthCheckDisabled:      "Health checks are disabled",
		"Elb.InternalError":                "",
		"":                                 "",
	} {
		if got := elb.Describe(reason); got != want {
			t.Errorf("Describe(%q) = %q, want %q", reason, got, want)
		}
	}
	if got := elb.CodeOf(fmt.Errorf("wrapped: %w", &elb.Error{Code: elb.CodeRuleNotFound})); got != elb.CodeRuleNotFound {
		t.Errorf("CodeOf(wrapped) = %q", got)
	}
	if got := elb.CodeOf(fmt.Errorf("plain")); got != "" {
		t.Errorf("CodeOf(plain) = %q", got)
	}
	if got := (&elb.Error{Code: "X", Message: "y"}).Error(); !strings.HasPrefix(got, "X: y") {
		t.Errorf("Error() = %q", got)
	}
}
