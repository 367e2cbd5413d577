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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// blueGreenFixture is a `berth dev` with the demo image, an application load balancer
// with two target groups (blue, green), a production and a test listener whose default
// rules forward to both (blue weight 1, green 0), and task definitions web:1 (blue) and
// web:2 (green) whose HTTP servers tell themselves apart: GET /resolve/color answers the
// address their extraHosts give "color" (10.0.0.1 blue, 10.0.0.2 green).
type blueGreenFixture struct {
	t                  *testing.T
	root               string
	env                []string
	tgs                map[string]string
	prodRule, testRule string
	prodPort, testPort int
}

const bgAppPort = 8080

func newBlueGreenFixture(t *testing.T, extraEnv ...string) *blueGreenFixture {
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/portmap"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("CNI plugin %s missing: blue and green tasks need networkMode bridge to serve one port side by side (apt-get install containernetworking-plugins)", p)
		}
	}
	dir := t.TempDir()
	env := append(append(devEnv(t, filepath.Join(dir, "data")), "BERTH_TASK_STABLE_AFTER=2s"), extraEnv...)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	f := &blueGreenFixture{t: t, root: root, env: env, tgs: map[string]string{}}
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	cli(t, root, env, "bin/berth", "image", "demo")
	var lb struct {
		LoadBalancers []struct{ LoadBalancerArn string }
	}
	f.json(&lb, "elbv2", "create-load-balancer", "--name", "web", "--subnets", "subnet-1", "subnet-2")
	for _, color := range []string{"blue", "green"} {
		var tg struct {
			TargetGroups []struct{ TargetGroupArn string }
		}
		f.json(&tg, "elbv2", "create-target-group", "--name", color, "--protocol", "HTTP", "--port", strconv.Itoa(bgAppPort),
			"--vpc-id", "vpc-1", "--health-check-path", "/health", "--health-check-interval-seconds", "5",
			"--health-check-timeout-seconds", "2", "--healthy-threshold-count", "2")
		f.tgs[color] = tg.TargetGroups[0].TargetGroupArn
		cli(t, root, env, "aws", "elbv2", "modify-target-group-attributes", "--target-group-arn", f.tgs[color],
			"--attributes", "Key=deregistration_delay.timeout_seconds,Value=5")
	}
	both := fmt.Sprintf(`[{"Type":"forward","ForwardConfig":{"TargetGroups":[{"TargetGroupArn":"%s","Weight":1},{"TargetGroupArn":"%s","Weight":0}]}}]`, f.tgs["blue"], f.tgs["green"])
	rule := func(port int) string {
		var l struct {
			Listeners []struct{ ListenerArn string }
		}
		f.json(&l, "elbv2", "create-listener", "--load-balancer-arn", lb.LoadBalancers[0].LoadBalancerArn,
			"--protocol", "HTTP", "--port", strconv.Itoa(port), "--default-actions", both)
		var r struct{ Rules []struct{ RuleArn string } }
		f.json(&r, "elbv2", "describe-rules", "--listener-arn", l.Listeners[0].ListenerArn)
		return r.Rules[len(r.Rules)-1].RuleArn // the default rule
	}
	f.prodPort, f.testPort = harness.FreePort(t), harness.FreePort(t)
	f.prodRule, f.testRule = rule(f.prodPort), rule(f.testPort)
	for _, ip := range []string{"10.0.0.1", "10.0.0.2"} {
		cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--network-mode", "bridge", "--container-definitions",
			fmt.Sprintf(`[{"name":"web","image":"%s/berth/demo:latest","memory":32,"command":["serve","%d"],
			  "extraHosts":[{"hostname":"color","ipAddress":"%s"}],"portMappings":[{"containerPort":%d}]}]`, reg, bgAppPort, ip, bgAppPort))
	}
	t.Cleanup(func() {
		// No container outlives the test.
		cmd := exec.Command("aws", "ecs", "delete-service", "--service", "web", "--force")
		cmd.Dir, cmd.Env = root, env
		_ = cmd.Run()
		time.Sleep(8 * time.Second)
	})
	return f
}

func (f *blueGreenFixture) json(v any, args ...string) {
	f.t.Helper()
	out := cli(f.t, f.root, f.env, "aws", append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		f.t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// createService creates service web of web:1 with deployment configuration dc (JSON) and
// the load balancer with its advancedConfiguration.
func (f *blueGreenFixture) createService(dc string) {
	lbs := fmt.Sprintf(`[{"targetGroupArn":"%s","containerName":"web","containerPort":%d,"advancedConfiguration":
	  {"alternateTargetGroupArn":"%s","productionListenerRule":"%s","testListenerRule":"%s","roleArn":"arn:aws:iam::000000000000:role/ecs-lb"}}]`,
		f.tgs["blue"], bgAppPort, f.tgs["green"], f.prodRule, f.testRule)
	cli(f.t, f.root, f.env, "aws", "ecs", "create-service", "--service-name", "web", "--task-definition", "web:1", "--desired-count", "1",
		"--load-balancers", lbs, "--deployment-configuration", dc)
}

// color GETs /resolve/color through the listener on port: "blue", "green", or what
// failed.
func color(port int) string {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/resolve/color", port))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch b := strings.TrimSpace(string(body)); {
	case resp.StatusCode != 200:
		return fmt.Sprint(resp.StatusCode, " ", b)
	case b == "10.0.0.1":
		return "blue"
	case b == "10.0.0.2":
		return "green"
	default:
		return b
	}
}

// poll waits up to 4 minutes (a deployment waits for its tasks to start, stay up and
// pass two health checks, and for the old ones to drain) for check.
func poll(t *testing.T, what string, check func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		v, ok := check()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 4 minutes; last value %q", what, v)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// deployment is what the test reads of DescribeServiceDeployments.
type deployment struct {
	ServiceDeploymentArn  string
	Status                string
	LifecycleStage        string
	LifecycleHookDetails  []struct{ HookId, TargetType, Status, TimeoutAction string }
	TargetServiceRevision struct {
		Arn                              string
		RequestedProductionTrafficWeight float64
		RequestedTestTrafficWeight       float64
	}
}

func (f *blueGreenFixture) current() deployment {
	var s struct {
		Services []struct{ CurrentServiceDeployment string }
	}
	f.json(&s, "ecs", "describe-services", "--services", "web")
	var d struct{ ServiceDeployments []deployment }
	f.json(&d, "ecs", "describe-service-deployments", "--service-deployment-arns", s.Services[0].CurrentServiceDeployment)
	return d.ServiceDeployments[0]
}

// weights returns a rule's forward weights as "blue/green".
func (f *blueGreenFixture) weights(rule string) string {
	var r struct {
		Rules []struct {
			Actions []struct {
				ForwardConfig struct {
					TargetGroups []struct {
						TargetGroupArn string
						Weight         int
					}
				}
			}
		}
	}
	f.json(&r, "elbv2", "describe-rules", "--rule-arns", rule)
	w := map[string]int{}
	for _, g := range r.Rules[0].Actions[0].ForwardConfig.TargetGroups {
		w[g.TargetGroupArn] = g.Weight
	}
	return fmt.Sprintf("%d/%d", w[f.tgs["blue"]], w[f.tgs["green"]])
}

// shiftLoad GETs the production listener until stopped, counting answers per color and the
// failed requests.
type shiftLoad struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   map[string]int
	failed atomic.Int64
	total  atomic.Int64
}

func startShiftLoad(port int) *shiftLoad {
	l := &shiftLoad{stop: make(chan struct{}), seen: map[string]int{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			c := color(port)
			l.total.Add(1)
			l.mu.Lock()
			l.seen[c]++
			l.mu.Unlock()
			if c != "blue" && c != "green" {
				l.failed.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

func (l *shiftLoad) end() map[string]int {
	close(l.stop)
	l.wg.Wait()
	return l.seen
}

// TestBlueGreenDeploymentOnDev is an ECS-native BLUE_GREEN deployment on `berth dev` with
// the AWS CLI, Berth's load balancer and real containers: web:1 serves production; an
// update to web:2 starts green tasks in the alternate target group, moves the test
// listener's rule to green and pauses at the POST_TEST_TRAFFIC_SHIFT PAUSE hook — the
// test listener answers green while production still answers blue; continue-service-
// deployment moves production to green, the blue task drains away and the deployment
// ends SUCCESSFUL. A client GETs production all along: no request fails.
func TestBlueGreenDeploymentOnDev(t *testing.T) {
	t.Parallel() // see main_test.go
	f := newBlueGreenFixture(t)
	f.createService(`{"strategy":"BLUE_GREEN","bakeTimeInMinutes":0,"lifecycleHooks":[{"targetType":"PAUSE","lifecycleStages":["POST_TEST_TRAFFIC_SHIFT"],"timeoutConfiguration":{"timeoutInMinutes":30,"action":"ROLLBACK"}}]}`)
	poll(t, "web:1 serves production", func() (string, bool) { c := color(f.prodPort); return c, c == "blue" })
	poll(t, "first deployment", func() (string, bool) { d := f.current(); return d.Status, d.Status == "SUCCESSFUL" })

	l := startShiftLoad(f.prodPort)
	cli(t, f.root, f.env, "aws", "ecs", "update-service", "--service", "web", "--task-definition", "web:2")
	d := f.current()
	poll(t, "the pause hook", func() (string, bool) {
		d = f.current()
		return fmt.Sprintf("%+v", d), len(d.LifecycleHookDetails) == 1 && d.LifecycleHookDetails[0].Status == "AWAITING_ACTION"
	})
	if d.Status != "IN_PROGRESS" || d.LifecycleStage != "POST_TEST_TRAFFIC_SHIFT" || d.LifecycleHookDetails[0].TargetType != "PAUSE" ||
		!strings.HasPrefix(d.LifecycleHookDetails[0].HookId, "ecs-pause-") || d.TargetServiceRevision.RequestedTestTrafficWeight != 100 ||
		d.TargetServiceRevision.RequestedProductionTrafficWeight != 0 {
		t.Fatalf("paused deployment: %+v", d)
	}
	poll(t, "test rule weights", func() (string, bool) { w := f.weights(f.testRule); return w, w == "0/100" })
	if w := f.weights(f.prodRule); w != "100/0" {
		t.Errorf("production rule weights while paused: %s, want 100/0", w)
	}
	for range 5 {
		if c := color(f.testPort); c != "green" {
			t.Errorf("test listener while paused answered %s, want green", c)
		}
		if c := color(f.prodPort); c != "blue" {
			t.Errorf("production listener while paused answered %s, want blue", c)
		}
	}

	cli(t, f.root, f.env, "aws", "ecs", "continue-service-deployment", "--service-deployment-arn", d.ServiceDeploymentArn,
		"--hook-id", d.LifecycleHookDetails[0].HookId, "--action", "CONTINUE")
	poll(t, "production answers green", func() (string, bool) { c := color(f.prodPort); return c, c == "green" })
	poll(t, "deployment successful", func() (string, bool) {
		d = f.current()
		return fmt.Sprintf("%+v", d), d.Status == "SUCCESSFUL" && d.LifecycleStage == "CLEAN_UP"
	})
	if w := f.weights(f.prodRule); w != "0/100" {
		t.Errorf("production rule weights after the shift: %s, want 0/100", w)
	}
	seen := l.end()
	t.Logf("production requests through the shift: %d, failed %d, by answer %v", l.total.Load(), l.failed.Load(), seen)
	if l.failed.Load() != 0 || seen["green"] == 0 || seen["blue"] == 0 {
		t.Errorf("production through the shift: %v (%d failed of %d)", seen, l.failed.Load(), l.total.Load())
	}
	var running struct{ TaskArns []string }
	f.json(&running, "ecs", "list-tasks", "--service-name", "web", "--desired-status", "RUNNING")
	if len(running.TaskArns) != 1 {
		t.Errorf("tasks after the deployment: %v, want the one green task", running.TaskArns)
	}
}

// TestLinearDeploymentOnDev is a LINEAR deployment of 25% steps on `berth dev`: a PAUSE
// hook at PRODUCTION_TRAFFIC_SHIFT stops it at each of its four steps, where the
// production rule's weights and the deployment's requested production weight are 25,
// 50, 75 and 100% to the new revision (each step after a one-minute step bake, a second
// long under BERTH_DEV_BAKE_MINUTE). A second deployment back to web:1 is rolled back at
// its first step with continue-service-deployment ROLLBACK: all production traffic
// returns to the running revision and the deployment ends ROLLBACK_SUCCESSFUL. No
// production request fails throughout.
func TestLinearDeploymentOnDev(t *testing.T) {
	t.Parallel() // see main_test.go
	f := newBlueGreenFixture(t, "BERTH_DEV_BAKE_MINUTE=1s")
	f.createService(`{"strategy":"LINEAR","linearConfiguration":{"stepPercent":25,"stepBakeTimeInMinutes":1},"bakeTimeInMinutes":1,
	  "lifecycleHooks":[{"targetType":"PAUSE","lifecycleStages":["PRODUCTION_TRAFFIC_SHIFT"]}]}`)
	poll(t, "web:1 serves production", func() (string, bool) { c := color(f.prodPort); return c, c == "blue" })
	poll(t, "first deployment", func() (string, bool) { d := f.current(); return d.Status, d.Status == "SUCCESSFUL" })

	l := startShiftLoad(f.prodPort)
	cli(t, f.root, f.env, "aws", "ecs", "update-service", "--service", "web", "--task-definition", "web:2")
	// pause waits for the n-th hook run to await action and returns the deployment.
	pause := func(n int) deployment {
		var d deployment
		poll(t, fmt.Sprintf("hook %d", n), func() (string, bool) {
			d = f.current()
			return fmt.Sprintf("%+v", d), len(d.LifecycleHookDetails) == n && d.LifecycleHookDetails[n-1].Status == "AWAITING_ACTION"
		})
		return d
	}
	var steps []string
	for n := 1; n <= 4; n++ {
		d := pause(n)
		w := f.weights(f.prodRule)
		steps = append(steps, fmt.Sprintf("%g%% %s", d.TargetServiceRevision.RequestedProductionTrafficWeight, w))
		if d.LifecycleStage != "PRODUCTION_TRAFFIC_SHIFT" {
			t.Errorf("stage at step %d: %s", n, d.LifecycleStage)
		}
		cli(t, f.root, f.env, "aws", "ecs", "continue-service-deployment", "--service-deployment-arn", d.ServiceDeploymentArn,
			"--hook-id", d.LifecycleHookDetails[n-1].HookId)
	}
	if got, want := strings.Join(steps, ", "), "25% 75/25, 50% 50/50, 75% 25/75, 100% 0/100"; got != want {
		t.Errorf("linear steps: %s, want %s", got, want)
	}
	poll(t, "linear deployment successful", func() (string, bool) { d := f.current(); return d.Status, d.Status == "SUCCESSFUL" })
	poll(t, "production answers green", func() (string, bool) { c := color(f.prodPort); return c, c == "green" })

	// Back to web:1 on the blue side, rolled back at its first step.
	cli(t, f.root, f.env, "aws", "ecs", "update-service", "--service", "web", "--task-definition", "web:1")
	d := pause(1)
	if w := f.weights(f.prodRule); w != "25/75" {
		t.Errorf("production weights at the third deployment's first step: %s, want 25/75 (blue 25)", w)
	}
	cli(t, f.root, f.env, "aws", "ecs", "continue-service-deployment", "--service-deployment-arn", d.ServiceDeploymentArn,
		"--hook-id", d.LifecycleHookDetails[0].HookId, "--action", "ROLLBACK")
	poll(t, "rolled back", func() (string, bool) {
		var r struct{ ServiceDeployments []deployment }
		f.json(&r, "ecs", "describe-service-deployments", "--service-deployment-arns", d.ServiceDeploymentArn)
		return r.ServiceDeployments[0].Status, r.ServiceDeployments[0].Status == "ROLLBACK_SUCCESSFUL"
	})
	if w := f.weights(f.prodRule); w != "0/100" {
		t.Errorf("production weights after the rollback: %s, want 0/100", w)
	}
	for range 5 {
		if c := color(f.prodPort); c != "green" {
			t.Errorf("production after the rollback answered %s, want green", c)
		}
	}
	seen := l.end()
	t.Logf("production requests through two deployments: %d, failed %d, by answer %v", l.total.Load(), l.failed.Load(), seen)
	if l.failed.Load() != 0 {
		t.Errorf("production through the deployments: %v (%d failed of %d)", seen, l.failed.Load(), l.total.Load())
	}
}
