package placement

import (
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/cql"
)

// TestExpr evaluates memberOf expressions on an Instance (a cql.Subject); the parser's
// own tests are in package cql.
func TestExpr(t *testing.T) {
	in := inst("abc", 0, 0,
		attr("ecs.instance-type", "t2.small"), attr("ecs.availability-zone", "us-east-1a"),
		attr("stack", "prod"), attr("gpu", ""), ec2("i-0123"), tasks(3), group("service:web", 2))
	in.AgentVersion = "1.72.0"
	in.RegisteredAt = time.Date(2026, 6, 18, 22, 28, 28, 0, time.UTC)
	cases := []struct {
		expr string
		want bool
	}{
		{"attribute:ecs.instance-type == t2.small", true},
		{"attribute:ecs.instance-type != t2.small", false},
		{"attribute:ecs.instance-type = t2.small", true},
		{"attribute:ecs.instance-type =~ t2.*", true},
		{"attribute:ecs.instance-type !~ t2.*", false},
		{"attribute:ecs.availability-zone in [us-east-1a, us-east-1b]", true},
		{"attribute:ecs.availability-zone in (us-east-1c, 'us-east-1d')", false},
		{"attribute:ecs.availability-zone !in [us-east-1c]", true},
		{"attribute:ecs.availability-zone not_in [us-east-1a]", false},
		{"attribute:ecs.availability-zone not in [us-east-1a]", false},
		{"attribute:stack exists", true},
		{"attribute:gpu exists", true},
		{"attribute:missing exists", false},
		{"attribute:missing not exists", true},
		{"attribute:missing !exists", true},
		{"attribute:missing == x", false},
		{"attribute:missing != x", true},
		{"attribute:stack == prod and attribute:ecs.instance-type == t2.small", true},
		{"attribute:stack == dev or attribute:ecs.instance-type == t2.small", true},
		{"attribute:stack == dev || attribute:stack == qa", false},
		{"attribute:stack == prod && !(attribute:stack == prod)", false},
		{"(attribute:stack == dev or attribute:stack == prod) and not attribute:gpu not exists", true},
		{"attribute:stack == dev or attribute:stack == prod and attribute:gpu exists", true}, // and binds tighter
		{"ec2InstanceId == i-0123", true},
		{"ec2InstanceId in ['i-1', \"i-0123\"]", true},
		{"instanceId == abc", true},
		{"agentConnected == true", true},
		{"agentVersion >= 1.70.0", true},
		{"agentVersion < 1.9.0", false},
		{"registeredAt < 2026-06-19", true},
		{"registeredAt >= 2026-06-18T22:28:28Z", true},
		{"runningTasksCount <= 3", true},
		{"runningTasksCount > 3", false},
		{"task:group == service:web", true},
		{"not(task:group == service:web)", false},
		{"task:group != service:db", true},
	}
	for _, tc := range cases {
		e, err := cql.ParseExpr(tc.expr)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if got := e.Match(in); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
}
