package containerdtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/berthhq/berth/services/agent/containerdproc"
)

// cleanupTimeout bounds the whole cleanup of a test's daemon: removing
// leftover tasks and containers, then stopping it.
const cleanupTimeout = time.Minute

// Snapshotter names the daemon chooses between (containerdproc's).
const (
	SnapshotterOverlayfs = containerdproc.SnapshotterOverlayfs
	SnapshotterNative    = containerdproc.SnapshotterNative
)

// Option configures the daemon: containerdproc.WithBinary, WithLogLevel or
// WithStartTimeout.
type Option = containerdproc.Option

// WithBinary runs the containerd binary at path instead of the one found in PATH.
func WithBinary(path string) Option { return containerdproc.WithBinary(path) }

// WithLogLevel sets containerd's log level ("debug", "info", "warn", "error"); the
// default is "info".
func WithLogLevel(level string) Option { return containerdproc.WithLogLevel(level) }

// WithStartTimeout bounds how long a start waits for the daemon to serve; the default
// is 30s.
func WithStartTimeout(d time.Duration) Option { return containerdproc.WithStartTimeout(d) }

// Instance is a test's private containerd: the product's containerdproc.Instance (Stop,
// Start, Restart, Address, Snapshotter, …) plus Client for a test.
type Instance struct {
	*containerdproc.Instance
}

// Start starts a private containerd for the test under t.TempDir() and
// returns once it serves. It skips the test when not running as root or when
// containerd, containerd-shim-runc-v2 or runc is not in PATH, and fails it if
// the daemon does not start. When the test ends, tasks and containers left in
// any namespace are killed and deleted and the daemon is stopped; if the test
// failed, the end of the daemon's log is logged.
func Start(t testing.TB, opts ...Option) *Instance {
	t.Helper()
	proc, err := containerdproc.New(t.TempDir(), opts...)
	if errors.Is(err, containerdproc.ErrUnavailable) {
		t.Skipf("containerdtest: %v", err)
	}
	if err != nil {
		t.Fatalf("containerdtest: %v", err)
	}
	inst := &Instance{proc}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), cleanupTimeout)
		defer cancel()
		if inst.Running() {
			if err := inst.Purge(ctx); err != nil {
				t.Errorf("containerdtest: remove leftover containers: %v", err)
			}
		}
		if err := inst.Stop(ctx); err != nil {
			t.Errorf("containerdtest: %v", err)
		}
		if t.Failed() {
			t.Logf("containerd log %s ends:\n%s", inst.LogPath(), inst.LogTail())
		}
		// A long t.TempDir() puts the socket in a directory of its own under /tmp.
		if dir := filepath.Dir(inst.Address()); dir != inst.Dir() {
			_ = os.RemoveAll(dir)
		}
	})
	if err := inst.Start(t.Context()); err != nil {
		t.Fatalf("containerdtest: %v", err)
	}
	return inst
}

// Client returns a client of the daemon whose calls use namespace ns; it is
// closed when the test ends.
func (i *Instance) Client(t testing.TB, ns string) *containerd.Client {
	t.Helper()
	client, err := containerd.New(i.Address(), containerd.WithDefaultNamespace(ns))
	if err != nil {
		t.Fatalf("containerdtest: client for %s: %v", i.Address(), err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}
