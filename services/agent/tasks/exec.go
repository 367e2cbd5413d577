package tasks

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
)

// Exec runs an ECS Exec command (docs/exec.md) in a running container of one of the
// manager's tasks, as a containerd exec process sharing the container's namespaces,
// cgroup, user, environment and working directory, with a terminal when start.Tty (its
// output then carries stderr too). Input comes from stdin, terminal sizes (columns, rows)
// from resize. It returns the exit status once the process exited and its output was
// written; when ctx ends first, the process is killed. Errors: the task or container is
// not here or not running, or the runtime refused the process (a missing program).
// Implements session.ExecRunner.
func (m *Manager) Exec(ctx context.Context, start *agentv1.ExecStart, stdin io.Reader, stdout io.Writer, resize <-chan [2]uint32) (int, error) {
	m.mu.Lock()
	t := m.tasks[start.GetTaskArn()]
	m.mu.Unlock()
	if t == nil {
		return -1, fmt.Errorf("task %s is not running on this container instance", start.GetTaskArn())
	}
	var c *ctrState
	t.mu.Lock()
	for _, cs := range t.ctrs {
		if cs.Name == start.GetContainerName() {
			c = cs
		}
	}
	t.mu.Unlock()
	if c == nil {
		return -1, fmt.Errorf("container %s is not in task %s", start.GetContainerName(), start.GetTaskArn())
	}
	t.mu.Lock()
	task, ctr := c.proc, c.ctr
	t.mu.Unlock()
	if ready, _, _ := m.cfg.Gate.State(); !ready || task == nil || ctr == nil {
		return -1, fmt.Errorf("container %s is not running", start.GetContainerName())
	}
	spec, err := ctr.Spec(ctx)
	if err != nil || spec.Process == nil {
		return -1, fmt.Errorf("reading container %s's spec: %v", start.GetContainerName(), err)
	}
	if len(start.GetArgs()) == 0 {
		return -1, fmt.Errorf("no command to run")
	}
	pspec := *spec.Process
	pspec.Args = start.GetArgs()
	pspec.Terminal = start.GetTty()
	pspec.ConsoleSize = nil
	id := fmt.Sprintf("exec-%d", execSeq.Add(1))
	opts := []cio.Opt{cio.WithStreams(stdin, stdout, stdout), cio.WithFIFODir(m.fifoDir(c.ID))}
	if start.GetTty() {
		opts = append(opts, cio.WithTerminal)
	}
	p, err := task.Exec(ctx, id, &pspec, cio.NewCreator(opts...))
	if err != nil {
		return -1, fmt.Errorf("starting the command: %v", err)
	}
	cleanup := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = p.Delete(dctx)
	}
	exitC, err := p.Wait(context.WithoutCancel(ctx))
	if err != nil {
		cleanup()
		return -1, fmt.Errorf("waiting for the command: %v", err)
	}
	if err := p.Start(ctx); err != nil {
		cleanup()
		return -1, fmt.Errorf("starting the command: %v", err)
	}
	for {
		select {
		case sz := <-resize:
			if start.GetTty() && sz[0] > 0 && sz[1] > 0 {
				_ = p.Resize(ctx, sz[0], sz[1])
			}
		case st := <-exitC:
			code, _, _ := st.Result()
			if pio := p.IO(); pio != nil {
				pio.Wait() // the output is all written
			}
			cleanup()
			return int(code), nil
		case <-ctx.Done():
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = p.Kill(kctx, 9)
			cancel()
			st := <-exitC
			code, _, _ := st.Result()
			cleanup()
			return int(code), nil
		}
	}
}
