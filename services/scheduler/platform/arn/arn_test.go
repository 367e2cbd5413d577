package arn

import "testing"

func TestParseTaskSet(t *testing.T) {
	for _, c := range []struct {
		in            string
		cluster, name string
		ok            bool
	}{
		{"arn:aws:ecs:us-east-1:123456789012:task-set/c1/web/ecs-svc/1234567890123456789", "c1", "web/ecs-svc/1234567890123456789", true},
		{"arn:aws:ecs:us-east-1:123456789012:task-set/c1/web/ts-1", "c1", "web/ts-1", true},
		{"arn:aws:ecs:us-east-1:123456789012:task-set/c1/web/other/1", "", "", false},
		{"arn:aws:ecs:us-east-1:123456789012:task-set/c1/web/ecs-svc/", "", "", false},
	} {
		a, err := Parse(c.in)
		if (err == nil) != c.ok || (c.ok && (a.Type != TaskSet || a.Cluster != c.cluster || a.Name != c.name)) {
			t.Errorf("Parse(%q) = %+v, %v", c.in, a, err)
		}
	}
}
