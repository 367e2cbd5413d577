package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
)

// The operations issue 18 adds, through the real gateway and scheduler with the AWS SDK
// for Go v2 (typed errors) and the AWS CLI: task sets, StopServiceDeployment and
// ContinueServiceDeployment, the agent-facing actions; and a probe over every operation
// of the ECS model.

// registerTaskDef registers family with one small container and returns its ARN.
func registerTaskDef(t *testing.T, ctx context.Context, c *ecs.Client, family string) string {
	t.Helper()
	out, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String(family),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("app"), Image: aws.String("127.0.0.1:5000/app:1"), Memory: aws.Int32(64), Essential: aws.Bool(true),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.TaskDefinition.TaskDefinitionArn)
}

// TestTaskSetsWithSDK: a service under the EXTERNAL deployment controller and its task
// sets, with AWS's states and errors.
func TestTaskSetsWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	c := stack.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("ts")}); err != nil {
		t.Fatal(err)
	}
	blue, green := registerTaskDef(t, ctx, c, "blue"), registerTaskDef(t, ctx, c, "green")
	ext := &ecstypes.DeploymentController{Type: ecstypes.DeploymentControllerTypeExternal}
	svc, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("ts"), ServiceName: aws.String("web"), DesiredCount: aws.Int32(4), DeploymentController: ext})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Service.DeploymentController.Type != ecstypes.DeploymentControllerTypeExternal || len(svc.Service.Deployments) != 0 {
		t.Fatalf("service %+v", svc.Service)
	}
	if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("ts"), ServiceName: aws.String("rolling"), DesiredCount: aws.Int32(0), TaskDefinition: aws.String(blue)}); err != nil {
		t.Fatal(err)
	}

	a, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskDefinition: aws.String(blue),
		ExternalId: aws.String("blue-1"), Tags: []ecstypes.Tag{{Key: aws.String("color"), Value: aws.String("blue")}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := a.TaskSet
	if aws.ToString(ts.Status) != "ACTIVE" || ts.ComputedDesiredCount != 4 || ts.StabilityStatus != ecstypes.StabilityStatusStabilizing ||
		ts.Scale.Value != 100 || ts.Scale.Unit != ecstypes.ScaleUnitPercent || !strings.Contains(aws.ToString(ts.TaskSetArn), ":task-set/ts/web/ecs-svc/") ||
		aws.ToString(ts.ExternalId) != "blue-1" || len(ts.Tags) != 1 {
		t.Fatalf("CreateTaskSet %+v", ts)
	}
	b, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskDefinition: aws.String(green),
		Scale: &ecstypes.Scale{Unit: ecstypes.ScaleUnitPercent, Value: 30}})
	if err != nil {
		t.Fatal(err)
	}
	if b.TaskSet.ComputedDesiredCount != 2 { // ceil(4 × 0.3)
		t.Fatalf("computedDesiredCount %d, want 2", b.TaskSet.ComputedDesiredCount)
	}
	if _, err := c.UpdateServicePrimaryTaskSet(ctx, &ecs.UpdateServicePrimaryTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), PrimaryTaskSet: ts.TaskSetArn}); err != nil {
		t.Fatal(err)
	}
	up, err := c.UpdateTaskSet(ctx, &ecs.UpdateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskSet: b.TaskSet.Id,
		Scale: &ecstypes.Scale{Unit: ecstypes.ScaleUnitPercent, Value: 100}})
	if err != nil || up.TaskSet.ComputedDesiredCount != 4 {
		t.Fatalf("UpdateTaskSet %+v %v", up, err)
	}
	prim, err := c.UpdateServicePrimaryTaskSet(ctx, &ecs.UpdateServicePrimaryTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), PrimaryTaskSet: b.TaskSet.Id})
	if err != nil || aws.ToString(prim.TaskSet.Status) != "PRIMARY" {
		t.Fatalf("UpdateServicePrimaryTaskSet %+v %v", prim, err)
	}
	d, err := c.DescribeTaskSets(ctx, &ecs.DescribeTaskSetsInput{Cluster: aws.String("ts"), Service: aws.String("web"),
		TaskSets: []string{aws.ToString(ts.Id), aws.ToString(b.TaskSet.TaskSetArn), "ecs-svc/0"}, Include: []ecstypes.TaskSetField{ecstypes.TaskSetFieldTags}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.TaskSets) != 2 || len(d.Failures) != 1 || aws.ToString(d.Failures[0].Reason) != "MISSING" ||
		aws.ToString(d.TaskSets[0].Status) != "ACTIVE" || aws.ToString(d.TaskSets[1].Status) != "PRIMARY" || len(d.TaskSets[0].Tags) != 1 {
		t.Fatalf("DescribeTaskSets %+v %+v", d.TaskSets, d.Failures)
	}
	// Tags of a task set by its ARN.
	if _, err := c.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: b.TaskSet.TaskSetArn, Tags: []ecstypes.Tag{{Key: aws.String("color"), Value: aws.String("green")}}}); err != nil {
		t.Fatal(err)
	}
	lt, err := c.ListTagsForResource(ctx, &ecs.ListTagsForResourceInput{ResourceArn: b.TaskSet.TaskSetArn})
	if err != nil || len(lt.Tags) != 1 || aws.ToString(lt.Tags[0].Value) != "green" {
		t.Fatalf("ListTagsForResource of a task set: %+v %v", lt, err)
	}
	if _, err := c.UntagResource(ctx, &ecs.UntagResourceInput{ResourceArn: b.TaskSet.TaskSetArn, TagKeys: []string{"color"}}); err != nil {
		t.Fatal(err)
	}
	desc, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String("ts"), Services: []string{"web"}})
	if err != nil || len(desc.Services[0].TaskSets) != 2 || aws.ToString(desc.Services[0].TaskDefinition) != green {
		t.Fatalf("DescribeServices %+v %v", desc, err)
	}

	// Task sets take loadBalancers, serviceRegistries and networkConfiguration, checked as
	// CreateService checks them (TestTaskSetsBehindLoadBalancerOnDev runs them): a target
	// group or Cloud Map service that does not exist, and a networkConfiguration for a
	// bridge task definition, are refused naming them — with none of the old "not
	// supported for task sets" wording.
	for what, tc := range map[string]struct {
		in   *ecs.CreateTaskSetInput
		want string
	}{
		"loadBalancers": {&ecs.CreateTaskSetInput{LoadBalancers: []ecstypes.LoadBalancer{{TargetGroupArn: aws.String("arn:aws:elasticloadbalancing:us-east-1:" + acct + ":targetgroup/tg/0123456789abcdef"), ContainerName: aws.String("app"), ContainerPort: aws.Int32(80)}}},
			"the target group does not exist"},
		"serviceRegistries": {&ecs.CreateTaskSetInput{ServiceRegistries: []ecstypes.ServiceRegistry{{RegistryArn: aws.String("arn:aws:servicediscovery:us-east-1:" + acct + ":service/srv-0123456789abcdef")}}},
			"the Cloud Map service does not exist"},
		"networkConfiguration": {&ecs.CreateTaskSetInput{NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-1"}}}},
			"Network Configuration is not valid for the given networkMode"},
	} {
		in := tc.in
		in.Cluster, in.Service, in.TaskDefinition = aws.String("ts"), aws.String("web"), aws.String(blue)
		_, err := c.CreateTaskSet(ctx, in)
		var ipe *ecstypes.InvalidParameterException
		if !errors.As(err, &ipe) || !strings.Contains(ipe.ErrorMessage(), tc.want) || strings.Contains(ipe.ErrorMessage(), "not supported for task sets") {
			t.Errorf("CreateTaskSet with %s: %v, want InvalidParameterException %q", what, err, tc.want)
		}
	}

	// AWS's errors, as the SDK's typed errors.
	for _, tc := range []struct {
		what  string
		err   error
		typed func(error) bool
	}{
		{"CreateTaskSet on an ECS service", func() error {
			_, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("rolling"), TaskDefinition: aws.String(blue)})
			return err
		}(), isType[*ecstypes.InvalidParameterException]},
		{"CreateTaskSet unknown service", func() error {
			_, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("nope"), TaskDefinition: aws.String(blue)})
			return err
		}(), isType[*ecstypes.ServiceNotFoundException]},
		{"CreateTaskSet unknown cluster", func() error {
			_, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("nope"), Service: aws.String("web"), TaskDefinition: aws.String(blue)})
			return err
		}(), isType[*ecstypes.ClusterNotFoundException]},
		{"CreateTaskSet unknown task definition", func() error {
			_, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskDefinition: aws.String("nope:9")})
			return err
		}(), isType[*ecstypes.ClientException]},
		{"CreateTaskSet scale above 100", func() error {
			_, err := c.CreateTaskSet(ctx, &ecs.CreateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskDefinition: aws.String(blue), Scale: &ecstypes.Scale{Value: 150}})
			return err
		}(), isType[*ecstypes.InvalidParameterException]},
		{"UpdateTaskSet unknown", func() error {
			_, err := c.UpdateTaskSet(ctx, &ecs.UpdateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskSet: aws.String("ecs-svc/1"), Scale: &ecstypes.Scale{Value: 1}})
			return err
		}(), isType[*ecstypes.TaskSetNotFoundException]},
		{"DeleteTaskSet scaled above 0", func() error {
			_, err := c.DeleteTaskSet(ctx, &ecs.DeleteTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskSet: b.TaskSet.Id})
			return err
		}(), isType[*ecstypes.InvalidParameterException]},
		{"DescribeTaskSets of an ECS service", func() error {
			_, err := c.DescribeTaskSets(ctx, &ecs.DescribeTaskSetsInput{Cluster: aws.String("ts"), Service: aws.String("rolling")})
			return err
		}(), isType[*ecstypes.InvalidParameterException]},
		{"UpdateService taskDefinition of an EXTERNAL service", func() error {
			_, err := c.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskDefinition: aws.String(blue)})
			return err
		}(), isType[*ecstypes.InvalidParameterException]},
		{"CreateService CODE_DEPLOY", func() error {
			_, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("ts"), ServiceName: aws.String("cd"), DesiredCount: aws.Int32(1), TaskDefinition: aws.String(blue),
				DeploymentController: &ecstypes.DeploymentController{Type: ecstypes.DeploymentControllerTypeCodeDeploy}})
			return err
		}(), isType[*ecstypes.UnsupportedFeatureException]},
	} {
		if !tc.typed(tc.err) {
			t.Errorf("%s: %v", tc.what, tc.err)
		}
	}

	// Delete: unforced once scaled to 0, then DRAINING.
	if _, err := c.UpdateTaskSet(ctx, &ecs.UpdateTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskSet: ts.Id, Scale: &ecstypes.Scale{Unit: ecstypes.ScaleUnitPercent, Value: 0}}); err != nil {
		t.Fatal(err)
	}
	del, err := c.DeleteTaskSet(ctx, &ecs.DeleteTaskSetInput{Cluster: aws.String("ts"), Service: aws.String("web"), TaskSet: ts.TaskSetArn})
	if err != nil || aws.ToString(del.TaskSet.Status) != "DRAINING" || del.TaskSet.ComputedDesiredCount != 0 {
		t.Fatalf("DeleteTaskSet %+v %v", del, err)
	}
	stack.cliTaskSets(t, ctx, acct, green)
}

// cli runs `aws ecs ARGS` against the stack with acct's key (or the given key) and
// returns stdout, stderr and the error; it skips the test when the CLI is missing.
func (s *apiStack) cli(t *testing.T, ctx context.Context, key [2]string, args ...string) (string, string, error) {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; the CLI half of this test needs it")
	}
	cmd := exec.CommandContext(ctx, "aws", append(append([]string{"ecs"}, args...), "--endpoint-url", s.url, "--region", "us-east-1", "--output", "json")...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "AWS_ACCESS_KEY_ID="+key[0], "AWS_SECRET_ACCESS_KEY="+key[1], "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_PAGER=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// cliTaskSets drives task sets with the AWS CLI.
func (s *apiStack) cliTaskSets(t *testing.T, ctx context.Context, acct, td string) {
	k := s.keys[acct]
	if out, stderr, err := s.cli(t, ctx, k, "create-service", "--cluster", "ts", "--service-name", "cli", "--desired-count", "2",
		"--deployment-controller", "type=EXTERNAL"); err != nil {
		t.Fatalf("create-service: %s %s %v", out, stderr, err)
	}
	out, stderr, err := s.cli(t, ctx, k, "create-task-set", "--cluster", "ts", "--service", "cli", "--task-definition", td,
		"--scale", "value=50,unit=PERCENT", "--external-id", "cli-1")
	var created struct {
		TaskSet struct {
			ID                   string `json:"id"`
			Status               string `json:"status"`
			ComputedDesiredCount int    `json:"computedDesiredCount"`
			StabilityStatus      string `json:"stabilityStatus"`
		} `json:"taskSet"`
	}
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || created.TaskSet.Status != "ACTIVE" || created.TaskSet.ComputedDesiredCount != 1 || created.TaskSet.StabilityStatus != "STABILIZING" {
		t.Fatalf("create-task-set: %s %s %v", out, stderr, err)
	}
	if out, stderr, err := s.cli(t, ctx, k, "update-task-set", "--cluster", "ts", "--service", "cli", "--task-set", created.TaskSet.ID, "--scale", "value=100,unit=PERCENT"); err != nil || !strings.Contains(out, `"computedDesiredCount": 2`) {
		t.Fatalf("update-task-set: %s %s %v", out, stderr, err)
	}
	if out, stderr, err := s.cli(t, ctx, k, "update-service-primary-task-set", "--cluster", "ts", "--service", "cli", "--primary-task-set", created.TaskSet.ID); err != nil || !strings.Contains(out, `"status": "PRIMARY"`) {
		t.Fatalf("update-service-primary-task-set: %s %s %v", out, stderr, err)
	}
	if out, stderr, err := s.cli(t, ctx, k, "describe-task-sets", "--cluster", "ts", "--service", "cli"); err != nil || !strings.Contains(out, `"externalId": "cli-1"`) {
		t.Fatalf("describe-task-sets: %s %s %v", out, stderr, err)
	}
	_, stderr, err = s.cli(t, ctx, k, "delete-task-set", "--cluster", "ts", "--service", "cli", "--task-set", "ecs-svc/1")
	if err == nil || !strings.Contains(stderr, "(TaskSetNotFoundException)") {
		t.Fatalf("delete-task-set unknown: %s %v", stderr, err)
	}
	if out, stderr, err := s.cli(t, ctx, k, "delete-task-set", "--cluster", "ts", "--service", "cli", "--task-set", created.TaskSet.ID, "--force"); err != nil || !strings.Contains(out, `"status": "DRAINING"`) {
		t.Fatalf("delete-task-set --force: %s %s %v", out, stderr, err)
	}
}

// TestStopServiceDeploymentWithSDK: a deployment that cannot place its task (no
// container instance) stays in progress; ABORT stops it, ROLLBACK has nothing to return
// to, finished and unknown deployments answer AWS's typed errors; the AWS CLI too.
func TestStopServiceDeploymentWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	c := stack.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("sd")}); err != nil {
		t.Fatal(err)
	}
	td := registerTaskDef(t, ctx, c, "sd")
	svc, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("sd"), ServiceName: aws.String("web"), DesiredCount: aws.Int32(1), TaskDefinition: aws.String(td)})
	if err != nil {
		t.Fatal(err)
	}
	dep := aws.ToString(svc.Service.CurrentServiceDeployment)
	_, err = c.StopServiceDeployment(ctx, &ecs.StopServiceDeploymentInput{ServiceDeploymentArn: aws.String(dep), StopType: ecstypes.StopServiceDeploymentStopTypeRollback})
	if !isType[*ecstypes.ConflictException](err) {
		t.Fatalf("ROLLBACK without an earlier completed deployment: %v", err)
	}
	_, err = c.StopServiceDeployment(ctx, &ecs.StopServiceDeploymentInput{ServiceDeploymentArn: aws.String(dep + "1")})
	if !isType[*ecstypes.ServiceDeploymentNotFoundException](err) {
		t.Fatalf("unknown deployment: %v", err)
	}
	_, err = c.ContinueServiceDeployment(ctx, &ecs.ContinueServiceDeploymentInput{ServiceDeploymentArn: aws.String(dep), HookId: aws.String("hook-1")})
	if !isType[*ecstypes.InvalidParameterException](err) {
		t.Fatalf("ContinueServiceDeployment: %v", err)
	}
	_, err = c.ContinueServiceDeployment(ctx, &ecs.ContinueServiceDeploymentInput{ServiceDeploymentArn: aws.String(dep + "1"), HookId: aws.String("hook-1")})
	if !isType[*ecstypes.ServiceDeploymentNotFoundException](err) {
		t.Fatalf("ContinueServiceDeployment unknown: %v", err)
	}
	// The AWS CLI: ABORT stops it; stopping it again is a conflict.
	k := stack.keys[acct]
	out, stderr, err := stack.cli(t, ctx, k, "stop-service-deployment", "--service-deployment-arn", dep, "--stop-type", "ABORT")
	if err != nil || !strings.Contains(out, dep) {
		t.Fatalf("stop-service-deployment: %s %s %v", out, stderr, err)
	}
	d, err := c.DescribeServiceDeployments(ctx, &ecs.DescribeServiceDeploymentsInput{ServiceDeploymentArns: []string{dep}})
	if err != nil || len(d.ServiceDeployments) != 1 || d.ServiceDeployments[0].Status != ecstypes.ServiceDeploymentStatusStopped {
		t.Fatalf("after ABORT: %+v %v", d, err)
	}
	l, err := c.ListServiceDeployments(ctx, &ecs.ListServiceDeploymentsInput{Cluster: aws.String("sd"), Service: aws.String("web"),
		Status: []ecstypes.ServiceDeploymentStatus{ecstypes.ServiceDeploymentStatusStopped}})
	if err != nil || len(l.ServiceDeployments) != 1 || aws.ToString(l.ServiceDeployments[0].ServiceDeploymentArn) != dep {
		t.Fatalf("ListServiceDeployments STOPPED: %+v %v", l, err)
	}
	_, stderr, err = stack.cli(t, ctx, k, "stop-service-deployment", "--service-deployment-arn", dep)
	if err == nil || !strings.Contains(stderr, "(ConflictException)") {
		t.Fatalf("stop-service-deployment again: %s %v", stderr, err)
	}
}

// TestAgentActionsWithSDK: a host registered through the ECS API reports its task's state
// with its own instance credential through the gateway, as an ECS-compatible agent does;
// another instance's credential is refused; DiscoverPollEndpoint answers the gateway;
// UpdateContainerAgent answers MissingVersionException; the AWS CLI with the instance key.
func TestAgentActionsWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	c := stack.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("ag")}); err != nil {
		t.Fatal(err)
	}
	res := []ecstypes.Resource{
		{Name: aws.String("CPU"), Type: aws.String("INTEGER"), IntegerValue: 1024},
		{Name: aws.String("MEMORY"), Type: aws.String("INTEGER"), IntegerValue: 1024},
	}
	register := func(host string) (string, *ecs.Client, [2]string) {
		t.Helper()
		r, err := c.RegisterContainerInstance(ctx, &ecs.RegisterContainerInstanceInput{Cluster: aws.String("ag"), TotalResources: res,
			InstanceIdentityDocument: aws.String(`{"instanceId":"` + host + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ci := aws.ToString(r.ContainerInstance.ContainerInstanceArn)
		key, err := stack.sched.Admin().CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: acct, ContainerInstanceArn: ci}))
		if err != nil {
			t.Fatal(err)
		}
		k := [2]string{key.Msg.GetAccessKey().GetAccessKeyId(), key.Msg.GetSecretAccessKey()}
		stack.keys[ci] = k
		return ci, stack.client(ci, "us-east-1"), k
	}
	ci1, agent1, key1 := register("i-1")
	ci2, agent2, _ := register("i-2")
	td := registerTaskDef(t, ctx, c, "ag")
	st, err := c.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String("ag"), TaskDefinition: aws.String(td), ContainerInstances: []string{ci1}})
	if err != nil || len(st.Tasks) != 1 {
		t.Fatalf("StartTask %+v %v", st, err)
	}
	task := aws.ToString(st.Tasks[0].TaskArn)

	_, err = agent2.SubmitTaskStateChange(ctx, &ecs.SubmitTaskStateChangeInput{Cluster: aws.String("ag"), Task: aws.String(task), Status: aws.String("RUNNING")})
	if !isType[*ecstypes.AccessDeniedException](err) {
		t.Fatalf("another instance's task: %v", err)
	}
	_, err = agent1.SubmitTaskStateChange(ctx, &ecs.SubmitTaskStateChangeInput{Cluster: aws.String("ag"), Task: aws.String("0123456789abcdef0123456789abcdef"), Status: aws.String("RUNNING")})
	if !isType[*ecstypes.InvalidParameterException](err) {
		t.Fatalf("unknown task: %v", err)
	}
	_, err = agent1.SubmitTaskStateChange(ctx, &ecs.SubmitTaskStateChangeInput{Cluster: aws.String("nope"), Task: aws.String(task), Status: aws.String("RUNNING")})
	if !isType[*ecstypes.ClusterNotFoundException](err) {
		t.Fatalf("unknown cluster: %v", err)
	}
	_, err = agent1.ListClusters(ctx, &ecs.ListClustersInput{})
	if apiErrorCode(err) != "AccessDeniedException" {
		t.Fatalf("an instance key calling ListClusters: %v", err)
	}
	ack, err := agent1.SubmitTaskStateChange(ctx, &ecs.SubmitTaskStateChangeInput{Cluster: aws.String("ag"), Task: aws.String(task), Status: aws.String("RUNNING"),
		Containers: []ecstypes.ContainerStateChange{{ContainerName: aws.String("app"), Status: aws.String("RUNNING"), RuntimeId: aws.String("rt-1")}}})
	if err != nil || aws.ToString(ack.Acknowledgment) != "ACK" {
		t.Fatalf("SubmitTaskStateChange: %+v %v", ack, err)
	}
	dt, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String("ag"), Tasks: []string{task}})
	if err != nil || aws.ToString(dt.Tasks[0].LastStatus) != "RUNNING" || aws.ToString(dt.Tasks[0].Containers[0].RuntimeId) != "rt-1" {
		t.Fatalf("after RUNNING: %+v %v", dt, err)
	}
	if _, err := agent1.SubmitContainerStateChange(ctx, &ecs.SubmitContainerStateChangeInput{Cluster: aws.String("ag"), Task: aws.String(task),
		ContainerName: aws.String("app"), Status: aws.String("STOPPED"), ExitCode: aws.Int32(2), Reason: aws.String("exit 2")}); err != nil {
		t.Fatal(err)
	}
	_, err = agent1.SubmitAttachmentStateChanges(ctx, &ecs.SubmitAttachmentStateChangesInput{Cluster: aws.String("ag"),
		Attachments: []ecstypes.AttachmentStateChange{{AttachmentArn: aws.String("arn:aws:ecs:us-east-1:" + acct + ":attachment/none"), Status: aws.String("ATTACHED")}}})
	if !isType[*ecstypes.InvalidParameterException](err) {
		t.Fatalf("unknown attachment: %v", err)
	}
	ep, err := agent1.DiscoverPollEndpoint(ctx, &ecs.DiscoverPollEndpointInput{Cluster: aws.String("ag"), ContainerInstance: aws.String(ci1)})
	if err != nil || aws.ToString(ep.Endpoint) != stack.url+"/" || aws.ToString(ep.TelemetryEndpoint) != stack.url+"/" {
		t.Fatalf("DiscoverPollEndpoint %+v %v (gateway %s)", ep, err, stack.url)
	}
	_, err = agent1.DiscoverPollEndpoint(ctx, &ecs.DiscoverPollEndpointInput{ContainerInstance: aws.String(ci2)})
	if !isType[*ecstypes.AccessDeniedException](err) {
		t.Fatalf("DiscoverPollEndpoint for another instance: %v", err)
	}
	_, err = c.UpdateContainerAgent(ctx, &ecs.UpdateContainerAgentInput{Cluster: aws.String("ag"), ContainerInstance: aws.String(ci1)})
	if !isType[*ecstypes.MissingVersionException](err) {
		t.Fatalf("UpdateContainerAgent: %v", err)
	}

	// The AWS CLI with the instance key: STOPPED with a reason.
	out, stderr, err := stack.cli(t, ctx, key1, "submit-task-state-change", "--cluster", "ag", "--task", task, "--status", "STOPPED", "--reason", "Essential container in task exited")
	if err != nil || !strings.Contains(out, `"acknowledgment": "ACK"`) {
		t.Fatalf("submit-task-state-change: %s %s %v", out, stderr, err)
	}
	dt, err = c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String("ag"), Tasks: []string{task}})
	if err != nil || aws.ToString(dt.Tasks[0].LastStatus) != "STOPPED" || dt.Tasks[0].StopCode != ecstypes.TaskStopCodeEssentialContainerExited ||
		aws.ToInt32(dt.Tasks[0].Containers[0].ExitCode) != 2 {
		t.Fatalf("after STOPPED: %+v %v", dt.Tasks, err)
	}
	if out, stderr, err := stack.cli(t, ctx, key1, "discover-poll-endpoint", "--cluster", "ag"); err != nil || !strings.Contains(out, stack.url+"/") {
		t.Fatalf("discover-poll-endpoint: %s %s %v", out, stderr, err)
	}
	_, stderr, err = stack.cli(t, ctx, stack.keys[acct], "update-container-agent", "--cluster", "ag", "--container-instance", ci1)
	if err == nil || !strings.Contains(stderr, "(MissingVersionException)") {
		t.Fatalf("update-container-agent: %s %v", stderr, err)
	}
}

// TestOperationProbe calls every operation of the ECS model (read from
// api/ecs/ecs-2014-11-13.json) through the gateway with a request holding only the
// model's required members (placeholder values, minimalRequest) and counts
// them as control.Operations classifies them: an unsupported one must answer
// UnsupportedFeatureException naming it, and no other may; none may answer a server
// error. It logs the counts and holds the floor of real operations.
func TestOperationProbe(t *testing.T) {
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := os.ReadFile("../../api/ecs/ecs-2014-11-13.json")
	if err != nil {
		t.Fatal(err)
	}
	var model struct {
		Operations map[string]struct {
			Input struct {
				Shape string `json:"shape"`
			} `json:"input"`
		} `json:"operations"`
		Shapes map[string]modelShape `json:"shapes"`
	}
	if err := json.Unmarshal(b, &model); err != nil {
		t.Fatal(err)
	}
	ops := make([]string, 0, len(model.Operations))
	for op := range model.Operations {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	k := stack.keys[acct]
	signer := v4.NewSigner()
	count := map[control.OperationStatus]int{}
	for _, op := range ops {
		body, err := json.Marshal(minimalRequest(model.Shapes, model.Operations[op].Input.Shape, 0))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, stack.url+"/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113."+op)
		sum := sha256.Sum256(body)
		if err := signer.SignHTTP(ctx, aws.Credentials{AccessKeyID: k[0], SecretAccessKey: k[1]}, req, hex.EncodeToString(sum[:]), "ecs", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode >= 500 {
			t.Errorf("%s: %d %s", op, resp.StatusCode, raw)
		}
		unsupported := e.Type == "UnsupportedFeatureException" && strings.HasPrefix(e.Message, "Berth does not support "+op)
		rule, ok := control.Operations[op]
		if !ok {
			t.Errorf("%s: not classified in control.Operations", op)
			continue
		}
		if (rule.Status == control.Unsupported) != unsupported {
			t.Errorf("%s: classified %s, answered %d %s", op, rule.Status, resp.StatusCode, raw)
		}
		count[rule.Status]++
	}
	t.Logf("%d operations: %d real, %d stub, %d unsupported", len(ops), count[control.Real], count[control.Stub], count[control.Unsupported])
	// Issue 18's bar: at least 60 real operations and no stub.
	const minReal = 60
	if count[control.Real] < minReal {
		t.Errorf("%d real operations, want at least %d", count[control.Real], minReal)
	}
	if count[control.Stub] != 0 {
		t.Errorf("%d stub operations, want none", count[control.Stub])
	}
	if len(ops) != 77 {
		t.Errorf("the model has %d operations, the probe expected 77", len(ops))
	}
}

// modelShape is the part of an ECS model shape minimalRequest reads.
type modelShape struct {
	Type     string   `json:"type"`
	Required []string `json:"required"`
	Enum     []string `json:"enum"`
	Members  map[string]struct {
		Shape string `json:"shape"`
	} `json:"members"`
	Member struct {
		Shape string `json:"shape"`
	} `json:"member"`
}

// minimalRequest builds a value of shape with only its required members, each a
// placeholder of its type (the first enum value for an enum), so that the gateway's
// validation of required members passes and the operation itself answers.
func minimalRequest(shapes map[string]modelShape, shape string, depth int) any {
	sh := shapes[shape]
	switch sh.Type {
	case "structure":
		out := map[string]any{}
		if depth > 6 {
			return out
		}
		for _, name := range sh.Required {
			out[name] = minimalRequest(shapes, sh.Members[name].Shape, depth+1)
		}
		return out
	case "list":
		return []any{minimalRequest(shapes, sh.Member.Shape, depth+1)}
	case "map":
		return map[string]any{}
	case "string":
		if len(sh.Enum) > 0 {
			return sh.Enum[0]
		}
		return "probe"
	case "integer", "long", "double", "float":
		return 1
	case "boolean":
		return false
	case "timestamp":
		return 0
	}
	return nil
}

// TestExpressGatewayRefusedWithSDK: CreateExpressGatewayService answers
// UnsupportedFeatureException with the reason that holds — Berth has Application Load
// Balancers, but HTTP and TCP listeners only, no certificates and no Application Auto
// Scaling — and what to run instead (issue 35).
func TestExpressGatewayRefusedWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	c := stack.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateExpressGatewayService(ctx, &ecs.CreateExpressGatewayServiceInput{
		InfrastructureRoleArn: aws.String("arn:aws:iam::" + acct + ":role/express"),
		ExecutionRoleArn:      aws.String("arn:aws:iam::" + acct + ":role/exec"),
		PrimaryContainer:      &ecstypes.ExpressGatewayContainer{Image: aws.String("127.0.0.1:5000/app:1")},
	})
	var ufe *ecstypes.UnsupportedFeatureException
	if !errors.As(err, &ufe) {
		t.Fatalf("CreateExpressGatewayService: %v, want UnsupportedFeatureException", err)
	}
	msg := ufe.ErrorMessage()
	for _, want := range []string{"Berth does not support CreateExpressGatewayService", "HTTPS Application Load Balancer", "Application Auto Scaling", "Berth Application Load Balancer"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "Application Load Balancer and managed TLS, which Berth does not have") {
		t.Errorf("message %q says Berth has no Application Load Balancer", msg)
	}
}
