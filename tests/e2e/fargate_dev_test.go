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

// TestFargateRunTaskDev runs a FARGATE task with the AWS CLI on `berth dev`'s own agent
// (every host takes Fargate tasks by default) and waits for it to be RUNNING as a real
// container: the answers show launchType FARGATE, capacityProviderName FARGATE,
// platformVersion 1.4.0, platformFamily Linux and no containerInstanceArn; it runs with
// the agent's awsvpc networking, as any awsvpc task: an ElasticNetworkInterface attachment,
// ATTACHED, whose private address the container's networkInterfaces show.
func TestFargateRunTaskDev(t *testing.T) {
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
	cli(t, root, env, "bin/berth", "image", "demo")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "fg", "--requires-compatibilities", "FARGATE",
		"--network-mode", "awsvpc", "--cpu", "256", "--memory", "512", "--container-definitions",
		fmt.Sprintf(`[{"name":"app","image":"%s/berth/demo:latest","command":["sleep","600"]}]`, reg))
	out := cli(t, root, env, "aws", "ecs", "run-task", "--task-definition", "fg", "--launch-type", "FARGATE", "--output", "json",
		"--network-configuration", "awsvpcConfiguration={subnets=[subnet-0a1b2c],assignPublicIp=DISABLED}")
	var run struct {
		Tasks []struct {
			TaskArn string `json:"taskArn"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil || len(run.Tasks) != 1 {
		t.Fatalf("run-task: %v\n%s", err, out)
	}
	arn := run.Tasks[0].TaskArn
	t.Cleanup(func() {
		_, _ = c.StopTask(context.Background(), &ecs.StopTaskInput{Task: aws.String(arn)})
		waitFor(t, func() (string, bool) {
			d, err := c.DescribeTasks(context.Background(), &ecs.DescribeTasksInput{Tasks: []string{arn}})
			if err != nil || len(d.Tasks) != 1 {
				return fmt.Sprint(err), false
			}
			return aws.ToString(d.Tasks[0].LastStatus), aws.ToString(d.Tasks[0].LastStatus) == "STOPPED"
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(t, func() (string, bool) {
		d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: []string{arn}})
		if err != nil || len(d.Tasks) != 1 {
			return fmt.Sprint(err), false
		}
		tk := d.Tasks[0]
		if tk.LaunchType != "FARGATE" || aws.ToString(tk.CapacityProviderName) != "FARGATE" || aws.ToString(tk.PlatformVersion) != "1.4.0" ||
			aws.ToString(tk.PlatformFamily) != "Linux" || tk.ContainerInstanceArn != nil {
			t.Fatalf("FARGATE task %+v", tk)
		}
		return aws.ToString(tk.LastStatus), aws.ToString(tk.LastStatus) == "RUNNING"
	})
	d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: []string{arn}})
	if err != nil || len(d.Tasks) != 1 {
		t.Fatalf("DescribeTasks: %v", err)
	}
	tk := d.Tasks[0]
	ip := ""
	for _, a := range tk.Attachments {
		if aws.ToString(a.Type) != "ElasticNetworkInterface" || aws.ToString(a.Status) != "ATTACHED" {
			continue
		}
		for _, kv := range a.Details {
			if aws.ToString(kv.Name) == "privateIPv4Address" {
				ip = aws.ToString(kv.Value)
			}
		}
	}
	if ip == "" || len(tk.Containers) != 1 || len(tk.Containers[0].NetworkInterfaces) != 1 || aws.ToString(tk.Containers[0].NetworkInterfaces[0].PrivateIpv4Address) != ip {
		t.Errorf("FARGATE task's network: attachments %+v, containers %+v; want an ATTACHED ENI whose address the container shows", tk.Attachments, tk.Containers)
	}
}
