package capacity

import (
	"testing"

	"github.com/berthhq/berth/services/scheduler/internal/depcheck"
)

// The capacity package sits below the domain packages: control and service
// use it, so it must not import them (nor anything that does). This checks
// the package's whole import graph with `go list -deps`.
func TestCapacityImportsNoDomainPackage(t *testing.T) {
	depcheck.NoDomainDeps(t, "capacity")
}
