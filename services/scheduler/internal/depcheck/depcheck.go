// Package depcheck is a test helper for the scheduler's layering: the packages below the
// domain packages (placement, task) check with it that their import graph reaches none
// of them.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// scheduler is the import path prefix of the scheduler module's packages.
const scheduler = "github.com/berthhq/berth/services/scheduler/"

// DomainPackages are the scheduler packages (relative to the module) that the lower
// packages must not import, directly or not: they build on those.
var DomainPackages = []string{"control", "service", "reaper", "agentsession", "app", "admin", "leader"}

// NoDomainDeps fails t for every package of DomainPackages (or below one) that the
// package in the test's working directory depends on, by its whole import graph
// (`go list -deps .`); name names that package in the messages. It skips t when the go
// tool is not on PATH, and fails it when go list fails or lists too few packages to be
// the real graph.
func NoDomainDeps(t *testing.T, name string) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool (go list -deps): not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %q: too few packages to be the real graph", deps)
	}
	for _, d := range deps {
		for _, f := range DomainPackages {
			if d == scheduler+f || strings.HasPrefix(d, scheduler+f+"/") {
				t.Errorf("%s depends on %s", name, d)
			}
		}
	}
}
