package network

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	"golang.org/x/sys/unix"
)

// newNetNS creates a network namespace bind-mounted at a new file under dir, named
// berth-<owner>-<random>, and returns its path. It does what containerd's netns.NewNetNS does — unshare on a locked thread,
// bind-mount the thread's namespace — but returns the thread to the process's namespace
// and unlocks it instead of letting Go end the thread: a child process started with
// Pdeathsig (the private containerd of `berth dev`) is signalled when the thread that
// forked it exits, so the agent must never end threads.
func newNetNS(dir, owner string) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "berth-"+owner+"-"+hex.EncodeToString(b))
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("create namespace file: %w", err)
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			goruntime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			goruntime.UnlockOSThread()
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		mountErr := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "none", unix.MS_BIND, "")
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread is stuck in the new namespace: it stays locked, and Go ends it
			// with this goroutine (the lesser harm).
			errc <- fmt.Errorf("return to the host namespace: %w", err)
			return
		}
		goruntime.UnlockOSThread()
		errc <- mountErr
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("create network namespace: %w", err)
	}
	return path, nil
}
