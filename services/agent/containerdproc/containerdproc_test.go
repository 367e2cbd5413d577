package containerdproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/berthhq/berth/services/agent/containerdproc"
)

// fakeShimEnv makes the test binary a stand-in for a containerd shim: it sleeps, under
// whatever command line its starter gave it.
const fakeShimEnv = "BERTH_TEST_FAKE_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(fakeShimEnv) == "1" {
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startFakeShim starts a process whose command line is a runc shim's for the daemon at
// address; it is killed when the test ends.
func startFakeShim(t *testing.T, address string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: self, Args: []string{"containerd-shim-runc-v2", "-namespace", "purge", "-id", "orphan", "-address", address},
		Env: append(os.Environ(), fakeShimEnv+"=1")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	return cmd
}

// TestPurgeKillsOrphanShims: a shim of this daemon that containerd no longer knows (it
// forgot the task whose delete was cut off) is killed by Purge; a shim of another
// daemon is left alone.
func TestPurgeKillsOrphanShims(t *testing.T) {
	t.Parallel()
	inst, err := containerdproc.StartProcess(t.Context(), t.TempDir())
	if errors.Is(err, containerdproc.ErrUnavailable) {
		t.Skip(err) // names what is missing: root or a binary
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := inst.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
	}()
	orphan := startFakeShim(t, inst.Address())
	other := startFakeShim(t, inst.Address()+".other")
	if err := inst.Purge(t.Context()); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	gone := func(cmd *exec.Cmd) bool {
		// A killed child stays a zombie until its Wait: signal 0 cannot tell, /proc can.
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "stat"))
		return err != nil || strings.Contains(string(b), ") Z ")
	}
	for deadline := time.Now().Add(5 * time.Second); !gone(orphan) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !gone(orphan) {
		t.Errorf("the orphan shim of this daemon (pid %d) still runs after Purge", orphan.Process.Pid)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil || gone(other) {
		t.Errorf("the shim of another daemon was killed: %v", err)
	}
}

// TestStartProcessLongDir: a data dir too long for a unix socket path gets its socket in
// a short directory under /tmp, and the daemon serves there.
func TestStartProcessLongDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	inst, err := containerdproc.StartProcess(t.Context(), dir)
	if errors.Is(err, containerdproc.ErrUnavailable) {
		t.Skip(err) // names what is missing: root or a binary
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := inst.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
		os.RemoveAll(filepath.Dir(inst.Address()))
	}()
	if got := inst.Address(); len(got) > 100 || !strings.HasPrefix(got, os.TempDir()+"/bt-") {
		t.Errorf("address %q: want a short path under %s/bt-*", got, os.TempDir())
	}
	client, err := containerd.New(inst.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Version(t.Context()); err != nil {
		t.Errorf("Version: %v", err)
	}
}
