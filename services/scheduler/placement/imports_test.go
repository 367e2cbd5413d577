package placement

import (
	"os/exec"
	"strings"
	"testing"
)

// The placement package sits below the domain packages: control and service call it and
// build their own transactions, so it must not import them (nor anything that does).
// This checks the package's whole import graph with `go list -deps`.
func TestPlacementImportsNoDomainPackage(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool (go list -deps): not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const scheduler = "github.com/berthhq/berth/services/scheduler/"
	forbidden := []string{"control", "service", "reaper", "agentsession", "app", "admin", "leader"}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %q: too few packages to be the real graph", deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == scheduler+f || strings.HasPrefix(d, scheduler+f+"/") {
				t.Errorf("placement depends on %s", d)
			}
		}
	}
}
