package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
)

// TestTaskSetsShiftWithContainers is issue 18's "a service under EXTERNAL with two task
// sets shifts 100% → 0% / 0% → 100% while both run", with real containers under `berth
// dev`, driven by the AWS CLI and counted from DescribeTasks: blue at 100% runs 2 tasks;
// green is created at 0% (no task), raised to 100% while blue still runs (2 + 2), then
// blue goes to 0% (0 + 2), is deleted and leaves the service's task sets.
func TestTaskSetsShiftWithContainers(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	c := ecs.New(ecs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(envValue(env, "AWS_ENDPOINT_URL")),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	cli(t, root, env, "bin/berth", "image", "demo")
	for _, family := range []string{"blue", "green"} {
		cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", family, "--container-definitions",
			fmt.Sprintf(`[{"name":"app","image":"%s/berth/demo:latest","memory":16,"command":["sleep","600"]}]`, reg))
	}
	cli(t, root, env, "aws", "ecs", "create-service", "--service-name", "web", "--desired-count", "2", "--deployment-controller", "type=EXTERNAL")
	t.Cleanup(func() {
		// No container outlives the test.
		_, _ = c.DeleteService(context.Background(), &ecs.DeleteServiceInput{Service: aws.String("web"), Force: aws.Bool(true)})
		waitFor(t, func() (string, bool) {
			lt, err := c.ListTasks(context.Background(), &ecs.ListTasksInput{DesiredStatus: "RUNNING"})
			if err != nil {
				return err.Error(), false
			}
			return fmt.Sprint(len(lt.TaskArns), " running"), len(lt.TaskArns) == 0
		})
	})
	taskSet := func(args ...string) string {
		t.Helper()
		var out struct {
			TaskSet struct {
				ID string `json:"id"`
			} `json:"taskSet"`
		}
		if err := json.Unmarshal([]byte(cli(t, root, env, "aws", append([]string{"ecs"}, args...)...)), &out); err != nil {
			t.Fatal(err)
		}
		return out.TaskSet.ID
	}
	// running counts the service's RUNNING tasks by group and task definition family
	// ("service:web blue"), and every task listed by "all lastStatus/desiredStatus"; for a
	// failure message, last keeps the stoppedReason and exit codes of one stopped task.
	var last string
	running := func() map[string]int {
		lt, err := c.ListTasks(ctx, &ecs.ListTasksInput{ServiceName: aws.String("web")})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := c.ListTasks(ctx, &ecs.ListTasksInput{ServiceName: aws.String("web"), DesiredStatus: "STOPPED"}); err == nil && len(st.TaskArns) > 0 {
			lt.TaskArns = append(lt.TaskArns, st.TaskArns[0])
		}
		out := map[string]int{}
		if len(lt.TaskArns) == 0 {
			return out
		}
		d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: lt.TaskArns})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range d.Tasks {
			out["all "+aws.ToString(tk.LastStatus)+"/"+aws.ToString(tk.DesiredStatus)]++
			switch aws.ToString(tk.LastStatus) {
			case "RUNNING":
				out[aws.ToString(tk.Group)+" "+familyOf(aws.ToString(tk.TaskDefinitionArn))]++
			case "STOPPED":
				// Shown in the failure message; never counted.
				last = aws.ToString(tk.StoppedReason)
				for _, ct := range tk.Containers {
					last += fmt.Sprintf(" (%s exit %d: %s)", aws.ToString(ct.Name), aws.ToInt32(ct.ExitCode), aws.ToString(ct.Reason))
				}
			}
		}
		return out
	}
	want := func(blue, green int) {
		t.Helper()
		waitFor(t, func() (string, bool) {
			m := running()
			var evs []string
			if d, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Services: []string{"web"}}); err == nil && len(d.Services) == 1 {
				for i, ev := range d.Services[0].Events {
					if i < 4 {
						evs = append(evs, aws.ToString(ev.Message))
					}
				}
			}
			return fmt.Sprint(m, " last stopped: ", last, " events: ", evs), m["service:web blue"] == blue && m["service:web green"] == green
		})
	}
	blue := taskSet("create-task-set", "--cluster", "default", "--service", "web", "--task-definition", "blue", "--scale", "value=100,unit=PERCENT")
	cli(t, root, env, "aws", "ecs", "update-service-primary-task-set", "--cluster", "default", "--service", "web", "--primary-task-set", blue)
	want(2, 0)
	green := taskSet("create-task-set", "--cluster", "default", "--service", "web", "--task-definition", "green", "--scale", "value=0,unit=PERCENT")
	want(2, 0)
	cli(t, root, env, "aws", "ecs", "update-task-set", "--cluster", "default", "--service", "web", "--task-set", green, "--scale", "value=100,unit=PERCENT")
	want(2, 2) // both run
	cli(t, root, env, "aws", "ecs", "update-service-primary-task-set", "--cluster", "default", "--service", "web", "--primary-task-set", green)
	cli(t, root, env, "aws", "ecs", "update-task-set", "--cluster", "default", "--service", "web", "--task-set", blue, "--scale", "value=0,unit=PERCENT")
	want(0, 2)
	cli(t, root, env, "aws", "ecs", "delete-task-set", "--cluster", "default", "--service", "web", "--task-set", blue)
	waitFor(t, func() (string, bool) {
		d, err := c.DescribeTaskSets(ctx, &ecs.DescribeTaskSetsInput{Cluster: aws.String("default"), Service: aws.String("web")})
		if err != nil {
			return err.Error(), false
		}
		if len(d.TaskSets) != 1 {
			return fmt.Sprint(len(d.TaskSets), " task sets"), false
		}
		g := d.TaskSets[0]
		return fmt.Sprint(aws.ToString(g.Status), " ", g.StabilityStatus, " ", g.RunningCount), aws.ToString(g.Id) == green &&
			aws.ToString(g.Status) == "PRIMARY" && g.RunningCount == 2 && g.StabilityStatus == "STEADY_STATE"
	})
	// Leave no container running when berth dev stops: its private containerd's shims would
	// still be writing under the test's temp dir as it is removed.
	cli(t, root, env, "aws", "ecs", "update-task-set", "--cluster", "default", "--service", "web", "--task-set", green, "--scale", "value=0,unit=PERCENT")
	waitFor(t, func() (string, bool) {
		m := running()
		return fmt.Sprint(m), m["all RUNNING/RUNNING"] == 0 && m["all RUNNING/STOPPED"] == 0
	})
}

// familyOf returns the family of a task definition ARN.
func familyOf(arn string) string {
	for i := len(arn) - 1; i >= 0; i-- {
		if arn[i] == ':' {
			arn = arn[:i]
			break
		}
	}
	for i := len(arn) - 1; i >= 0; i-- {
		if arn[i] == '/' {
			return arn[i+1:]
		}
	}
	return arn
}
