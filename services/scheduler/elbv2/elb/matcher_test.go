package elb_test

import (
	"testing"

	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

// AWS's Matcher reference: HttpCode is 200-499 for Application Load Balancers (HTTP
// target groups), 200-599 for Network Load Balancers (TCP groups checking over HTTP),
// whose default is 200-399; a range runs from low to high.
func TestHealthCheckMatcherRanges(t *testing.T) {
	e := newEnv(t)
	http := func(m string) elb.TargetGroupInput {
		return elb.TargetGroupInput{Name: "alb", Protocol: "HTTP", Port: port(80), MatcherHTTPCode: ptr(m)}
	}
	tcp := func(m string) elb.TargetGroupInput {
		in := elb.TargetGroupInput{Name: "nlb", Protocol: "TCP", Port: port(80), HealthCheckProtocol: ptr("HTTP")}
		if m != "" {
			in.MatcherHTTPCode = ptr(m)
		}
		return in
	}
	for _, tc := range []struct {
		name string
		in   elb.TargetGroupInput
		msg  string // "" accepted
	}{
		{"ALB 200", http("200"), ""},
		{"ALB 200-499", http("200-499"), ""},
		{"ALB list and range", http("200,202,300-399"), ""},
		{"ALB 100", http("100"), "Health check matcher HTTP code '100' must be codes from 200 to 499 such as 200, 200,202 or 200-299"},
		{"ALB 199", http("199-200"), "must be codes from 200 to 499"},
		{"ALB 500", http("500"), "must be codes from 200 to 499"},
		{"ALB 999", http("999"), "must be codes from 200 to 499"},
		{"ALB range past 499", http("200-599"), "must be codes from 200 to 499"},
		{"ALB descending range", http("300-200"), "Health check matcher HTTP code '300-200' must be codes from 200 to 499"},
		{"ALB one bad code of a list", http("200,600"), "must be codes from 200 to 499"},
		{"NLB 200-599", tcp("200-599"), ""},
		{"NLB 500", tcp("500"), ""},
		{"NLB 600", tcp("600"), "Health check matcher HTTP code '600' must be codes from 200 to 599 such as 200, 200,202 or 200-299"},
		{"NLB 100", tcp("100"), "must be codes from 200 to 599"},
		{"NLB descending range", tcp("399-200"), "must be codes from 200 to 599"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := e.s.CreateTargetGroup(t.Context(), scope, tc.in)
			if tc.msg != "" {
				wantCode(t, err, elb.CodeValidation, tc.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := e.s.DeleteTargetGroup(t.Context(), scope, tg.GetTargetGroupArn()); err != nil {
				t.Fatal(err)
			}
		})
	}
	// ModifyTargetGroup keeps to the same ranges.
	alb, err := e.s.CreateTargetGroup(t.Context(), scope, elb.TargetGroupInput{Name: "alb", Protocol: "HTTP", Port: port(80)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.s.ModifyTargetGroup(t.Context(), scope, alb.GetTargetGroupArn(), elb.TargetGroupInput{MatcherHTTPCode: ptr("502")})
	wantCode(t, err, elb.CodeValidation, "must be codes from 200 to 499")
	// An NLB's HTTP check matches 200-399 unless told otherwise.
	nlb, err := e.s.CreateTargetGroup(t.Context(), scope, tcp(""))
	if err != nil {
		t.Fatal(err)
	}
	if got := nlb.GetMatcherHttpCode(); got != "200-399" {
		t.Errorf("TCP group's HTTP check matcher = %q, want 200-399", got)
	}
}
