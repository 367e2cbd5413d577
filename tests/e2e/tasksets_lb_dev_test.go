package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestTaskSetsBehindLoadBalancerOnDev is blue/green with task sets on `berth dev`, with
// the AWS CLI and real containers (issue 35): a service under the EXTERNAL deployment
// controller; task set blue with networkConfiguration (awsvpc), loadBalancers (target
// group blue, target type ip) and serviceRegistries (a Cloud Map service); its task gets
// an awsvpc address, registers in blue — and only there — turns healthy and answers
// through the listener, and is a Cloud Map instance. Task set green does the same with
// target group green; the listener is switched to green; blue scaled to 0 drains out of
// its target group and Cloud Map while green stays.
func TestTaskSetsBehindLoadBalancerOnDev(t *testing.T) {
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
	const appPort = 8080
	tgs := map[string]string{}
	for _, color := range []string{"blue", "green"} {
		var tg struct {
			TargetGroups []struct{ TargetGroupArn string }
		}
		jsonOut(&tg, "elbv2", "create-target-group", "--name", color, "--protocol", "HTTP", "--port", strconv.Itoa(appPort),
			"--target-type", "ip", "--vpc-id", "vpc-1", "--health-check-path", "/health", "--health-check-interval-seconds", "5",
			"--health-check-timeout-seconds", "2", "--healthy-threshold-count", "2")
		tgs[color] = tg.TargetGroups[0].TargetGroupArn
		cli(t, root, env, "aws", "elbv2", "modify-target-group-attributes", "--target-group-arn", tgs[color],
			"--attributes", "Key=deregistration_delay.timeout_seconds,Value=5")
	}
	lport := harness.FreePort(t)
	var listener struct {
		Listeners []struct{ ListenerArn string }
	}
	jsonOut(&listener, "elbv2", "create-listener", "--load-balancer-arn", lb.LoadBalancers[0].LoadBalancerArn,
		"--protocol", "HTTP", "--port", strconv.Itoa(lport), "--default-actions", "Type=forward,TargetGroupArn="+tgs["blue"])
	// The test listener of blue/green: green is reached there before the switch (and a
	// target group needs a load balancer to be given to a task set, as on AWS).
	testPort := harness.FreePort(t)
	cli(t, root, env, "aws", "elbv2", "create-listener", "--load-balancer-arn", lb.LoadBalancers[0].LoadBalancerArn,
		"--protocol", "HTTP", "--port", strconv.Itoa(testPort), "--default-actions", "Type=forward,TargetGroupArn="+tgs["green"])

	var op struct{ OperationId string }
	jsonOut(&op, "servicediscovery", "create-private-dns-namespace", "--name", "ts.local", "--vpc", "vpc-1")
	var got struct {
		Operation struct{ Targets map[string]string }
	}
	jsonOut(&got, "servicediscovery", "get-operation", "--operation-id", op.OperationId)
	var sd struct{ Service struct{ Id, Arn string } }
	jsonOut(&sd, "servicediscovery", "create-service", "--name", "web", "--namespace-id", got.Operation.Targets["NAMESPACE"],
		"--dns-config", "RoutingPolicy=MULTIVALUE,DnsRecords=[{Type=A,TTL=10}]")

	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--network-mode", "awsvpc", "--container-definitions",
		fmt.Sprintf(`[{"name":"web","image":"%s/berth/demo:latest","memory":32,"command":["serve","%d"],"portMappings":[{"containerPort":%d}]}]`, reg, appPort, appPort))
	cli(t, root, env, "aws", "ecs", "create-service", "--service-name", "web", "--desired-count", "1", "--deployment-controller", "type=EXTERNAL")
	t.Cleanup(func() {
		// No container outlives the test.
		cmd := exec.Command("aws", "ecs", "delete-service", "--service", "web", "--force")
		cmd.Dir, cmd.Env = root, env
		_ = cmd.Run()
		time.Sleep(8 * time.Second)
	})
	taskSet := func(color string) string {
		t.Helper()
		var out struct {
			TaskSet struct {
				ID                   string `json:"id"`
				LoadBalancers        []struct{ TargetGroupArn string }
				ServiceRegistries    []struct{ RegistryArn string }
				NetworkConfiguration struct {
					AwsvpcConfiguration struct{ Subnets []string }
				}
			} `json:"taskSet"`
		}
		jsonOut(&out, "ecs", "create-task-set", "--cluster", "default", "--service", "web", "--task-definition", "web",
			"--scale", "value=100,unit=PERCENT", "--external-id", color,
			"--network-configuration", "awsvpcConfiguration={subnets=[subnet-"+color+"]}",
			"--load-balancers", fmt.Sprintf("targetGroupArn=%s,containerName=web,containerPort=%d", tgs[color], appPort),
			"--service-registries", "registryArn="+sd.Service.Arn)
		ts := out.TaskSet
		if len(ts.LoadBalancers) != 1 || ts.LoadBalancers[0].TargetGroupArn != tgs[color] || len(ts.ServiceRegistries) != 1 ||
			fmt.Sprint(ts.NetworkConfiguration.AwsvpcConfiguration.Subnets) != "[subnet-"+color+"]" {
			t.Fatalf("create-task-set %s answered %+v", color, ts)
		}
		return ts.ID
	}
	// taskOf returns the id and awsvpc address of the RUNNING task of task set id.
	taskOf := func(id string) (string, string) {
		var l struct{ TaskArns []string }
		jsonOut(&l, "ecs", "list-tasks", "--started-by", id, "--desired-status", "RUNNING")
		if len(l.TaskArns) != 1 {
			return "", ""
		}
		var d struct {
			Tasks []struct {
				TaskArn, LastStatus string
				Attachments         []struct {
					Details []struct{ Name, Value string }
				}
			}
		}
		jsonOut(&d, append([]string{"ecs", "describe-tasks", "--tasks"}, l.TaskArns...)...)
		if len(d.Tasks) != 1 || d.Tasks[0].LastStatus != "RUNNING" {
			return "", ""
		}
		ip := ""
		for _, a := range d.Tasks[0].Attachments {
			for _, det := range a.Details {
				if det.Name == "privateIPv4Address" {
					ip = det.Value
				}
			}
		}
		arn := d.Tasks[0].TaskArn
		return arn[strings.LastIndexByte(arn, '/')+1:], ip
	}
	// targets returns the targets of a target group as "id:port state".
	targets := func(color string) []string {
		var h struct {
			TargetHealthDescriptions []struct {
				Target       struct{ Id string }
				TargetHealth struct{ State string }
			}
		}
		jsonOut(&h, "elbv2", "describe-target-health", "--target-group-arn", tgs[color])
		var out []string
		for _, d := range h.TargetHealthDescriptions {
			out = append(out, d.Target.Id+" "+d.TargetHealth.State)
		}
		return out
	}
	instances := func() []string {
		var l struct{ Instances []struct{ Id string } }
		jsonOut(&l, "servicediscovery", "list-instances", "--service-id", sd.Service.Id)
		var out []string
		for _, i := range l.Instances {
			out = append(out, i.Id)
		}
		slices.Sort(out)
		return out
	}
	get := func(port int) string {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(body)))
	}

	blue := taskSet("blue")
	cli(t, root, env, "aws", "ecs", "update-service-primary-task-set", "--cluster", "default", "--service", "web", "--primary-task-set", blue)
	var blueTask, blueIP string
	waitFor(t, func() (string, bool) {
		blueTask, blueIP = taskOf(blue)
		return blueTask + " " + blueIP, blueIP != ""
	})
	waitFor(t, func() (string, bool) {
		ts := targets("blue")
		return fmt.Sprint(ts), fmt.Sprint(ts) == "["+blueIP+" healthy]"
	})
	if g := get(lport); g != "200 ok" {
		t.Errorf("GET through the listener to blue: %s", g)
	}
	waitFor(t, func() (string, bool) {
		is := instances()
		return fmt.Sprint(is), fmt.Sprint(is) == "["+blueTask+"]"
	})

	green := taskSet("green")
	var greenTask, greenIP string
	waitFor(t, func() (string, bool) {
		greenTask, greenIP = taskOf(green)
		return greenTask + " " + greenIP, greenIP != ""
	})
	waitFor(t, func() (string, bool) {
		ts := targets("green")
		return fmt.Sprint(ts), fmt.Sprint(ts) == "["+greenIP+" healthy]"
	})
	if ts := targets("blue"); fmt.Sprint(ts) != "["+blueIP+" healthy]" {
		t.Errorf("blue target group with both task sets running: %v, want only blue's task %s", ts, blueIP)
	}
	if g := get(testPort); g != "200 ok" {
		t.Errorf("GET through the test listener to green: %s", g)
	}
	want := []string{blueTask, greenTask}
	slices.Sort(want)
	waitFor(t, func() (string, bool) {
		is := instances()
		return fmt.Sprint(is), slices.Equal(is, want)
	})

	// The switch: the listener forwards to green, and blue is scaled away.
	cli(t, root, env, "aws", "elbv2", "modify-listener", "--listener-arn", listener.Listeners[0].ListenerArn,
		"--default-actions", "Type=forward,TargetGroupArn="+tgs["green"])
	cli(t, root, env, "aws", "ecs", "update-service-primary-task-set", "--cluster", "default", "--service", "web", "--primary-task-set", green)
	waitFor(t, func() (string, bool) {
		g := get(lport)
		return g, g == "200 ok"
	})
	cli(t, root, env, "aws", "ecs", "update-task-set", "--cluster", "default", "--service", "web", "--task-set", blue, "--scale", "value=0,unit=PERCENT")
	waitFor(t, func() (string, bool) {
		ts := targets("blue")
		return fmt.Sprint(ts), len(ts) == 0
	})
	waitFor(t, func() (string, bool) {
		is := instances()
		return fmt.Sprint(is), fmt.Sprint(is) == "["+greenTask+"]"
	})
	if ts := targets("green"); fmt.Sprint(ts) != "["+greenIP+" healthy]" {
		t.Errorf("green target group after blue's scale-in: %v", ts)
	}
	// Leave no container running when berth dev stops.
	cli(t, root, env, "aws", "ecs", "update-task-set", "--cluster", "default", "--service", "web", "--task-set", green, "--scale", "value=0,unit=PERCENT")
	waitFor(t, func() (string, bool) {
		id, _ := taskOf(green)
		return id, id == ""
	})
}
