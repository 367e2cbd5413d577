package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent"
)

// after makes c wait for the named containers to complete.
func after(c *ecsv1.ContainerDefinition, names ...string) *ecsv1.ContainerDefinition {
	for _, n := range names {
		c.DependsOn = append(c.DependsOn, &ecsv1.ContainerDependency{ContainerName: proto.String(n), Condition: proto.String("COMPLETE")})
	}
	return c
}

func nonEssential(c *ecsv1.ContainerDefinition) *ecsv1.ContainerDefinition {
	c.Essential = proto.Bool(false)
	return c
}

func mount(c *ecsv1.ContainerDefinition, volume, at string, readOnly bool) *ecsv1.ContainerDefinition {
	c.MountPoints = append(c.MountPoints, &ecsv1.MountPoint{SourceVolume: proto.String(volume), ContainerPath: proto.String(at), ReadOnly: proto.Bool(readOnly)})
	return c
}

// stdout returns the stdout lines of one container of a task.
func stdout(t *testing.T, ta *testAgent, arn, name string) []string {
	t.Helper()
	return texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn, ContainerName: name}), "stdout")
}

// TestTaskVolumes runs tasks on real containerd and looks, from inside the containers, at
// what the task definition's volumes, mountPoints and volumesFrom give them.
func TestTaskVolumes(t *testing.T) {
	w := newWorld(t)

	t.Run("host_bind_mount_read_only", func(t *testing.T) {
		t.Parallel()
		host := t.TempDir()
		if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from-host"), 0o644); err != nil {
			t.Fatal(err)
		}
		td := taskDef("hostvol",
			nonEssential(mount(containerDef("reader", w.image, "cat", "/data/in.txt"), "data", "/data", true)),
			nonEssential(mount(containerDef("rowriter", w.image, "write", "/data/nope.txt", "x"), "data", "/data", true)),
			after(mount(containerDef("writer", w.image, "write", "/data/out.txt", "from-container"), "data", "/data", false), "reader", "rowriter"),
		)
		td.Volumes = []*ecsv1.Volume{{Name: proto.String("data"), Host: &ecsv1.HostVolumeProperties{SourcePath: proto.String(host)}}}
		ta, arn, st := runToStop(t, w, td, nil)
		if got := stdout(t, ta, arn, "reader"); !slices.Equal(got, []string{"from-host"}) {
			t.Errorf("reader saw %q in /data/in.txt (exit %d, reason %q, stderr %q), want the host's file", got,
				containerOf(st, "reader").GetExitCode(), containerOf(st, "reader").GetReason(),
				texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn, ContainerName: "reader"}), "stderr"))
		}
		ro := stdout(t, ta, arn, "rowriter")
		if code := containerOf(st, "rowriter").GetExitCode(); code != 1 || len(ro) != 1 || !strings.Contains(ro[0], "read-only file system") {
			t.Errorf("write to a readOnly mount point: exit %d, %q; want a read-only file system error", code, ro)
		}
		if _, err := os.Stat(filepath.Join(host, "nope.txt")); err == nil {
			t.Error("the readOnly mount point let a file be written")
		}
		if code := containerOf(st, "writer").GetExitCode(); code != 0 {
			t.Errorf("writer exit %d: %q", code, stdout(t, ta, arn, "writer"))
		}
		if b, err := os.ReadFile(filepath.Join(host, "out.txt")); err != nil || string(b) != "from-container" {
			t.Errorf("host sees %q, %v; want the container's write", b, err)
		}
	})

	t.Run("scratch_volume_shared_and_removed", func(t *testing.T) {
		t.Parallel()
		td := taskDef("scratch",
			nonEssential(mount(containerDef("producer", w.image, "write", "/shared/msg", "hello"), "scratch", "/shared", false)),
			nonEssential(after(&ecsv1.ContainerDefinition{Name: proto.String("roconsumer"), Image: proto.String(w.image), Command: []string{"write", "/shared/other", "x"},
				VolumesFrom: []*ecsv1.VolumeFrom{{SourceContainer: proto.String("producer"), ReadOnly: proto.Bool(true)}}}, "producer")),
			after(&ecsv1.ContainerDefinition{Name: proto.String("consumer"), Image: proto.String(w.image), Command: []string{"cat", "/shared/msg"},
				VolumesFrom: []*ecsv1.VolumeFrom{{SourceContainer: proto.String("producer")}}}, "producer", "roconsumer"),
		)
		td.Volumes = []*ecsv1.Volume{{Name: proto.String("scratch"), Host: &ecsv1.HostVolumeProperties{}}}
		var dataDir string
		ta, arn, st := runToStop(t, w, td, func(c *agent.Config) {
			c.CleanupWait = 3 * time.Second
			dataDir = c.DataDir
		})
		if got := stdout(t, ta, arn, "consumer"); !slices.Equal(got, []string{"hello"}) || containerOf(st, "consumer").GetExitCode() != 0 {
			t.Errorf("consumer (volumesFrom producer) read %q, want the producer's write", got)
		}
		if ro := stdout(t, ta, arn, "roconsumer"); len(ro) != 1 || !strings.Contains(ro[0], "read-only file system") {
			t.Errorf("volumesFrom readOnly: %q, want a read-only file system error", ro)
		}
		dir := filepath.Join(dataDir, "volumes", arn[strings.LastIndex(arn, "/")+1:], "scratch")
		if b, err := os.ReadFile(filepath.Join(dir, "msg")); err != nil || string(b) != "hello" {
			t.Fatalf("scratch directory %s holds %q, %v", dir, b, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(filepath.Dir(dir)); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task's scratch volumes %s still there after the task was cleaned up", filepath.Dir(dir))
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("task_memory_is_a_hard_limit", func(t *testing.T) {
		t.Parallel()
		// No container limit: the task's 64 MiB is the limit. One container allocating
		// 200 MiB is OOM-killed at it.
		td := taskDef("taskmem", containerDef("big", w.image, "alloc", "200"))
		td.Memory = proto.String("64")
		_, _, st := runToStop(t, w, td, nil)
		if got := containerOf(st, "big").GetReason(); got != "OutOfMemoryError: Container killed due to memory usage" {
			t.Errorf("big: reason %q (exit %d), want OOM at the task's 64 MiB", got, containerOf(st, "big").GetExitCode())
		}
	})

	t.Run("task_memory_holds_all_containers", func(t *testing.T) {
		t.Parallel()
		// Two containers of 40 MiB each fit no container limit (they have none) but not the
		// task's 64 MiB together: the limit is the task cgroup's, so at least one of them
		// is OOM-killed, and its exit (both are essential) stops the task. (Which one, and whether the kernel takes a second victim while the
		// first is still exiting, is the kernel's choice.)
		td := taskDef("taskmem2",
			containerDef("a", w.image, "alloc", "40"),
			containerDef("b", w.image, "alloc", "40"),
		)
		td.Memory = proto.String("64")
		_, _, st := runToStop(t, w, td, nil)
		const oom = "OutOfMemoryError: Container killed due to memory usage"
		if containerOf(st, "a").GetReason() != oom && containerOf(st, "b").GetReason() != oom {
			t.Errorf("neither container was OOM-killed (a: %q exit %d, b: %q exit %d); 80 MiB fit a task limit of 64",
				containerOf(st, "a").GetReason(), containerOf(st, "a").GetExitCode(), containerOf(st, "b").GetReason(), containerOf(st, "b").GetExitCode())
		}
	})

	t.Run("task_memory_override", func(t *testing.T) {
		t.Parallel()
		// The task definition's 512 MiB would fit 100 MiB; the RunTask override of 48 does not.
		td := taskDef("taskmemov", containerDef("big", w.image, "alloc", "100"))
		td.Memory = proto.String("512")
		cp := newControlPlane(t)
		name := clusterName(t)
		startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId:     "d-" + arn[strings.LastIndex(arn, "/")+1:],
			Task:           &ecsv1.Task{TaskArn: proto.String(arn), TaskDefinitionArn: td.TaskDefinitionArn, Overrides: &ecsv1.TaskOverride{Memory: proto.String("48")}},
			TaskDefinition: td,
		}}})
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		if got := containerOf(st, "big").GetReason(); got != "OutOfMemoryError: Container killed due to memory usage" {
			t.Errorf("reason %q, want OOM at the overridden 48 MiB", got)
		}
	})

	t.Run("shared_docker_volume_outlives_tasks", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		cfg.CleanupWait = 2 * time.Second
		ta := startAgent(t, cfg, cp)
		shared := func(family, volume string, autoprovision bool, c *ecsv1.ContainerDefinition) *ecsv1.TaskDefinition {
			// A task-scoped volume beside the shared one: its directory goes with the task.
			td := taskDef(family, mount(mount(c, volume, "/v", false), "own", "/own", false))
			td.Volumes = []*ecsv1.Volume{{Name: proto.String(volume), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{
				Scope: proto.String("shared"), Autoprovision: proto.Bool(autoprovision), Driver: proto.String("local"),
			}}, {Name: proto.String("own"), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{Scope: proto.String("task")}}}
			return td
		}
		run := func(td *ecsv1.TaskDefinition) (string, *agentv1.TaskStateChange) {
			arn := taskARN(name)
			cp.assign(t, arn, td)
			return arn, cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		}
		first, _ := run(shared("producer", "cache", true, containerDef("main", w.image, "write", "/v/msg", "kept")))
		// The first task is cleaned up (its own volumes removed) before the second reads.
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "volumes", first[strings.LastIndex(first, "/")+1:], "own")); err != nil {
			t.Fatalf("the first task's task-scoped volume: %v", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "volumes", first[strings.LastIndex(first, "/")+1:])); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("first task not cleaned up")
			}
			time.Sleep(100 * time.Millisecond)
		}
		second, st := run(shared("consumer", "cache", false, containerDef("main", w.image, "cat", "/v/msg")))
		if got := stdout(t, ta, second, "main"); !slices.Equal(got, []string{"kept"}) || containerOf(st, "main").GetExitCode() != 0 {
			t.Errorf("second task read %q from the shared volume, want the first task's write", got)
		}
		_, st = run(shared("missing", "never-made", false, containerDef("main", w.image, "cat", "/v/msg")))
		if got := containerOf(st, "main").GetReason(); !strings.Contains(got, "shared volume not found on this instance and autoprovision is false") {
			t.Errorf("shared volume missing without autoprovision: reason %q", got)
		}
	})

	t.Run("task_cpu_cgroup", func(t *testing.T) {
		t.Parallel()
		// Both containers are in the task's cgroup, whose cpu.shares is the task's cpu and
		// whose CFS quota is cpu/1024 CPUs.
		td := taskDef("taskcpu", nonEssential(containerDef("a", w.image, "cat", "/proc/self/cgroup")), containerDef("b", w.image, "sleep", "600"))
		td.Cpu = proto.String("256")
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		ta := startAgent(t, cfg, cp)
		arn := taskARN(name)
		cp.assign(t, arn, td)
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		parent := "/" + cfg.Namespace + "/task-" + arn[strings.LastIndex(arn, "/")+1:]
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", parent, "cpu.shares"))
		if err != nil {
			b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", parent, "cpu.weight"))
		}
		if got := strings.TrimSpace(string(b)); err != nil || (got != "256" && got != "10") { // v1 shares, v2 weight of 256 shares
			t.Errorf("task cgroup cpu: %q, %v; want 256 shares", got, err)
		}
		// And a CFS quota of 256/1024 CPUs, as the ECS agent sets from task-level cpu.
		b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", parent, "cpu.cfs_quota_us"))
		want := "25000"
		if err != nil {
			b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", parent, "cpu.max"))
			want = "25000 100000"
		}
		if got := strings.TrimSpace(string(b)); err != nil || got != want {
			t.Errorf("task cgroup cpu quota: %q, %v; want %s", got, err, want)
		}
		deadline := time.Now().Add(30 * time.Second)
		var lines []string
		for time.Now().Before(deadline) {
			if lines = stdout(t, ta, arn, "a"); len(lines) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, parent+"/") }) {
			t.Errorf("container a's cgroups %q are not under the task's %s", lines, parent)
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})

	t.Run("task_volumes_survive_agent_restart", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		cfg.CleanupWait = time.Second
		ta := startAgent(t, cfg, cp)
		td := taskDef("survive",
			nonEssential(mount(containerDef("producer", w.image, "write", "/s/msg", "still here"), "scratch", "/s", false)),
			mount(containerDef("main", w.image, "sleep", "600"), "scratch", "/s", true),
		)
		td.Volumes = []*ecsv1.Volume{{Name: proto.String("scratch"), Host: &ecsv1.HostVolumeProperties{}}}
		td.Memory = proto.String("128")
		arn := taskARN(name)
		id := arn[strings.LastIndex(arn, "/")+1:]
		msg := filepath.Join(cfg.DataDir, "volumes", id, "scratch", "msg")
		memCgroup := filepath.Join("/sys/fs/cgroup/memory", cfg.Namespace, "task-"+id)
		cp.assign(t, arn, td)
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		cp.waitFor(t, 30*time.Second, "the producer's write", func() bool { _, err := os.Stat(msg); return err == nil })

		ta.stop()
		startAgent(t, cfg, cp)
		cp.waitFor(t, 30*time.Second, "second hello", func() bool { return len(cp.hellos) >= 2 })
		cp.assign(t, arn, td) // redelivered
		time.Sleep(time.Second)
		if b, err := os.ReadFile(msg); err != nil || string(b) != "still here" {
			t.Fatalf("after the agent restart the task's volume holds %q, %v", b, err)
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
		cp.waitFor(t, 30*time.Second, "the task's volumes and cgroup removed", func() bool {
			_, errV := os.Stat(filepath.Dir(filepath.Dir(msg)))
			_, errC := os.Stat(memCgroup)
			return os.IsNotExist(errV) && os.IsNotExist(errC)
		})
		// The producer exited as the first agent stopped: its containerd task was being
		// deleted then, and must not be left with a shim that containerd no longer knows.
		cp.waitFor(t, 10*time.Second, "no containerd shim left for the task's containers", func() bool {
			return len(shimsOf(t, cfg.Namespace, id)) == 0
		})
	})
}

// shimsOf lists the containerd-shim processes of namespace whose container id starts
// with prefix, as "pid: command line".
func shimsOf(t *testing.T, namespace, prefix string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue // not a process, or gone
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		ns, ok := slices.Index(args, "-namespace"), false
		if i := slices.Index(args, "-id"); ns >= 0 && ns+1 < len(args) && i >= 0 && i+1 < len(args) {
			ok = args[ns+1] == namespace && strings.HasPrefix(args[i+1], prefix)
		}
		if ok {
			out = append(out, d.Name()+": "+strings.Join(args, " "))
		}
	}
	return out
}
