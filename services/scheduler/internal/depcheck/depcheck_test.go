package depcheck

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestSchedulerLayering checks the whole module's import graph against the rules.
func TestSchedulerLayering(t *testing.T) {
	for _, v := range Violations(List(t, "../..")) {
		t.Error(v)
	}
}

// TestTopLevelFolders fails on a folder at the top of the module that is neither a
// service nor one of platform, admin, app and internal: a new AWS service gets its own
// folder and a line in Services, anything shared goes into platform.
func TestTopLevelFolders(t *testing.T) {
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		n++
		if !slices.Contains(TopLevel, e.Name()) {
			t.Errorf("services/scheduler/%s is not a service folder nor one of platform, admin, app, internal", e.Name())
		}
	}
	if n > 13 {
		t.Errorf("services/scheduler has %d top-level folders; the layout allows 13", n)
	}
}

// TestViolations shows each rule catching the import it forbids, and the imports the
// rules allow passing.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pkg      Package
		wantRule string // "" when the import is allowed
	}{
		{"service to platform", Package{"ecs/control", []string{"platform/store"}}, ""},
		{"within a service", Package{"ecs/service", []string{"ecs/control"}}, ""},
		{"service to another's model", Package{"ecs/service", []string{"elbv2/elb"}}, ""},
		{"data plane to its model", Package{"elbv2/lb", []string{"elbv2/elb"}}, ""},
		{"app wires everything", Package{"app", []string{"elbv2/lb", "admin", "ecs/control"}}, ""},
		{"admin on platform", Package{"admin", []string{"platform/keys"}}, ""},
		{"service to another's API", Package{"ecs/service", []string{"elbv2/elbapi"}}, "only through its model"},
		{"service to another's data plane", Package{"ecs/service", []string{"elbv2/lb"}}, "only through its model"},
		{"model to its data plane", Package{"elbv2/elb", []string{"elbv2/lb"}}, "a model never imports a data plane"},
		{"API to its data plane", Package{"elbv2/elbapi", []string{"elbv2/lb"}}, "only app wires a data plane"},
		{"platform to a service", Package{"platform/store", []string{"ecs/task"}}, "platform imports no service"},
		{"service to admin", Package{"ecs/control", []string{"admin"}}, "only app wires admin"},
		{"anything to app", Package{"ecs/control", []string{"app"}}, "nothing imports app"},
		{"admin to a service", Package{"admin", []string{"ecs/control"}}, "admin builds on platform only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Violations([]Package{tc.pkg})
			if tc.wantRule == "" {
				if len(got) > 0 {
					t.Errorf("Violations = %q, want none", got)
				}
				return
			}
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tc.wantRule) }) {
				t.Errorf("Violations = %q, want one naming %q", got, tc.wantRule)
			}
		})
	}
}
