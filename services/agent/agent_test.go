package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/pkg/demoimage"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/ociregistry"
	"github.com/berthhq/berth/services/agent/session"
	"github.com/berthhq/berth/services/agent/tasks"
	"github.com/berthhq/berth/testkit/containerdtest"
	"github.com/berthhq/berth/testkit/registrytest"
	"github.com/berthhq/berth/testkit/testimage"
)

// world is a containerd and a registry holding the test image, shared by
// the tests that run under one parent.
type world struct {
	ctd   *containerdtest.Instance
	image string // reference of the test image in the registry
	reg   string // registry address
}

func newWorld(t testing.TB) *world {
	t.Helper()
	ctd := containerdtest.Start(t)
	reg := registrytest.Start(t)
	ref := registrytest.PushTestImage(t, reg, "berth/testimage", "latest")
	return &world{ctd: ctd, image: ref, reg: reg.Addr()}
}

var taskSeq atomic.Int64

func taskARN(cluster string) string {
	return fmt.Sprintf("arn:aws:ecs:us-east-1:000000000000:task/%s/%032x", cluster, taskSeq.Add(1))
}

// testAgent is an agent under test with its own namespace, data dir and
// control plane.
type testAgent struct {
	cfg    agent.Config
	cp     *controlPlane
	a      *agent.Agent
	cancel context.CancelFunc
	done   chan error
}

func testConfig(t testing.TB, w *world, cp *controlPlane, name string) agent.Config {
	return agent.Config{
		ControlPlaneURL:      cp.url,
		Cluster:              name,
		DataDir:              filepath.Join(t.TempDir(), "agent"),
		ContainerdAddress:    w.ctd.Address(),
		RuncRoot:             w.ctd.RuncRoot(),
		Namespace:            "berth-" + name,
		Snapshotter:          w.ctd.Snapshotter(),
		PullRetries:          -1,
		PullBehavior:         "prefer-cached",
		StopTimeout:          2 * time.Second,
		CleanupWait:          time.Hour,
		LogAddr:              "127.0.0.1:0",
		HeartbeatInterval:    200 * time.Millisecond,
		ResendInterval:       time.Second,
		BackoffMin:           50 * time.Millisecond,
		BackoffMax:           500 * time.Millisecond,
		RuntimeProbeInterval: 200 * time.Millisecond,
		RuntimeProbeTimeout:  2 * time.Second,
		MemoryReserveMiB:     256,
		Attributes:           map[string]string{"team": "berth"},
		Logger:               slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// startAgent starts an agent on cfg; it is stopped when the test ends.
func startAgent(t testing.TB, cfg agent.Config, cp *controlPlane) *testAgent {
	t.Helper()
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ta := &testAgent{cfg: cfg, cp: cp, a: a, cancel: cancel, done: make(chan error, 1)}
	go func() { ta.done <- a.Run(ctx) }()
	t.Cleanup(ta.stop)
	return ta
}

// stop hard-stops the agent in-process (its containers keep running) and
// waits for Run to return.
func (ta *testAgent) stop() {
	ta.cancel()
	select {
	case <-ta.done:
	case <-time.After(30 * time.Second):
		panic("agent did not stop within 30s")
	}
	ta.done <- nil // let a second stop return at once
}

func containerDef(name, image string, command ...string) *ecsv1.ContainerDefinition {
	return &ecsv1.ContainerDefinition{Name: proto.String(name), Image: proto.String(image), Command: command}
}

func taskDef(family string, ctrs ...*ecsv1.ContainerDefinition) *ecsv1.TaskDefinition {
	return &ecsv1.TaskDefinition{
		Family:               proto.String(family),
		Revision:             1,
		TaskDefinitionArn:    proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/" + family + ":1"),
		ContainerDefinitions: ctrs,
		NetworkMode:          proto.String("host"),
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func clusterName(t *testing.T) string {
	n := strings.ToLower(t.Name())
	n = n[strings.LastIndex(n, "/")+1:]
	return strings.NewReplacer("_", "-", " ", "-").Replace(n)
}

// TestTasks runs task-behaviour tests in parallel against one containerd.
func TestTasks(t *testing.T) {
	w := newWorld(t)

	// A root filesystem snapshot left without its container (an agent killed inside a
	// create) does not fail the next create of that container: it is removed and the
	// container is created afresh (it was "snapshot … already exists").
	t.Run("leftover_rootfs_snapshot", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		arn := taskARN(name)
		client := w.ctd.Client(t, cfg.Namespace)
		key := tasks.ContainerID(arn, "main") + "-rootfs"
		if _, err := client.SnapshotService(cfg.Snapshotter).Prepare(t.Context(), key, ""); err != nil {
			t.Fatalf("prepare the leftover snapshot %s: %v", key, err)
		}
		startAgent(t, cfg, cp)
		cp.assign(t, arn, taskDef("leftover", containerDef("main", w.image, "exit", "0")))
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		if c := containerOf(st, "main"); c.ExitCode == nil || c.GetExitCode() != 0 {
			t.Errorf("with a leftover root filesystem: exit code %v, reason %q, task %q", c.ExitCode, c.GetReason(), st.GetStoppedReason())
		}
	})

	t.Run("exit_code", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		ta := startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		td := taskDef("exit", containerDef("main", w.image, "exit", "3"))
		cp.assign(t, arn, td)
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		c := containerOf(st, "main")
		if c.ExitCode == nil || c.GetExitCode() != 3 {
			t.Errorf("exit code = %v, want 3", c.ExitCode)
		}
		if st.GetStopCode() != "EssentialContainerExited" {
			t.Errorf("stopCode = %q", st.GetStopCode())
		}
		for name, ts := range map[string]*timestamppb.Timestamp{"pullStartedAt": st.GetPullStartedAt(), "pullStoppedAt": st.GetPullStoppedAt(),
			"startedAt": st.GetStartedAt(), "stoppingAt": st.GetStoppingAt(), "executionStoppedAt": st.GetExecutionStoppedAt(), "stoppedAt": st.GetStoppedAt()} {
			if !ts.IsValid() {
				t.Errorf("%s not reported", name)
			}
		}
		if st.GetStartedAt().AsTime().Before(st.GetPullStoppedAt().AsTime()) || st.GetStoppedAt().AsTime().Before(st.GetStartedAt().AsTime()) {
			t.Errorf("timestamps out of order: %v", st)
		}
		// A redelivery is acked and not run again.
		cp.assign(t, arn, td)
		cp.waitFor(t, 10*time.Second, "redelivery ack", func() bool {
			n := 0
			for _, a := range cp.acks {
				if a == "d-"+arn[strings.LastIndex(arn, "/")+1:] {
					n++
				}
			}
			return n >= 2
		})
		time.Sleep(300 * time.Millisecond)
		running := 0
		for _, s := range cp.statesOf(arn) {
			if s.GetLastStatus() == "RUNNING" {
				running++
			}
		}
		if running > 1 {
			t.Errorf("task reported RUNNING %d times; redelivery ran it again", running)
		}
		// Registration.
		cp.mu.Lock()
		reg := cp.registrations[0]
		cp.mu.Unlock()
		res := map[string]*ecsv1.Resource{}
		for _, r := range reg.GetResources() {
			res[r.GetName()] = r
		}
		if res["CPU"].GetIntegerValue()%1024 != 0 || res["CPU"].GetIntegerValue() == 0 {
			t.Errorf("CPU = %d, want a non-zero multiple of 1024", res["CPU"].GetIntegerValue())
		}
		if res["MEMORY"].GetIntegerValue() <= 0 {
			t.Errorf("MEMORY = %d", res["MEMORY"].GetIntegerValue())
		}
		if got := strings.Join(res["PORTS"].GetStringSetValue(), ","); got != "22,2375,2376,51678,51679" {
			t.Errorf("PORTS = %s", got)
		}
		attrs := map[string]string{}
		for _, a := range reg.GetAttributes() {
			attrs[a.GetName()] = a.GetValue()
		}
		if attrs["ecs.os-type"] != "linux" || attrs["ecs.cpu-architecture"] == "" || attrs["team"] != "berth" {
			t.Errorf("attributes = %v", attrs)
		}
		if attrs["berth.log-endpoint"] != "http://"+ta.a.LogAddr() {
			t.Errorf("berth.log-endpoint = %q, want http://%s", attrs["berth.log-endpoint"], ta.a.LogAddr())
		}
		if _, ok := attrs["ecs.capability.container-health-check"]; !ok {
			t.Errorf("no health-check capability in %v", attrs)
		}
		_ = ta
	})
}

// readLogs reads a task's logs through the agent's LogService.
func readLogs(t *testing.T, ta *testAgent, req *agentv1.ReadLogsRequest) []*agentv1.LogLine {
	t.Helper()
	client := agentv1connect.NewLogServiceClient(session.DefaultHTTPClient(), "http://"+ta.a.LogAddr())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := client.ReadLogs(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("ReadLogs: %v", err)
	}
	var out []*agentv1.LogLine
	for stream.Receive() {
		out = append(out, stream.Msg().GetLines()...)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("ReadLogs stream: %v", err)
	}
	return out
}

func texts(lines []*agentv1.LogLine, stream string) []string {
	var out []string
	for _, l := range lines {
		if stream == "" || l.GetStream() == stream {
			out = append(out, l.GetText())
		}
	}
	return out
}

// runToStop assigns td as a new task on a new agent and waits for STOPPED.
func runToStop(t *testing.T, w *world, td *ecsv1.TaskDefinition, mod func(*agent.Config)) (*testAgent, string, *agentv1.TaskStateChange) {
	t.Helper()
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := testConfig(t, w, cp, name)
	if mod != nil {
		mod(&cfg)
	}
	ta := startAgent(t, cfg, cp)
	arn := taskARN(name)
	cp.assign(t, arn, td)
	return ta, arn, cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
}

func TestTasksMore(t *testing.T) {
	w := newWorld(t)

	t.Run("entrypoint_command_logs", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "hello-out", "hello-err")
		c.EntryPoint = []string{"/berth-testimage", "echo"}
		ta, arn, st := runToStop(t, w, taskDef("echo", c), nil)
		if got := containerOf(st, "main").GetExitCode(); got != 0 {
			t.Fatalf("exit code %d", got)
		}
		lines := readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn, ContainerName: "main"})
		if out, errs := texts(lines, "stdout"), texts(lines, "stderr"); !slices.Equal(out, []string{"hello-out"}) || !slices.Equal(errs, []string{"hello-err"}) {
			t.Errorf("stdout %q stderr %q", out, errs)
		}
		if tail := readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn, Tail: 1}); len(tail) != 1 {
			t.Errorf("tail 1 returned %d lines", len(tail))
		}
		if later := readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn, Since: timestamppb.New(time.Now().Add(time.Minute))}); len(later) != 0 {
			t.Errorf("since the future returned %d lines", len(later))
		}
	})

	t.Run("command_keeps_entrypoint", func(t *testing.T) {
		t.Parallel()
		// command alone replaces CMD and keeps the image's ENTRYPOINT.
		_, _, st := runToStop(t, w, taskDef("cmd", containerDef("main", w.image, "exit", "7")), nil)
		if got := containerOf(st, "main").GetExitCode(); got != 7 {
			t.Errorf("exit code %d, want 7", got)
		}
	})

	t.Run("environment", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "env")
		c.Environment = []*ecsv1.KeyValuePair{{Name: proto.String("FOO"), Value: proto.String("bar")}, {Name: proto.String("IMAGE_VAR"), Value: proto.String("overridden")}}
		c.WorkingDirectory = proto.String("/tmp")
		ta, arn, _ := runToStop(t, w, taskDef("env", c), nil)
		out := texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn}), "stdout")
		for _, want := range []string{"FOO=bar", "IMAGE_VAR=overridden", "PATH=/"} {
			if !slices.Contains(out, want) {
				t.Errorf("env lacks %s: %q", want, out)
			}
		}
	})

	t.Run("oom", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "alloc", "256")
		c.Memory = proto.Int32(32)
		_, _, st := runToStop(t, w, taskDef("oom", c), nil)
		if got := containerOf(st, "main").GetReason(); got != "OutOfMemoryError: Container killed due to memory usage" {
			t.Errorf("reason %q (exit %d)", got, containerOf(st, "main").GetExitCode())
		}
	})

	// A process the runtime cannot execute stops the task as ECS does: TaskFailedToStart,
	// and the container's reason CannotStartContainerError with the runtime's message, no
	// exit code. runc finds a missing program or a file that is not executable before the
	// start; a program whose dynamic loader the image lacks (a cgo build packed alone, as
	// deploy/README.md's image once was) passes that check and its execve fails after.
	checkCannotStart := func(t *testing.T, st *agentv1.TaskStateChange, want ...string) {
		t.Helper()
		ctr := containerOf(st, "main")
		r := ctr.GetReason()
		ok := strings.HasPrefix(r, "CannotStartContainerError: ")
		for _, w := range want {
			ok = ok && strings.Contains(r, w)
		}
		if !ok || ctr.ExitCode != nil {
			t.Errorf("container reason %q, exit code %v; want CannotStartContainerError: with the runtime's message naming %q, no exit code", r, ctr.ExitCode, want)
		}
		if st.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st.GetStoppedReason(), "CannotStartContainerError: ") {
			t.Errorf("stopCode %q stoppedReason %q, want TaskFailedToStart and CannotStartContainerError", st.GetStopCode(), st.GetStoppedReason())
		}
	}
	for _, tc := range []struct{ name, entry, want string }{
		{"command_not_found", "/no-such-program", "no such file or directory"},
		{"not_executable", "/etc/passwd", "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := containerDef("main", w.image)
			c.EntryPoint = []string{tc.entry}
			_, _, st := runToStop(t, w, taskDef(tc.name, c), nil)
			checkCannotStart(t, st, tc.entry, tc.want)
		})
	}
	t.Run("dynamic_program", func(t *testing.T) {
		t.Parallel()
		sh, err := filepath.EvalSymlinks("/bin/sh")
		if err != nil {
			t.Skipf("no /bin/sh to pack: %v", err)
		}
		bin, err := os.ReadFile(sh)
		if err != nil {
			t.Fatal(err)
		}
		if demoimage.CheckStatic(bin) == nil {
			t.Skip("/bin/sh is static here: no dynamically linked program to pack")
		}
		img, err := demoimage.Pack(bin, goruntime.GOARCH)
		if err != nil {
			t.Fatal(err)
		}
		ref := w.reg + "/berth/dynamic:latest"
		if err := demoimage.Push(t.Context(), img, ref); err != nil {
			t.Fatal(err)
		}
		_, _, st := runToStop(t, w, taskDef("dynamic", containerDef("main", ref, "-c", "exit 0")), nil)
		checkCannotStart(t, st, "exec "+demoimage.Entrypoint+": no such file or directory")
	})

	t.Run("pull_failure", func(t *testing.T) {
		t.Parallel()
		_, _, st := runToStop(t, w, taskDef("nopull", containerDef("main", w.reg+"/berth/missing:latest")), nil)
		if st.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st.GetStoppedReason(), "CannotPullContainerError: ") {
			t.Errorf("stopCode %q reason %q", st.GetStopCode(), st.GetStoppedReason())
		}
		if r := containerOf(st, "main").GetReason(); !strings.HasPrefix(r, "CannotPullContainerError: ") {
			t.Errorf("container reason %q", r)
		}
	})

	t.Run("stop_sigterm", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		c := containerDef("main", w.image, "sleep", "600")
		c.StopTimeout = proto.Int32(20)
		cp.assign(t, arn, taskDef("sleep", c))
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		// The program is PID 1: a SIGTERM before its handler is installed
		// is not the agent's to honour.
		time.Sleep(time.Second)
		t0 := time.Now()
		cp.stop(t, arn, "UserInitiated")
		st := cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("stop took %s; SIGTERM not honoured", d)
		}
		if st.GetStopCode() != "UserInitiated" || st.GetStoppedReason() != "stopped by test" || containerOf(st, "main").GetExitCode() != 0 {
			t.Errorf("stopped: %v", st)
		}
	})

	t.Run("stop_sigkill_after_timeout", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		c := containerDef("main", w.image, "ignore-sigterm")
		c.StopTimeout = proto.Int32(2)
		cp.assign(t, arn, taskDef("stubborn", c))
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		time.Sleep(time.Second) // let it install its handler
		t0 := time.Now()
		cp.stop(t, arn, "UserInitiated")
		st := cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
		if d := time.Since(t0); d < 1500*time.Millisecond || d > 15*time.Second {
			t.Errorf("stop took %s, want about the 2s stopTimeout", d)
		}
		if got := containerOf(st, "main").GetExitCode(); got != 137 {
			t.Errorf("exit code %d, want 137 (SIGKILL)", got)
		}
	})

	t.Run("non_essential_exit_keeps_task", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		side := containerDef("side", w.image, "exit", "1")
		side.Essential = proto.Bool(false)
		cp.assign(t, arn, taskDef("ess", containerDef("main", w.image, "sleep", "600"), side))
		cp.waitFor(t, 60*time.Second, "side STOPPED", func() bool {
			s := cp.latestLocked(arn)
			return s != nil && containerOf(s, "side").GetLastStatus() == "STOPPED"
		})
		time.Sleep(500 * time.Millisecond)
		cp.mu.Lock()
		s := cp.latestLocked(arn)
		cp.mu.Unlock()
		if s.GetLastStatus() != "RUNNING" || containerOf(s, "side").GetExitCode() != 1 {
			t.Fatalf("after non-essential exit: %v", s)
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})

	t.Run("essential_exit_stops_task", func(t *testing.T) {
		t.Parallel()
		side := containerDef("side", w.image, "sleep", "600")
		side.Essential = proto.Bool(false)
		_, _, st := runToStop(t, w, taskDef("ess2", containerDef("main", w.image, "exit", "4"), side), nil)
		if st.GetStopCode() != "EssentialContainerExited" || containerOf(st, "main").GetExitCode() != 4 || containerOf(st, "side").GetLastStatus() != "STOPPED" {
			t.Errorf("stopped: %v", st)
		}
	})

	t.Run("depends_on", func(t *testing.T) {
		t.Parallel()
		port := freePort(t)
		initC := containerDef("init", w.image, "exit", "0")
		initC.Essential = proto.Bool(false)
		web := containerDef("web", w.image, "serve", fmt.Sprint(port))
		web.HealthCheck = &ecsv1.HealthCheck{
			Command:  []string{"CMD", "/berth-testimage", "check", fmt.Sprintf("http://127.0.0.1:%d/health", port)},
			Interval: proto.Int32(1), Retries: proto.Int32(3), Timeout: proto.Int32(2),
		}
		web.DependsOn = []*ecsv1.ContainerDependency{{ContainerName: proto.String("init"), Condition: proto.String("SUCCESS")}}
		app := containerDef("app", w.image, "sleep", "600")
		app.DependsOn = []*ecsv1.ContainerDependency{{ContainerName: proto.String("web"), Condition: proto.String("HEALTHY")}}
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		cp.assign(t, arn, taskDef("deps", initC, web, app))
		st := cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		if containerOf(st, "web").GetHealthStatus() != "HEALTHY" || containerOf(st, "init").GetExitCode() != 0 {
			t.Errorf("at RUNNING: %v", st)
		}
		// Order: init stopped before web ran; web healthy before app ran.
		var initStopped, webRunning, webHealthy, appRunning = -1, -1, -1, -1
		for i, s := range cp.statesOf(arn) {
			first := func(p *int, cond bool) {
				if cond && *p < 0 {
					*p = i
				}
			}
			first(&initStopped, containerOf(s, "init").GetLastStatus() == "STOPPED")
			first(&webRunning, containerOf(s, "web").GetLastStatus() == "RUNNING")
			first(&webHealthy, containerOf(s, "web").GetHealthStatus() == "HEALTHY")
			first(&appRunning, containerOf(s, "app").GetLastStatus() == "RUNNING")
		}
		if !(initStopped >= 0 && initStopped <= webRunning && webHealthy <= appRunning && webHealthy >= 0) {
			t.Errorf("order: init stopped %d, web running %d, web healthy %d, app running %d", initStopped, webRunning, webHealthy, appRunning)
		}
		if st.GetHealthStatus() != "HEALTHY" && st.GetHealthStatus() != "UNKNOWN" {
			t.Errorf("task health %q", st.GetHealthStatus())
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})

	t.Run("container_settings", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		startAgent(t, cfg, cp)
		arn := taskARN(name)
		c := containerDef("main", w.image, "sleep", "600")
		c.Cpu = 512
		c.Memory = proto.Int32(64)
		c.MemoryReservation = proto.Int32(32)
		c.User = proto.String("nobody")
		c.ReadonlyRootFilesystem = proto.Bool(true)
		c.DockerLabels = map[string]string{"app": "web"}
		c.Ulimits = []*ecsv1.Ulimit{{Name: proto.String("nofile"), SoftLimit: 1024, HardLimit: 2048}}
		cp.assign(t, arn, taskDef("settings", c))
		st := cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		client := w.ctd.Client(t, cfg.Namespace)
		ctr, err := client.LoadContainer(t.Context(), containerOf(st, "main").GetRuntimeId())
		if err != nil {
			t.Fatal(err)
		}
		spec, err := ctr.Spec(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		labels, _ := ctr.Labels(t.Context())
		res := spec.Linux.Resources
		if res.CPU == nil || res.CPU.Shares == nil || *res.CPU.Shares != 512 {
			t.Errorf("cpu shares %v", res.CPU)
		}
		if res.Memory == nil || res.Memory.Limit == nil || *res.Memory.Limit != 64<<20 || res.Memory.Reservation == nil || *res.Memory.Reservation != 32<<20 {
			t.Errorf("memory %+v", res.Memory)
		}
		if spec.Process.User.UID != 65534 || !spec.Root.Readonly {
			t.Errorf("user %+v readonly %v", spec.Process.User, spec.Root.Readonly)
		}
		if !slices.ContainsFunc(spec.Process.Rlimits, func(r specs.POSIXRlimit) bool {
			return r.Type == "RLIMIT_NOFILE" && r.Soft == 1024 && r.Hard == 2048
		}) {
			t.Errorf("rlimits %+v", spec.Process.Rlimits)
		}
		if labels["app"] != "web" || labels["com.berthhq.task-arn"] != arn || labels["com.berthhq.container-name"] != "main" ||
			labels["com.berthhq.cluster"] != name || labels["com.berthhq.task-definition"] != "settings:1" || labels["com.berthhq.container-instance"] == "" {
			t.Errorf("labels %v", labels)
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})

	t.Run("cleanup_keeps_logs", func(t *testing.T) {
		t.Parallel()
		ta, arn, st := runToStop(t, w, taskDef("cleanup", containerDef("main", w.image, "echo", "kept", "also")), func(c *agent.Config) {
			c.CleanupWait = 300 * time.Millisecond
		})
		client := w.ctd.Client(t, ta.cfg.Namespace)
		id := containerOf(st, "main").GetRuntimeId()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := client.LoadContainer(t.Context(), id)
			if errdefs.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("container %s not removed after the cleanup wait (%v)", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		snaps := 0
		err := client.SnapshotService(ta.cfg.Snapshotter).Walk(t.Context(), func(_ context.Context, i snapshots.Info) error {
			if strings.HasPrefix(i.Name, id) {
				snaps++
			}
			return nil
		})
		if err != nil || snaps != 0 {
			t.Errorf("%d snapshots of %s left (%v)", snaps, id, err)
		}
		if out := texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn}), ""); !slices.Equal(out, []string{"kept", "also"}) && !slices.Equal(out, []string{"also", "kept"}) {
			t.Errorf("logs after removal: %q", out)
		}
	})

	t.Run("logs_follow", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		ta := startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		cp.assign(t, arn, taskDef("follow", containerDef("main", w.image, "sleep", "1")))
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		// Follow returns once the container has stopped and its log is complete.
		lines := readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn, ContainerName: "main", Follow: true})
		if got := texts(lines, "stdout"); !slices.Equal(got, []string{"sleeping 1s"}) {
			t.Errorf("followed %q", got)
		}
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})

	t.Run("pull_behaviour_cache_fallback", func(t *testing.T) {
		t.Parallel()
		// A registry of its own, shut down after the first pull.
		reg, err := ociregistry.Serve(t.Context(), "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		img, err := testimage.Build(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ref := reg.Addr() + "/berth/cached:v1"
		if err := testimage.Push(t.Context(), img, ref); err != nil {
			t.Fatal(err)
		}
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		cfg.PullBehavior = "default"
		ta := startAgent(t, cfg, cp)
		first := taskARN(name)
		cp.assign(t, first, taskDef("cached", containerDef("main", ref, "exit", "0")))
		cp.waitStatus(t, first, "STOPPED", 60*time.Second)
		if err := reg.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		// default: the pull fails, the cached image is used.
		second := taskARN(name)
		cp.assign(t, second, taskDef("cached", containerDef("main", ref, "exit", "6")))
		if st := cp.waitStatus(t, second, "STOPPED", 60*time.Second); containerOf(st, "main").GetExitCode() != 6 {
			t.Errorf("default behaviour with registry down: %v", st)
		}
		// always: the failed pull fails the task.
		ta.stop()
		cfg.PullBehavior = "always"
		startAgent(t, cfg, cp)
		cp.waitFor(t, 30*time.Second, "second hello", func() bool { return len(cp.hellos) >= 2 && cp.send != nil })
		third := taskARN(name)
		cp.assign(t, third, taskDef("cached", containerDef("main", ref, "exit", "0")))
		st := cp.waitStatus(t, third, "STOPPED", 60*time.Second)
		if !strings.HasPrefix(st.GetStoppedReason(), "CannotPullContainerError: ") || st.GetStopCode() != "TaskFailedToStart" {
			t.Errorf("always behaviour with registry down: %v", st)
		}
	})

	t.Run("outbox_resends_until_acked", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		cp.noStateAck = true
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		ta := startAgent(t, cfg, cp)
		arn := taskARN(name)
		cp.assign(t, arn, taskDef("unacked", containerDef("main", w.image, "exit", "9")))
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		seq := st.GetSeq()
		// Unacked: resent on the resend interval.
		cp.waitFor(t, 10*time.Second, "a resend", func() bool {
			n := 0
			for _, s := range cp.states {
				if s.GetSeq() == seq {
					n++
				}
			}
			return n >= 2
		})
		// And across an agent restart, until acked.
		ta.stop()
		cp.mu.Lock()
		cp.noStateAck = false
		mark := len(cp.states)
		cp.mu.Unlock()
		ta = startAgent(t, cfg, cp)
		cp.waitFor(t, 30*time.Second, "resend after restart", func() bool {
			for _, s := range cp.states[mark:] {
				if s.GetSeq() == seq && s.GetLastStatus() == "STOPPED" {
					return true
				}
			}
			return false
		})
		// Acked now: a later restart sends nothing for it, and the task
		// is not run again.
		time.Sleep(300 * time.Millisecond)
		ta.stop()
		cp.mu.Lock()
		mark = len(cp.states)
		cp.mu.Unlock()
		startAgent(t, cfg, cp)
		cp.waitFor(t, 30*time.Second, "third hello", func() bool { return len(cp.hellos) >= 3 })
		time.Sleep(time.Second)
		cp.mu.Lock()
		defer cp.mu.Unlock()
		for _, s := range cp.states[mark:] {
			if s.GetTaskArn() == arn {
				t.Errorf("acked task reported again after restart: %v", s)
			}
		}
	})

	t.Run("expected_tasks_stops_others", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		keep, drop := taskARN(name), taskARN(name)
		cp.assign(t, keep, taskDef("keep", containerDef("main", w.image, "sleep", "600")))
		cp.assign(t, drop, taskDef("drop", containerDef("main", w.image, "sleep", "600")))
		cp.waitStatus(t, keep, "RUNNING", 60*time.Second)
		cp.waitStatus(t, drop, "RUNNING", 60*time.Second)
		cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_ExpectedTasks{ExpectedTasks: &agentv1.ExpectedTasks{TaskArns: []string{keep}}}})
		if st := cp.waitStatus(t, drop, "STOPPED", 30*time.Second); st.GetStopCode() != "ServiceSchedulerInitiated" {
			t.Errorf("unexpected task stopped with %v", st)
		}
		cp.mu.Lock()
		if s := cp.latestLocked(keep); s.GetLastStatus() != "RUNNING" {
			t.Errorf("expected task: %v", s)
		}
		cp.mu.Unlock()
		cp.stop(t, keep, "UserInitiated")
		cp.waitStatus(t, keep, "STOPPED", 30*time.Second)
	})

	t.Run("health_unhealthy", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		c := containerDef("main", w.image, "sleep", "600")
		c.HealthCheck = &ecsv1.HealthCheck{
			Command:  []string{"CMD", "/berth-testimage", "health-file", "/nonexistent"},
			Interval: proto.Int32(1), Retries: proto.Int32(2), Timeout: proto.Int32(2),
		}
		cp.assign(t, arn, taskDef("unhealthy", c))
		cp.waitFor(t, 60*time.Second, "UNHEALTHY", func() bool {
			s := cp.latestLocked(arn)
			return s != nil && s.GetHealthStatus() == "UNHEALTHY" && containerOf(s, "main").GetHealthStatus() == "UNHEALTHY"
		})
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})
}
