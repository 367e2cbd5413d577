package agent_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// capEff returns the effective capability mask from /proc/self/status lines.
func capEff(t *testing.T, lines []string) uint64 {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("CapEff %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no CapEff in %q", lines)
	return 0
}

// mountLine returns the /proc/self/mounts line of the mount at dest.
func mountLine(lines []string, dest string) string {
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[1] == dest {
			return l
		}
	}
	return ""
}

// TestLinuxParameters looks from inside containers on real containerd at what
// linuxParameters gives them: capabilities added and dropped, tmpfs mounts and the size
// of /dev/shm.
func TestLinuxParameters(t *testing.T) {
	w := newWorld(t)
	const (
		capChown    = 1 << 0
		capNetRaw   = 1 << 13
		capSysAdmin = 1 << 21
	)

	t.Run("capabilities", func(t *testing.T) {
		t.Parallel()
		plain := nonEssential(containerDef("plain", w.image, "cat", "/proc/self/status"))
		changed := after(containerDef("changed", w.image, "cat", "/proc/self/status"), "plain")
		changed.LinuxParameters = &ecsv1.LinuxParameters{Capabilities: &ecsv1.KernelCapabilities{Add: []string{"SYS_ADMIN"}, Drop: []string{"CHOWN"}}}
		ta, arn, _ := runToStop(t, w, taskDef("caps", plain, changed), nil)
		before, got := capEff(t, stdout(t, ta, arn, "plain")), capEff(t, stdout(t, ta, arn, "changed"))
		if before&capChown == 0 || before&capSysAdmin != 0 {
			t.Fatalf("default set %#x: want CHOWN and not SYS_ADMIN (the test's premise)", before)
		}
		if got&capSysAdmin == 0 || got&capChown != 0 || got&capNetRaw == 0 {
			t.Errorf("CapEff %#x with add SYS_ADMIN, drop CHOWN: want SYS_ADMIN, no CHOWN, NET_RAW kept", got)
		}
	})

	t.Run("drop_all", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "cat", "/proc/self/status")
		c.LinuxParameters = &ecsv1.LinuxParameters{Capabilities: &ecsv1.KernelCapabilities{Add: []string{"NET_RAW"}, Drop: []string{"ALL"}}}
		ta, arn, _ := runToStop(t, w, taskDef("dropall", c), nil)
		if got := capEff(t, stdout(t, ta, arn, "main")); got != capNetRaw {
			t.Errorf("CapEff %#x with drop ALL, add NET_RAW: want NET_RAW only (%#x)", got, capNetRaw)
		}
	})

	t.Run("tmpfs_and_shm", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "cat", "/proc/self/mounts")
		c.LinuxParameters = &ecsv1.LinuxParameters{
			SharedMemorySize: proto.Int32(32),
			Tmpfs:            []*ecsv1.Tmpfs{{ContainerPath: proto.String("/scratch"), Size: 8, MountOptions: []string{"noexec"}}},
		}
		ta, arn, _ := runToStop(t, w, taskDef("tmpfs", c), nil)
		lines := stdout(t, ta, arn, "main")
		if l := mountLine(lines, "/scratch"); !strings.HasPrefix(l, "tmpfs /scratch tmpfs ") || !strings.Contains(l, "size=8192k") || !strings.Contains(l, "noexec") {
			t.Errorf("/scratch mount %q: want an 8 MiB noexec tmpfs", l)
		}
		if l := mountLine(lines, "/dev/shm"); !strings.Contains(l, "size=32768k") {
			t.Errorf("/dev/shm mount %q: want size=32768k", l)
		}
	})

	t.Run("privileged", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "cat", "/proc/self/status")
		c.Privileged = proto.Bool(true)
		ta, arn, _ := runToStop(t, w, taskDef("privileged", c), nil)
		if got := capEff(t, stdout(t, ta, arn, "main")); got&capSysAdmin == 0 || got&(1<<19) == 0 { // SYS_ADMIN, SYS_PTRACE
			t.Errorf("privileged CapEff %#x: want every capability (SYS_ADMIN, SYS_PTRACE)", got)
		}
	})

	t.Run("pid_mode_host", func(t *testing.T) {
		t.Parallel()
		// PID 1 is the container's own program in its own PID namespace and the host's
		// init with pidMode host.
		td := taskDef("pidhost", containerDef("main", w.image, "cat", "/proc/1/cmdline"))
		td.PidMode = proto.String("host")
		ta, arn, _ := runToStop(t, w, td, nil)
		hostInit, err := os.ReadFile("/proc/1/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimRight(string(hostInit), "\x00")
		if got := strings.Join(stdout(t, ta, arn, "main"), "\n"); strings.TrimRight(got, "\x00") != want {
			t.Errorf("pidMode host: PID 1 is %q, want the host's %q", got, want)
		}
		ownTD := taskDef("pidown", containerDef("own", w.image, "cat", "/proc/1/cmdline"))
		ta2, arn2, _ := runToStop(t, w, ownTD, nil)
		if got := strings.Join(stdout(t, ta2, arn2, "own"), ""); !strings.Contains(got, "berth-testimage") {
			t.Errorf("without pidMode PID 1 is %q, want the container's own program", got)
		}
	})

	t.Run("system_controls", func(t *testing.T) {
		t.Parallel()
		c := containerDef("main", w.image, "cat", "/proc/sys/kernel/shmmni")
		c.SystemControls = []*ecsv1.SystemControl{{Namespace: proto.String("kernel.shmmni"), Value: proto.String("1234")}}
		ta, arn, _ := runToStop(t, w, taskDef("sysctl", c), nil)
		if got := stdout(t, ta, arn, "main"); len(got) == 0 || strings.TrimSpace(got[0]) != "1234" {
			t.Errorf("kernel.shmmni in the container is %q, want 1234", got)
		}
		if b, _ := os.ReadFile("/proc/sys/kernel/shmmni"); strings.TrimSpace(string(b)) == "1234" {
			t.Error("the host's kernel.shmmni changed too")
		}
	})

	t.Run("readonly_root_and_user", func(t *testing.T) {
		t.Parallel()
		w1 := nonEssential(containerDef("rootwrite", w.image, "write", "/berth-probe", "x"))
		w1.ReadonlyRootFilesystem = proto.Bool(true)
		who := after(containerDef("who", w.image, "cat", "/proc/self/status"), "rootwrite")
		who.User = proto.String("65534:65534")
		ta, arn, st := runToStop(t, w, taskDef("rootfs", w1, who), nil)
		if out := stdout(t, ta, arn, "rootwrite"); containerOf(st, "rootwrite").GetExitCode() != 1 || len(out) != 1 || !strings.Contains(out[0], "read-only file system") {
			t.Errorf("write to a read-only root: %q, want a read-only file system error", out)
		}
		uid := ""
		for _, l := range stdout(t, ta, arn, "who") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				uid = strings.Fields(v)[0]
			}
		}
		if uid != "65534" {
			t.Errorf("user 65534:65534 runs as uid %q", uid)
		}
	})

	t.Run("ipc_mode", func(t *testing.T) {
		t.Parallel()
		// A System V shared memory segment made on the host is listed in a container with
		// ipcMode host and not in one without; ipcMode none has no /dev/shm.
		const key = 0x0be47415
		id, _, errno := syscall.Syscall(syscall.SYS_SHMGET, key, 4096, 01000|0o600) // IPC_CREAT
		if errno != 0 {
			t.Fatalf("shmget: %v", errno)
		}
		t.Cleanup(func() { syscall.Syscall(syscall.SYS_SHMCTL, id, 0, 0) }) // IPC_RMID
		lists := func(lines []string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { f := strings.Fields(l); return len(f) > 0 && f[0] == strconv.Itoa(key) })
		}
		host := taskDef("ipchost", containerDef("main", w.image, "cat", "/proc/sysvipc/shm"))
		host.IpcMode = proto.String("host")
		ta, arn, _ := runToStop(t, w, host, nil)
		if got := stdout(t, ta, arn, "main"); !lists(got) {
			t.Errorf("ipcMode host: the host's segment %d is not in %q", key, got)
		}
		ta, arn, _ = runToStop(t, w, taskDef("ipcown", containerDef("main", w.image, "cat", "/proc/sysvipc/shm")), nil)
		if got := stdout(t, ta, arn, "main"); lists(got) {
			t.Errorf("without ipcMode the host's segment %d is visible: %q", key, got)
		}
		none := taskDef("ipcnone", containerDef("main", w.image, "cat", "/proc/self/mounts"))
		none.IpcMode = proto.String("none")
		ta, arn, _ = runToStop(t, w, none, nil)
		if l := mountLine(stdout(t, ta, arn, "main"), "/dev/shm"); l != "" {
			t.Errorf("ipcMode none still mounts /dev/shm: %q", l)
		}
	})

	t.Run("devices", func(t *testing.T) {
		t.Parallel()
		// /dev/null given at /dev/berth-null is there, and absent without devices;
		// /dev/kmsg given read-only is refused for writing by the
		// device cgroup (nothing is ever written to the host's kernel log).
		given := nonEssential(containerDef("given", w.image, "cat", "/dev/berth-null"))
		given.LinuxParameters = &ecsv1.LinuxParameters{Devices: []*ecsv1.Device{{HostPath: proto.String("/dev/null"), ContainerPath: proto.String("/dev/berth-null")}}}
		absent := nonEssential(containerDef("absent", w.image, "cat", "/dev/berth-null"))
		ro := after(containerDef("ro", w.image, "write", "/dev/berth-kmsg", "berth test"), "given", "absent")
		ro.LinuxParameters = &ecsv1.LinuxParameters{Devices: []*ecsv1.Device{{HostPath: proto.String("/dev/kmsg"), ContainerPath: proto.String("/dev/berth-kmsg"), Permissions: []string{"read"}}}}
		ta, arn, st := runToStop(t, w, taskDef("devices", given, absent, ro), nil)
		if out := stdout(t, ta, arn, "given"); containerOf(st, "given").GetExitCode() != 0 {
			t.Errorf("read of a device given: %q", out)
		}
		if out := stdout(t, ta, arn, "absent"); containerOf(st, "absent").GetExitCode() != 1 || len(out) != 1 || !strings.Contains(out[0], "no such file") {
			t.Errorf("without devices: %q, want no such file", out)
		}
		if out := stdout(t, ta, arn, "ro"); containerOf(st, "ro").GetExitCode() != 1 || len(out) != 1 || !strings.Contains(out[0], "operation not permitted") {
			t.Errorf("write to a device given read only: %q, want operation not permitted", out)
		}
	})

	t.Run("init_process", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("docker-init"); err != nil {
			if _, err := exec.LookPath("tini-static"); err != nil {
				t.Skip("neither docker-init nor tini-static in PATH (apt-get install tini)")
			}
		}
		c := containerDef("main", w.image, "cat", "/proc/1/cmdline")
		c.LinuxParameters = &ecsv1.LinuxParameters{InitProcessEnabled: proto.Bool(true)}
		ta, arn, st := runToStop(t, w, taskDef("init", c), nil)
		got := strings.Split(strings.Join(stdout(t, ta, arn, "main"), ""), "\x00")
		if len(got) < 3 || got[0] != "/sbin/docker-init" || got[1] != "--" || !strings.HasSuffix(got[2], "berth-testimage") {
			t.Errorf("PID 1 with initProcessEnabled runs %q, want /sbin/docker-init -- the container's command", got)
		}
		if code := containerOf(st, "main").GetExitCode(); code != 0 {
			t.Errorf("exit code through the init %d", code)
		}
	})

	t.Run("max_swap_and_swappiness", func(t *testing.T) {
		t.Parallel()
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil {
			t.Skip("cgroup v1 swap accounting (memory.memsw.*) not on this host: boot with swapaccount=1")
		}
		// The container's memory cgroup: memory+swap is memory plus maxSwap.
		c := containerDef("main", w.image, "sleep", "600")
		c.Memory = proto.Int32(32)
		c.LinuxParameters = &ecsv1.LinuxParameters{MaxSwap: proto.Int32(16), Swappiness: proto.Int32(7)}
		cp := newControlPlane(t)
		name := clusterName(t)
		cfg := testConfig(t, w, cp, name)
		startAgent(t, cfg, cp)
		arn := taskARN(name)
		cp.assign(t, arn, taskDef("swap", c))
		st := cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		dir := filepath.Join("/sys/fs/cgroup/memory", cfg.Namespace, containerOf(st, "main").GetRuntimeId())
		read := func(f string) string { b, _ := os.ReadFile(filepath.Join(dir, f)); return strings.TrimSpace(string(b)) }
		if got := read("memory.memsw.limit_in_bytes"); got != strconv.Itoa(48<<20) {
			t.Errorf("memory.memsw.limit_in_bytes %q, want %d (32 MiB memory + 16 MiB maxSwap)", got, 48<<20)
		}
		if got := read("memory.swappiness"); got != "7" {
			t.Errorf("memory.swappiness %q, want 7", got)
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})

	t.Run("start_timeout", func(t *testing.T) {
		t.Parallel()
		// main waits for slow to complete, which takes ten minutes: after its 2 s
		// startTimeout main is given up, never started, and (essential) stops the task.
		slow := nonEssential(containerDef("slow", w.image, "sleep", "600"))
		main := after(containerDef("main", w.image, "exit", "0"), "slow")
		main.StartTimeout = proto.Int32(2)
		start := time.Now()
		_, _, st := runToStop(t, w, taskDef("starttimeout", slow, main), nil)
		if got := containerOf(st, "main").GetReason(); !strings.Contains(got, "dependencies not resolved within its startTimeout of 2 s") {
			t.Errorf("main's reason %q, want the startTimeout", got)
		}
		if d := time.Since(start); d > 40*time.Second {
			t.Errorf("the task took %s to stop", d)
		}
	})
}
