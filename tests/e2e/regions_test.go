package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
)

// signedAgent is an agent's side of the protocol through the gateway, signing for one
// region as `berth agent --region` does: it registers a host and holds a session,
// collecting what the scheduler sends.
type signedAgent struct {
	region string
	arn    string
	in     chan *agentv1.SessionResponse
}

func startSignedAgent(t *testing.T, ctx context.Context, s *apiStack, acct, region, cluster, host string) *signedAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	k := s.keys[acct]
	hc := gateway.NewH2CClient()
	// Cleanups run last-in first-out: the session ends before the stack's servers close.
	t.Cleanup(func() { cancel(); hc.CloseIdleConnections() })
	hc.Transport = sigv4client.New(hc.Transport, sigv4client.StaticCredentials(k[0], k[1]), region)
	c := agentv1connect.NewAgentServiceClient(hc, s.url)
	rr, err := c.Register(ctx, connect.NewRequest(&agentv1.RegisterRequest{
		Cluster: cluster, HostId: host, RuntimeReady: true, Resources: control.Resources(2048, 2048, nil, nil),
	}))
	if err != nil {
		t.Fatalf("register in %s: %v", region, err)
	}
	a := &signedAgent{region: region, arn: rr.Msg.GetContainerInstance().GetContainerInstanceArn(), in: make(chan *agentv1.SessionResponse, 64)}
	st := c.Session(ctx)
	t.Cleanup(func() { _ = st.CloseRequest() })
	if err := st.Send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: a.arn}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(a.in)
		for {
			m, err := st.Receive()
			if err != nil {
				return
			}
			a.in <- m
		}
	}()
	return a
}

// next returns the agent's next message, or nil when none comes within d.
func (a *signedAgent) next(t *testing.T, d time.Duration) *agentv1.SessionResponse {
	t.Helper()
	select {
	case m, ok := <-a.in:
		if !ok {
			t.Fatalf("%s agent: session ended", a.region)
		}
		return m
	case <-time.After(d):
		return nil
	}
}

// TestRegionsThroughGateway runs one account in us-east-1 and eu-west-1 through the real
// gateway and scheduler with the Go SDK (and the AWS CLI): the same cluster, family and
// host names in both regions stay apart; ARNs carry the region; an ARN of the other region
// is MISSING / not found; an agent signed for each region gets only its region's tasks;
// a region outside the allow-list is refused with AWS's InvalidSignatureException.
func TestRegionsThroughGateway(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "333333333333"
	stack := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	use, euw := stack.client(acct, "us-east-1"), stack.client(acct, "eu-west-1")
	regions := map[string]*ecs.Client{"us-east-1": use, "eu-west-1": euw}

	tds := map[string]string{}
	for region, c := range regions {
		cl, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("shared")})
		if err != nil {
			t.Fatalf("%s: %v", region, err)
		}
		if got, want := aws.ToString(cl.Cluster.ClusterArn), "arn:aws:ecs:"+region+":"+acct+":cluster/shared"; got != want {
			t.Errorf("clusterArn %s, want %s", got, want)
		}
		n := 1
		if region == "us-east-1" {
			n = 2 // us-east-1 gets two revisions, eu-west-1 one: counters are per region
		}
		for range n {
			td, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
				Family: aws.String("app"),
				ContainerDefinitions: []ecstypes.ContainerDefinition{{
					Name: aws.String("app"), Image: aws.String("busybox"), Cpu: 128, Memory: aws.Int32(128),
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			tds[region] = aws.ToString(td.TaskDefinition.TaskDefinitionArn)
		}
	}
	if tds["us-east-1"] != "arn:aws:ecs:us-east-1:"+acct+":task-definition/app:2" || tds["eu-west-1"] != "arn:aws:ecs:eu-west-1:"+acct+":task-definition/app:1" {
		t.Errorf("task definitions %v", tds)
	}

	agents := map[string]*signedAgent{}
	for region := range regions {
		a := startSignedAgent(t, ctx, stack, acct, region, "shared", "same-host")
		if !strings.Contains(a.arn, ":"+region+":") {
			t.Fatalf("%s agent registered as %s", region, a.arn)
		}
		if a.next(t, 10*time.Second).GetExpectedTasks() == nil {
			t.Fatalf("%s agent: no expected tasks", region)
		}
		agents[region] = a
	}

	// RunTask in eu-west-1 lands on the eu-west-1 instance only.
	run, err := euw.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("shared"), TaskDefinition: aws.String("app"), Count: aws.Int32(2)})
	if err != nil || len(run.Tasks) != 2 {
		t.Fatalf("RunTask: %v %v", run, err)
	}
	for _, task := range run.Tasks {
		if aws.ToString(task.ContainerInstanceArn) != agents["eu-west-1"].arn || !strings.HasPrefix(aws.ToString(task.TaskArn), "arn:aws:ecs:eu-west-1:") {
			t.Errorf("task %s on %s, want on %s", aws.ToString(task.TaskArn), aws.ToString(task.ContainerInstanceArn), agents["eu-west-1"].arn)
		}
	}
	for range 2 {
		if as := agents["eu-west-1"].next(t, 10*time.Second).GetAssignment(); as.GetTask().GetContainerInstanceArn() != agents["eu-west-1"].arn {
			t.Fatalf("eu-west-1 agent got %v", as)
		}
	}
	if m := agents["us-east-1"].next(t, 500*time.Millisecond); m.GetAssignment() != nil {
		t.Fatalf("us-east-1 agent got an eu-west-1 task: %v", m)
	}

	// Lists are per region; us-east-1 has no tasks.
	for region, c := range regions {
		cls, err := c.ListClusters(ctx, &ecs.ListClustersInput{})
		if err != nil || len(cls.ClusterArns) != 1 || !strings.Contains(cls.ClusterArns[0], ":"+region+":") {
			t.Errorf("%s ListClusters: %v %v", region, cls, err)
		}
		insts, err := c.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{Cluster: aws.String("shared")})
		if err != nil || len(insts.ContainerInstanceArns) != 1 || insts.ContainerInstanceArns[0] != agents[region].arn {
			t.Errorf("%s ListContainerInstances: %v %v", region, insts, err)
		}
		tasks, err := c.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String("shared")})
		want := map[string]int{"us-east-1": 0, "eu-west-1": 2}[region]
		if err != nil || len(tasks.TaskArns) != want {
			t.Errorf("%s ListTasks: %v %v; want %d", region, tasks, err, want)
		}
	}

	// The other region's ARNs name nothing here.
	d, err := use.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"arn:aws:ecs:eu-west-1:" + acct + ":cluster/shared"}})
	if err != nil || len(d.Clusters) != 0 || len(d.Failures) != 1 || aws.ToString(d.Failures[0].Reason) != "MISSING" {
		t.Errorf("DescribeClusters by an eu-west-1 ARN in us-east-1: %v %v", d, err)
	}
	dt, err := use.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String("shared"), Tasks: []string{aws.ToString(run.Tasks[0].TaskArn)}})
	if err != nil || len(dt.Tasks) != 0 || len(dt.Failures) != 1 || aws.ToString(dt.Failures[0].Reason) != "MISSING" {
		t.Errorf("DescribeTasks by an eu-west-1 ARN in us-east-1: %v %v", dt, err)
	}
	if _, err := use.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(tds["eu-west-1"])}); apiErrorCode(err) != "ClientException" {
		t.Errorf("DescribeTaskDefinition by an eu-west-1 ARN in us-east-1: %v", err)
	}

	// A region outside the allow-list (the public AWS regions) is refused as AWS does.
	_, err = stack.client(acct, "xx-nowhere-1").ListClusters(ctx, &ecs.ListClustersInput{})
	if apiErrorCode(err) != "InvalidSignatureException" || !strings.Contains(err.Error(), "Credential should be scoped to a valid region, not 'xx-nowhere-1'.") {
		t.Errorf("unknown region: %v", err)
	}

	// The same through the AWS CLI's --region.
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; the CLI half of this test needs it")
	}
	cli := func(region string, args ...string) (string, string, error) {
		k := stack.keys[acct]
		cmd := exec.CommandContext(ctx, "aws", append(args, "--endpoint-url", stack.url, "--region", region, "--output", "json")...)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AWS_") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "AWS_ACCESS_KEY_ID="+k[0], "AWS_SECRET_ACCESS_KEY="+k[1], "AWS_CONFIG_FILE=/dev/null",
			"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_PAGER=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, stderr, err := cli("eu-west-1", "ecs", "list-tasks", "--cluster", "shared")
	var lt struct{ TaskArns []string }
	if err != nil || json.Unmarshal([]byte(out), &lt) != nil || len(lt.TaskArns) != 2 || !strings.HasPrefix(lt.TaskArns[0], "arn:aws:ecs:eu-west-1:") {
		t.Errorf("aws --region eu-west-1 ecs list-tasks: %s %s %v", out, stderr, err)
	}
	out, stderr, err = cli("us-east-1", "ecs", "describe-clusters", "--clusters", "arn:aws:ecs:eu-west-1:"+acct+":cluster/shared")
	var raw struct {
		Clusters []any
		Failures []struct{ Reason string }
	}
	if err != nil || json.Unmarshal([]byte(out), &raw) != nil || len(raw.Clusters) != 0 || len(raw.Failures) != 1 || raw.Failures[0].Reason != "MISSING" {
		t.Errorf("aws --region us-east-1 describe-clusters (eu-west-1 ARN): %s %s %v", out, stderr, err)
	}
	_, stderr, err = cli("xx-nowhere-1", "ecs", "list-clusters")
	if err == nil || !strings.Contains(stderr, "(InvalidSignatureException)") || !strings.Contains(stderr, "Credential should be scoped to a valid region, not 'xx-nowhere-1'.") {
		t.Errorf("aws --region xx-nowhere-1: %s %v", stderr, err)
	}
}
