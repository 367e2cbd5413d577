package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// composeCmd returns the compose command this machine has: docker-compose, or the
// `docker compose` plugin.
func composeCmd(t *testing.T) []string {
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	t.Skip("neither docker-compose nor the `docker compose` plugin is installed")
	return nil
}

// TestCompose brings up deploy/compose.yaml (3 etcd members with peer and client TLS, 2
// schedulers, 2 gateways with console and metrics, the Cloud Map DNS server, 2 agents each
// running its own containerd on the stack's network, the lb role), checks the second
// gateway, the console, /metrics, the DNS server and that etcd refuses clients without its
// CA's certificate, runs a task to completion through the gateway with the AWS CLI, runs
// the chaos suite (a gateway killed among its faults), issue
// 17's zero-failure load balancer test on a bridge service over both agents, stops one
// agent container and sees its instance disconnect, and brings the stack down.
func TestCompose(t *testing.T) {
	t.Parallel() // see main_test.go
	if testing.Short() {
		t.Skip("-short: the compose stack takes a few minutes")
	}
	// Bounded; generous for a loaded machine (the images are built inside the bound).
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no docker engine reachable (docker info: %v: %s); the compose test needs docker", err, bytes.TrimSpace(out))
	}
	compose := composeCmd(t)
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	deploy := filepath.Join(root, "deploy")

	t0 := time.Now()
	// The build has its own bound: on a loaded machine compiling four static binaries
	// takes minutes the stack's own bound should not count.
	buildCtx, buildCancel := context.WithTimeout(t.Context(), 20*time.Minute)
	run(t, buildCtx, root, nil, filepath.Join(deploy, "build.sh"))
	buildCancel()
	t.Logf("static binaries built in %s", time.Since(t0).Round(time.Second))
	ctx, cancel = context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	data := t.TempDir()
	port, port2, etcdPort := harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)
	regPort := harness.FreePort(t)
	logPorts := [2]int{harness.FreePort(t), harness.FreePort(t)}
	var b [4]byte
	_, _ = rand.Read(b[:])
	// BERTH_E2E_COMPOSE_PREFIX replaces the project's (and images' tag's) prefix, so one
	// machine's engineers tell their stacks apart.
	prefix := "berthe2e"
	if p := os.Getenv("BERTH_E2E_COMPOSE_PREFIX"); p != "" {
		prefix = p
	}
	project := prefix + hex.EncodeToString(b[:])
	env := append(os.Environ(),
		"BERTH_GATEWAY_PORT="+strconv.Itoa(port),
		"BERTH_GATEWAY2_PORT="+strconv.Itoa(port2),
		"BERTH_ETCD_PORT="+strconv.Itoa(etcdPort),
		"BERTH_LB_LISTEN_HOST=127.0.0.1",
		"BERTH_COMPOSE_DATA="+data,
		// The images are tagged per run: two runs from different checkouts at once must
		// not start each other's builds.
		"BERTH_IMAGE_TAG="+project,
		"BERTH_REGISTRY_PORT="+strconv.Itoa(regPort),
		"BERTH_AGENT1_LOG_PORT="+strconv.Itoa(logPorts[0]),
		"BERTH_AGENT2_LOG_PORT="+strconv.Itoa(logPorts[1]),
	)
	dc := func(ctx context.Context, args ...string) (string, error) {
		argv := append(append(append([]string{}, compose[1:]...), "-p", project, "-f", filepath.Join(deploy, "compose.yaml")), args...)
		cmd := exec.CommandContext(ctx, compose[0], argv...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			return stdout.String(), fmt.Errorf("%s %s: %w\n%s", compose[0], strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), nil
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			if logs, err := dc(ctx, "logs", "--no-color", "--tail", "40"); err == nil {
				t.Logf("compose logs:\n%s", logs)
			}
		}
		if _, err := dc(ctx, "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
			t.Errorf("compose down: %v", err)
		}
		// This run's images go with it (their layers stay as the next build's cache).
		for _, img := range []string{"berth", "berth-agent", "berth-gateway", "berth-etcd"} {
			_ = exec.CommandContext(ctx, "docker", "image", "rm", img+":"+project).Run()
		}
	})

	t0 = time.Now()
	if _, err := dc(ctx, "build"); err != nil {
		t.Fatal(err)
	}
	if _, err := dc(ctx, "up", "-d", "registry", "etcd1", "etcd2", "etcd3", "scheduler1", "scheduler2", "gateway", "gateway2", "dns"); err != nil {
		t.Fatal(err)
	}
	// The task's image goes into the stack's own registry, as a user's would.
	testImage := filepath.Join(t.TempDir(), "berth-testimage")
	run(t, ctx, root, append(os.Environ(), "CGO_ENABLED=0"), "go", "build", "-trimpath", "-o", testImage, "./testkit/testimage/cmd/berth-testimage")
	// Pushed from the host through the registry's published port; the agents pull the same
	// repository as registry:5000 over the stack's network.
	pushed := "127.0.0.1:" + strconv.Itoa(regPort) + "/berth/testimage:compose"
	image := "registry:5000/berth/testimage:compose"
	retry(t, ctx, 30*time.Second, "image push into the stack's registry", func() error {
		out, err := exec.CommandContext(ctx, filepath.Join(deploy, ".build", "berth"), "image", "demo", pushed, "--binary", testImage).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	// The first admin call succeeds once etcd has formed its cluster and scheduler1
	// serves.
	const account = "000000000000"
	retry(t, ctx, 90*time.Second, "account creation through scheduler1", func() error {
		_, err := dc(ctx, "run", "--rm", "admin", "account", "create", account)
		if err != nil && strings.Contains(err.Error(), "already_exists") {
			return nil
		}
		return err
	})
	agentEnv, err := dc(ctx, "run", "--rm", "admin", "key", "create", account, "--output", "env", "--description", "compose agents")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "agent.env"), []byte(agentEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	userKey, err := dc(ctx, "run", "--rm", "admin", "key", "create", account, "--description", "compose test")
	if err != nil {
		t.Fatal(err)
	}
	keyID, secret, ok := strings.Cut(strings.TrimSpace(userKey), "\t")
	if !ok {
		t.Fatalf("key create printed %q", userKey)
	}
	if _, err := dc(ctx, "up", "-d", "agent1", "agent2", "lb"); err != nil {
		t.Fatal(err)
	}
	t.Logf("stack up in %s", time.Since(t0).Round(time.Second))

	// The CLI reaches the gateway through a proxy checking every answer against the ECS
	// model's required members.
	// The gateway serves HTTPS with the stack's CA (deploy/build.sh): the proxy trusts it.
	caFile := filepath.Join(deploy, ".build", "tls", "berth-ca.pem")
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	upstream := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(port)})
	upstream.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	proxy := httptest.NewServer(harness.ShapeRecorder(t).Handler(upstream))
	defer proxy.Close()
	// And the AWS CLI reaches it directly with the CA bundle, as a user would.
	direct := exec.CommandContext(ctx, "aws", "--endpoint-url", "https://127.0.0.1:"+strconv.Itoa(port), "--ca-bundle", caFile,
		"--output", "json", "ecs", "list-clusters")
	direct.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+keyID, "AWS_SECRET_ACCESS_KEY="+secret,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_MAX_ATTEMPTS=3")
	if out, err := direct.CombinedOutput(); err != nil {
		t.Fatalf("aws --ca-bundle against the HTTPS gateway: %v: %s", err, out)
	}
	aws := func(args ...string) (map[string]any, error) {
		argv := append([]string{"--endpoint-url", proxy.URL, "--output", "json", "ecs"}, args...)
		cmd := exec.CommandContext(ctx, "aws", argv...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+keyID, "AWS_SECRET_ACCESS_KEY="+secret,
			"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_MAX_ATTEMPTS=1")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			return nil, fmt.Errorf("aws ecs %s: %w: %s", strings.Join(args, " "), err, stderr)
		}
		var v map[string]any
		if len(bytes.TrimSpace(out)) == 0 {
			return map[string]any{}, nil
		}
		return v, json.Unmarshal(out, &v)
	}
	connected := func() (up, down int, err error) {
		list, err := aws("list-container-instances", "--cluster", "default")
		if err != nil {
			return 0, 0, err
		}
		arns, _ := list["containerInstanceArns"].([]any)
		if len(arns) == 0 {
			return 0, 0, nil
		}
		args := []string{"describe-container-instances", "--cluster", "default", "--container-instances"}
		for _, a := range arns {
			args = append(args, a.(string))
		}
		desc, err := aws(args...)
		if err != nil {
			return 0, 0, err
		}
		cis, _ := desc["containerInstances"].([]any)
		for _, ci := range cis {
			if ci.(map[string]any)["agentConnected"] == true {
				up++
			} else {
				down++
			}
		}
		return up, down, nil
	}
	retry(t, ctx, 90*time.Second, "both agents connected", func() error {
		up, _, err := connected()
		if err == nil && up != 2 {
			err = fmt.Errorf("%d agents connected", up)
		}
		return err
	})

	// No single point of failure, and TLS everywhere: the second gateway answers the same
	// endpoint; both serve the console and /metrics; the Cloud Map DNS server runs; etcd
	// answers only TLS clients with a certificate of its own CA.
	direct2 := exec.CommandContext(ctx, "aws", "--endpoint-url", "https://127.0.0.1:"+strconv.Itoa(port2), "--ca-bundle", caFile,
		"--output", "json", "ecs", "list-container-instances", "--cluster", "default")
	direct2.Env = direct.Env
	if out, err := direct2.CombinedOutput(); err != nil || !strings.Contains(string(out), "container-instance/") {
		t.Errorf("the second gateway: %v: %s", err, out)
	}
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for _, p := range []int{port, port2} {
		for path, want := range map[string]string{"/metrics": "berth_", "/console/": "<html"} {
			res, err := https.Get("https://127.0.0.1:" + strconv.Itoa(p) + path)
			if err != nil {
				t.Errorf("gateway on %d %s: %v", p, path, err)
				continue
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(string(body)), want) {
				t.Errorf("gateway on %d %s: %d, no %q in %.200s", p, path, res.StatusCode, want, body)
			}
		}
	}
	retry(t, ctx, 60*time.Second, "the Cloud Map DNS server answering", func() error {
		logs, err := dc(ctx, "logs", "--no-color", "dns")
		if err == nil && !strings.Contains(logs, "dns answering") {
			err = fmt.Errorf("dns logs: %s", logs)
		}
		return err
	})
	etcdCA := x509.NewCertPool()
	if b, err := os.ReadFile(filepath.Join(deploy, ".build", "etcd-tls", "etcd-ca.pem")); err != nil || !etcdCA.AppendCertsFromPEM(b) {
		t.Fatalf("etcd CA: %v", err)
	}
	for what, cfg := range map[string]clientv3.Config{
		"plain HTTP":                {Endpoints: []string{"http://127.0.0.1:" + strconv.Itoa(etcdPort)}},
		"TLS without a certificate": {Endpoints: []string{"https://127.0.0.1:" + strconv.Itoa(etcdPort)}, TLS: &tls.Config{RootCAs: etcdCA}},
		"the gateway's certificate": {Endpoints: []string{"https://127.0.0.1:" + strconv.Itoa(etcdPort)}, TLS: clientTLS(t, etcdCA, filepath.Join(tlsDirOf(deploy), "berth-gateway.pem"), filepath.Join(tlsDirOf(deploy), "berth-gateway-key.pem"))},
	} {
		cfg.DialTimeout = 3 * time.Second
		cli, err := clientv3.New(cfg)
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = cli.Get(sctx, "/berth/")
			cancel()
			cli.Close()
		}
		if err == nil {
			t.Errorf("etcd answered a client with %s", what)
		}
	}

	// A task to completion.
	defs, _ := json.Marshal([]map[string]any{{"name": "main", "image": image, "command": []string{"exit", "0"}, "memory": 16, "essential": true}})
	if _, err := aws("register-task-definition", "--family", "compose", "--network-mode", "host", "--container-definitions", string(defs)); err != nil {
		t.Fatal(err)
	}
	runOut, err := aws("run-task", "--cluster", "default", "--task-definition", "compose")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := runOut["tasks"].([]any)
	if len(tasks) != 1 {
		t.Fatalf("run-task: %v", runOut)
	}
	taskArn := tasks[0].(map[string]any)["taskArn"].(string)
	var final map[string]any
	retry(t, ctx, 2*time.Minute, "task STOPPED", func() error {
		d, err := aws("describe-tasks", "--cluster", "default", "--tasks", taskArn)
		if err != nil {
			return err
		}
		ts, _ := d["tasks"].([]any)
		if len(ts) != 1 {
			return fmt.Errorf("describe-tasks: %v", d)
		}
		final = ts[0].(map[string]any)
		if s := final["lastStatus"]; s != "STOPPED" {
			return fmt.Errorf("lastStatus %v", s)
		}
		return nil
	})
	ctrs, _ := final["containers"].([]any)
	if len(ctrs) != 1 || ctrs[0].(map[string]any)["exitCode"] != float64(0) || final["stopCode"] != "EssentialContainerExited" {
		t.Errorf("task ended %v %v with containers %v", final["stopCode"], final["stoppedReason"], ctrs)
	}

	// The lb role: an ALB listener on the host forwarding to a target of the test's own.
	elbCLI := func(args ...string) (map[string]any, error) {
		argv := append([]string{"--endpoint-url", "https://127.0.0.1:" + strconv.Itoa(port), "--ca-bundle", caFile, "--output", "json", "elbv2"}, args...)
		cmd := exec.CommandContext(ctx, "aws", argv...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+keyID, "AWS_SECRET_ACCESS_KEY="+secret,
			"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_MAX_ATTEMPTS=1")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			return nil, fmt.Errorf("aws elbv2 %s: %w: %s", strings.Join(args, " "), err, stderr)
		}
		v := map[string]any{}
		if len(bytes.TrimSpace(out)) == 0 {
			return v, nil
		}
		return v, json.Unmarshal(out, &v)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "behind the lb") }))
	defer backend.Close()
	bport := backend.Listener.Addr().(*net.TCPAddr).Port
	lbOut, err := elbCLI("create-load-balancer", "--name", "compose")
	if err != nil {
		t.Fatal(err)
	}
	lbArn := lbOut["LoadBalancers"].([]any)[0].(map[string]any)["LoadBalancerArn"].(string)
	tgOut, err := elbCLI("create-target-group", "--name", "compose", "--protocol", "HTTP", "--port", strconv.Itoa(bport),
		"--target-type", "ip", "--health-check-interval-seconds", "5", "--health-check-timeout-seconds", "2", "--healthy-threshold-count", "2")
	if err != nil {
		t.Fatal(err)
	}
	tgArn := tgOut["TargetGroups"].([]any)[0].(map[string]any)["TargetGroupArn"].(string)
	lport := harness.FreePort(t)
	if _, err := elbCLI("create-listener", "--load-balancer-arn", lbArn, "--protocol", "HTTP", "--port", strconv.Itoa(lport),
		"--default-actions", "Type=forward,TargetGroupArn="+tgArn); err != nil {
		t.Fatal(err)
	}
	if _, err := elbCLI("register-targets", "--target-group-arn", tgArn, "--targets", "Id=127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	retry(t, ctx, 90*time.Second, "the target healthy and answering through the listener", func() error {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(lport) + "/")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "behind the lb" {
			return fmt.Errorf("listener answered %d %q", resp.StatusCode, body)
		}
		return nil
	})

	// `berth logs` reads the task's output from the agent that ran it (the agents' log
	// services listen on the host's loopback at the ports compose gives them, mTLS with
	// the agents' certificates: the admin certificate reads, none is refused).
	var logs []string
	tlsDir := filepath.Join(deploy, ".build", "tls")
	for _, p := range logPorts {
		agentURL := "https://127.0.0.1:" + strconv.Itoa(p)
		if out, err := exec.CommandContext(ctx, filepath.Join(deploy, ".build", "berth"), "logs", taskArn, "--agent", agentURL,
			"--tls-ca", caFile).CombinedOutput(); err == nil {
			t.Errorf("berth logs without a client certificate read agent log port %d: %s", p, out)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(deploy, ".build", "berth"), "logs", taskArn, "--agent", agentURL,
			"--tls-ca", caFile, "--tls-cert", filepath.Join(tlsDir, "berth-admin.pem"), "--tls-key", filepath.Join(tlsDir, "berth-admin-key.pem"))
		out, err := cmd.CombinedOutput()
		logs = append(logs, fmt.Sprintf("agent log port %d: %v: %s", p, err, out))
		if err == nil && strings.Contains(string(out), "exiting with status 0") {
			logs = nil
			break
		}
	}
	if logs != nil {
		t.Errorf("berth logs found the task's output on neither agent:\n%s", strings.Join(logs, "\n"))
	}

	// The README's service: 4 tasks spread over both agents, then scaled to 0 and deleted.
	svcDefs, _ := json.Marshal([]map[string]any{{"name": "web", "image": image, "command": []string{"sleep", "3600"}, "memory": 32, "cpu": 10, "essential": true}})
	if _, err := aws("register-task-definition", "--family", "web", "--network-mode", "host", "--container-definitions", string(svcDefs)); err != nil {
		t.Fatal(err)
	}
	if _, err := aws("create-service", "--cluster", "default", "--service-name", "web", "--task-definition", "web", "--desired-count", "4",
		"--placement-strategy", "type=spread,field=instanceId"); err != nil {
		t.Fatal(err)
	}
	retry(t, ctx, 2*time.Minute, "4 service tasks RUNNING on both agents", func() error {
		l, err := aws("list-tasks", "--cluster", "default", "--service-name", "web")
		if err != nil {
			return err
		}
		arns, _ := l["taskArns"].([]any)
		if len(arns) != 4 {
			return fmt.Errorf("%d tasks", len(arns))
		}
		args := []string{"describe-tasks", "--cluster", "default", "--tasks"}
		for _, a := range arns {
			args = append(args, a.(string))
		}
		d, err := aws(args...)
		if err != nil {
			return err
		}
		instances := map[any]int{}
		for _, task := range d["tasks"].([]any) {
			tm := task.(map[string]any)
			if tm["lastStatus"] != "RUNNING" {
				return fmt.Errorf("task %v is %v (%v)", tm["taskArn"], tm["lastStatus"], tm["stoppedReason"])
			}
			instances[tm["containerInstanceArn"]]++
		}
		if len(instances) != 2 {
			return fmt.Errorf("tasks on %d instances: %v", len(instances), instances)
		}
		return nil
	})
	// The chaos suite: one fault at a time under a steady RunTask workload and the running
	// service (compose_chaos_test.go), a table of the figures in the test log.
	etcdTLS, err := (transport.TLSInfo{CertFile: filepath.Join(deploy, ".build", "etcd-tls", "etcd-client.pem"),
		KeyFile: filepath.Join(deploy, ".build", "etcd-tls", "etcd-client-key.pem"), TrustedCAFile: filepath.Join(deploy, ".build", "etcd-tls", "etcd-ca.pem")}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	// The rig dials the members' addresses; their one certificate names etcd1..3, and etcd's
	// client puts the address it dials in ServerName. So the chain is checked here, for the
	// name etcd1, instead of by the handshake.
	etcdTLS.InsecureSkipVerify = true
	etcdTLS.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs = append(certs, c)
		}
		if len(certs) == 0 {
			return fmt.Errorf("etcd presented no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: etcdTLS.RootCAs, Intermediates: inter, DNSName: "etcd1"})
		return err
	}
	rig := &chaosRig{t: t, ctx: ctx, dc: dc, roots: roots, etcdTLS: etcdTLS, family: "compose", service: "web", desired: 4}
	rig.ecs = chaosClient([]string{"127.0.0.1:" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(port2)}, roots, keyID, secret)
	rig.chaos()
	t.Logf("chaos figures (%s):\n%s", time.Since(t0).Round(time.Second), rig.table())

	if _, err := aws("update-service", "--cluster", "default", "--service", "web", "--desired-count", "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := aws("delete-service", "--cluster", "default", "--service", "web"); err != nil {
		t.Fatal(err)
	}

	// Issue 17's zero-failure test across the two agents: an ALB listener of the lb
	// service (host network) in front of a 3-task bridge service, through a rolling
	// deployment and a task killed (compose_lb_test.go).
	t0lb := time.Now()
	t.Run("LoadBalancedBridgeService", func(t *testing.T) {
		composeLBService(t, ctx, rig.ecs, composeELBClient("https://127.0.0.1:"+strconv.Itoa(port), roots, keyID, secret), image)
	})
	t.Logf("load-balanced bridge service done in %s", time.Since(t0lb).Round(time.Second))

	// Routes between the agents' task subnets: an awsvpc task on agent2 answers HTTP on its
	// own address to an awsvpc task on agent1 (task subnet to task subnet, through both
	// agents' network namespaces) and to a host-mode task on agent1 (agent1's own network
	// namespace, as any process of that host).
	runOn := func(family, agent string, extra ...string) string {
		t.Helper()
		args := append([]string{"run-task", "--cluster", "default", "--task-definition", family,
			"--placement-constraints", "type=memberOf,expression=attribute:compose.host == " + agent}, extra...)
		out, err := aws(args...)
		if err != nil {
			t.Fatal(err)
		}
		ts, _ := out["tasks"].([]any)
		if len(ts) != 1 {
			t.Fatalf("run-task %s on %s: %v", family, agent, out)
		}
		return ts[0].(map[string]any)["taskArn"].(string)
	}
	waitTask := func(arn, status string) map[string]any {
		t.Helper()
		var task map[string]any
		retry(t, ctx, 2*time.Minute, "task "+arn+" "+status, func() error {
			d, err := aws("describe-tasks", "--cluster", "default", "--tasks", arn)
			if err != nil {
				return err
			}
			ts, _ := d["tasks"].([]any)
			if len(ts) != 1 {
				return fmt.Errorf("describe-tasks: %v", d)
			}
			task = ts[0].(map[string]any)
			if s := task["lastStatus"]; s != status {
				if s == "STOPPED" {
					t.Fatalf("task %s stopped: %v %v", arn, task["stopCode"], task["stoppedReason"])
				}
				return fmt.Errorf("lastStatus %v", s)
			}
			return nil
		})
		return task
	}
	vpc := []string{"--network-configuration", "awsvpcConfiguration={subnets=[subnet-compose]}"}
	serverDefs, _ := json.Marshal([]map[string]any{{"name": "server", "image": image, "command": []string{"serve", "8080"}, "memory": 16, "essential": true,
		"portMappings": []map[string]any{{"containerPort": 8080}}}})
	if _, err := aws("register-task-definition", "--family", "peer-server", "--network-mode", "awsvpc", "--container-definitions", string(serverDefs)); err != nil {
		t.Fatal(err)
	}
	server := waitTask(runOn("peer-server", "agent2", vpc...), "RUNNING")
	var serverIP string
	for _, att := range server["attachments"].([]any) {
		for _, d := range att.(map[string]any)["details"].([]any) {
			if d.(map[string]any)["name"] == "privateIPv4Address" {
				serverIP, _ = d.(map[string]any)["value"].(string)
			}
		}
	}
	if serverIP == "" {
		t.Fatalf("the awsvpc task on agent2 shows no privateIPv4Address: %v", server["attachments"])
	}
	t.Logf("awsvpc task on agent2 at %s", serverIP)
	for _, c := range []struct{ family, mode string }{{"peer-client-vpc", "awsvpc"}, {"peer-client-host", "host"}} {
		defs, _ := json.Marshal([]map[string]any{{"name": "client", "image": image, "command": []string{"get", "http://" + serverIP + ":8080/"}, "memory": 16, "essential": true}})
		if _, err := aws("register-task-definition", "--family", c.family, "--network-mode", c.mode, "--container-definitions", string(defs)); err != nil {
			t.Fatal(err)
		}
		var extra []string
		if c.mode == "awsvpc" {
			extra = vpc
		}
		// The route reaches agent1 with the next session message after agent2's
		// registration; a client that ran before it fails: retry a few times.
		var last string
		ok := false
		for attempt := 0; attempt < 5 && !ok; attempt++ {
			done := waitTask(runOn(c.family, "agent1", extra...), "STOPPED")
			ctrs, _ := done["containers"].([]any)
			if len(ctrs) == 1 && ctrs[0].(map[string]any)["exitCode"] == float64(0) {
				ok = true
				break
			}
			last = fmt.Sprintf("%v %v %v", done["stopCode"], done["stoppedReason"], ctrs)
			time.Sleep(2 * time.Second)
		}
		if !ok {
			t.Errorf("%s task on agent1 did not fetch http://%s:8080/ from agent2's awsvpc task: %s", c.mode, serverIP, last)
		} else {
			t.Logf("%s task on agent1 fetched http://%s:8080/ from agent2's awsvpc task", c.mode, serverIP)
		}
	}
	if _, err := aws("stop-task", "--cluster", "default", "--task", server["taskArn"].(string)); err != nil {
		t.Fatal(err)
	}

	// One agent container stops: its instance is seen disconnected, the other stays.
	if _, err := dc(ctx, "stop", "--timeout", "10", "agent1"); err != nil {
		t.Fatal(err)
	}
	retry(t, ctx, 90*time.Second, "agent1's instance disconnected", func() error {
		up, down, err := connected()
		if err == nil && (up != 1 || down != 1) {
			err = fmt.Errorf("%d connected, %d disconnected", up, down)
		}
		return err
	})
	t.Logf("compose test done in %s", time.Since(t0).Round(time.Second))
}

func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func retry(t *testing.T, ctx context.Context, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// tlsDirOf is the stack's Berth TLS material (deploy/build.sh).
func tlsDirOf(deploy string) string { return filepath.Join(deploy, ".build", "tls") }

// clientTLS returns a TLS client configuration trusting roots and presenting the
// certificate at certFile/keyFile.
func clientTLS(t *testing.T, roots *x509.CertPool, certFile, keyFile string) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}
}
