package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestLoadBalancedServiceOnDev is the whole path with the real AWS CLI and a real
// container under `berth dev`: `aws elbv2` creates an application load balancer, a
// target group and a listener; a service with loadBalancers runs the demo image's HTTP
// server; the dev lb role serves the listener and checks the target; the task's target
// shows healthy in describe-target-health and the listener answers from the container;
// scaling the service to 0 drains the target away before the task stops.
func TestLoadBalancedServiceOnDev(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	jsonOut := func(v any, args ...string) {
		t.Helper()
		out := cli(t, root, env, "aws", append(args, "--output", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cli(t, root, env, "bin/berth", "image", "demo")

	var lb struct {
		LoadBalancers []struct{ LoadBalancerArn string }
	}
	jsonOut(&lb, "elbv2", "create-load-balancer", "--name", "web", "--subnets", "subnet-1", "subnet-2")
	appPort := harness.FreePort(t)
	var tg struct {
		TargetGroups []struct{ TargetGroupArn string }
	}
	jsonOut(&tg, "elbv2", "create-target-group", "--name", "web", "--protocol", "HTTP", "--port", strconv.Itoa(appPort),
		"--vpc-id", "vpc-1", "--health-check-path", "/health", "--health-check-interval-seconds", "5",
		"--health-check-timeout-seconds", "2", "--healthy-threshold-count", "2")
	tgArn := tg.TargetGroups[0].TargetGroupArn
	cli(t, root, env, "aws", "elbv2", "modify-target-group-attributes", "--target-group-arn", tgArn,
		"--attributes", "Key=deregistration_delay.timeout_seconds,Value=5")
	lport := harness.FreePort(t)
	cli(t, root, env, "aws", "elbv2", "create-listener", "--load-balancer-arn", lb.LoadBalancers[0].LoadBalancerArn,
		"--protocol", "HTTP", "--port", strconv.Itoa(lport), "--default-actions", "Type=forward,TargetGroupArn="+tgArn)

	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--container-definitions",
		fmt.Sprintf(`[{"name":"web","image":"%s/berth/demo:latest","memory":32,"command":["serve","%d"],"portMappings":[{"containerPort":%d}]}]`, reg, appPort, appPort))
	cli(t, root, env, "aws", "ecs", "create-service", "--service-name", "web", "--task-definition", "web", "--desired-count", "1",
		"--load-balancers", fmt.Sprintf("targetGroupArn=%s,containerName=web,containerPort=%d", tgArn, appPort))
	t.Cleanup(func() {
		// No container outlives the test.
		cmd := exec.Command("aws", "ecs", "delete-service", "--service", "web", "--force")
		cmd.Dir, cmd.Env = root, env
		_ = cmd.Run()
		time.Sleep(3 * time.Second)
	})

	type health struct {
		TargetHealthDescriptions []struct {
			Target       struct{ Id string }
			TargetHealth struct{ State, Reason string }
		}
	}
	describe := func() health {
		var h health
		// A group without targets is "TargetHealthDescriptions": [], as on AWS.
		out := cli(t, root, env, "aws", "elbv2", "describe-target-health", "--target-group-arn", tgArn, "--output", "json")
		if err := json.Unmarshal([]byte(out), &h); err != nil {
			t.Fatalf("describe-target-health: %v\n%s", err, out)
		}
		return h
	}
	waitFor(t, func() (string, bool) {
		h := describe()
		return fmt.Sprint(h), len(h.TargetHealthDescriptions) == 1 && h.TargetHealthDescriptions[0].TargetHealth.State == "healthy"
	})
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", lport))
	if err != nil {
		t.Fatalf("GET through the listener: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("GET through the listener: %d %q", resp.StatusCode, body)
	}

	cli(t, root, env, "aws", "ecs", "update-service", "--service", "web", "--desired-count", "0")
	waitFor(t, func() (string, bool) {
		h := describe()
		return fmt.Sprint(h), len(h.TargetHealthDescriptions) == 0
	})
	waitFor(t, func() (string, bool) {
		out := cli(t, root, env, "aws", "ecs", "list-tasks", "--service-name", "web", "--desired-status", "RUNNING", "--output", "text")
		return out, strings.TrimSpace(out) == ""
	})
	resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/", lport))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("listener without targets answered %d, want 503", resp.StatusCode)
		}
	}
}
