package containerdtest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"github.com/berthhq/berth/testkit/containerdtest"
	"github.com/berthhq/berth/testkit/registrytest"
)

const namespace = "berth-test"

// env is one private containerd with the test image pulled into it.
type env struct {
	inst   *containerdtest.Instance
	client *containerd.Client
	image  containerd.Image
}

// setup starts a containerd and a registry, pushes the test image and pulls
// and unpacks it over plain HTTP, as the agent will.
func setup(t *testing.T) *env {
	t.Helper()
	inst := containerdtest.Start(t)
	client := inst.Client(t, namespace)
	reg := registrytest.Start(t)
	ref := registrytest.PushTestImage(t, reg, "berth/testimage", "latest")

	resolver := docker.NewResolver(docker.ResolverOptions{
		Hosts: docker.ConfigureDefaultRegistries(docker.WithPlainHTTP(docker.MatchLocalhost)),
	})
	img, err := client.Pull(t.Context(), ref,
		containerd.WithResolver(resolver),
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(inst.Snapshotter()),
	)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return &env{inst: inst, client: client, image: img}
}

// newContainer creates a container of the test image running args (after
// the image's entrypoint) with extra environment variables; it is deleted,
// with its snapshot, when the test ends.
func (e *env) newContainer(t *testing.T, id string, args, extraEnv []string) containerd.Container {
	t.Helper()
	ctr, err := e.client.NewContainer(t.Context(), id,
		containerd.WithImage(e.image),
		containerd.WithSnapshotter(e.inst.Snapshotter()),
		containerd.WithNewSnapshot(id+"-rootfs", e.image),
		containerd.WithNewSpec(oci.WithImageConfigArgs(e.image, args), oci.WithEnv(extraEnv)),
		e.inst.RuntimeOpt(),
	)
	if err != nil {
		t.Fatalf("create container %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if err := ctr.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete container %s: %v", id, err)
		}
	})
	return ctr
}

// run starts a task of ctr with IO from creator, waits for it to exit and
// deletes it, returning its exit status.
func run(t *testing.T, ctr containerd.Container, creator cio.Creator) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	task, err := ctr.NewTask(ctx, creator)
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	defer func() {
		// Deleting the task also waits for its output to be copied.
		if _, err := task.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill); err != nil {
			t.Errorf("delete task: %v", err)
		}
	}()
	exitC, err := task.Wait(ctx) // before Start, so the exit cannot be missed
	if err != nil {
		t.Fatalf("wait task: %v", err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	select {
	case st := <-exitC:
		code, _, err := st.Result()
		if err != nil {
			t.Fatalf("task result: %v", err)
		}
		return code
	case <-ctx.Done():
		t.Fatalf("task did not exit: %v", ctx.Err())
		return 0
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctr := e.newContainer(t, "exit-status", []string{"exit", "3"}, nil)
	if code := run(t, ctr, cio.NullIO); code != 3 {
		t.Errorf("exit status = %d, want 3", code)
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctr := e.newContainer(t, "environment", []string{"env"}, []string{"EXTRA_VAR=added"})
	var stdout, stderr bytes.Buffer
	if code := run(t, ctr, cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr))); code != 0 {
		t.Fatalf("exit status = %d, want 0; stderr %q", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for _, want := range []string{"IMAGE_VAR=from-image", "PATH=/", "EXTRA_VAR=added"} {
		if !slices.Contains(lines, want) {
			t.Errorf("environment lacks %s:\n%s", want, stdout.String())
		}
	}
}

func TestLogFile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctr := e.newContainer(t, "log-file", []string{"echo", "to-stdout", "to-stderr"}, nil)
	logPath := filepath.Join(t.TempDir(), "container.log")
	if code := run(t, ctr, cio.LogFile(logPath)); code != 0 {
		t.Fatalf("exit status = %d, want 0", code)
	}
	// The shim copies stdout and stderr into the file on two goroutines of
	// its own, and the exit event can reach us before the second copy has
	// written: wait for both lines rather than read the file once.
	wants := []string{"to-stdout\n", "to-stderr\n"}
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(logPath); err != nil {
			t.Fatal(err)
		}
		if containsAll(string(b), wants) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(string(b), want) {
			t.Errorf("log %q lacks %q", b, want)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestRestartKeepsTasks restarts containerd under a running task: the task
// keeps running, and the new daemon still controls it.
func TestRestartKeepsTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	ctr := e.newContainer(t, "restart", []string{"sleep", "600"}, nil)
	task, err := ctr.NewTask(ctx, cio.NullIO)
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	pid := task.Pid()

	if err := e.inst.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}

	ctr, err = e.client.LoadContainer(ctx, ctr.ID())
	if err != nil {
		t.Fatalf("load container after restart: %v", err)
	}
	task, err = ctr.Task(ctx, nil)
	if err != nil {
		t.Fatalf("load task after restart: %v", err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		t.Fatalf("task status: %v", err)
	}
	if st.Status != containerd.Running || task.Pid() != pid {
		t.Fatalf("after restart: task %s with pid %d, want running with pid %d", st.Status, task.Pid(), pid)
	}

	exitC, err := task.Wait(ctx)
	if err != nil {
		t.Fatalf("wait task: %v", err)
	}
	if err := task.Kill(ctx, syscall.SIGTERM); err != nil {
		t.Fatalf("kill task: %v", err)
	}
	code, _, err := (<-exitC).Result()
	if err != nil || code != 0 {
		t.Errorf("after SIGTERM: exit status %d (%v), want 0", code, err)
	}
	if _, err := task.Delete(ctx); err != nil {
		t.Errorf("delete task: %v", err)
	}
}

// TestCleanupRemovesLeftovers leaves a running task behind in a subtest and
// checks that the subtest's cleanup killed it and stopped the daemon.
func TestCleanupRemovesLeftovers(t *testing.T) {
	t.Parallel()
	var (
		pid  uint32
		inst *containerdtest.Instance
	)
	t.Run("leak", func(t *testing.T) {
		e := setup(t)
		inst = e.inst
		ctx := t.Context()
		ctr, err := e.client.NewContainer(ctx, "leftover",
			containerd.WithSnapshotter(e.inst.Snapshotter()),
			containerd.WithNewSnapshot("leftover-rootfs", e.image),
			containerd.WithNewSpec(oci.WithImageConfigArgs(e.image, []string{"sleep", "600"})),
			e.inst.RuntimeOpt(),
		)
		if err != nil {
			t.Fatalf("create container: %v", err)
		}
		task, err := ctr.NewTask(ctx, cio.NullIO)
		if err != nil {
			t.Fatalf("create task: %v", err)
		}
		if err := task.Start(ctx); err != nil {
			t.Fatalf("start task: %v", err)
		}
		pid = task.Pid()
	})
	if pid == 0 {
		t.Fatal("subtest started no task")
	}
	if err := syscall.Kill(int(pid), 0); err != syscall.ESRCH {
		t.Errorf("task process %d still exists after cleanup (kill 0: %v)", pid, err)
	}
	if inst.Running() {
		t.Error("containerd still running after cleanup")
	}
}

// TestOwnRuncRoot runs a container of the same namespace and id in two daemons at once:
// each keeps runc's state under its own RuncRoot, so the second create does not fail
// with "container with given ID already exists" (as it did when every test containerd
// used runc's default /run/containerd/runc/<namespace>), and nothing lands there.
func TestOwnRuncRoot(t *testing.T) {
	t.Parallel()
	a, b := setup(t), setup(t)
	const id = "same-id-in-two-daemons"
	if _, err := os.Stat(filepath.Join("/run/containerd/runc", namespace, id)); err == nil {
		t.Fatalf("runc state %s exists before the test: another run left it", filepath.Join("/run/containerd/runc", namespace, id))
	}
	for _, e := range []*env{a, b} {
		ctr := e.newContainer(t, id, []string{"sleep", "60"}, nil)
		task, err := ctr.NewTask(t.Context(), cio.NullIO)
		if err != nil {
			t.Fatalf("create task in %s: %v", e.inst.Dir(), err)
		}
		t.Cleanup(func() { _, _ = task.Delete(context.WithoutCancel(t.Context()), containerd.WithProcessKill) })
		if err := task.Start(t.Context()); err != nil {
			t.Fatalf("start task in %s: %v", e.inst.Dir(), err)
		}
		if _, err := os.Stat(filepath.Join(e.inst.RuncRoot(), namespace, id, "state.json")); err != nil {
			t.Errorf("runc state not under the daemon's own root: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join("/run/containerd/runc", namespace, id)); err == nil {
		t.Errorf("runc state written to the host-wide /run/containerd/runc")
	}
}
