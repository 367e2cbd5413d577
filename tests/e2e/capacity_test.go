package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

const cpAccount = "222233334444"

func cpASG(name string) *string {
	return aws.String("arn:aws:autoscaling:us-east-1:" + cpAccount + ":autoScalingGroup:1b2c3d4e-0000-0000-0000-000000000000:autoScalingGroupName/" + name)
}

// registerPoolInstance registers a container instance through the API (as the ECS agent
// does), in capacity provider pool ("" for none).
func registerPoolInstance(t *testing.T, ctx context.Context, c *ecs.Client, cluster, pool string) string {
	t.Helper()
	attrs := []ecstypes.Attribute{{Name: aws.String("ecs.os-type"), Value: aws.String("linux")}}
	if pool != "" {
		attrs = append(attrs, ecstypes.Attribute{Name: aws.String("berth.capacity-provider"), Value: aws.String(pool)})
	}
	out, err := c.RegisterContainerInstance(ctx, &ecs.RegisterContainerInstanceInput{Cluster: aws.String(cluster), Attributes: attrs,
		TotalResources: []ecstypes.Resource{
			{Name: aws.String("CPU"), Type: aws.String("INTEGER"), IntegerValue: 4096},
			{Name: aws.String("MEMORY"), Type: aws.String("INTEGER"), IntegerValue: 8192},
		}})
	if err != nil {
		t.Fatalf("RegisterContainerInstance: %v", err)
	}
	return aws.ToString(out.ContainerInstance.ContainerInstanceArn)
}

// TestCapacityProvidersWithSDK drives capacity providers, strategies, FARGATE and task
// protection's error cases through the real gateway with the AWS SDK for Go v2: typed
// errors, AWS's shapes (the stack checks every answer against the model), and the
// strategy base 1 / weights 1:3 over two pools placing 1 + 3:1 of the rest, by counting.
func TestCapacityProvidersWithSDK(t *testing.T) {
	st := startAPIStack(t, cpAccount)
	c := st.clients[cpAccount]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, n := range []string{"pool-a", "pool-b"} {
		out, err := c.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{Name: aws.String(n),
			AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProvider{AutoScalingGroupArn: cpASG(n),
				ManagedScaling: &ecstypes.ManagedScaling{Status: ecstypes.ManagedScalingStatusDisabled, TargetCapacity: aws.Int32(90)}}})
		if err != nil {
			t.Fatalf("CreateCapacityProvider %s: %v", n, err)
		}
		if out.CapacityProvider.Status != ecstypes.CapacityProviderStatusActive || aws.ToInt32(out.CapacityProvider.AutoScalingGroupProvider.ManagedScaling.InstanceWarmupPeriod) != 300 {
			t.Fatalf("created %+v", out.CapacityProvider)
		}
	}
	var ce *ecstypes.ClientException
	var ipe *ecstypes.InvalidParameterException
	if _, err := c.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{Name: aws.String("pool-a"),
		AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProvider{AutoScalingGroupArn: cpASG("other")}}); !errors.As(err, &ce) {
		t.Fatalf("duplicate provider: %v", err)
	}
	if _, err := c.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{Name: aws.String("ecs-pool"),
		AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProvider{AutoScalingGroupArn: cpASG("x")}}); !errors.As(err, &ipe) {
		t.Fatalf("reserved prefix: %v", err)
	}
	d, err := c.DescribeCapacityProviders(ctx, &ecs.DescribeCapacityProvidersInput{})
	if err != nil || len(d.CapacityProviders) != 4 || aws.ToString(d.CapacityProviders[0].Name) != "FARGATE" {
		t.Fatalf("DescribeCapacityProviders: %v %+v", err, d)
	}
	if _, err := c.UpdateCapacityProvider(ctx, &ecs.UpdateCapacityProviderInput{Name: aws.String("FARGATE"), AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProviderUpdate{}}); !errors.As(err, &ce) {
		t.Fatalf("update FARGATE: %v", err)
	}
	u, err := c.UpdateCapacityProvider(ctx, &ecs.UpdateCapacityProviderInput{Name: aws.String("pool-b"),
		AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProviderUpdate{ManagedDraining: ecstypes.ManagedDrainingDisabled}})
	if err != nil || u.CapacityProvider.UpdateStatus != ecstypes.CapacityProviderUpdateStatusUpdateComplete || u.CapacityProvider.AutoScalingGroupProvider.ManagedDraining != ecstypes.ManagedDrainingDisabled {
		t.Fatalf("UpdateCapacityProvider: %v %+v", err, u)
	}

	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("cp")}); err != nil {
		t.Fatal(err)
	}
	a := registerPoolInstance(t, ctx, c, "cp", "pool-a")
	b := registerPoolInstance(t, ctx, c, "cp", "pool-b")
	registerPoolInstance(t, ctx, c, "cp", "")
	strategy := []ecstypes.CapacityProviderStrategyItem{{CapacityProvider: aws.String("pool-a"), Base: 1, Weight: 1}, {CapacityProvider: aws.String("pool-b"), Weight: 3}}
	if _, err := c.PutClusterCapacityProviders(ctx, &ecs.PutClusterCapacityProvidersInput{Cluster: aws.String("cp"),
		CapacityProviders: []string{"ghost"}, DefaultCapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{}}); !errors.As(err, &ipe) {
		t.Fatalf("unknown provider on a cluster: %v", err)
	}
	if _, err := c.PutClusterCapacityProviders(ctx, &ecs.PutClusterCapacityProvidersInput{Cluster: aws.String("cp"),
		CapacityProviders: []string{"pool-a", "pool-b", "FARGATE"}, DefaultCapacityProviderStrategy: strategy}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{Family: aws.String("cpweb"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("img"), Cpu: 10, Memory: aws.Int32(10)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cp"), TaskDefinition: aws.String("cpweb"),
		CapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{{CapacityProvider: aws.String("ghost"), Weight: 1}}}); !errors.As(err, &ipe) {
		t.Fatalf("unknown provider in a strategy: %v", err)
	}
	run, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cp"), TaskDefinition: aws.String("cpweb"), Count: aws.Int32(9)}) // the default strategy
	if err != nil || len(run.Tasks) != 9 {
		t.Fatalf("RunTask: %v %+v", err, run)
	}
	onA, onB := 0, 0
	for _, tk := range run.Tasks {
		switch {
		case aws.ToString(tk.ContainerInstanceArn) == a && aws.ToString(tk.CapacityProviderName) == "pool-a":
			onA++
		case aws.ToString(tk.ContainerInstanceArn) == b && aws.ToString(tk.CapacityProviderName) == "pool-b":
			onB++
		default:
			t.Fatalf("task on %s via %s", aws.ToString(tk.ContainerInstanceArn), aws.ToString(tk.CapacityProviderName))
		}
	}
	if onA != 3 || onB != 6 {
		t.Fatalf("base 1, weights 1:3 over 9 tasks: pool-a %d, pool-b %d; want 1+2 and 6", onA, onB)
	}
	ci, err := c.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String("cp"), ContainerInstances: []string{a}})
	if err != nil || aws.ToString(ci.ContainerInstances[0].CapacityProviderName) != "pool-a" {
		t.Fatalf("instance capacityProviderName: %v %+v", err, ci)
	}

	// FARGATE.
	fargateTD := func(family, cpu, memory string) error {
		_, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{Family: aws.String(family), RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
			NetworkMode: ecstypes.NetworkModeAwsvpc, Cpu: aws.String(cpu), Memory: aws.String(memory),
			ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("img")}}})
		return err
	}
	if err := fargateTD("fgbad", "1024", "1024"); !errors.As(err, &ce) || !strings.Contains(aws.ToString(ce.Message), "No Fargate configuration exists") {
		t.Fatalf("bad Fargate size: %v", err)
	}
	if err := fargateTD("fg", "1024", "2048"); err != nil {
		t.Fatal(err)
	}
	net := &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-0abc"}, AssignPublicIp: ecstypes.AssignPublicIpDisabled}}
	var pue *ecstypes.PlatformUnknownException
	if _, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cp"), TaskDefinition: aws.String("fg"), LaunchType: ecstypes.LaunchTypeFargate,
		NetworkConfiguration: net, PlatformVersion: aws.String("0.9.0")}); !errors.As(err, &pue) {
		t.Fatalf("unknown platform version: %v", err)
	}
	if _, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cp"), TaskDefinition: aws.String("cpweb"), LaunchType: ecstypes.LaunchTypeFargate}); !errors.As(err, &ipe) {
		t.Fatalf("EC2-only definition on FARGATE: %v", err)
	}
	// assignPublicIp ENABLED: AWS gives a Fargate task a public address; Berth has none to
	// give, so it refuses it, for FARGATE as for EC2, rather than ignore it.
	public := &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-0abc"}, AssignPublicIp: ecstypes.AssignPublicIpEnabled}}
	for what, call := range map[string]func() error{
		"RunTask FARGATE": func() error {
			_, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cp"), TaskDefinition: aws.String("fg"), LaunchType: ecstypes.LaunchTypeFargate, NetworkConfiguration: public})
			return err
		},
		"CreateService FARGATE": func() error {
			_, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("cp"), ServiceName: aws.String("fgpublic"), TaskDefinition: aws.String("fg"),
				DesiredCount: aws.Int32(1), LaunchType: ecstypes.LaunchTypeFargate, NetworkConfiguration: public})
			return err
		},
	} {
		if err := call(); !errors.As(err, &ipe) || !strings.Contains(aws.ToString(ipe.Message), "assignPublicIp ENABLED is not supported by Berth, for FARGATE tasks either") {
			t.Errorf("%s with assignPublicIp ENABLED: %v", what, err)
		}
	}
	fr, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cp"), TaskDefinition: aws.String("fg"), LaunchType: ecstypes.LaunchTypeFargate, NetworkConfiguration: net})
	if err != nil || len(fr.Tasks) != 1 {
		t.Fatalf("FARGATE RunTask: %v %+v", err, fr)
	}
	ft := fr.Tasks[0]
	if ft.LaunchType != ecstypes.LaunchTypeFargate || aws.ToString(ft.PlatformVersion) != "1.4.0" || aws.ToString(ft.PlatformFamily) != "Linux" ||
		aws.ToString(ft.CapacityProviderName) != "FARGATE" || ft.ContainerInstanceArn != nil {
		t.Fatalf("FARGATE task %+v", ft)
	}

	// A provider a cluster lists cannot be deleted; protection is for service tasks.
	if _, err := c.DeleteCapacityProvider(ctx, &ecs.DeleteCapacityProviderInput{CapacityProvider: aws.String("pool-b")}); !errors.As(err, &ce) {
		t.Fatalf("delete in use: %v", err)
	}
	if _, err := c.PutClusterCapacityProviders(ctx, &ecs.PutClusterCapacityProvidersInput{Cluster: aws.String("cp"), CapacityProviders: []string{"pool-a"},
		DefaultCapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{}}); err != nil {
		t.Fatal(err)
	}
	del, err := c.DeleteCapacityProvider(ctx, &ecs.DeleteCapacityProviderInput{CapacityProvider: aws.String("pool-b")})
	if err != nil || del.CapacityProvider.Status != ecstypes.CapacityProviderStatusInactive {
		t.Fatalf("DeleteCapacityProvider: %v %+v", err, del)
	}
	p, err := c.UpdateTaskProtection(ctx, &ecs.UpdateTaskProtectionInput{Cluster: aws.String("cp"), Tasks: []string{aws.ToString(ft.TaskArn)}, ProtectionEnabled: true})
	if err != nil || len(p.Failures) != 1 || aws.ToString(p.Failures[0].Reason) != "TASK_NOT_VALID" {
		t.Fatalf("protect a standalone task: %v %+v", err, p)
	}
	if _, err := c.UpdateTaskProtection(ctx, &ecs.UpdateTaskProtectionInput{Cluster: aws.String("cp"), Tasks: []string{aws.ToString(ft.TaskArn)}, ProtectionEnabled: true, ExpiresInMinutes: aws.Int32(2881)}); !errors.As(err, &ipe) {
		t.Fatalf("expiresInMinutes 2881: %v", err)
	}
}

// TestCapacityProvidersWithCLI runs the capacity provider calls and a strategy RunTask
// with the AWS CLI against the gateway.
func TestCapacityProvidersWithCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (aws) is not installed; make deps installs awscli")
	}
	st := startAPIStack(t, cpAccount)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k := st.keys[cpAccount]
	env := append(os.Environ(), "AWS_ENDPOINT_URL="+st.url, "AWS_ACCESS_KEY_ID="+k[0], "AWS_SECRET_ACCESS_KEY="+k[1],
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")

	cp := awsCLI(t, ctx, env, "create-capacity-provider", "--name", "cli-pool",
		"--auto-scaling-group-provider", "autoScalingGroupArn="+aws.ToString(cpASG("cli"))+",managedScaling={status=DISABLED,targetCapacity=75},managedTerminationProtection=DISABLED")
	requireMembers(t, "capacityProvider", cp["capacityProvider"], map[string]string{"name": `"cli-pool"`, "status": `"ACTIVE"`, "type": `"EC2_AUTOSCALING"`})
	d := awsCLI(t, ctx, env, "describe-capacity-providers", "--capacity-providers", "cli-pool", "FARGATE", "nope", "--include", "TAGS")
	if n := len(d["capacityProviders"].([]any)); n != 2 || len(d["failures"].([]any)) != 1 {
		t.Fatalf("describe-capacity-providers: %v", d)
	}
	awsCLI(t, ctx, env, "update-capacity-provider", "--name", "cli-pool", "--auto-scaling-group-provider", "managedScaling={targetCapacity=60}")
	awsCLI(t, ctx, env, "create-cluster", "--cluster-name", "cli")
	c := st.clients[cpAccount]
	registerPoolInstance(t, ctx, c, "cli", "cli-pool")
	cl := awsCLI(t, ctx, env, "put-cluster-capacity-providers", "--cluster", "cli", "--capacity-providers", "cli-pool", "FARGATE",
		"--default-capacity-provider-strategy", "capacityProvider=cli-pool,weight=1,base=1")
	requireMembers(t, "cluster", cl["cluster"], map[string]string{"capacityProviders": `["cli-pool","FARGATE"]`})
	awsCLI(t, ctx, env, "register-task-definition", "--family", "cliweb", "--container-definitions", `[{"name":"app","image":"img","cpu":10,"memory":10}]`)
	r := awsCLI(t, ctx, env, "run-task", "--cluster", "cli", "--task-definition", "cliweb", "--count", "2",
		"--capacity-provider-strategy", "capacityProvider=cli-pool,weight=1")
	for _, tk := range r["tasks"].([]any) {
		requireMembers(t, "task", tk, map[string]string{"capacityProviderName": `"cli-pool"`, "launchType": `"EC2"`})
	}
	// An error as the CLI reports it.
	cmd := exec.CommandContext(ctx, "aws", "ecs", "delete-capacity-provider", "--capacity-provider", "cli-pool")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "(ClientException)") {
		t.Fatalf("delete-capacity-provider of a provider in use: %v\n%s", err, out)
	}
	awsCLI(t, ctx, env, "put-cluster-capacity-providers", "--cluster", "cli", "--capacity-providers", "FARGATE", "--default-capacity-provider-strategy", "[]")
	del := awsCLI(t, ctx, env, "delete-capacity-provider", "--capacity-provider", "cli-pool")
	requireMembers(t, "capacityProvider", del["capacityProvider"], map[string]string{"status": `"INACTIVE"`})
}

// TestCapacityProviderNamesWithSDK: through the gateway with the AWS SDK for Go v2, a
// capacity provider name follows CreateCapacityProvider's reference (up to 255 letters,
// digits, '_' and '-', not prefixed aws, ecs or fargate), while its Auto Scaling group,
// given by name, may use any ASCII character 33 to 126 but ':' as CreateAutoScalingGroup
// allows — '/' included, and described back as given (issue 35).
func TestCapacityProviderNamesWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	st := startAPIStack(t, cpAccount)
	c := st.clients[cpAccount]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := func(name, asg string) (*ecs.CreateCapacityProviderOutput, error) {
		return c.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{Name: aws.String(name),
			AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProvider{AutoScalingGroupArn: aws.String(asg)}})
	}
	for i, asg := range []string{"web.asg/blue@2024+1", `!"#$%&'()*+,-./;<=>?@[\]^_{|}~`, strings.Repeat("g", 255), aws.ToString(cpASG("web.asg/2"))} {
		name := fmt.Sprintf("pool-%d", i)
		out, err := create(name, asg)
		if err != nil {
			t.Fatalf("CreateCapacityProvider with Auto Scaling group %q: %v", asg, err)
		}
		if got := aws.ToString(out.CapacityProvider.AutoScalingGroupProvider.AutoScalingGroupArn); got != asg {
			t.Errorf("created with group %q, described %q", asg, got)
		}
		d, err := c.DescribeCapacityProviders(ctx, &ecs.DescribeCapacityProvidersInput{CapacityProviders: []string{name}})
		if err != nil || len(d.CapacityProviders) != 1 || aws.ToString(d.CapacityProviders[0].AutoScalingGroupProvider.AutoScalingGroupArn) != asg {
			t.Errorf("DescribeCapacityProviders %s: %v %+v", name, err, d)
		}
	}
	if _, err := create(strings.Repeat("p", 255), "long-name-group"); err != nil {
		t.Errorf("a 255-character provider name: %v", err)
	}
	var ipe *ecstypes.InvalidParameterException
	for _, bad := range [][2]string{
		{"web-pool", "web:asg"}, {"web-pool", "web asg"}, {"web-pool", "wéb"}, {"web-pool", strings.Repeat("g", 256)},
		{"pool.a", "g1"}, {"pool/a", "g2"}, {"pool:a", "g3"}, {strings.Repeat("p", 256), "g4"},
		{"aws-pool", "g5"}, {"ECSpool", "g6"}, {"fargate2", "g7"},
	} {
		if _, err := create(bad[0], bad[1]); !errors.As(err, &ipe) {
			t.Errorf("CreateCapacityProvider name %q group %q: %v, want InvalidParameterException", bad[0], bad[1], err)
		}
	}
}
