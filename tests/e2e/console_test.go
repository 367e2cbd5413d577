package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/chromedp/chromedp"
)

// screenshotDir is where TestConsoleInBrowser writes its screenshots (gitignored);
// BERTH_CONSOLE_SCREENSHOTS overrides it.
func screenshotDir(t *testing.T, root string) string {
	dir := os.Getenv("BERTH_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(root, "tests/e2e/screenshots/console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// findChromium returns Debian's chromium (or another Chrome) binary, or skips.
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not found in PATH (apt-get install chromium)")
	return ""
}

// TestConsoleInBrowser drives the web console of a real `berth dev` in headless Chromium:
// a wrong key is refused, the dev key signs in, the clusters, cluster, service, task,
// logs, instance and task definition pages show the running service, and scaling the
// service through the console (with its confirmation page) changes the running count on
// the open page without a reload (server-sent events from the scheduler's watch). Each
// page's screenshot is written to screenshotDir, plus the service page at phone width.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	chrome := findChromium(t)
	shots := screenshotDir(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	dev := startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	c := ecs.New(ecs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(dev.endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	})
	cli(t, root, env, "bin/berth", "image", "demo")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--container-definitions",
		fmt.Sprintf(`[{"name":"web","image":"%s/berth/demo:latest","memory":16,"command":["sleep","600"]}]`, reg))
	cli(t, root, env, "aws", "ecs", "create-service", "--service-name", "web", "--task-definition", "web:1", "--desired-count", "1")
	t.Cleanup(func() {
		_, _ = c.DeleteService(context.Background(), &ecs.DeleteServiceInput{Service: aws.String("web"), Force: aws.Bool(true)})
		// Every container stopped, not only every task told to stop: berth dev's shims must
		// not be writing under the test's temp dir when it is removed.
		waitFor(t, func() (string, bool) {
			lt, err := c.ListTasks(context.Background(), &ecs.ListTasksInput{DesiredStatus: "RUNNING"})
			if err != nil {
				return err.Error(), false
			}
			if len(lt.TaskArns) > 0 {
				return fmt.Sprint(len(lt.TaskArns), " running"), false
			}
			st, err := c.ListTasks(context.Background(), &ecs.ListTasksInput{DesiredStatus: "STOPPED"})
			if err != nil || len(st.TaskArns) == 0 {
				return fmt.Sprint(err), err == nil
			}
			d, err := c.DescribeTasks(context.Background(), &ecs.DescribeTasksInput{Tasks: st.TaskArns})
			if err != nil {
				return err.Error(), false
			}
			for _, tk := range d.Tasks {
				if aws.ToString(tk.LastStatus) != "STOPPED" {
					return aws.ToString(tk.TaskArn) + " is " + aws.ToString(tk.LastStatus), false
				}
			}
			return "", true
		})
	})
	waitFor(t, func() (string, bool) {
		d, err := c.DescribeServices(context.Background(), &ecs.DescribeServicesInput{Services: []string{"web"}})
		if err != nil || len(d.Services) != 1 {
			return fmt.Sprint(err), false
		}
		return fmt.Sprint(d.Services[0].RunningCount), d.Services[0].RunningCount == 1
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()

	// The first Run starts the browser; it must not carry the test's timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 4*time.Minute)
	defer cancel()

	base := dev.endpoint + "/console"
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](js)(ctx, tg)
			return err
		})
	}
	// text returns sel's text now (empty when absent), without waiting.
	text := func(sel string) string {
		t.Helper()
		q, _ := json.Marshal(sel)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){var e=document.querySelector(`+string(q)+`);return e?e.innerText:""})()`))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	// waitText polls sel's text until ok, without reloading the page.
	waitText := func(sel string, ok func(string) bool) string {
		t.Helper()
		for end := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			s := text(sel)
			if ok(s) {
				return s
			}
			if time.Now().After(end) {
				t.Fatalf("%s: text %q not as expected after 90s", sel, s)
			}
		}
	}

	// A wrong secret is refused, with the reason on the form.
	run("wrong key",
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.ID("#access_key_id")),
		chromedp.SendKeys(chromedp.ID("#access_key_id"), "test"),
		chromedp.SendKeys(chromedp.ID("#secret_access_key"), "not-the-secret"),
		chromedp.Click(chromedp.ID("#signin")),
		chromedp.WaitVisible(chromedp.ID("#signin-error")),
		shot("01-signin-refused"),
	)
	if msg := text("#signin-error"); !strings.Contains(msg, "wrong") {
		t.Fatalf("wrong key: message %q", msg)
	}
	// Pages need a session: the clusters page sends the browser back to sign in.
	run("no session", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("#signin")))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(loc, "/console/signin") {
		t.Fatalf("without a session /console/ went to %s", loc)
	}

	// The dev key signs in and lands on the clusters page.
	run("sign in",
		chromedp.SetValue(chromedp.ID("#access_key_id"), "test"),
		chromedp.SetValue(chromedp.ID("#secret_access_key"), "test"),
		chromedp.Click(chromedp.ID("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/clusters/default"]`)),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
		shot("02-clusters"),
	)
	run("cluster page",
		chromedp.Click(chromedp.CSS(`a[href="/console/clusters/default"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/clusters/default/services/web"]`)),
		shot("03-cluster"),
	)
	run("service page",
		chromedp.Click(chromedp.CSS(`a[href="/console/clusters/default/services/web"]`)),
		chromedp.WaitVisible(chromedp.ID("#running-count")),
	)
	if n := text("#running-count"); n != "1" {
		t.Fatalf("service page runningCount %q, want 1", n)
	}
	run("service screenshot", shot("04-service"))

	// Scale to 2 through the confirmation page.
	run("scale",
		chromedp.SetValue(chromedp.ID("#desired_count"), "2"),
		chromedp.Click(chromedp.ID("#scale")),
		chromedp.WaitVisible(chromedp.ID("#confirm")),
		shot("05-confirm-scale"),
		chromedp.Click(chromedp.ID("#confirm")),
		chromedp.WaitVisible(chromedp.ID("#running-count")),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
		// A marker a reload would lose: the count must change under it.
		eval(`window.berthMarker = 1`),
	)
	if d := text("#desired-count"); d != "2" {
		t.Fatalf("desiredCount after scaling %q, want 2", d)
	}
	waitText("#running-count", func(s string) bool { return s == "2" })
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.berthMarker === 1 && document.body.hasAttribute("data-refreshed")`))
	if err != nil || !marker {
		t.Fatal("the running count changed through a reload, not the live update")
	}
	run("service scaled", shot("06-service-scaled"))

	// A task, its logs.
	run("task page",
		chromedp.Navigate(base+"/clusters/default/services/web"),
		chromedp.WaitVisible(chromedp.CSS(`table.tasks a`)),
		chromedp.Click(chromedp.CSS(`table.tasks a`)),
		chromedp.WaitVisible(chromedp.ID("#task-status")),
		shot("07-task"),
	)
	if s := text("#task-status"); s != "RUNNING" {
		t.Fatalf("task page status %q", s)
	}
	taskURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	taskID := taskURL[strings.LastIndexByte(taskURL, '/')+1:]
	run("logs page",
		chromedp.Click(chromedp.ID("#open-logs")),
		chromedp.WaitVisible(chromedp.ID("#log-lines")),
	)
	waitText("#log-lines", func(s string) bool { return strings.Contains(s, "sleeping 10m0s") })
	run("logs screenshot", shot("08-logs"))

	// The container instance and the task definitions.
	run("instance page",
		chromedp.Navigate(base+"/clusters/default"),
		chromedp.WaitVisible(chromedp.CSS(`a[href^="/console/clusters/default/instances/"]`)),
		chromedp.Click(chromedp.CSS(`a[href^="/console/clusters/default/instances/"]`)),
		chromedp.WaitVisible(chromedp.ID("#instance-status")),
		shot("09-instance"),
	)
	run("task definitions",
		chromedp.Navigate(base+"/task-definitions"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/task-definitions/web/1"]`)),
		shot("10-task-definitions"),
		chromedp.Click(chromedp.CSS(`a[href="/console/task-definitions/web/1"]`)),
		chromedp.WaitVisible(chromedp.CSS("pre.json")),
		shot("11-task-definition"),
	)
	if js := text("pre.json"); !strings.Contains(js, `"family": "web"`) {
		t.Fatalf("task definition JSON: %.200s", js)
	}
	// Stop a task, then drain and activate the instance, each through its confirmation.
	run("stop task",
		chromedp.Navigate(base+"/clusters/default/tasks/"+taskID),
		chromedp.WaitVisible(chromedp.ID("#stop-task")),
		chromedp.SetValue(chromedp.ID("#reason"), "stopped by the console test"),
		chromedp.Click(chromedp.ID("#stop-task")),
		chromedp.WaitVisible(chromedp.ID("#confirm")),
		chromedp.Click(chromedp.ID("#confirm")),
		chromedp.WaitVisible(chromedp.ID("#task-status")),
	)
	waitText("#task-status", func(s string) bool { return s == "STOPPED" })
	if !strings.Contains(text("main"), "stopped by the console test") {
		t.Fatalf("stopped task page does not show the reason: %s", text("main"))
	}
	run("stopped task screenshot", shot("14-task-stopped"))
	run("drain",
		chromedp.Navigate(base+"/clusters/default"),
		chromedp.WaitVisible(chromedp.CSS(`a[href^="/console/clusters/default/instances/"]`)),
		chromedp.Click(chromedp.CSS(`a[href^="/console/clusters/default/instances/"]`)),
		chromedp.WaitVisible(chromedp.ID("#drain")),
		chromedp.Click(chromedp.ID("#drain")),
		chromedp.WaitVisible(chromedp.ID("#confirm")),
		shot("15-confirm-drain"),
		chromedp.Click(chromedp.ID("#confirm")),
		chromedp.WaitVisible(chromedp.ID("#activate")),
	)
	if s := text("#instance-status"); s != "DRAINING" {
		t.Fatalf("instance after drain: %q", s)
	}
	run("activate",
		chromedp.Click(chromedp.ID("#activate")),
		chromedp.WaitVisible(chromedp.ID("#confirm")),
		chromedp.Click(chromedp.ID("#confirm")),
		chromedp.WaitVisible(chromedp.ID("#drain")),
	)
	if s := text("#instance-status"); s != "ACTIVE" {
		t.Fatalf("instance after activate: %q", s)
	}

	// Phone width.
	run("phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(base+"/clusters/default/services/web"),
		chromedp.WaitVisible(chromedp.ID("#running-count")),
		shot("12-service-phone"),
		chromedp.Navigate(base+"/clusters/default/tasks/"+taskID),
		chromedp.WaitVisible(chromedp.ID("#task-status")),
		shot("13-task-phone"),
	)

	t.Logf("screenshots in %s", shots)
	checkDevMetrics(t, dev.endpoint)
}

// checkDevMetrics scrapes `berth dev`'s /metrics (on the gateway's address) after the
// console test's work and checks that the metrics of each part recorded it: API calls by
// action and code, placements, tasks by status, etcd txns, agent container starts.
func checkDevMetrics(t *testing.T, endpoint string) {
	t.Helper()
	checks := []struct {
		series string
		min    float64
	}{
		{`berth_gateway_requests_total{action="CreateService",code="200"}`, 1},
		{`berth_gateway_request_duration_seconds_count{action="RegisterTaskDefinition",code="200"}`, 1},
		{`berth_gateway_requests_total{action="UpdateService",code="200"}`, 1}, // the console's scale
		{`berth_scheduler_placements_total`, 2},
		{`berth_scheduler_tasks{status="RUNNING"}`, 2}, // cached for 5 s
		{`berth_scheduler_etcd_request_duration_seconds_count{op="txn"}`, 1},
		{`berth_agent_container_events_total{event="start"}`, 2},
		{`berth_agent_tasks{status="RUNNING"}`, 2},
		{`berth_agent_container_events_total{event="exit"}`, 1}, // the task the console stopped
		// The service's first deployment completes once its task has run 5 s
		// (BERTH_TASK_STABLE_AFTER).
		{`berth_scheduler_deployment_duration_seconds_count{state="COMPLETED"}`, 1},
		{`go_goroutines`, 1},
	}
	waitFor(t, func() (string, bool) {
		res, err := http.Get(endpoint + "/metrics")
		if err != nil {
			return err.Error(), false
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Sprintf("GET /metrics: %d %.200s", res.StatusCode, body), false
		}
		// value sums the samples of the series whose line starts with prefix.
		value := func(prefix string) float64 {
			sum := 0.0
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, prefix) {
					f := strings.Fields(line)
					if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
						sum += v
					}
				}
			}
			return sum
		}
		var missing []string
		for _, c := range checks {
			if v := value(c.series); v < c.min {
				missing = append(missing, fmt.Sprintf("%s = %v (want >= %v)", c.series, v, c.min))
			}
		}
		return strings.Join(missing, "; "), len(missing) == 0
	})
}
