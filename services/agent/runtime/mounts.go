package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Mount is a bind mount of a host directory into a container, as ECS mountPoints of a
// host volume (or volumesFrom) ask.
type Mount struct {
	// Source is the absolute host path.
	Source string
	// Destination is the absolute path in the container.
	Destination string
	// ReadOnly mounts it read-only.
	ReadOnly bool
}

// WithBindMounts adds ms as recursive, private bind mounts, after the image's and the
// default mounts, so a mount over a default path (say /tmp) wins, as Docker's -v does.
func WithBindMounts(ms []Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		for _, m := range ms {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			s.Mounts = append(s.Mounts, specs.Mount{
				Type: "bind", Source: m.Source, Destination: m.Destination,
				Options: []string{"rbind", "rprivate", mode},
			})
		}
		return nil
	}
}

// WithCgroupParent puts the container in the cgroup parent/id, under a task cgroup made
// by EnsureTaskCgroup (cgroupfs paths, as containerd's default "/namespace/id").
func WithCgroupParent(parent, id string) oci.SpecOpts {
	return oci.WithCgroup(path.Join(parent, id))
}

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// unifiedCgroups reports whether the host runs cgroup v2 only.
func unifiedCgroups() bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// CPUPeriodUs is the CFS period of a task cgroup with task-level cpu, in microseconds:
// the ECS agent's DefaultCPUPeriod (100 ms), the kernel's default period.
const CPUPeriodUs = 100000

// minCPUQuotaUs is the smallest CFS quota the kernel accepts (1 ms).
const minCPUQuotaUs = 1000

// TaskCPUQuota returns the CFS quota (microseconds per CPUPeriodUs) of a task with
// cpuUnits of task-level cpu, as the ECS agent on Linux sets it on the task's cgroup:
// cpuUnits/1024 vCPUs of every period (256 units: 25000 of 100000, a quarter of one CPU;
// 2048: 200000, two CPUs), at least the kernel's 1 ms; -1 (no quota) for 0 units.
func TaskCPUQuota(cpuUnits uint64) int64 {
	if cpuUnits == 0 {
		return -1
	}
	return max(int64(cpuUnits)*CPUPeriodUs/1024, minCPUQuotaUs)
}

// EnsureTaskCgroup creates the task cgroup parent (a cgroupfs path such as
// "/berth/<task id>") with a hard memory limit of memoryMiB (0: none; swap is held to
// the same limit where the kernel accounts it, so the limit is hard) and cpuUnits (ECS's
// task-level cpu; 0: none) as both cpu shares (cgroup v1 cpu.shares, v2 the cpu.weight
// runc converts them to) and a CFS quota (TaskCPUQuota per CPUPeriodUs: cgroup v1
// cpu.cfs_quota_us and cpu.cfs_period_us, v2 cpu.max), so the task uses at most
// cpuUnits/1024 CPUs, as the ECS agent on Linux limits a task with task-level cpu — the
// containers of the task are then created in it with WithCgroupParent and share the
// limits (a container's own cpu stays shares only). It is idempotent (an agent that
// restarts sets the same values). Errors name the file that could not be written.
func EnsureTaskCgroup(parent string, memoryMiB int64, cpuUnits uint64) error {
	if unifiedCgroups() {
		return ensureTaskCgroupV2(parent, memoryMiB, cpuUnits)
	}
	if memoryMiB > 0 {
		dir := filepath.Join(cgroupRoot, "memory", parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("task cgroup: %w", err)
		}
		limit := strconv.FormatInt(memoryMiB<<20, 10)
		if err := writeCgroup(dir, "memory.limit_in_bytes", limit); err != nil {
			return err
		}
		// Without swap accounting the file is absent and there is nothing to hold.
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			if err := writeCgroup(dir, "memory.memsw.limit_in_bytes", limit); err != nil {
				return err
			}
		}
	}
	if cpuUnits > 0 {
		dir := filepath.Join(cgroupRoot, "cpu", parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("task cgroup: %w", err)
		}
		if err := writeCgroup(dir, "cpu.shares", strconv.FormatUint(max(cpuUnits, 2), 10)); err != nil {
			return err
		}
		if err := writeCgroup(dir, "cpu.cfs_period_us", strconv.Itoa(CPUPeriodUs)); err != nil {
			return err
		}
		if err := writeCgroup(dir, "cpu.cfs_quota_us", strconv.FormatInt(TaskCPUQuota(cpuUnits), 10)); err != nil {
			return err
		}
	}
	return nil
}

func ensureTaskCgroupV2(parent string, memoryMiB int64, cpuUnits uint64) error {
	// Controllers must be enabled in every ancestor for the task's cgroup to have them.
	dir := cgroupRoot
	for _, part := range strings.Split(strings.Trim(parent, "/"), "/") {
		_ = writeCgroup(dir, "cgroup.subtree_control", "+memory +cpu")
		dir = filepath.Join(dir, part)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("task cgroup: %w", err)
		}
	}
	_ = writeCgroup(dir, "cgroup.subtree_control", "+memory +cpu")
	if memoryMiB > 0 {
		if err := writeCgroup(dir, "memory.max", strconv.FormatInt(memoryMiB<<20, 10)); err != nil {
			return err
		}
		_ = writeCgroup(dir, "memory.swap.max", "0")
	}
	if cpuUnits > 0 {
		// runc's conversion of cpu.shares (2–262144) to cpu.weight (1–10000).
		s := min(max(cpuUnits, 2), 262144)
		if err := writeCgroup(dir, "cpu.weight", strconv.FormatUint(1+((s-2)*9999)/262142, 10)); err != nil {
			return err
		}
		if err := writeCgroup(dir, "cpu.max", fmt.Sprintf("%d %d", TaskCPUQuota(cpuUnits), CPUPeriodUs)); err != nil {
			return err
		}
	}
	return nil
}

func writeCgroup(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("task cgroup: write %s: %w", file, err)
	}
	return nil
}

// RemoveTaskCgroup removes the task cgroup parent in every hierarchy once its containers
// are gone; a missing one is not an error.
func RemoveTaskCgroup(parent string) error {
	dirs := []string{filepath.Join(cgroupRoot, parent)}
	if !unifiedCgroups() {
		entries, err := os.ReadDir(cgroupRoot)
		if err != nil {
			return err
		}
		dirs = dirs[:0]
		for _, e := range entries {
			dirs = append(dirs, filepath.Join(cgroupRoot, e.Name(), parent))
		}
	}
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// OOMKilledIn reports whether the kernel's OOM killer killed a process of the container
// whose cgroupfs path is cgroupPath (WithCgroupParent's parent/id, or containerd's
// default /namespace/id), on cgroup v1 or v2: the kill is counted in the victim's own
// cgroup also when a task cgroup's limit was hit. Read it before the container is
// deleted; it returns false when the cgroup is gone.
func OOMKilledIn(cgroupPath string) bool {
	for _, p := range []string{
		filepath.Join(cgroupRoot, "memory", cgroupPath, "memory.oom_control"),
		filepath.Join(cgroupRoot, cgroupPath, "memory.events"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "oom_kill" {
				if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
					return true
				}
			}
		}
	}
	return false
}
