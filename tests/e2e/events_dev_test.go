package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliFails runs a command that must fail and returns its stderr (the AWS CLI prints the
// error type and message there).
func cliFails(t testing.TB, root string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("%s %s succeeded, want an error:\n%s", name, strings.Join(args, " "), out)
	}
	return stderr.String()
}

// TestDevEventBridge runs `berth dev` and drives EventBridge with the AWS CLI: a rule
// with rate(1 minute) and an ECS target starts a real task (startedBy
// events-rule/{rule}) within its first minute or so; a rule whose pattern matches the
// STOPPED tasks of one family runs its target when such a task stops; bad input answers
// EventBridge's own error types.
func TestDevEventBridge(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	register := func(family string) string {
		t.Helper()
		def, _ := json.Marshal([]map[string]any{{"name": "app", "image": image, "memory": 32, "command": []string{"env"}, "essential": true}})
		return aws("ecs", "register-task-definition", "--family", family, "--container-definitions", string(def),
			"--query", "taskDefinition.taskDefinitionArn", "--output", "text")
	}
	tickDef, watchedDef, afterDef := register("tick"), register("watched"), register("after-stop")
	clusterArn := aws("ecs", "describe-clusters", "--query", "clusters[0].clusterArn", "--output", "text")
	target := func(def string, input string) string {
		t.Helper()
		tg := map[string]any{"Id": "run", "Arn": clusterArn, "EcsParameters": map[string]any{"TaskDefinitionArn": def, "TaskCount": 1, "LaunchType": "EC2"}}
		if input != "" {
			tg["Input"] = input
		}
		b, _ := json.Marshal([]any{tg})
		return string(b)
	}
	// tasksStartedBy lists the tasks (running or stopped) a rule started.
	tasksStartedBy := func(startedBy string) []string {
		t.Helper()
		var all []string
		for _, status := range []string{"RUNNING", "STOPPED"} {
			out := aws("ecs", "list-tasks", "--started-by", startedBy, "--desired-status", status, "--query", "taskArns", "--output", "json")
			var arns []string
			if err := json.Unmarshal([]byte(out), &arns); err != nil {
				t.Fatalf("list-tasks: %v: %s", err, out)
			}
			all = append(all, arns...)
		}
		return all
	}
	waitTasks := func(startedBy string, within time.Duration) []string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if arns := tasksStartedBy(startedBy); len(arns) > 0 {
				return arns
			}
			if time.Now().After(deadline) {
				t.Fatalf("no task started by %s within %s", startedBy, within)
			}
			time.Sleep(2 * time.Second)
		}
	}

	// Bad input: EventBridge's own error types.
	for _, expr := range []string{"cron(0 12 * * * *)", "rate(1 minutes)", "cron(0 12 ? * 8 *)"} {
		if out := cliFails(t, root, env, "aws", "events", "put-rule", "--name", "bad", "--schedule-expression", expr); !strings.Contains(out, "ValidationException") ||
			!strings.Contains(out, "Parameter ScheduleExpression is not valid.") {
			t.Errorf("put-rule %s: %s", expr, out)
		}
	}
	if out := cliFails(t, root, env, "aws", "events", "describe-rule", "--name", "nope"); !strings.Contains(out, "ResourceNotFoundException") {
		t.Errorf("describe-rule nope: %s", out)
	}
	if out := cliFails(t, root, env, "aws", "events", "put-rule", "--name", "bad", "--event-pattern", `{"source":"aws.ecs"}`); !strings.Contains(out, "InvalidEventPatternException") {
		t.Errorf("put-rule bad pattern: %s", out)
	}

	// A scheduled rule: rate(1 minute) starts the task through ECS RunTask.
	aws("events", "put-rule", "--name", "every-minute", "--schedule-expression", "rate(1 minute)")
	if out := cliFails(t, root, env, "aws", "events", "put-targets", "--rule", "every-minute", "--targets",
		target(strings.Replace(tickDef, "task-definition/tick", "task-definition/ghost", 1), "")); !strings.Contains(out, "ValidationException") || !strings.Contains(out, "TaskDefinitionArn") {
		t.Errorf("put-targets with an unknown task definition: %s", out)
	}
	if out := cliFails(t, root, env, "aws", "events", "put-targets", "--rule", "nope", "--targets", target(tickDef, "")); !strings.Contains(out, "ResourceNotFoundException") {
		t.Errorf("put-targets on an unknown rule: %s", out)
	}
	aws("events", "put-targets", "--rule", "every-minute", "--targets",
		target(tickDef, `{"containerOverrides":[{"name":"app","environment":[{"name":"FROM_RULE","value":"yes"}]}]}`))
	if got := aws("events", "list-targets-by-rule", "--rule", "every-minute", "--query", "Targets[0].EcsParameters.TaskDefinitionArn", "--output", "text"); got != tickDef {
		t.Errorf("list-targets-by-rule = %s", got)
	}
	if out := cliFails(t, root, env, "aws", "events", "delete-rule", "--name", "every-minute"); !strings.Contains(out, "ValidationException") {
		t.Errorf("delete-rule with targets: %s", out)
	}
	started := time.Now()
	arns := waitTasks("events-rule/every-minute", 3*time.Minute)
	t.Logf("the rate(1 minute) rule started %s %s after put-targets", arns[0], time.Since(started).Round(time.Second))
	env0 := aws("ecs", "describe-tasks", "--tasks", arns[0], "--query", "tasks[0].overrides.containerOverrides[0].environment[0].value", "--output", "text")
	if env0 != "yes" {
		t.Errorf("the task's overrides lack the target's Input: %s", env0)
	}
	aws("events", "disable-rule", "--name", "every-minute")
	if got := aws("events", "describe-rule", "--name", "every-minute", "--query", "State", "--output", "text"); got != "DISABLED" {
		t.Errorf("describe-rule State = %s", got)
	}

	// A pattern rule on STOPPED tasks of the family "watched" runs "after-stop".
	aws("events", "put-rule", "--name", "on-stop", "--event-pattern",
		`{"source":["aws.ecs"],"detail-type":["ECS Task State Change"],"detail":{"lastStatus":["STOPPED"],"group":["family:watched"]}}`)
	aws("events", "put-targets", "--rule", "on-stop", "--targets", target(afterDef, ""))
	if got := aws("events", "test-event-pattern", "--event-pattern", `{"source":["aws.ecs"]}`, "--event",
		`{"id":"1","account":"000000000000","source":"aws.ecs","time":"2026-01-01T00:00:00Z","region":"us-east-1","detail-type":"x","resources":[],"detail":{}}`,
		"--query", "Result", "--output", "text"); got != "True" {
		t.Errorf("test-event-pattern = %s", got)
	}
	watched := aws("ecs", "run-task", "--task-definition", watchedDef, "--query", "tasks[0].taskArn", "--output", "text")
	after := waitTasks("events-rule/on-stop", 2*time.Minute)
	if stopped := aws("ecs", "describe-tasks", "--tasks", watched, "--query", "tasks[0].lastStatus", "--output", "text"); stopped != "STOPPED" {
		t.Errorf("the target ran while the watched task is %s", stopped)
	}
	if def := aws("ecs", "describe-tasks", "--tasks", after[0], "--query", "tasks[0].taskDefinitionArn", "--output", "text"); def != afterDef {
		t.Errorf("the rule started %s, want %s", def, afterDef)
	}
	names := aws("events", "list-rule-names-by-target", "--target-arn", clusterArn, "--query", "RuleNames", "--output", "text")
	if !strings.Contains(names, "every-minute") || !strings.Contains(names, "on-stop") {
		t.Errorf("list-rule-names-by-target = %s", names)
	}
	aws("events", "remove-targets", "--rule", "on-stop", "--ids", "run")
	aws("events", "delete-rule", "--name", "on-stop")
	aws("events", "delete-rule", "--name", "every-minute", "--force")
	if got := aws("events", "list-rules", "--query", "length(Rules)", "--output", "text"); got != "0" {
		t.Errorf("list-rules after deleting both = %s", got)
	}
}
