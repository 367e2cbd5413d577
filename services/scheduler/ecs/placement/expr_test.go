package placement

import (
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/ecs/cql"
)

// TestInstanceSubject checks Instance as the cql.Subject memberOf expressions are
// evaluated on: every built-in subject reads the right field. The language itself is
// tested in package cql.
func TestInstanceSubject(t *testing.T) {
	in := inst("abc", 0, 0, attr("stack", "prod"), attr("gpu", ""), ec2("i-0123"), tasks(3), group("service:web", 2), group("service:old", 0))
	in.AgentVersion = "1.72.0"
	in.RegisteredAt = time.Date(2026, 6, 18, 22, 28, 28, 0, time.UTC)
	bare := inst("def", 0, 0)
	cases := []struct {
		expr     string
		in, bare bool
	}{
		{"attribute:stack == prod", true, false},
		{"attribute:gpu exists", true, false},
		{"attribute:stack !exists", false, true},
		{"ec2InstanceId == i-0123", true, false},
		{"ec2InstanceId != i-0123", false, true},
		{"instanceId == abc", true, false},
		{"agentConnected == true", true, true},
		{"agentVersion >= 1.70.0", true, false},
		{"registeredAt < 2026-06-19", true, false},
		{"runningTasksCount == 3", true, false},
		{"runningTasksCount == 0", false, true},
		{"task:group == service:web", true, false},
		{"task:group == service:old", false, false},
		{"not(task:group == service:web)", false, true},
	}
	for _, tc := range cases {
		e, err := cql.ParseExpr(tc.expr)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if got := e.Match(in); got != tc.in {
			t.Errorf("%q on abc = %v, want %v", tc.expr, got, tc.in)
		}
		if got := e.Match(bare); got != tc.bare {
			t.Errorf("%q on a bare instance = %v, want %v", tc.expr, got, tc.bare)
		}
	}
}
