package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// cleanupTimeout bounds the whole cleanup of a test's daemon: removing
// leftover tasks and containers, then stopping it.
const cleanupTimeout = time.Minute

// Start starts a private containerd for the test under t.TempDir() and
// returns once it serves. It skips the test when not running as root or when
// containerd, containerd-shim-runc-v2 or runc is not in PATH, and fails it if
// the daemon does not start. When the test ends, tasks and containers left in
// any namespace are killed and deleted and the daemon is stopped; if the test
// failed, the end of the daemon's log is logged.
func Start(t testing.TB, opts ...Option) *Instance {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := checkHost(o.binary); err != nil {
		t.Skipf("containerdtest: %v", err)
	}

	inst, err := newInstance(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("containerdtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), cleanupTimeout)
		defer cancel()
		if inst.Running() {
			if err := inst.purge(ctx); err != nil {
				t.Errorf("containerdtest: remove leftover containers: %v", err)
			}
		}
		if err := inst.Stop(ctx); err != nil {
			t.Errorf("containerdtest: %v", err)
		}
		if t.Failed() {
			t.Logf("containerd log %s ends:\n%s", inst.LogPath(), inst.logTail())
		}
		if dir := filepath.Dir(inst.address); dir != inst.dir {
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
	client, err := containerd.New(i.address, containerd.WithDefaultNamespace(ns))
	if err != nil {
		t.Fatalf("containerdtest: client for %s: %v", i.address, err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// purge kills and deletes every task and deletes every container, with its
// snapshot, in every namespace, so no shim or mount outlives the test.
func (i *Instance) purge(ctx context.Context) error {
	client, err := containerd.New(i.address)
	if err != nil {
		return err
	}
	defer client.Close()
	nss, err := client.NamespaceService().List(ctx)
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	var errs []error
	for _, ns := range nss {
		nsCtx := namespaces.WithNamespace(ctx, ns)
		ctrs, err := client.Containers(nsCtx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list containers in %s: %w", ns, err))
			continue
		}
		for _, c := range ctrs {
			if err := deleteContainer(nsCtx, c); err != nil {
				errs = append(errs, fmt.Errorf("container %s/%s: %w", ns, c.ID(), err))
			}
		}
	}
	return errors.Join(errs...)
}

func deleteContainer(ctx context.Context, c containerd.Container) error {
	task, err := c.Task(ctx, nil)
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("load task: %w", err)
	default:
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task: %w", err)
		}
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container: %w", err)
	}
	return nil
}
