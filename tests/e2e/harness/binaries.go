package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Binaries are the programs the harness runs.
type Binaries struct {
	// Berth is bin/berth (every Berth service and the admin CLI).
	Berth string
	// Agent is bin/berth-agent, the agent-only binary hosts that only run tasks deploy
	// (`berth agent`'s flags, no subcommand); the harness runs its agents with it.
	Agent string
	// TestImage is bin/berth-testimage, packed into the demo image.
	TestImage string
	// Etcd is the real etcd server built from go.etcd.io/etcd/server/v3 (cmd/berth-etcd).
	Etcd string
}

var (
	etcdOnce sync.Once
	etcdPath string
	etcdErr  error
	etcdDir  string
)

// binDir returns the directory of `make build`'s binaries: $BERTH_BIN_DIR, else bin/ at the
// repository root (found from this source file).
func binDir() string {
	if d := os.Getenv("BERTH_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(moduleDir(), "..", "..", "bin")
}

// moduleDir returns the directory of the tests/e2e module.
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// FindBinaries returns the binaries, building the etcd server once per test binary. It
// fails the test, saying to run `make build`, when bin/berth, bin/berth-agent or
// bin/berth-testimage is missing.
func FindBinaries(t testing.TB) Binaries {
	t.Helper()
	dir, err := filepath.Abs(binDir())
	if err != nil {
		t.Fatal(err)
	}
	b := Binaries{Berth: filepath.Join(dir, "berth"), Agent: filepath.Join(dir, "berth-agent"), TestImage: filepath.Join(dir, "berth-testimage")}
	for _, p := range []string{b.Berth, b.Agent, b.TestImage} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("e2e: %s is missing: run `make build` at the repository root first (or set BERTH_BIN_DIR): %v", p, err)
		}
	}
	etcdOnce.Do(func() { etcdPath, etcdErr = buildEtcd() })
	if etcdErr != nil {
		t.Fatalf("e2e: build the etcd server: %v", etcdErr)
	}
	b.Etcd = etcdPath
	return b
}

// buildEtcd builds cmd/berth-etcd (CGO off) into a temporary directory removed by Cleanup.
func buildEtcd() (string, error) {
	dir, err := os.MkdirTemp("", "berth-e2e-etcd-")
	if err != nil {
		return "", err
	}
	etcdDir = dir
	out := filepath.Join(dir, "berth-etcd")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/berth-etcd")
	cmd.Dir = moduleDir()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go build ./cmd/berth-etcd: %w\n%s", err, b)
		}
		return "", err
	}
	return out, nil
}

// Cleanup removes what the harness built; call it from TestMain after m.Run.
func Cleanup() {
	if etcdDir != "" {
		_ = os.RemoveAll(etcdDir)
	}
}
