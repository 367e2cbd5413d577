package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
)

// TestSecondUpdateKeepsServiceRunning is issue 12's "a second update during a rollout can
// take a service to zero", with real containers: a service with 2 RUNNING tasks whose
// first rollout is still IN_PROGRESS (the tasks have not yet counted toward
// minimumHealthyPercent), then `aws ecs update-service` to an image that cannot be
// pulled. With minimumHealthyPercent 100 the running count must stay at 2 and the first
// deployment must stay listed while the new tasks fail.
func TestSecondUpdateKeepsServiceRunning(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	// A stability wait longer than the test window: the first rollout stays IN_PROGRESS.
	env := append(devEnv(t, filepath.Join(dir, "data")), "BERTH_TASK_STABLE_AFTER=5m")
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	c := ecs.New(ecs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(envValue(env, "AWS_ENDPOINT_URL")),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cli(t, root, env, "bin/berth", "image", "demo")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--container-definitions",
		fmt.Sprintf(`[{"name":"web","image":"%s/berth/demo:latest","memory":16,"command":["sleep","600"]}]`, reg))
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "web", "--container-definitions",
		fmt.Sprintf(`[{"name":"web","image":"%s/berth/no-such-image:latest","memory":16,"command":["sleep","600"]}]`, reg))
	cli(t, root, env, "aws", "ecs", "create-service", "--service-name", "web", "--task-definition", "web:1", "--desired-count", "2",
		"--deployment-configuration", "minimumHealthyPercent=100,maximumPercent=200")
	t.Cleanup(func() {
		// No container outlives the test.
		_, _ = c.DeleteService(context.Background(), &ecs.DeleteServiceInput{Service: aws.String("web"), Force: aws.Bool(true)})
		waitFor(t, func() (string, bool) {
			lt, err := c.ListTasks(context.Background(), &ecs.ListTasksInput{DesiredStatus: "RUNNING"})
			if err != nil {
				return err.Error(), false
			}
			r, err := c.ListTasks(context.Background(), &ecs.ListTasksInput{DesiredStatus: "STOPPED"})
			if err != nil {
				return err.Error(), false
			}
			stopped := 0
			if len(r.TaskArns) > 0 {
				d, err := c.DescribeTasks(context.Background(), &ecs.DescribeTasksInput{Tasks: r.TaskArns})
				if err != nil {
					return err.Error(), false
				}
				for _, tk := range d.Tasks {
					if aws.ToString(tk.LastStatus) == "STOPPED" {
						stopped++
					}
				}
			}
			return fmt.Sprintf("%d running, %d of %d stopped", len(lt.TaskArns), stopped, len(r.TaskArns)), len(lt.TaskArns) == 0 && stopped == len(r.TaskArns)
		})
	})
	// describe returns the service's runningCount and its deployments by id ("status
	// rolloutState").
	describe := func() (int32, map[string]string) {
		t.Helper()
		d, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Services: []string{"web"}})
		if err != nil || len(d.Services) != 1 {
			t.Fatalf("DescribeServices: %v %v", err, d)
		}
		deps := map[string]string{}
		for _, dep := range d.Services[0].Deployments {
			deps[aws.ToString(dep.Id)] = aws.ToString(dep.Status) + " " + string(dep.RolloutState)
		}
		return d.Services[0].RunningCount, deps
	}
	var first string
	waitFor(t, func() (string, bool) {
		n, deps := describe()
		for id, st := range deps {
			first = id
			if st != "PRIMARY IN_PROGRESS" {
				return fmt.Sprint(n, deps), false
			}
		}
		return fmt.Sprint(n, deps), n == 2 && len(deps) == 1
	})

	cli(t, root, env, "aws", "ecs", "update-service", "--service", "web", "--task-definition", "web:2")
	sawNew := false
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		n, deps := describe()
		if n < 2 {
			t.Fatalf("runningCount fell to %d during the second rollout; deployments %v", n, deps)
		}
		if _, ok := deps[first]; !ok {
			t.Fatalf("the first deployment %s vanished while its tasks run: %v", first, deps)
		}
		sawNew = sawNew || len(deps) == 2
	}
	if !sawNew {
		t.Fatal("the update started no second deployment")
	}
}
