package tasks

import (
	"context"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/berthhq/berth/services/agent/runtime"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// This file is the containerd I/O of one container: create (Wait before Start, as
// containerd's own client does, so no exit is missed), attach after an agent or
// containerd restart, watch until exit, stop (stop signal, then SIGKILL), and cleanup.
// The state it changes is in package state, under task.mu.

// runContainer starts c once its dependencies hold (or adopts the existing
// container) and waits for it to exit.
func (t *task) runContainer(ctx context.Context, c *ctrState, img containerd.Image, existing containerd.Container) {
	log := t.m.log.With("task", t.arn, "container", c.Name)
	if existing == nil {
		ok, reason := t.waitDependencies(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			t.markStopped(c, nil, reason, true)
			return
		}
		holderPID, ok, reason := t.waitNamespaceHolder(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			t.markStopped(c, nil, reason, true)
			return
		}
		var err error
		existing, err = t.create(ctx, c, img, holderPID)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("container not started", "err", err)
			t.markStopped(c, nil, err.Error(), true)
			return
		}
	}
	t.watch(ctx, c, existing)
}

// create creates and starts the container of c and its containerd task,
// with stdout and stderr going to the log store. holderPID, when not 0, is the process
// whose shared namespaces c joins (pidMode or ipcMode task).
func (t *task) create(ctx context.Context, c *ctrState, img containerd.Image, holderPID uint32) (containerd.Container, error) {
	client, err := t.m.cfg.Gate.Wait(ctx)
	if err != nil {
		return nil, err
	}
	spec := t.containerSpec(c, img)
	if err := t.prepareSpec(c, &spec); err != nil {
		return nil, fmt.Errorf("%s%w", reasonCannotCreate, err)
	}
	if err := t.netSpec(c, &spec); err != nil {
		return nil, fmt.Errorf("%s%w", reasonCannotCreate, err)
	}
	t.joinNamespaces(&spec.Linux, holderPID)
	ctr, err := runtime.Create(ctx, client, spec)
	if errdefs.IsAlreadyExists(err) {
		// Left by an attempt that failed part way (the container, or only its root
		// filesystem snapshot when the create was cut short in between): start afresh.
		if old, lerr := client.LoadContainer(ctx, spec.ID); lerr == nil {
			_ = deleteContainer(context.WithoutCancel(ctx), old)
		}
		if rerr := runtime.RemoveRootfs(context.WithoutCancel(ctx), client, spec.Snapshotter, spec.ID); rerr != nil {
			t.m.log.Warn("leftover root filesystem not removed", "task", t.arn, "container", c.Name, "err", rerr)
		}
		ctr, err = runtime.Create(ctx, client, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", reasonCannotCreate, err)
	}
	if err := t.startProcess(ctx, c, ctr); err != nil {
		return nil, err
	}
	return ctr, nil
}

// startProcess creates and starts the containerd task (the process) of c's container
// ctr, with stdout and stderr going to the log store, and records it on c. create calls
// it for a new container, exited for one restarted in place.
func (t *task) startProcess(ctx context.Context, c *ctrState, ctr containerd.Container) error {
	stdout, stderr, closeLogs, err := t.m.cfg.Logs.Open(t.arn, c.Name)
	if err != nil {
		return fmt.Errorf("%s%w", reasonCannotStart, err)
	}
	stdin, closeLogs := t.stdin(c, closeLogs)
	head := &headWriter{}
	argv0 := ""
	if spec, err := ctr.Spec(ctx); err == nil && spec.Process != nil && len(spec.Process.Args) > 0 {
		argv0 = spec.Process.Args[0]
	}
	stdout, stderr = io.MultiWriter(stdout, head), io.MultiWriter(stderr, head)
	proc, err := ctr.NewTask(ctx, cio.NewCreator(t.ioOpts(c, stdin, stdout, stderr, cio.WithFIFODir(t.m.fifoDir(c.ID)))...))
	if err != nil {
		closeLogs()
		return fmt.Errorf("%screate task: %w", reasonCannotStart, err)
	}
	// Wait before Start, as containerd's client and ctr do: the exit subscription exists
	// before the process can exit, so even an instant exit is seen by watch.
	exitC, err := proc.Wait(ctx)
	if err != nil {
		_, _ = proc.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill)
		closeLogs()
		return fmt.Errorf("%swait task: %w", reasonCannotStart, err)
	}
	t.mu.Lock()
	c.starting = true
	t.mu.Unlock()
	if err := proc.Start(ctx); err != nil {
		t.mu.Lock()
		c.starting = false
		t.broadcastLocked()
		t.mu.Unlock()
		_, _ = proc.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill)
		closeLogs()
		t.m.containerEvent("start_failed")
		return fmt.Errorf("%s%w", reasonCannotStart, err)
	}
	t.m.containerEvent("start")
	t.m.log.Debug("container started", "task", t.arn, "container", c.Name, "id", c.ID, "pid", proc.Pid())
	t.mu.Lock()
	c.ctr, c.proc, c.exitC = ctr, proc, exitC
	c.closeLogs = closeLogs
	c.argv0, c.outHead = argv0, head
	c.Status, c.Started, c.RunningSince = state.Running, true, time.Now()
	c.starting = false
	t.broadcastLocked()
	t.mu.Unlock()
	return nil
}

// ioOpts returns the cio options of c's process: its streams (stdin nil unless
// interactive), and a terminal for pseudoTerminal (its one output stream goes to stdout).
func (t *task) ioOpts(c *ctrState, stdin io.Reader, stdout, stderr io.Writer, more ...cio.Opt) []cio.Opt {
	opts := []cio.Opt{cio.WithStreams(stdin, stdout, stderr)}
	if c.Def.GetPseudoTerminal() {
		opts = append(opts, cio.WithTerminal)
	}
	return append(opts, more...)
}

// stdin returns the stdin of c's process and closeLogs extended to end it: for an
// interactive container (ECS interactive, Docker's -i) a pipe kept open while the
// process runs, so a program reading stdin waits instead of reading end-of-file; nil
// (end-of-file at once) otherwise. Nothing writes to it: ECS has no way to attach.
// After an agent restart the re-attached process gets no stdin stream, so it then reads
// end-of-file.
func (t *task) stdin(c *ctrState, closeLogs func() error) (io.Reader, func() error) {
	if !c.Def.GetInteractive() {
		return nil, closeLogs
	}
	r, w := io.Pipe()
	return r, func() error {
		_ = w.Close()
		return closeLogs()
	}
}

// watch waits for c's containerd task to exit, re-attaching through the
// gate when containerd goes away and comes back, then records the exit.
func (t *task) watch(ctx context.Context, c *ctrState, ctr containerd.Container) {
	log := t.m.log.With("task", t.arn, "container", c.Name)
	t.mu.Lock()
	proc, exitC := c.proc, c.exitC // exitC: taken before Start by create, for the first wait
	c.exitC = nil
	t.mu.Unlock()
	healthCtx, stopHealth := context.WithCancel(ctx)
	defer stopHealth()
	if hc := c.Def.GetHealthCheck(); hc != nil && len(hc.GetCommand()) > 0 {
		go t.healthLoop(healthCtx, c, hc)
	}
	for {
		if proc == nil {
			var err error
			proc, err = t.attach(ctx, c, ctr)
			if ctx.Err() != nil {
				return
			}
			if errdefs.IsNotFound(err) {
				// The task is gone: the container never ran or was
				// cleaned up behind our back.
				t.markStopped(c, nil, "container task not found in containerd", !c.Started)
				return
			}
			if err != nil {
				log.Debug("re-attach failed; retrying", "err", err)
				sleepCtx(ctx, runtimeRetryInterval)
				continue
			}
		}
		if exitC == nil {
			var err error
			if exitC, err = proc.Wait(ctx); err != nil {
				if ctx.Err() != nil {
					t.detach(c)
					return
				}
				proc, exitC = nil, nil
				sleepCtx(ctx, runtimeRetryInterval)
				continue
			}
		}
		var st containerd.ExitStatus
		select {
		case <-ctx.Done():
			t.detach(c)
			return
		case st = <-exitC:
		}
		if st.Error() != nil {
			// The wait broke (containerd went away), not the process.
			if ctx.Err() != nil {
				t.detach(c)
				return
			}
			log.Info("lost containerd while waiting; re-attaching", "err", st.Error())
			proc, exitC = nil, nil
			sleepCtx(ctx, runtimeRetryInterval)
			continue
		}
		if !t.exited(ctx, c, proc, st.ExitCode()) {
			return
		}
		// Restarted in place: watch the new process.
		t.mu.Lock()
		proc, exitC = c.proc, c.exitC
		c.exitC = nil
		t.mu.Unlock()
	}
}

// attach loads c's containerd task, re-attaching its output to the logs.
func (t *task) attach(ctx context.Context, c *ctrState, ctr containerd.Container) (containerd.Task, error) {
	client, err := t.m.cfg.Gate.Wait(ctx)
	if err != nil {
		return nil, err
	}
	ctr, err = client.LoadContainer(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	proc, err := ctr.Task(ctx, nil)
	if err != nil {
		return nil, err
	}
	st, err := proc.Status(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	haveLogs := c.closeLogs != nil
	t.mu.Unlock()
	if !haveLogs && (st.Status == containerd.Running || st.Status == containerd.Paused) {
		// Re-attach the output FIFOs (they live under the data dir).
		stdout, stderr, closeLogs, lerr := t.m.cfg.Logs.Open(t.arn, c.Name)
		if lerr != nil {
			return nil, lerr
		}
		proc, err = ctr.Task(ctx, cio.NewAttach(t.ioOpts(c, nil, stdout, stderr)...))
		if err != nil {
			closeLogs()
			return nil, err
		}
		t.mu.Lock()
		c.closeLogs = closeLogs
		t.mu.Unlock()
	}
	t.mu.Lock()
	c.ctr, c.proc = ctr, proc
	if c.Status == state.Pending {
		c.Status, c.Started = state.Running, true
		t.broadcastLocked()
	}
	t.mu.Unlock()
	return proc, nil
}

// detach lets go of c's output without touching the container: the agent
// is stopping, and a new agent will re-attach.
func (t *task) detach(c *ctrState) {
	t.mu.Lock()
	proc, closeLogs := c.proc, c.closeLogs
	c.closeLogs = nil
	t.mu.Unlock()
	if proc != nil && proc.IO() != nil {
		proc.IO().Cancel()
	}
	if closeLogs != nil {
		_ = closeLogs()
	}
}

// exited records c's exit: OOM check, the output drained (drainOutput), task delete,
// logs closed. Then, when c's restartPolicy asks for it
// (state.ShouldRestart), it starts the container again in place and returns true (the
// caller watches the new process); else it marks c stopped and returns false.
func (t *task) exited(ctx context.Context, c *ctrState, proc containerd.Task, code uint32) bool {
	reason := ""
	t.m.containerEvent("exit")
	if runtime.OOMKilledIn(t.cgroupPath(c)) {
		reason = ReasonOOM
		t.m.containerEvent("oom")
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	drainOutput(proc, outputDrainTimeout)
	if _, err := proc.Delete(dctx); err != nil && !errdefs.IsNotFound(err) {
		t.m.log.Warn("delete exited task", "task", t.arn, "container", c.Name, "err", err)
	}
	t.mu.Lock()
	closeLogs := c.closeLogs
	c.closeLogs = nil
	t.mu.Unlock()
	if closeLogs != nil {
		_ = closeLogs()
	}
	t.m.removeFIFOs(c.ID)
	exit := int32(code)
	t.mu.Lock()
	argv0, head, ran := c.argv0, c.outHead, time.Since(c.RunningSince)
	t.mu.Unlock()
	if msg, ok := execFailure(argv0, code, ran, head.Bytes()); ok {
		// The runtime could not execute the program (runc reports an execve failure after
		// the start on the process's stderr, with exit status 1): as ECS does, the
		// container did not start, and restarting it cannot help.
		t.m.containerEvent("start_failed")
		t.m.log.Warn("container not started", "task", t.arn, "container", c.Name, "err", msg)
		t.markStopped(c, nil, reasonCannotStart+msg, true)
		return false
	}
	t.mu.Lock()
	restart := t.st.ShouldRestart(c.Container, exit, time.Now())
	ctr := c.ctr
	if restart {
		c.proc = nil // deleted; stopContainer signals the new one once it exists
	}
	t.mu.Unlock()
	if restart && ctr != nil {
		err := t.startProcess(ctx, c, ctr)
		if err == nil {
			t.mu.Lock()
			c.RestartCount++
			t.broadcastLocked()
			t.mu.Unlock()
			t.m.log.Info("container restarted under its restartPolicy", "task", t.arn, "container", c.Name, "exitCode", exit, "restartCount", c.RestartCount)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		t.m.log.Warn("restart under restartPolicy failed", "task", t.arn, "container", c.Name, "err", err)
		reason = cmpOr(reason, err.Error())
	}
	t.markStopped(c, &exit, reason, false)
	return false
}

// stopContainer sends c its stop signal (the image's StopSignal, else
// SIGTERM), then SIGKILL after its stopTimeout.
func (t *task) stopContainer(ctx context.Context, c *ctrState) {
	timeout := t.m.cfg.StopTimeout
	if s := c.Def.GetStopTimeout(); s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	kill := func(sig syscall.Signal) bool {
		t.mu.Lock()
		proc, ctr := c.proc, c.ctr
		t.mu.Unlock()
		if proc == nil {
			return false
		}
		if sig != syscall.SIGKILL && ctr != nil {
			if s, err := containerd.GetStopSignal(ctx, ctr, syscall.SIGTERM); err == nil {
				sig = s
			}
		}
		if err := proc.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
			t.m.log.Debug("kill", "task", t.arn, "container", c.Name, "signal", sig, "err", err)
			return false
		}
		return true
	}
	// Wait for a container still starting to come up (or give up).
	for {
		t.mu.Lock()
		started, stopped, ch := c.proc != nil, c.Status == state.Stopped, t.changed
		t.mu.Unlock()
		if started || stopped {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	retry := time.NewTicker(250 * time.Millisecond)
	defer retry.Stop()
	// Signals are retried: while containerd restarts, the container's
	// handle is stale until the watcher re-attaches.
	termSent, timedOut := kill(syscall.SIGTERM), false
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			timedOut = true
			if kill(syscall.SIGKILL) {
				return
			}
		case <-retry.C:
			switch {
			case timedOut:
				if kill(syscall.SIGKILL) {
					return
				}
			case !termSent:
				termSent = kill(syscall.SIGTERM)
			}
		}
	}
}

// scheduleCleanup removes the task's containers and snapshots after the
// cleanup wait and starts its logs' retention.
func (t *task) scheduleCleanup(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(t.m.cfg.CleanupWait):
	}
	t.m.cleanup(ctx, t.arn, slices.Collect(func(yield func(string) bool) {
		for _, c := range t.ctrs {
			if !yield(c.ID) {
				return
			}
		}
	}))
}

// cleanup deletes the given containers with their snapshots, then forgets
// the task.
func (m *Manager) cleanup(ctx context.Context, arn string, ids []string) {
	client, err := m.cfg.Gate.Wait(ctx)
	if err != nil {
		return
	}
	for _, id := range ids {
		ctr, err := client.LoadContainer(ctx, id)
		if err == nil {
			err = deleteContainer(context.WithoutCancel(ctx), ctr)
		}
		if err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("remove stopped container", "task", arn, "id", id, "err", err)
		}
		m.removeFIFOs(id)
	}
	if err := m.removeTaskResources(arn); err != nil {
		m.log.Warn("remove task volumes and cgroup", "task", arn, "err", err)
	}
	if err := m.cfg.Logs.MarkRemoved(arn); err != nil {
		m.log.Warn("mark logs removed", "task", arn, "err", err)
	}
	if err := m.cfg.Outbox.DeleteAssignment(arn); err != nil {
		m.log.Warn("forget assignment", "task", arn, "err", err)
	}
	m.forget(arn)
}

// deleteContainer kills and deletes a container's task, if any, and the
// container with its snapshot.
func deleteContainer(ctx context.Context, ctr containerd.Container) error {
	if proc, err := ctr.Task(ctx, nil); err == nil {
		if _, err := proc.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task of %s: %w", ctr.ID(), err)
		}
	}
	if err := ctr.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", ctr.ID(), err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// outputDrainTimeout bounds how long an exited container's output may take to reach the
// agent before its task is deleted.
const outputDrainTimeout = 5 * time.Second

// drainOutput waits until proc's output copies have read everything (the shim closes
// its end of the FIFOs once the container's pipes are empty), or timeout. containerd's
// Task.Delete cancels the IO before it waits for it, and its cio cancel closes the FIFOs'
// read ends (since containerd PR 8334, for issue 8326; google/go-tpm-tools PR 882 met the
// same loss): output still in a FIFO when the task was deleted was lost, up to the last
// 64 KiB a container wrote just before it exited (a task printing 100,000 lines lost the
// last 73 to 763 of them in 1 run of 4). The bound is for a process that left a child
// holding the container's stdout: Delete then closes the pipes as before.
func drainOutput(proc containerd.Task, timeout time.Duration) {
	pio := proc.IO()
	if pio == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		pio.Wait() // returns at the latest when Delete cancels the IO
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}
