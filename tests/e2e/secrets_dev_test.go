package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevTaskSecrets runs `berth dev` (real containerd) and a task whose container prints
// its environment: secrets[] from a Secrets Manager secret (whole, and one JSON key) and a
// SecureString SSM parameter arrive as environment variables, DescribeTasks never shows a
// value, and a task naming a missing secret stops with AWS's ResourceInitializationError.
func TestDevTaskSecrets(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	arn := aws("secretsmanager", "create-secret", "--name", "app/db", "--secret-string", `{"user":"app","password":"p4ss-w0rd"}`,
		"--query", "ARN", "--output", "text")
	aws("ssm", "put-parameter", "--name", "/app/host", "--value", "db.internal", "--type", "SecureString")
	aws("ssm", "put-parameter", "--name", "plain-flag", "--value", "on", "--type", "String")
	if _, err := os.Stat(filepath.Join(dir, "data", "secrets.key")); err != nil {
		t.Fatalf("berth dev keeps no secrets key in its data dir: %v", err)
	}

	type secret struct {
		Name      string `json:"name"`
		ValueFrom string `json:"valueFrom"`
	}
	register := func(family string, secrets []secret) {
		t.Helper()
		def, _ := json.Marshal([]map[string]any{{
			"name": "app", "image": image, "memory": 32, "command": []string{"env"}, "essential": true,
			"environment": []map[string]string{{"name": "PLAIN", "value": "1"}},
			"secrets":     secrets,
		}})
		aws("ecs", "register-task-definition", "--family", family, "--container-definitions", string(def))
	}
	register("secrets", []secret{
		{"DB_PASSWORD", arn + ":password::"},
		{"DB_JSON", arn},
		{"DB_HOST", "/app/host"},
		{"FLAG", "arn:aws:ssm:us-east-1:000000000000:parameter/plain-flag"},
	})
	task := aws("ecs", "run-task", "--task-definition", "secrets", "--query", "tasks[0].taskArn", "--output", "text")
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	described := aws("ecs", "describe-tasks", "--tasks", task)
	if strings.Contains(described, "p4ss-w0rd") || strings.Contains(described, "db.internal") {
		t.Errorf("DescribeTasks shows a secret value:\n%s", described)
	}
	if code := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].containers[0].exitCode", "--output", "text"); code != "0" {
		t.Fatalf("container exit code %s; output:\n%s", code, cli(t, root, env, "bin/berth", "logs", task))
	}
	out := waitFor(t, func() (string, bool) {
		s := cli(t, root, env, "bin/berth", "logs", task)
		return s, strings.Contains(s, "PLAIN=1")
	})
	for _, want := range []string{
		"DB_PASSWORD=p4ss-w0rd",
		`DB_JSON={"user":"app","password":"p4ss-w0rd"}`,
		"DB_HOST=db.internal",
		"FLAG=on",
	} {
		if !strings.Contains(out, want+"\n") && !strings.HasSuffix(out, want) {
			t.Errorf("the container's environment lacks %s:\n%s", want, out)
		}
	}

	// No value in berth dev's own log (gateway, scheduler and agent).
	if b, err := os.ReadFile(filepath.Join(dir, "dev.log")); err != nil || strings.Contains(string(b), "p4ss-w0rd") || strings.Contains(string(b), "db.internal") {
		t.Errorf("dev.log holds a secret value (read error %v)", err)
	}

	// A missing secret: the task never starts, as on AWS.
	register("missing", []secret{{"X", fmt.Sprintf("arn:aws:secretsmanager:us-east-1:000000000000:secret:nope-AbCdEf")}})
	bad := aws("ecs", "run-task", "--task-definition", "missing", "--query", "tasks[0].taskArn", "--output", "text")
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", bad, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	reason := aws("ecs", "describe-tasks", "--tasks", bad, "--query", "tasks[0].stoppedReason", "--output", "text")
	if !strings.HasPrefix(reason, "ResourceInitializationError: unable to pull secrets or registry auth: ") || !strings.Contains(reason, "secret:nope-AbCdEf") {
		t.Errorf("stoppedReason %q", reason)
	}
	if code := aws("ecs", "describe-tasks", "--tasks", bad, "--query", "tasks[0].stopCode", "--output", "text"); code != "TaskFailedToStart" {
		t.Errorf("stopCode %q", code)
	}

	// logConfiguration.secretOptions: the awslogs group comes from an SSM SecureString;
	// the output lands in that group, and DescribeTasks never shows the value.
	aws("ssm", "put-parameter", "--name", "/log/group", "--value", "/ecs/from-ssm-secret", "--type", "SecureString")
	aws("logs", "create-log-group", "--log-group-name", "/ecs/from-ssm-secret")
	registerLogged := func(family, valueFrom string) {
		t.Helper()
		def, _ := json.Marshal([]map[string]any{{
			"name": "app", "image": image, "memory": 32, "command": []string{"echo", "via secret options", "to stderr"}, "essential": true,
			"logConfiguration": map[string]any{
				"logDriver":     "awslogs",
				"options":       map[string]string{"awslogs-stream-prefix": "sec", "awslogs-region": "us-east-1"},
				"secretOptions": []secret{{"awslogs-group", valueFrom}},
			},
		}})
		aws("ecs", "register-task-definition", "--family", family, "--container-definitions", string(def))
	}
	registerLogged("logsecrets", "/log/group")
	lt := aws("ecs", "run-task", "--task-definition", "logsecrets", "--query", "tasks[0].taskArn", "--output", "text")
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", lt, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	if d := aws("ecs", "describe-tasks", "--tasks", lt); strings.Contains(d, "/ecs/from-ssm-secret") || !strings.Contains(d, `"exitCode": 0`) {
		t.Errorf("DescribeTasks of the secretOptions task (value shown, or the container failed):\n%s", d)
	}
	stream := "sec/app/" + lt[strings.LastIndex(lt, "/")+1:]
	waitFor(t, func() (string, bool) {
		s := aws("logs", "get-log-events", "--log-group-name", "/ecs/from-ssm-secret", "--log-stream-name", stream,
			"--start-from-head", "--query", "events[].message", "--output", "text")
		return s, strings.Contains(s, "via secret options")
	})
	// A secretOptions reference that does not resolve stops the task before it starts.
	registerLogged("logsecrets-missing", "/log/absent")
	lb := aws("ecs", "run-task", "--task-definition", "logsecrets-missing", "--query", "tasks[0].taskArn", "--output", "text")
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", lb, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	reason = aws("ecs", "describe-tasks", "--tasks", lb, "--query", "tasks[0].stoppedReason", "--output", "text")
	if !strings.HasPrefix(reason, "ResourceInitializationError: unable to pull secrets or registry auth: ") || !strings.Contains(reason, "/log/absent") {
		t.Errorf("secretOptions missing: stoppedReason %q", reason)
	}
}
