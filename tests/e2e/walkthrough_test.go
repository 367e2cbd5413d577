package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/services/agent/containerdproc"
	"github.com/berthhq/berth/testkit/shapecheck"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// devProcess is a running `bin/berth dev`.
type devProcess struct {
	cmd      *exec.Cmd
	endpoint string
	env      []string
	logPath  string
}

// repoRoot returns the repository root (tests run in tests/e2e).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// requireDevPrereqs skips when the machine cannot run `berth dev` with a runtime and fails
// when bin/berth is missing (make test builds it first).
func requireDevPrereqs(t testing.TB, root string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("berth dev starts a private containerd, which needs root")
	}
	for _, bin := range []string{"containerd", "runc", "aws"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found in PATH (apt-get install containerd runc awscli)", bin)
		}
	}
	for _, bin := range []string{"bin/berth", "bin/berth-testimage"} {
		if _, err := os.Stat(filepath.Join(root, bin)); err != nil {
			t.Fatalf("%s is missing: run `make build` first (make test does)", bin)
		}
	}
}

// devEnv returns the environment of a `berth dev` on free loopback ports with its data
// in dataDir, and of the AWS CLI (or boto3) pointed at it through a proxy that checks every
// answer against the ECS model's required members (the test fails at its end on any
// violation).
func devEnv(t testing.TB, dataDir string) []string {
	env, _ := devEnvShapes(t, dataDir)
	return env
}

// devEnvShapes is devEnv, also returning the recorder of the checking proxy.
func devEnvShapes(t testing.TB, dataDir string) ([]string, *shapecheck.Recorder) {
	gw, reg, logs := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	rec := harness.ShapeRecorder(t)
	proxy := httptest.NewServer(rec.Proxy(&url.URL{Scheme: "http", Host: gw}))
	t.Cleanup(proxy.Close)
	return append(os.Environ(),
		"BERTH_DATA_DIR="+dataDir,
		"BERTH_GATEWAY_ADDR="+gw,
		"BERTH_REGISTRY_ADDR="+reg,
		"BERTH_ECR_ADDR="+harness.FreeAddr(t),
		"BERTH_AGENT_LOG_ADDR="+logs,
		"BERTH_AGENT_LOG_URL=http://"+logs,
		// The README's shorter stability wait: AWS's 40 s would make the rolling update
		// step alone take a minute and a half.
		"BERTH_TASK_STABLE_AFTER=5s",
		"AWS_ENDPOINT_URL="+proxy.URL,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_PAGER=",
	), rec
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// startDev starts bin/berth dev and waits for its ready line.
func startDev(t testing.TB, root string, env []string, logPath string) *devProcess {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin/berth"), "dev")
	cmd.Dir = root
	cmd.Env = env
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProcess{cmd: cmd, env: env, logPath: logPath}
	t.Cleanup(func() {
		p.stop(t)
		logFile.Close()
		if t.Failed() {
			dumpTail(t, logPath, 60)
		}
		purgeDevContainers(t, envValue(env, "BERTH_DATA_DIR"))
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		m := regexp.MustCompile(`endpoint (\S+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("ready line has no endpoint: %q", line)
		}
		p.endpoint = m[1]
	case <-time.After(90 * time.Second):
		t.Fatalf("berth dev printed no ready line within 90s")
	}
	return p
}

// purgeDevContainers removes the containers a stopped `berth dev` left running under
// dataDir (Ctrl-C leaves them for the next start to adopt, as the README says): it starts
// the private containerd on dataDir/containerd again, deletes every task and container,
// and stops it. Without it, a container still stopping when its test ends outlives the
// test, and its shim writes into the bundle (runc's log.json) while t.TempDir's cleanup
// removes it: "unlinkat …-app: directory not empty". It does nothing when the dev used
// another containerd or left no task.
func purgeDevContainers(t testing.TB, dataDir string) {
	t.Helper()
	dir := filepath.Join(dataDir, "containerd")
	var left []string
	nss, _ := os.ReadDir(filepath.Join(dir, "state", "io.containerd.runtime.v2.task"))
	for _, ns := range nss {
		tasks, _ := os.ReadDir(filepath.Join(dir, "state", "io.containerd.runtime.v2.task", ns.Name()))
		for _, task := range tasks {
			left = append(left, ns.Name()+"/"+task.Name())
		}
	}
	if len(left) == 0 {
		return
	}
	t.Logf("berth dev left %d containerd tasks (%s); removing them", len(left), strings.Join(left, ", "))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel()
	inst, err := containerdproc.StartProcess(ctx, dir)
	if err != nil {
		t.Errorf("start the dev's containerd to remove its leftover containers: %v", err)
		return
	}
	if err := inst.Purge(ctx); err != nil {
		t.Errorf("remove the dev's leftover containers: %v", err)
	}
	if err := inst.Stop(ctx); err != nil {
		t.Errorf("stop the dev's containerd: %v", err)
	}
}

// stop sends SIGINT (Ctrl-C) and waits for a clean exit.
func (p *devProcess) stop(t testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("berth dev exited uncleanly after Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("berth dev did not exit within 30s of Ctrl-C")
	}
}

func dumpTail(t testing.TB, path string, n int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("last lines of %s:\n%s", path, strings.Join(lines, "\n"))
}

// walkthroughScript extracts the README's walkthrough: every ```sh block between the
// walkthrough markers, in order, with the dev endpoint and registry of this run.
func walkthroughScript(t testing.TB, root string, env []string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	begin := strings.Index(text, "<!-- walkthrough:begin -->")
	end := strings.Index(text, "<!-- walkthrough:end -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no walkthrough markers")
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text[begin:end], -1)
	if len(blocks) < 5 {
		t.Fatalf("README walkthrough has %d sh blocks; expected the whole walkthrough", len(blocks))
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\nset -x\n")
	for _, b := range blocks {
		script.WriteString(b[1])
	}
	s := script.String()
	s = strings.ReplaceAll(s, "http://127.0.0.1:4566", envValue(env, "AWS_ENDPOINT_URL"))
	s = strings.ReplaceAll(s, "127.0.0.1:5000", envValue(env, "BERTH_REGISTRY_ADDR"))
	s = strings.ReplaceAll(s, "127.0.0.1:5001", envValue(env, "BERTH_ECR_ADDR"))
	return s
}

// TestReadmeWalkthrough runs the README's walkthrough, command for command, with the real
// AWS CLI against a real `bin/berth dev` (etcd, scheduler, gateway, agent, registry and a
// private containerd), and checks what each step prints.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a deadline, not a goal: its AWS CLI calls share the cores with the parallel tests
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", walkthroughScript(t, root, env))
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"pushed " + envValue(env, "BERTH_ECR_ADDR") + "/berth/demo@sha256:",
		`"status": "ACTIVE"`,
		"task-definition/hello:1",
		`"stopCode": "EssentialContainerExited"`,
		`"exitCode": 0`,
		"app: GREETING=hello from berth",
		`"desired": 2`,
		"has reached a steady state.",
		`"rollout": "COMPLETED"`,
		`"DRAINING"`,
		`"bridge"`,
		`"awsvpc"`,
		`"type": "ElasticNetworkInterface"`,
		`"status": "ATTACHED"`,
		"ok from the task address 10.240.",
		`"status": "INACTIVE"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("walkthrough output lacks %q", want)
		}
	}
	// Both copies of the bridge service answer, each on its own dynamic host port.
	ports := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*ok from host port (\d+)$`).FindAllStringSubmatch(string(out), -1) {
		ports[m[1]] = true
	}
	if len(ports) != 2 {
		t.Errorf("bridge service copies answered on host ports %v, want two different ones", ports)
	}
	if t.Failed() {
		t.Logf("walkthrough output:\n%s", out)
	}
}

// TestDevStatePersists stops `berth dev` with Ctrl-C while a task runs and starts it again
// on the same data dir: the cluster, the task definition and the task are still there,
// and the task's container was adopted, not started again.
func TestDevStatePersists(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	dev := startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"

	// A second berth dev on the same data dir says so at once rather than waiting forever
	// on etcd's database lock.
	second := exec.Command(filepath.Join(root, "bin/berth"), "dev")
	second.Dir, second.Env = root, env
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is in use by another berth dev") {
		t.Errorf("second berth dev on the same data dir: err %v, output %q", err, out)
	}

	cli(t, root, env, "bin/berth", "image", "demo")
	cli(t, root, env, "aws", "ecs", "create-cluster", "--cluster-name", "keep")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "sleeper",
		"--container-definitions", fmt.Sprintf(`[{"name":"s","image":%q,"memory":16,"command":["sleep","600"]}]`, image))
	task := cli(t, root, env, "aws", "ecs", "run-task", "--task-definition", "sleeper",
		"--query", "tasks[0].taskArn", "--output", "text")
	startedAt := waitFor(t, func() (string, bool) {
		s := cli(t, root, env, "aws", "ecs", "describe-tasks", "--tasks", task,
			"--query", "tasks[0].[lastStatus,startedAt]", "--output", "text")
		f := strings.Fields(s)
		return s, len(f) == 2 && f[0] == "RUNNING"
	})

	dev.stop(t)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))

	if got := cli(t, root, env, "aws", "ecs", "describe-clusters", "--clusters", "keep",
		"--query", "clusters[0].status", "--output", "text"); got != "ACTIVE" {
		t.Errorf("cluster keep after restart: %q, want ACTIVE", got)
	}
	if got := cli(t, root, env, "aws", "ecs", "describe-task-definition", "--task-definition", "sleeper",
		"--query", "taskDefinition.revision", "--output", "text"); got != "1" {
		t.Errorf("task definition sleeper after restart: revision %q, want 1", got)
	}
	// The agent reconnects and re-adopts the running container: the task stays RUNNING
	// with the same startedAt (a restarted container would report a new one).
	waitFor(t, func() (string, bool) {
		s := cli(t, root, env, "aws", "ecs", "describe-container-instances", "--container-instances",
			cli(t, root, env, "aws", "ecs", "list-container-instances", "--query", "containerInstanceArns[0]", "--output", "text"),
			"--query", "containerInstances[0].agentConnected", "--output", "text")
		return s, s == "True"
	})
	after := cli(t, root, env, "aws", "ecs", "describe-tasks", "--tasks", task,
		"--query", "tasks[0].[lastStatus,startedAt]", "--output", "text")
	if after != startedAt {
		t.Errorf("task after restart: %q, want %q (still RUNNING, not restarted)", after, startedAt)
	}
	// Stop the task and wait for it, so no container outlives the test.
	cli(t, root, env, "aws", "ecs", "stop-task", "--task", task)
	waitFor(t, func() (string, bool) {
		s := cli(t, root, env, "aws", "ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
}

// cli runs a command with env in root and returns its trimmed stdout; it fails the test on
// a non-zero exit.
func cli(t testing.TB, root string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// waitFor polls check every 500 ms for up to 60 s and returns its last value.
func waitFor(t testing.TB, check func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, ok := check()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 60s; last value %q", v)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
