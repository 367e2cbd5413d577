package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevAWSLogs runs a task with the awslogs driver on `berth dev` and reads its output
// with `aws logs get-log-events` and `berth logs`: `berth dev` (scheduler, log store and
// agent) is stopped with Ctrl-C while the task prints and started again; after the task
// stops, every line is in the stream prefix/container/task-id exactly once and in order.
func TestDevAWSLogs(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	dev := startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "ticker",
		"--container-definitions", fmt.Sprintf(`[{"name":"app","image":%q,"memory":16,"command":["tick","20","400"],
		  "logConfiguration":{"logDriver":"awslogs","options":{"awslogs-group":"/ecs/ticker","awslogs-create-group":"true","awslogs-stream-prefix":"demo"}}}]`, image))
	task := cli(t, root, env, "aws", "ecs", "run-task", "--task-definition", "ticker", "--query", "tasks[0].taskArn", "--output", "text")
	stream := "demo/app/" + task[strings.LastIndex(task, "/")+1:]
	events := func() []string {
		out := cli(t, root, env, "aws", "logs", "get-log-events", "--log-group-name", "/ecs/ticker", "--log-stream-name", stream,
			"--start-from-head", "--query", "events[].message", "--output", "text")
		return strings.Fields(strings.ReplaceAll(out, "tick ", "tick_"))
	}
	waitFor(t, func() (string, bool) {
		ev := events()
		return strings.Join(ev, " "), len(ev) >= 2
	})

	dev.stop(t)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	waitFor(t, func() (string, bool) {
		s := cli(t, root, env, "aws", "ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("tick_%d", i))
	}
	got := waitFor(t, func() (string, bool) {
		ev := strings.Join(events(), " ")
		return ev, ev == strings.Join(want, " ")
	})
	t.Logf("after the restart and the task's stop, GetLogEvents answers: %s", got)
	// berth logs reads the same store.
	if out := cli(t, root, env, "bin/berth", "logs", task); !strings.HasPrefix(out, "app: tick 1\n") || !strings.HasSuffix(out, "app: tick 20") || strings.Count(out, "\n") != 19 {
		t.Errorf("berth logs %s:\n%s", task, out)
	}
	if out := cli(t, root, env, "bin/berth", "logs", task, "--tail", "2"); out != "app: tick 19\napp: tick 20" {
		t.Errorf("berth logs --tail 2: %q", out)
	}
	if groups := cli(t, root, env, "aws", "logs", "describe-log-groups", "--query", "logGroups[].logGroupName", "--output", "text"); groups != "/ecs/ticker" {
		t.Errorf("describe-log-groups: %q", groups)
	}
}
