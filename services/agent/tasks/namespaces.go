package tasks

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/services/agent/runtime"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// This file shares namespaces between a task's containers for ECS pidMode task and
// ipcMode task ("all containers in the task share the same PID / IPC resources"). The
// ECS agent keeps them in a pause container; Berth has no pause image, so the task's
// first container that can start first (in definition order, without dependsOn) holds
// them and the others join its namespaces through /proc/<pid>/ns, as Docker's
// --pid container:<id> and --ipc container:<id> do. The holder starts before the others.
// The kernel ends a PID namespace with its first process: when the holder exits, the
// other containers of a pidMode task are killed with it (they are reported stopped).

// nsHolder returns the container whose namespaces the task's other containers join, or
// nil when the task shares neither its PID nor its IPC namespace.
func (t *task) nsHolder() *ctrState {
	td := t.a.GetTaskDefinition()
	if td.GetPidMode() != "task" && td.GetIpcMode() != "task" {
		return nil
	}
	for _, c := range t.ctrs {
		if len(c.Def.GetDependsOn()) == 0 {
			return c
		}
	}
	return t.ctrs[0] // every container depends on another: registration refuses cycles
}

// waitNamespaceHolder blocks until the namespace holder of c's task runs and returns its
// PID (0 when c joins no one: no shared namespace, or c is the holder). It returns false
// with a reason when the holder stopped without running, so c cannot join it.
func (t *task) waitNamespaceHolder(ctx context.Context, c *ctrState) (uint32, bool, string) {
	h := t.nsHolder()
	if h == nil || h == c {
		return 0, true, ""
	}
	for {
		t.mu.Lock()
		proc, status, ch := h.proc, h.Status, t.changed
		t.mu.Unlock()
		if proc != nil && status == state.Running {
			return proc.Pid(), true, ""
		}
		if status == state.Stopped {
			return 0, false, fmt.Sprintf("%scontainer %s, whose PID and IPC namespaces the task's containers share (pidMode or ipcMode task), is not running", reasonCannotStart, h.Name)
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err().Error()
		case <-ch:
		}
	}
}

// joinNamespaces makes l join the namespaces of the holder process pid that the task
// shares (pidMode task, ipcMode task).
func (t *task) joinNamespaces(l *runtime.LinuxOptions, pid uint32) {
	if pid == 0 {
		return
	}
	td := t.a.GetTaskDefinition()
	if td.GetPidMode() == "task" {
		l.JoinPID = fmt.Sprintf("/proc/%d/ns/pid", pid)
	}
	if td.GetIpcMode() == "task" {
		l.JoinIPC = fmt.Sprintf("/proc/%d/ns/ipc", pid)
	}
}

// shmDir is the host directory of an ipcMode task's shared /dev/shm: a tmpfs beside the
// task's volume directory, removed with the task (removeTaskResources).
func (m *Manager) shmDir(arn string) string { return m.volumeDir(arn) + ".shm" }

// taskShm mounts the task's shared /dev/shm (ipcMode task) and points l at it; every
// container of the task, the holder too, gets it. Its size is the largest
// sharedMemorySize of the task's containers, else Docker's 64 MiB.
func (t *task) taskShm(l *runtime.LinuxOptions) error {
	if t.a.GetTaskDefinition().GetIpcMode() != "task" {
		return nil
	}
	size := int64(64)
	for _, c := range t.ctrs {
		if s := int64(c.Def.GetLinuxParameters().GetSharedMemorySize()); s > 0 && (size == 64 || s > size) {
			size = s
		}
	}
	dir := t.m.shmDir(t.arn)
	if err := runtime.EnsureShmTmpfs(dir, size); err != nil {
		return err
	}
	l.ShmFrom = dir
	return nil
}
