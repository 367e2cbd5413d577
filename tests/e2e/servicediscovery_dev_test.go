package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCloudMapDNSOnDev is service discovery end to end on `berth dev` with the AWS CLI
// and real containers: a private DNS namespace and a Cloud Map service (A record, TTL
// 10) created with `aws servicediscovery`; an ECS service of 2 awsvpc tasks with
// serviceRegistries; a client task (awsvpc, its resolv.conf the Cloud Map DNS server)
// resolves web.sd.local to exactly the IPs of the service's RUNNING tasks; stopping one
// task takes its IP out of the answer within the TTL, and the replacement's IP comes in.
func TestCloudMapDNSOnDev(t *testing.T) {
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

	var op struct{ OperationId string }
	jsonOut(&op, "servicediscovery", "create-private-dns-namespace", "--name", "sd.local", "--vpc", "vpc-1")
	var got struct {
		Operation struct {
			Status  string
			Targets map[string]string
		}
	}
	jsonOut(&got, "servicediscovery", "get-operation", "--operation-id", op.OperationId)
	if got.Operation.Status != "SUCCESS" {
		t.Fatalf("get-operation: %+v", got)
	}
	const ttl = 10
	var svc struct{ Service struct{ Arn string } }
	jsonOut(&svc, "servicediscovery", "create-service", "--name", "web", "--namespace-id", got.Operation.Targets["NAMESPACE"],
		"--dns-config", fmt.Sprintf("RoutingPolicy=MULTIVALUE,DnsRecords=[{Type=A,TTL=%d}]", ttl))

	netCfg := "awsvpcConfiguration={subnets=[subnet-1]}"
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--network-mode", "awsvpc", "--container-definitions",
		fmt.Sprintf(`[{"name":"web","image":"%s/berth/demo:latest","memory":32,"command":["serve","8080"],"portMappings":[{"containerPort":8080}]}]`, reg))
	cli(t, root, env, "aws", "ecs", "create-service", "--service-name", "web", "--task-definition", "web", "--desired-count", "2",
		"--network-configuration", netCfg, "--service-registries", "registryArn="+svc.Service.Arn)
	var run struct {
		Tasks []struct{ TaskArn string }
	}
	jsonOut(&run, "ecs", "run-task", "--task-definition", "web", "--network-configuration", netCfg)
	client := run.Tasks[0].TaskArn
	t.Cleanup(func() {
		// No container outlives the test.
		for _, args := range [][]string{{"ecs", "delete-service", "--service", "web", "--force"}, {"ecs", "stop-task", "--task", client}} {
			cmd := exec.Command("aws", args...)
			cmd.Dir, cmd.Env = root, env
			_ = cmd.Run()
		}
		time.Sleep(3 * time.Second)
	})

	type task struct {
		TaskArn, LastStatus, DesiredStatus string
		Attachments                        []struct {
			Details []struct{ Name, Value string }
		}
	}
	ipOf := func(tk task) string {
		for _, a := range tk.Attachments {
			for _, d := range a.Details {
				if d.Name == "privateIPv4Address" {
					return d.Value
				}
			}
		}
		return ""
	}
	describe := func(arns ...string) []task {
		var d struct{ Tasks []task }
		jsonOut(&d, append([]string{"ecs", "describe-tasks", "--tasks"}, arns...)...)
		return d.Tasks
	}
	// webIPs returns the IPs of the service's RUNNING tasks, sorted, and their ARNs.
	webIPs := func() ([]string, []string) {
		var l struct{ TaskArns []string }
		jsonOut(&l, "ecs", "list-tasks", "--service-name", "web", "--desired-status", "RUNNING")
		if len(l.TaskArns) == 0 {
			return nil, nil
		}
		var ips, arns []string
		for _, tk := range describe(l.TaskArns...) {
			if tk.LastStatus == "RUNNING" && ipOf(tk) != "" {
				ips, arns = append(ips, ipOf(tk)), append(arns, tk.TaskArn)
			}
		}
		slices.Sort(ips)
		return ips, arns
	}
	clientIP := waitFor(t, func() (string, bool) {
		tk := describe(client)[0]
		return ipOf(tk), tk.LastStatus == "RUNNING" && ipOf(tk) != ""
	})
	resolve := func() string {
		resp, err := http.Get("http://" + clientIP + ":8080/resolve/web.sd.local")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	var ips, arns []string
	waitFor(t, func() (string, bool) {
		ips, arns = webIPs()
		got := resolve()
		return fmt.Sprintf("resolved %q, running %v", got, ips), len(ips) == 2 && got == strings.Join(ips, ",")
	})
	stopped := arns[0]
	gone := ipOf(describe(stopped)[0])
	start := time.Now()
	cli(t, root, env, "aws", "ecs", "stop-task", "--task", stopped)
	waitFor(t, func() (string, bool) {
		got := resolve()
		return got, !slices.Contains(strings.Split(got, ","), gone)
	})
	if took := time.Since(start); took > ttl*time.Second {
		t.Errorf("the stopped task's IP %s left DNS after %v, more than the TTL (%ds)", gone, took, ttl)
	}
	t.Logf("stopped task's IP left DNS %v after stop-task", time.Since(start).Round(100*time.Millisecond))
	// The replacement comes in: the answer is again exactly the running tasks.
	waitFor(t, func() (string, bool) {
		ips, _ = webIPs()
		got := resolve()
		return fmt.Sprintf("resolved %q, running %v", got, ips), len(ips) == 2 && got == strings.Join(ips, ",") && !slices.Contains(ips, gone)
	})
}
