package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// awsCLI runs `aws ecs ARGS... --output json` with env and decodes its output.
func awsCLI(t *testing.T, ctx context.Context, env []string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.CommandContext(ctx, "aws", append(append([]string{"ecs"}, args...), "--output", "json")...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("aws ecs %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("aws ecs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// requireMembers fails unless obj (a decoded AWS answer) has each member with the JSON
// text given (a "" text only asks for presence).
func requireMembers(t *testing.T, what string, obj any, want map[string]string) {
	t.Helper()
	m, ok := obj.(map[string]any)
	if !ok {
		t.Fatalf("%s: %T, want an object", what, obj)
	}
	for k, text := range want {
		v, ok := m[k]
		if !ok {
			t.Errorf("%s lacks %q", what, k)
			continue
		}
		got, _ := json.Marshal(v)
		if text != "" && string(got) != text {
			t.Errorf("%s.%s = %s, want %s", what, k, got, text)
		}
	}
}

func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestDeployToolLoop drives the loop third-party deploy tools run against ECS — describe
// the service's task definition, copy it, change the image and the environment, register
// the copy, update the service, wait for services-stable — once as a bash tool on the AWS
// CLI + jq does (testdata/deploy_cli.sh) and once as a Python tool on boto3 does
// (testdata/deploy_boto3.py, run by boto3Python), against a real `bin/berth dev` (gateway, scheduler, agent,
// private containerd, registry). Every answer passes the ECS model's required-member check
// (devEnv's proxy). It also checks, in the CLI's raw JSON, that the members AWS returns
// empty are there and the optional ones AWS leaves out are not. On a gateway that omits
// empty lists, both loops fail at register: the copy's volumes is null.
func TestDeployToolLoop(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq not found in PATH (apt-get install jq; make test installs it)")
	}
	python := boto3Python(t)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	registry := envValue(env, "BERTH_REGISTRY_ADDR")
	v1, v2 := registry+"/berth/demo:latest", registry+"/berth/demo:v2"
	for _, ref := range []string{v1, v2} {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "bin/berth"), "image", "demo", ref)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("berth image demo %s: %v\n%s", ref, err, out)
		}
	}

	for _, tool := range []struct {
		name    string
		command []string
	}{
		{"aws-cli+jq", []string{"bash", "testdata/deploy_cli.sh"}},
		{"boto3", []string{python, "testdata/deploy_boto3.py"}},
	} {
		t.Run(tool.name, func(t *testing.T) {
			service := "deploy-" + strings.TrimSuffix(strings.ReplaceAll(tool.name, "+", "-"), "-jq")
			awsCLI(t, ctx, env, "register-task-definition", "--family", service, "--container-definitions",
				`[{"name":"app","image":"`+v1+`","memory":32,"command":["sleep","3600"]}]`)
			// An alarms block without names, which AWS (and the model) answers with
			// "alarmNames": [].
			awsCLI(t, ctx, env, "create-service", "--service-name", service, "--task-definition", service,
				"--desired-count", "1", "--deployment-configuration",
				`{"maximumPercent":200,"minimumHealthyPercent":100,"alarms":{"alarmNames":[],"enable":false,"rollback":false}}`)

			// Deploy tools update a service that is already steady.
			wait := exec.CommandContext(ctx, "aws", "ecs", "wait", "services-stable", "--services", service)
			wait.Env = env
			if out, err := wait.CombinedOutput(); err != nil {
				t.Fatalf("aws ecs wait services-stable before the deploy: %v\n%s", err, out)
			}

			cmd := exec.CommandContext(ctx, tool.command[0], append(tool.command[1:], service, v2)...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s deploy loop failed: %v\n%s", tool.name, err, out)
			}
			t.Logf("%s:\n%s", tool.name, out)
			if !strings.Contains(string(out), "stable") {
				t.Errorf("%s did not reach services-stable:\n%s", tool.name, out)
			}

			svc := dig(awsCLI(t, ctx, env, "describe-services", "--services", service), "services", 0)
			td := dig(svc, "taskDefinition").(string)
			if !strings.HasSuffix(td, ":task-definition/"+service+":2") || dig(svc, "runningCount") != 1.0 ||
				len(dig(svc, "deployments").([]any)) != 1 {
				t.Errorf("after the deploy: taskDefinition %s, runningCount %v, deployments %v", td, dig(svc, "runningCount"), dig(svc, "deployments"))
			}
			if a := dig(svc, "deploymentConfiguration", "alarms"); a == nil {
				t.Errorf("deploymentConfiguration.alarms was dropped: %v", dig(svc, "deploymentConfiguration"))
			}
			desc := awsCLI(t, ctx, env, "describe-task-definition", "--task-definition", td)
			c := dig(desc, "taskDefinition", "containerDefinitions", 0)
			if dig(c, "image") != v2 {
				t.Errorf("registered copy's image = %v, want %s", dig(c, "image"), v2)
			}
			env2, _ := json.Marshal(dig(c, "environment"))
			if string(env2) != `[{"name":"VERSION","value":"2"}]` {
				t.Errorf("registered copy's environment = %s", env2)
			}
			tasks := awsCLI(t, ctx, env, "list-tasks", "--service-name", service, "--desired-status", "RUNNING")
			arns := dig(tasks, "taskArns").([]any)
			if len(arns) != 1 {
				t.Fatalf("running tasks of %s: %v", service, arns)
			}
			task := dig(awsCLI(t, ctx, env, "describe-tasks", "--tasks", arns[0].(string)), "tasks", 0)
			if dig(task, "taskDefinitionArn") != td || dig(task, "containers", 0, "image") != v2 {
				t.Errorf("running task: taskDefinitionArn %v image %v, want %s %s", dig(task, "taskDefinitionArn"), dig(task, "containers", 0, "image"), td, v2)
			}
		})
	}
	if t.Failed() {
		return
	}

	// Shapes, in the CLI's raw JSON: members AWS returns empty are present
	// (ecs-examples-2014-11-13.json; issue 12), optional ones it leaves out are absent.
	desc := awsCLI(t, ctx, env, "describe-task-definition", "--task-definition", "deploy-aws-cli")
	if _, ok := desc["tags"]; ok {
		t.Errorf("describe-task-definition without --include TAGS answered tags: %v", desc["tags"])
	}
	td := dig(desc, "taskDefinition")
	requireMembers(t, "taskDefinition", td, map[string]string{
		"volumes": "[]", "placementConstraints": "[]", "requiresAttributes": "", "compatibilities": "",
	})
	requireMembers(t, "containerDefinitions[0]", dig(td, "containerDefinitions", 0), map[string]string{
		"portMappings": "[]", "mountPoints": "[]", "volumesFrom": "[]", "essential": "true", "cpu": "0", "environment": "",
	})
	svc := dig(awsCLI(t, ctx, env, "describe-services", "--services", "deploy-boto3"), "services", 0)
	requireMembers(t, "service", svc, map[string]string{
		"loadBalancers": "[]", "serviceRegistries": "[]", "placementConstraints": "[]", "placementStrategy": "[]", "events": "",
	})
	if _, ok := svc.(map[string]any)["tags"]; ok {
		t.Errorf("describe-services without --include TAGS answered tags")
	}
	requireMembers(t, "deploymentConfiguration.alarms", dig(svc, "deploymentConfiguration", "alarms"), map[string]string{
		"alarmNames": "[]", "enable": "false", "rollback": "false",
	})

	run := awsCLI(t, ctx, env, "run-task", "--task-definition", "deploy-boto3", "--tags", "key=team,value=core")
	taskARN := dig(run, "tasks", 0, "taskArn").(string)
	task := dig(awsCLI(t, ctx, env, "describe-tasks", "--tasks", taskARN), "tasks", 0)
	requireMembers(t, "task", task, map[string]string{"attachments": "[]", "overrides": ""})
	requireMembers(t, "task.overrides", dig(task, "overrides"), map[string]string{"containerOverrides": "", "inferenceAcceleratorOverrides": "[]"})
	requireMembers(t, "task.containers[0]", dig(task, "containers", 0), map[string]string{"networkBindings": "", "networkInterfaces": "[]"})
	if _, ok := task.(map[string]any)["tags"]; ok {
		t.Errorf("describe-tasks without --include TAGS answered tags")
	}
	tagged := dig(awsCLI(t, ctx, env, "describe-tasks", "--tasks", taskARN, "--include", "TAGS"), "tasks", 0)
	requireMembers(t, "task with --include TAGS", tagged, map[string]string{"tags": `[{"key":"team","value":"core"}]`})
	// containerArn: container/{cluster}/{taskId}/{36-char UUID}.
	taskID := taskARN[strings.LastIndex(taskARN, "/")+1:]
	carn, _ := dig(task, "containers", 0, "containerArn").(string)
	prefix := strings.Replace(taskARN, ":task/", ":container/", 1) + "/"
	if !strings.HasPrefix(carn, prefix) || len(carn)-len(prefix) != 36 || !strings.Contains(carn, "/default/"+taskID+"/") {
		t.Errorf("containerArn %q, want %s{36-char UUID}", carn, prefix)
	}
	awsCLI(t, ctx, env, "stop-task", "--task", taskARN)
	for _, s := range []string{"deploy-aws-cli", "deploy-boto3"} {
		awsCLI(t, ctx, env, "delete-service", "--service", s, "--force")
	}
}

// TestDescribedServiceRoundTripWithSDK is the Go deploy tool's half of TestDeployToolLoop
// (issue 35): describe a service with the AWS SDK for Go v2 and create a copy from what
// was described, with the SDK's own input validation on. The SDK refuses an input that
// lacks a member the model marks required ("missing required field,
// CreateServiceInput.DeploymentConfiguration.Alarms.AlarmNames"), so every nested
// required member of the described service must come back, even empty: AWS answers
// "alarms": {"alarmNames": [], "enable": false, "rollback": false} for a service without
// alarms (DescribeServices API reference, DeploymentAlarms: alarmNames, enable and
// rollback are required).
func TestDescribedServiceRoundTripWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	s := startAPIStack(t, "000000000000")
	c := s.clients["000000000000"]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("copied"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("app"), Image: aws.String("img"), Memory: aws.Int32(32),
			HealthCheck: &ecstypes.HealthCheck{Command: []string{"CMD", "true"}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []*ecs.CreateServiceInput{
		// No deploymentConfiguration: AWS answers its defaults, alarms disabled.
		{ServiceName: aws.String("plain")},
		{ServiceName: aws.String("percents"), DeploymentConfiguration: &ecstypes.DeploymentConfiguration{
			MaximumPercent: aws.Int32(150), MinimumHealthyPercent: aws.Int32(50),
			DeploymentCircuitBreaker: &ecstypes.DeploymentCircuitBreaker{Enable: true, Rollback: true},
		}},
		{ServiceName: aws.String("no-alarms"), DeploymentConfiguration: &ecstypes.DeploymentConfiguration{
			Alarms: &ecstypes.DeploymentAlarms{AlarmNames: []string{}},
		}},
	} {
		name := aws.ToString(in.ServiceName)
		in.TaskDefinition, in.DesiredCount = aws.String("copied"), aws.Int32(0)
		if _, err := c.CreateService(ctx, in); err != nil {
			t.Fatalf("CreateService %s: %v", name, err)
		}
		d, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Services: []string{name}})
		if err != nil || len(d.Services) != 1 {
			t.Fatalf("DescribeServices %s: %+v %v", name, d, err)
		}
		svc := d.Services[0]
		if a := svc.DeploymentConfiguration.Alarms; a == nil || a.AlarmNames == nil || a.Enable || a.Rollback {
			t.Errorf("%s: deploymentConfiguration.alarms = %+v, want alarmNames [] and both false", name, a)
		}
		copyIn := &ecs.CreateServiceInput{
			ServiceName: aws.String(name + "-copy"), TaskDefinition: svc.TaskDefinition, DesiredCount: aws.Int32(svc.DesiredCount),
			DeploymentConfiguration: svc.DeploymentConfiguration, DeploymentController: svc.DeploymentController,
			PlacementConstraints: svc.PlacementConstraints, PlacementStrategy: svc.PlacementStrategy,
			LoadBalancers: svc.LoadBalancers, ServiceRegistries: svc.ServiceRegistries,
			NetworkConfiguration: svc.NetworkConfiguration, CapacityProviderStrategy: svc.CapacityProviderStrategy,
			SchedulingStrategy: svc.SchedulingStrategy, PropagateTags: svc.PropagateTags,
			EnableECSManagedTags: svc.EnableECSManagedTags,
		}
		if _, err := c.CreateService(ctx, copyIn); err != nil {
			t.Errorf("CreateService from the described %s: %v", name, err)
		}
		if _, err := c.UpdateService(ctx, &ecs.UpdateServiceInput{Service: aws.String(name), DeploymentConfiguration: svc.DeploymentConfiguration}); err != nil {
			t.Errorf("UpdateService with the described %s's deploymentConfiguration: %v", name, err)
		}
	}
	// The described task definition's nested required members come back too
	// (healthCheck.command), so a copy of it registers.
	td, err := c.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String("copied")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: td.TaskDefinition.Family, ContainerDefinitions: td.TaskDefinition.ContainerDefinitions,
		Volumes: td.TaskDefinition.Volumes, PlacementConstraints: td.TaskDefinition.PlacementConstraints,
	}); err != nil {
		t.Errorf("RegisterTaskDefinition from the described copy: %v", err)
	}
}

// boto3Python returns the python3 the deploy loop runs: python3 on PATH if its boto3
// reaches Berth through AWS_ENDPOINT_URL, else Debian's /usr/bin/python3 if its does —
// Debian's python3-boto3 (which make deps installs) lives in Debian's python3, which a
// python3 earlier on PATH (pyenv) does not see. A boto3 older than 1.28 ignores
// AWS_ENDPOINT_URL and would call AWS itself: the test skips saying so.
func boto3Python(t *testing.T) string {
	t.Helper()
	const probe = `import boto3, sys; print(boto3.__version__); sys.exit(0 if boto3.client("ecs").meta.endpoint_url == "http://127.0.0.1:9" else 3)`
	var old []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		cmd := exec.Command(py, "-c", probe)
		cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL=http://127.0.0.1:9", "AWS_DEFAULT_REGION=us-east-1")
		out, err := cmd.Output()
		if err == nil {
			return py
		}
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
			old = append(old, py+" has boto3 "+strings.TrimSpace(string(out)))
		}
	}
	if len(old) > 0 {
		t.Skipf("no python3 with a boto3 that honours AWS_ENDPOINT_URL (1.28 or later): %s", strings.Join(old, "; "))
	}
	t.Skip("boto3 is not importable by python3 or /usr/bin/python3 (apt-get install python3-boto3; make test installs it)")
	return ""
}
