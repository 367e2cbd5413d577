package runtime

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// tmpfsMagic is the f_type statfs reports for a tmpfs (linux/magic.h TMPFS_MAGIC).
const tmpfsMagic = 0x01021994

// EnsureShmTmpfs makes dir a tmpfs of sizeMiB (mode 1777, nosuid, nodev, noexec, as
// Docker mounts a container's /dev/shm) unless it already is one, so containers that
// share an IPC namespace can bind-mount one /dev/shm (Docker does the same for
// --ipc shareable: the shm lives on the host, not in a container's mount namespace,
// which a bind mount cannot reach into). It is idempotent across agent restarts.
func EnsureShmTmpfs(dir string, sizeMiB int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && st.Type == tmpfsMagic {
		return nil
	}
	data := fmt.Sprintf("mode=1777,size=%dm", sizeMiB)
	if err := syscall.Mount("shm", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, data); err != nil {
		return fmt.Errorf("mount the task's /dev/shm tmpfs at %s: %w", dir, err)
	}
	return nil
}

// RemoveShmTmpfs unmounts the tmpfs EnsureShmTmpfs made at dir (lazily: a container
// still holding it keeps it until it exits) and removes dir. A dir that does not exist
// is no error.
func RemoveShmTmpfs(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return nil
}
