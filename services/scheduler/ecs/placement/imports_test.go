package placement

import (
	"testing"

	"github.com/berthhq/berth/services/scheduler/internal/depcheck"
)

// The placement package sits below the domain packages: control and service call it and
// build their own transactions, so it must not import them (nor anything that does).
// This checks the package's whole import graph with `go list -deps`.
func TestPlacementImportsNoDomainPackage(t *testing.T) {
	depcheck.NoDomainDeps(t, "placement")
}
