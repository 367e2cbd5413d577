package e2e

import (
	"os"
	"testing"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestMain runs the package's tests and removes what the harness built.
//
// Tests that start a stack of their own — a `berth dev` (own data dir, ports and task
// subnet), the compose stack, a harness stack with its own agents, an in-process API
// stack on ephemeral ports — call t.Parallel: Go runs them together after the serial
// tests, up to -parallel at once (make test passes -parallel 4). They spend their time
// waiting on containers and in AWS CLI processes, so running them side by side uses
// both cores: the package took 21 min one test at a time. The serial ones are those that
// measure recovery or count failures under faults (fault_test.go, failover, the
// zero-failure load balancer test), whose timings another stack's CPU would blur, and
// TestTaskRoleCredentialsBridgeDev: two agents on one host share berth0, and only one
// agent's 169.254.170.2 redirect can be in force on it.
func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}
