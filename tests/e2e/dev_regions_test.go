package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestDevTwoRegions runs `berth dev` (its agent in BERTH_REGION, us-east-1) and a second
// `berth-agent --region eu-west-1` (the agent-only binary) against it, both joining "default" on the same
// containerd: the same names in both regions stay apart, ARNs carry the region, and a
// task run in eu-west-1 runs as a real container on the eu-west-1 agent, never on the
// us-east-1 one (and the other way round).
func TestDevTwoRegions(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")

	// The dev containerd (a private one, or the system's) serves the second agent too,
	// in its own namespace.
	logb, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
	addr, snap := "/run/containerd/containerd.sock", "overlayfs"
	if m := regexp.MustCompile(`started a private containerd.*? address=(\S+) snapshotter=(\S+)`).FindSubmatch(logb); m != nil {
		addr, snap = string(m[1]), string(m[2])
	}
	agentLog, err := os.Create(filepath.Join(dir, "agent-eu.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The agent-only binary, as a host that only runs tasks deploys it.
	agent := exec.Command(filepath.Join(root, "bin/berth-agent"),
		// The gateway itself: the AWS_ENDPOINT_URL proxy checks ECS answers and speaks no h2c.
		"--gateway", "http://"+envValue(env, "BERTH_GATEWAY_ADDR"), "--region", "eu-west-1", "--cluster", "default",
		"--data-dir", filepath.Join(dir, "agent-eu"), "--containerd", addr, "--snapshotter", snap,
		"--namespace", "berth-eu", "--log-addr", harness.FreeAddr(t))
	agent.Env = append(env, "BERTH_ACCESS_KEY_ID=test", "BERTH_SECRET_ACCESS_KEY=test")
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = agent.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = agent.Process.Kill()
			<-done
		}
		agentLog.Close()
		if t.Failed() {
			dumpTail(t, filepath.Join(dir, "agent-eu.log"), 40)
		}
	})

	in := func(region string, args ...string) string {
		t.Helper()
		return cli(t, root, env, "aws", append([]string{"--region", region}, args...)...)
	}
	instances := map[string]string{}
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		instances[region] = waitFor(t, func() (string, bool) {
			s := in(region, "ecs", "list-container-instances", "--query", "containerInstanceArns", "--output", "text")
			return s, strings.HasPrefix(s, "arn:aws:ecs:"+region+":000000000000:container-instance/default/") && !strings.Contains(s, "\t")
		})
	}
	// Same family in both; revisions count per region.
	td := fmt.Sprintf(`[{"name":"s","image":%q,"memory":16,"command":["sleep","600"]}]`, image)
	in("us-east-1", "ecs", "register-task-definition", "--family", "sleeper", "--container-definitions", td)
	for region, want := range map[string]string{"us-east-1": "2", "eu-west-1": "1"} {
		if got := in(region, "ecs", "register-task-definition", "--family", "sleeper", "--container-definitions", td,
			"--query", "taskDefinition.revision", "--output", "text"); got != want {
			t.Errorf("%s: revision %s, want %s", region, got, want)
		}
	}

	for region, other := range map[string]string{"eu-west-1": "us-east-1", "us-east-1": "eu-west-1"} {
		task := in(region, "ecs", "run-task", "--task-definition", "sleeper", "--query", "tasks[0].taskArn", "--output", "text")
		if !strings.HasPrefix(task, "arn:aws:ecs:"+region+":") {
			t.Fatalf("%s: task ARN %s", region, task)
		}
		got := waitFor(t, func() (string, bool) {
			s := in(region, "ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].[lastStatus,containerInstanceArn]", "--output", "text")
			return s, strings.HasPrefix(s, "RUNNING")
		})
		if !strings.HasSuffix(got, instances[region]) {
			t.Errorf("%s: task on %q, want on %s", region, got, instances[region])
		}
		// The other region does not know it, by ARN or in its lists.
		if s := in(other, "ecs", "describe-tasks", "--tasks", task, "--query", "failures[0].reason", "--output", "text"); s != "MISSING" {
			t.Errorf("%s describes the %s task: %q", other, region, s)
		}
		in(region, "ecs", "stop-task", "--task", task)
		waitFor(t, func() (string, bool) {
			s := in(region, "ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
			return s, s == "STOPPED"
		})
	}
	if s := in("eu-west-1", "ecs", "list-clusters", "--query", "clusterArns", "--output", "text"); s != "arn:aws:ecs:eu-west-1:000000000000:cluster/default" {
		t.Errorf("eu-west-1 clusters: %q", s)
	}
}
