package cql

import (
	"errors"
	"testing"
	"time"
)

// fakeSubject is a test Subject.
type fakeSubject struct {
	attrs map[string]string
	b     Builtins
}

func (s fakeSubject) Attribute(name string) (string, bool) { v, ok := s.attrs[name]; return v, ok }
func (s fakeSubject) Builtins() Builtins                   { return s.b }

func testSubject() fakeSubject {
	return fakeSubject{
		attrs: map[string]string{"ecs.instance-type": "t2.small", "ecs.availability-zone": "us-east-1a", "stack": "prod", "gpu": ""},
		b: Builtins{InstanceID: "abc", EC2InstanceID: "i-0123", AgentConnected: true, AgentVersion: "1.72.0",
			RegisteredAt: time.Date(2026, 6, 18, 22, 28, 28, 0, time.UTC), RunningTasksCount: 3,
			TaskGroups: map[string]int{"service:web": 2, "service:old": 0}},
	}
}

func TestExpr(t *testing.T) {
	in := testSubject()
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
		{"attribute:ecs.availability-zone in us-east-1a", true},
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
		{"attribute:missing in [x]", false},
		{"attribute:missing not_in [x]", true},
		{"attribute:missing =~ x*", false},
		{"attribute:stack == prod and attribute:ecs.instance-type == t2.small", true},
		{"attribute:stack == prod AND attribute:ecs.instance-type == t2.small", true},
		{"attribute:stack == dev or attribute:ecs.instance-type == t2.small", true},
		{"attribute:stack == dev || attribute:stack == qa", false},
		{"attribute:stack == prod && !(attribute:stack == prod)", false},
		{"(attribute:stack == dev or attribute:stack == prod) and not attribute:gpu not exists", true},
		{"attribute:stack == dev or attribute:stack == prod and attribute:gpu exists", true}, // and binds tighter
		{"(attribute:stack == prod) and (attribute:gpu exists)", true},
		{"attribute:stack == 'prod'", true},
		{`attribute:stack == "prod"`, true},
		{"ec2InstanceId == i-0123", true},
		{"ec2InstanceId != i-0123", false},
		{"ec2InstanceId in ['i-1', \"i-0123\"]", true},
		{"ec2InstanceId not_in [i-1]", true},
		{"instanceId == abc", true},
		{"containerInstanceId == abc", true},
		{"agentConnected == true", true},
		{"agentVersion >= 1.70.0", true},
		{"agentVersion < 1.9.0", false},
		{"registeredAt < 2026-06-19", true},
		{"registeredAt >= 2026-06-18T22:28:28Z", true},
		{"runningTasksCount <= 3", true},
		{"runningTasksCount > 3", false},
		{"task:group == service:web", true},
		{"task:group == service:old", false},
		{"not(task:group == service:web)", false},
		{"task:group != service:db", true},
		// =~ reads the pattern as a regular expression or as a glob (control's filter
		// accepted globs): either reading matching is a match.
		{"attribute:ecs.instance-type =~ t2*", true},     // glob; the regexp t2* does not match
		{"attribute:ecs.instance-type =~ *.small", true}, // glob; not a valid regexp
		{"attribute:ecs.instance-type =~ 't2\\.(small|large)'", true},
		{"attribute:ecs.instance-type =~ t3*", false},
		{"attribute:ecs.instance-type !~ t2*", false},
		{"attribute:ecs.instance-type !~ *.large", true},
		{"ec2InstanceId =~ i-01*", true},
		{"attribute:stack =~ pr?d", false}, // ? is not a glob wildcard; pr?d is the regexp for "prd" and "pd"
	}
	for _, tc := range cases {
		e, err := ParseExpr(tc.expr)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if e.String() != tc.expr {
			t.Errorf("%q: String() = %q", tc.expr, e.String())
		}
		if got := e.Match(in); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestNilExprMatchesEverything(t *testing.T) {
	var e *Expr
	if !e.Match(testSubject()) {
		t.Fatal("nil Expr did not match")
	}
}

func TestExprErrors(t *testing.T) {
	for _, src := range []string{
		"", "attribute:x", "attribute:x ==", "attribute: == a", "foo == bar",
		"(attribute:x == a", "attribute:x == a)", "attribute:x in [a,", "attribute:x in [a b]",
		"ec2InstanceId exists", "runningTasksCount =~ 3", "attribute:x =~ (", "attribute:x == 'a",
		"attribute:x == a and", "attribute:x ! foo", "garbage", "nonsense",
	} {
		if _, err := ParseExpr(src); !errors.Is(err, ErrExpression) {
			t.Errorf("%q: err = %v, want ErrExpression", src, err)
		}
	}
}
