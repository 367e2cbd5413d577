package agent_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// containerPIDs returns the pid of every running task in ns.
func containerPIDs(t *testing.T, w *world, ns string) map[string]uint32 {
	t.Helper()
	client := w.ctd.Client(t, ns)
	ctrs, err := client.Containers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	for _, c := range ctrs {
		task, err := c.Task(t.Context(), nil)
		if err != nil {
			out[c.ID()] = 0
			continue
		}
		if st, err := task.Status(t.Context()); err == nil && st.Status == containerd.Running {
			out[c.ID()] = task.Pid()
		}
	}
	return out
}

// TestAgentRestartAdoptsContainers hard-stops the agent while tasks run and
// starts a new one on the same data dir: the running container is adopted
// (same pid, not started again), the one that exited meanwhile is reported
// STOPPED with its exit code, and a redelivered assignment is not run.
func TestAgentRestartAdoptsContainers(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cp := newControlPlane(t)
	cfg := testConfig(t, w, cp, "restart")
	ta := startAgent(t, cfg, cp)

	long, short := taskARN("restart"), taskARN("restart")
	longTD := taskDef("long", containerDef("main", w.image, "sleep", "600"))
	cp.assign(t, long, longTD)
	cp.assign(t, short, taskDef("short", containerDef("main", w.image, "sleep", "2")))
	firstRun := cp.waitStatus(t, long, "RUNNING", 60*time.Second)
	cp.waitStatus(t, short, "RUNNING", 60*time.Second)
	before := containerPIDs(t, w, cfg.Namespace)

	ta.stop()
	time.Sleep(2500 * time.Millisecond) // the short task exits while no agent runs
	cp.mu.Lock()
	nStates := len(cp.states)
	cp.mu.Unlock()

	ta2 := startAgent(t, cfg, cp)
	cp.waitFor(t, 30*time.Second, "second hello", func() bool { return len(cp.hellos) >= 2 })
	st := cp.waitStatus(t, short, "STOPPED", 30*time.Second)
	if c := containerOf(st, "main"); c.ExitCode == nil || c.GetExitCode() != 0 {
		t.Errorf("short task after restart: %v", st)
	}
	cp.mu.Lock()
	hello := cp.hellos[len(cp.hellos)-1]
	cp.mu.Unlock()
	if !slices.Contains(hello.GetRunningTaskArns(), long) {
		t.Errorf("hello after restart lists %v, want %s", hello.GetRunningTaskArns(), long)
	}
	cp.assign(t, long, longTD) // redelivered
	time.Sleep(time.Second)
	after := containerPIDs(t, w, cfg.Namespace)
	id := ""
	for k, pid := range before {
		if pid != 0 && after[k] == pid {
			id = k
		}
	}
	if id == "" || len(after) != 2 {
		t.Fatalf("containers before %v, after %v: the long task was not adopted as is", before, after)
	}
	cp.mu.Lock()
	for _, s := range cp.states[nStates:] {
		if s.GetTaskArn() == long && s.GetLastStatus() != "RUNNING" {
			t.Errorf("adopted task reported %s", s.GetLastStatus())
		}
		if s.GetTaskArn() == long && !s.GetStartedAt().AsTime().Equal(firstRun.GetStartedAt().AsTime()) {
			t.Errorf("adopted task's startedAt moved from %v to %v", firstRun.GetStartedAt().AsTime(), s.GetStartedAt().AsTime())
		}
	}
	cp.mu.Unlock()

	// The adopted task is still under control: stop it.
	cp.stop(t, long, "UserInitiated")
	st = cp.waitStatus(t, long, "STOPPED", 30*time.Second)
	if c := containerOf(st, "main"); c.GetExitCode() != 0 || st.GetStopCode() != "UserInitiated" {
		t.Errorf("adopted task stopped: %v", st)
	}
	// Its output before and after the restart is in its log: the new
	// agent re-attached the container's FIFOs.
	out := texts(readLogs(t, ta2, &agentv1.ReadLogsRequest{TaskArn: long}), "stdout")
	if !slices.Equal(out, []string{"sleeping 10m0s", "signalled; exiting"}) {
		t.Errorf("adopted task's log: %q", out)
	}
}

// TestAgentRestartContainerVanished removes a running task's container from containerd
// while no agent runs: the next agent reports the task STOPPED (the essential container
// gone, no exit code) and never creates the container again — a task must not run twice.
func TestAgentRestartContainerVanished(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cp := newControlPlane(t)
	cfg := testConfig(t, w, cp, "vanish")
	ta := startAgent(t, cfg, cp)
	arn := taskARN("vanish")
	cp.assign(t, arn, taskDef("long", containerDef("main", w.image, "sleep", "600")))
	cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
	ta.stop()

	client := w.ctd.Client(t, cfg.Namespace)
	ctrs, err := client.Containers(t.Context())
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("containers before the restart: %d, %v", len(ctrs), err)
	}
	if task, err := ctrs[0].Task(t.Context(), nil); err == nil {
		exited, err := task.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Kill(t.Context(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		if _, err := task.Delete(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ctrs[0].Delete(t.Context(), containerd.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	var lastSeq uint64 // reports up to it may be delivered again by the next agent
	for _, s := range cp.statesOf(arn) {
		lastSeq = max(lastSeq, s.GetSeq())
	}

	startAgent(t, cfg, cp)
	st := cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	c := containerOf(st, "main")
	if c.ExitCode != nil || c.GetReason() != state.ReasonVanished || st.GetStopCode() != state.StopCodeEssentialContainerExited {
		t.Errorf("task whose container vanished: %v", st)
	}
	for _, s := range cp.statesOf(arn) {
		if s.GetSeq() > lastSeq && s.GetLastStatus() == "RUNNING" {
			t.Errorf("the task ran again after the restart: %v", s)
		}
	}
	if ctrs, err := client.Containers(t.Context()); err != nil || len(ctrs) != 0 {
		t.Errorf("containers after the restart: %d, %v (the container was created again)", len(ctrs), err)
	}
}

// heartbeatCapacity returns the cpu of heartbeats after index from.
func heartbeatsSince(cp *controlPlane, from int) []*agentv1.Heartbeat {
	return slices.Clone(cp.heartbeats[min(from, len(cp.heartbeats)):])
}

// TestContainerdRestartUnderAgent stops containerd under a running agent
// and task: the agent advertises zero capacity while it is down and
// recovers when it is back, without a restart; the task keeps running and
// can be stopped.
func TestContainerdRestartUnderAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cp := newControlPlane(t)
	cfg := testConfig(t, w, cp, "ctdrestart")
	startAgent(t, cfg, cp)
	arn := taskARN("ctdrestart")
	cp.assign(t, arn, taskDef("sleep", containerDef("main", w.image, "sleep", "600")))
	cp.waitStatus(t, arn, "RUNNING", 60*time.Second)

	cp.mu.Lock()
	mark := len(cp.heartbeats)
	cp.mu.Unlock()
	if err := w.ctd.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	cp.waitFor(t, 10*time.Second, "a zero-capacity heartbeat", func() bool {
		for _, hb := range heartbeatsSince(cp, mark) {
			if !hb.GetRuntimeReady() && hb.GetCpu() == 0 && hb.GetMemory() == 0 {
				return true
			}
		}
		return false
	})
	cp.mu.Lock()
	mark = len(cp.heartbeats)
	cp.mu.Unlock()
	if err := w.ctd.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	cp.waitFor(t, 10*time.Second, "capacity back", func() bool {
		for _, hb := range heartbeatsSince(cp, mark) {
			if hb.GetRuntimeReady() && hb.GetCpu() > 0 && hb.GetMemory() > 0 {
				return true
			}
		}
		return false
	})
	cp.stop(t, arn, "UserInitiated")
	st := cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	if c := containerOf(st, "main"); c.ExitCode == nil || c.GetExitCode() != 0 {
		t.Errorf("after containerd restart, stopped: %v", st)
	}
	// A new task runs on the recovered runtime.
	arn2 := taskARN("ctdrestart")
	cp.assign(t, arn2, taskDef("exit", containerDef("main", w.image, "exit", "5")))
	if st := cp.waitStatus(t, arn2, "STOPPED", 60*time.Second); containerOf(st, "main").GetExitCode() != 5 {
		t.Errorf("task on recovered runtime: %v", st)
	}
}

// TestContainerdAbsentAtBoot starts the agent while containerd is down: it
// registers with zero capacity and picks containerd up when it starts.
func TestContainerdAbsentAtBoot(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.ctd.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	cp := newControlPlane(t)
	cfg := testConfig(t, w, cp, "late")
	startAgent(t, cfg, cp)
	cp.waitFor(t, 10*time.Second, "registration", func() bool { return len(cp.registrations) > 0 })
	cp.mu.Lock()
	reg := cp.registrations[0]
	cp.mu.Unlock()
	if reg.GetRuntimeReady() || reg.GetRuntimeReason() == "" {
		t.Errorf("registration while containerd is down: ready %v reason %q", reg.GetRuntimeReady(), reg.GetRuntimeReason())
	}
	for _, r := range reg.GetResources() {
		if (r.GetName() == "CPU" || r.GetName() == "MEMORY") && r.GetIntegerValue() != 0 {
			t.Errorf("%s = %d while containerd is down", r.GetName(), r.GetIntegerValue())
		}
	}
	arn := taskARN("late")
	cp.assign(t, arn, taskDef("exit", containerDef("main", w.image, "exit", "2")))
	time.Sleep(500 * time.Millisecond)
	if err := w.ctd.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second); containerOf(st, "main").GetExitCode() != 2 {
		t.Errorf("task after late containerd: %v", st)
	}
	cp.waitFor(t, 10*time.Second, "capacity heartbeat", func() bool {
		n := len(cp.heartbeats)
		return n > 0 && cp.heartbeats[n-1].GetCpu() > 0
	})
}
