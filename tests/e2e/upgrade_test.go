package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestRollingUpgrade follows docs/install.md's upgrade, one role at a time, under a
// steady RunTask workload (one call every 150 ms, each with its client token, the SDK
// retrying as clients do): each scheduler replica in turn, then the gateway, is stopped
// (SIGTERM, as systemctl restart does) and started from a new binary with another stamped
// version, which its /metrics' berth_build_info must show before the next. The one
// gateway has no load balancer in front: calls during its restart are refused and the
// SDK retries them (30 attempts, backoff up to 2 s). No call fails
// for good, every RunTask placed exactly one task, and every task runs its 3 s to exit 0:
// nothing lost, nothing done twice.
func TestRollingUpgrade(t *testing.T) {
	c := harness.Start(t, harness.Options{GatewayReplicas: true})
	const version = "v0.0.0-upgraded"
	newBin := filepath.Join(t.TempDir(), "berth")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/berthhq/berth/pkg/buildinfo.Version="+version, "-o", newBin, "./cmd/berth")
	build.Dir = repoRoot(t)
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the new berth: %v\n%s", err, out)
	}

	reg, err := c.ECS.RegisterTaskDefinition(t.Context(), &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("upgrade-short"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("app"), Image: aws.String(c.Image), Memory: aws.Int32(16), Cpu: 10,
			Command: []string{"sleep", "3"}, Essential: aws.Bool(true),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	td := aws.ToString(reg.TaskDefinition.TaskDefinitionArn)

	client := c.NewECSClient(30)
	type call struct {
		name string
		err  error
	}
	var (
		mu    sync.Mutex
		calls []call
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("up-%04d", i)
				res, err := client.RunTask(t.Context(), &ecs.RunTaskInput{Cluster: aws.String(harness.ClusterName),
					TaskDefinition: aws.String(td), StartedBy: aws.String(name), ClientToken: aws.String(name)})
				if err == nil && len(res.Failures) > 0 {
					err = fmt.Errorf("failure %s", aws.ToString(res.Failures[0].Reason))
				}
				mu.Lock()
				calls = append(calls, call{name, err})
				mu.Unlock()
			}()
		}
	}()

	metrics := func(addr string) string {
		res, err := http.Get(addr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	upgrade := func(p *harness.Proc, metricsURL string, extraArgs ...string) {
		t.Helper()
		time.Sleep(2 * time.Second) // the workload runs on the old binary a while
		if err := p.Stop(); err != nil {
			t.Errorf("stop %s: %v", p.Name, err)
		}
		p.Path = newBin
		p.Args = append(p.Args, extraArgs...)
		if err := p.Start(); err != nil {
			t.Fatalf("start %s on the new binary: %v", p.Name, err)
		}
		c.Eventually(t.Context(), 60*time.Second, p.Name+" serving the new version", func() error {
			if m := metrics(metricsURL); !strings.Contains(m, `version="`+version+`"`) {
				return fmt.Errorf("%s /metrics has no berth_build_info of %s", p.Name, version)
			}
			return nil
		})
		t.Logf("%s upgraded to %s", p.Name, version)
	}
	for i, s := range c.Schedulers {
		upgrade(s, "http://"+c.SchedulerAddrs[i])
	}
	upgrade(c.Gateway, c.GatewayURL, "--metrics") // the harness's gateway serves no /metrics otherwise
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	failed := 0
	for _, cl := range calls {
		if cl.err != nil {
			failed++
			t.Errorf("RunTask %s failed for good: %v", cl.name, cl.err)
		}
	}
	c.WaitAgentsConnected(t.Context())
	var tasks []ecstypes.Task
	c.Eventually(t.Context(), 90*time.Second, "every task stopped", func() error {
		var err error
		if tasks, err = c.Tasks(t.Context()); err != nil {
			return err
		}
		for _, task := range tasks {
			if aws.ToString(task.LastStatus) != "STOPPED" {
				return fmt.Errorf("task %s is %s", aws.ToString(task.TaskArn), aws.ToString(task.LastStatus))
			}
		}
		return nil
	})
	by := map[string]int{}
	for _, task := range tasks {
		by[aws.ToString(task.StartedBy)]++
		if ctrs := task.Containers; len(ctrs) != 1 || ctrs[0].ExitCode == nil || *ctrs[0].ExitCode != 0 {
			var ctrs []string
			for _, ct := range task.Containers {
				ctrs = append(ctrs, fmt.Sprintf("%s exit %v reason %q", aws.ToString(ct.Name), aws.ToInt32(ct.ExitCode), aws.ToString(ct.Reason)))
			}
			t.Errorf("task %s (%s) did not run to exit 0: stopCode %s, reason %q, containers %v", aws.ToString(task.TaskArn),
				aws.ToString(task.StartedBy), task.StopCode, aws.ToString(task.StoppedReason), ctrs)
		}
	}
	for _, cl := range calls {
		if cl.err == nil && by[cl.name] != 1 {
			t.Errorf("RunTask %s placed %d tasks, want 1", cl.name, by[cl.name])
		}
	}
	t.Logf("rolling upgrade figures: %d RunTask calls, %d failed for good, %d tasks, all run to exit 0 unless reported above", len(calls), failed, len(tasks))
}
