package containerdproc

import (
	"context"
	"errors"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// Purge kills and deletes every task and deletes every container, with its snapshot, in
// every namespace of the daemon, so no shim or mount outlives it. It returns the joined
// errors of what it could not remove.
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
