package containerdproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// Purge kills and deletes every task and deletes every container, with its snapshot, in
// every namespace of the daemon, so no shim or mount outlives it. Then it kills every
// shim process still serving this daemon's address: containerd 1.6 forgets a task whose
// delete was cut off (its client went away mid-call) but leaves the task's shim running,
// and no API call reaches such a shim again. It returns the joined errors of what it
// could not remove.
func (i *Instance) Purge(ctx context.Context) error {
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
	if err := killShims(i.address); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killShims sends SIGKILL to every containerd shim process started for the daemon at
// address (its command line has "-address <address>"), found through /proc.
func killShims(address string) error {
	pids, err := shimsOf(address)
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill shim %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

// shimsOf returns the pids of the containerd shim processes whose command line names
// address as their daemon's ("-address <address>").
func shimsOf(address string) ([]int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue // gone, or not ours to read
		}
		args := strings.Split(string(b), "\x00")
		if !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		if i := slices.Index(args, "-address"); i >= 0 && i+1 < len(args) && args[i+1] == address {
			pids = append(pids, pid)
		}
	}
	return pids, nil
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
