package arn

import "testing"

// TestDaemonARNs: the managed daemons' ARN forms parse and format back.
func TestDaemonARNs(t *testing.T) {
	for _, c := range []struct {
		s, typ, cluster, name string
		rev                   int
		ok                    bool
	}{
		{"arn:aws:ecs:us-east-1:123456789012:daemon-task-definition/agents:3", DaemonTaskDefinition, "", "agents", 3, true},
		{"arn:aws:ecs:us-east-1:123456789012:daemon-task-definition/agents", "", "", "", 0, false},
		{"arn:aws:ecs:us-east-1:123456789012:daemon/prod/monitor", Daemon, "prod", "monitor", 0, true},
		{"arn:aws:ecs:us-east-1:123456789012:daemon/monitor", "", "", "", 0, false},
		{"arn:aws:ecs:us-east-1:123456789012:daemon-deployment/prod/monitor/abc", DaemonDeployment, "prod", "monitor/abc", 0, true},
		{"arn:aws:ecs:us-east-1:123456789012:daemon-revision/prod/monitor/def", DaemonRevision, "prod", "monitor/def", 0, true},
		{"arn:aws:ecs:us-east-1:123456789012:daemon-revision/prod/monitor", "", "", "", 0, false},
	} {
		a, err := Parse(c.s)
		if (err == nil) != c.ok {
			t.Errorf("Parse(%q): err %v, want ok %v", c.s, err, c.ok)
			continue
		}
		if !c.ok {
			continue
		}
		if a.Type != c.typ || a.Cluster != c.cluster || a.Name != c.name || a.Revision != c.rev {
			t.Errorf("Parse(%q) = %+v", c.s, a)
		}
		if got := a.String(); got != c.s {
			t.Errorf("String() = %q, want %q", got, c.s)
		}
	}
}
