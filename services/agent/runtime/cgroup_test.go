package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskCPUQuota: the CFS quota of a task with task-level cpu is cpu/1024 CPUs of each
// 100 ms period, as the ECS agent on Linux sets it (at least the kernel's 1 ms).
func TestTaskCPUQuota(t *testing.T) {
	for units, want := range map[uint64]int64{0: -1, 1: 1000, 10: 1000, 128: 12500, 256: 25000, 512: 50000, 1024: 100000, 1536: 150000, 4096: 400000, 196608: 19200000} {
		if got := TaskCPUQuota(units); got != want {
			t.Errorf("TaskCPUQuota(%d) = %d, want %d", units, got, want)
		}
	}
}

// TestEnsureTaskCgroupCPU makes a task cgroup with 256 cpu units and reads back what the
// kernel holds: shares (v2: their weight) and a quota of 25000 µs per 100000 µs period.
func TestEnsureTaskCgroupCPU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write /sys/fs/cgroup")
	}
	parent := fmt.Sprintf("/berth-runtime-test/task-%d", os.Getpid())
	if err := EnsureTaskCgroup(parent, 64, 256); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = RemoveTaskCgroup(parent)
		_ = RemoveTaskCgroup("/berth-runtime-test")
	})
	read := func(dir, file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if unifiedCgroups() {
		dir := filepath.Join(cgroupRoot, parent)
		if got := read(dir, "cpu.max"); got != "25000 100000" {
			t.Errorf("cpu.max %q, want 25000 100000", got)
		}
		if got := read(dir, "cpu.weight"); got != "10" {
			t.Errorf("cpu.weight %q, want 10 (256 shares)", got)
		}
		return
	}
	dir := filepath.Join(cgroupRoot, "cpu", parent)
	for file, want := range map[string]string{"cpu.shares": "256", "cpu.cfs_quota_us": "25000", "cpu.cfs_period_us": "100000"} {
		if got := read(dir, file); got != want {
			t.Errorf("%s %q, want %s", file, got, want)
		}
	}
	// Idempotent: a restarted agent sets the same values again.
	if err := EnsureTaskCgroup(parent, 64, 256); err != nil {
		t.Errorf("second EnsureTaskCgroup: %v", err)
	}
}
