package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevTaskRegionEnv runs `berth dev` and tasks whose container prints its environment:
// every container gets AWS_REGION and AWS_DEFAULT_REGION set to the task's region, as
// Fargate sets them (Amazon ECS developer guide, "Fargate task environment variables" /
// task definition parameters, environment), so an AWS SDK in the task finds its region;
// a value the task definition sets wins (issue 35 item 5). A task without a role gets
// AWS_ENDPOINT_URL too.
func TestDevTaskRegionEnv(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	run := func(family string, environment []map[string]string) string {
		t.Helper()
		def, _ := json.Marshal([]map[string]any{{
			"name": "app", "image": image, "memory": 32, "command": []string{"env"}, "essential": true,
			"environment": append(environment, map[string]string{"name": "PLAIN", "value": "1"}),
		}})
		aws("ecs", "register-task-definition", "--family", family, "--container-definitions", string(def))
		task := aws("ecs", "run-task", "--task-definition", family, "--query", "tasks[0].taskArn", "--output", "text")
		waitFor(t, func() (string, bool) {
			s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
			return s, s == "STOPPED"
		})
		return task
	}
	output := func(task string) map[string]string {
		t.Helper()
		out := waitFor(t, func() (string, bool) {
			s := cli(t, root, env, "bin/berth", "logs", task)
			return s, strings.Contains(s, "PLAIN=1")
		})
		vars := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "app: ") // berth logs prefixes the container
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		return vars
	}

	task := run("region", nil)
	region := strings.Split(task, ":")[3] // arn:aws:ecs:REGION:…
	vars := output(task)
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if vars[k] != region {
			t.Errorf("%s = %q, want the task's region %q", k, vars[k], region)
		}
	}

	// A task without a role reaches Berth too: AWS_ENDPOINT_URL is the listener it reaches
	// its metadata on, when that is the link-local redirect (a bridge task cannot reach the
	// agent's loopback listener, so without the redirect it gets none).
	if strings.HasPrefix(vars["ECS_CONTAINER_METADATA_URI_V4"], "http://169.254.170.2/") {
		if vars["AWS_ENDPOINT_URL"] != "http://169.254.170.2" {
			t.Errorf("AWS_ENDPOINT_URL = %q, want http://169.254.170.2 for a bridge task without a role", vars["AWS_ENDPOINT_URL"])
		}
	} else if v, ok := vars["AWS_ENDPOINT_URL"]; ok {
		t.Errorf("AWS_ENDPOINT_URL = %q for a bridge task with no route to the listener (metadata %q)", v, vars["ECS_CONTAINER_METADATA_URI_V4"])
	}

	// The task definition's own value wins.
	vars = output(run("region-set", []map[string]string{{"name": "AWS_REGION", "value": "eu-west-1"}}))
	if vars["AWS_REGION"] != "eu-west-1" || vars["AWS_DEFAULT_REGION"] != region {
		t.Errorf("with AWS_REGION set by the task definition: AWS_REGION %q AWS_DEFAULT_REGION %q, want eu-west-1 %s",
			vars["AWS_REGION"], vars["AWS_DEFAULT_REGION"], region)
	}
}
