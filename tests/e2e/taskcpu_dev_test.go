package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDevTaskCPUQuota runs `berth dev` and a task with task-level cpu 256 (and a
// container cpu of 128) through the AWS CLI, then reads the cgroups of the container's
// process on the host: the task's cgroup (the container's parent) holds a CFS quota of a
// quarter CPU — 25000 µs of each 100000 µs period, cpu/1024 CPUs as the ECS agent on Linux
// sets it from task-level cpu — and the container's own cgroup has shares only (128) and
// no quota (issue 35 item 8).
func TestDevTaskCPUQuota(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	def, _ := json.Marshal([]map[string]any{{
		"name": "app", "image": image, "cpu": 128, "memory": 32, "command": []string{"sleep", "600"}, "essential": true,
	}})
	aws("ecs", "register-task-definition", "--family", "cpuquota", "--cpu", "256", "--memory", "128", "--container-definitions", string(def))
	task := aws("ecs", "run-task", "--task-definition", "cpuquota", "--query", "tasks[0].taskArn", "--output", "text")
	defer aws("ecs", "stop-task", "--task", task)
	runtimeID := waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].[lastStatus,containers[0].runtimeId]", "--output", "text")
		status, id, _ := strings.Cut(s, "\t")
		return id, status == "RUNNING" && id != "" && id != "None"
	})
	pids := cgroupPids(runtimeID)
	if len(pids) == 0 {
		t.Fatalf("no host process in the cgroup of container %s", runtimeID)
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	// The container's cpu cgroup: cgroup v1 "N:cpu,cpuacct:/path", v2 "0::/path".
	var v1, v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				v1 = parts[2]
			}
		}
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case v1 != "":
		ctr := filepath.Join("/sys/fs/cgroup/cpu", v1)
		taskCg := filepath.Dir(ctr)
		if !strings.Contains(filepath.Base(taskCg), "task-") {
			t.Fatalf("container cgroup %s is not in a task cgroup", v1)
		}
		if q, p := read(filepath.Join(taskCg, "cpu.cfs_quota_us")), read(filepath.Join(taskCg, "cpu.cfs_period_us")); q != "25000" || p != "100000" {
			t.Errorf("task cgroup %s: cfs quota %s per period %s, want 25000 per 100000 (256 cpu units)", taskCg, q, p)
		}
		if s := read(filepath.Join(taskCg, "cpu.shares")); s != "256" {
			t.Errorf("task cgroup cpu.shares %s, want 256", s)
		}
		if q, s := read(filepath.Join(ctr, "cpu.cfs_quota_us")), read(filepath.Join(ctr, "cpu.shares")); q != "-1" || s != "128" {
			t.Errorf("container cgroup: cfs quota %s, shares %s; want -1 (none) and 128", q, s)
		}
	case v2 != "":
		ctr := filepath.Join("/sys/fs/cgroup", v2)
		taskCg := filepath.Dir(ctr)
		if m := read(filepath.Join(taskCg, "cpu.max")); m != "25000 100000" {
			t.Errorf("task cgroup %s cpu.max %q, want 25000 100000 (256 cpu units)", taskCg, m)
		}
		if m := read(filepath.Join(ctr, "cpu.max")); !strings.HasPrefix(m, "max ") {
			t.Errorf("container cgroup cpu.max %q, want no quota", m)
		}
	default:
		t.Fatalf("no cpu cgroup in %q", b)
	}
}
