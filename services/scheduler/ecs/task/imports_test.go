package task

import (
	"testing"

	"github.com/berthhq/berth/services/scheduler/internal/depcheck"
)

// The task package sits below the domain packages: control, service, reaper and
// agentsession call it, so it must not import them (nor anything that does). This checks
// the package's whole import graph with `go list -deps`.
func TestTaskImportsNoDomainPackage(t *testing.T) {
	depcheck.NoDomainDeps(t, "task")
}
