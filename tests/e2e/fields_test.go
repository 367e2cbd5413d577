package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// TestRefusedFieldsThroughGateway sends each field Berth refuses (docs/task-definition-fields.md)
// through the real gateway and scheduler with the AWS SDK for Go v2 and checks the typed
// error names the field and says what Berth supports, and that a refused task definition
// was not registered (no revision used). A few go through the AWS CLI too.
func TestRefusedFieldsThroughGateway(t *testing.T) {
	t.Parallel() // see main_test.go
	s := startAPIStack(t, "000000000000")
	c := s.clients["000000000000"]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	base := func(mod func(*ecs.RegisterTaskDefinitionInput)) *ecs.RegisterTaskDefinitionInput {
		in := &ecs.RegisterTaskDefinitionInput{
			Family: aws.String("refused"),
			ContainerDefinitions: []ecstypes.ContainerDefinition{{
				Name: aws.String("app"), Image: aws.String("img"), Memory: aws.Int32(32),
			}},
		}
		mod(in)
		return in
	}
	ctr := func(in *ecs.RegisterTaskDefinitionInput) *ecstypes.ContainerDefinition {
		return &in.ContainerDefinitions[0]
	}
	for _, tc := range []struct {
		name string
		in   *ecs.RegisterTaskDefinitionInput
		want string
	}{
		{"firelensConfiguration", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).FirelensConfiguration = &ecstypes.FirelensConfiguration{Type: ecstypes.FirelensConfigurationTypeFluentbit}
		}), "containerDefinitions[0].firelensConfiguration is not supported by Berth. Berth has no FireLens log router"},
		{"environmentFiles", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).EnvironmentFiles = []ecstypes.EnvironmentFile{{Type: ecstypes.EnvironmentFileTypeS3, Value: aws.String("arn:aws:s3:::bucket/app.env")}}
		}), "containerDefinitions[0].environmentFiles is not supported by Berth. Berth has no object store"},
		{"splunk", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).LogConfiguration = &ecstypes.LogConfiguration{LogDriver: ecstypes.LogDriverSplunk}
		}), `containerDefinitions[0].logConfiguration.logDriver "splunk" is not supported by Berth. Berth supports logDriver json-file (kept by the agent) and awslogs`},
		{"awslogs option", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).LogConfiguration = &ecstypes.LogConfiguration{LogDriver: ecstypes.LogDriverAwslogs, Options: map[string]string{"awslogs-group": "g", "awslogs-endpoint": "http://x"}}
		}), `containerDefinitions[0].logConfiguration.options: unknown log opt 'awslogs-endpoint' for awslogs log driver`},
		{"inference accelerator", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).ResourceRequirements = []ecstypes.ResourceRequirement{{Type: ecstypes.ResourceTypeInferenceAccelerator, Value: aws.String("dev1")}}
		}), "Invalid 'resourceRequirements' setting for container 'app'. InferenceAccelerator is not supported by Berth"},
		{"dockerSecurityOptions", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).DockerSecurityOptions = []string{"no-new-privileges"}
		}),
			"containerDefinitions[0].dockerSecurityOptions is not supported by Berth. Berth does not apply SELinux, AppArmor or seccomp options yet"},
		{"restartPolicy period", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).RestartPolicy = &ecstypes.ContainerRestartPolicy{Enabled: aws.Bool(true), RestartAttemptPeriod: aws.Int32(30)}
		}), "Invalid 'restartPolicy' setting for container 'app'. restartAttemptPeriod must be between 60 and 1800 seconds."},
		// containerPortRange is honoured, under AWS's rules.
		{"containerPortRange with containerPort", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).PortMappings = []ecstypes.PortMapping{{ContainerPortRange: aws.String("8000-8010"), ContainerPort: aws.Int32(8000)}}
		}), "Invalid port mapping for container 'app': containerPort and containerPortRange cannot both be specified."},
		{"containerPortRange with hostPort", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).PortMappings = []ecstypes.PortMapping{{ContainerPortRange: aws.String("8000-8010"), HostPort: aws.Int32(9000)}}
		}), "Invalid port mapping for container 'app': hostPort cannot be specified with containerPortRange"},
		{"containerPortRange in host mode", base(func(in *ecs.RegisterTaskDefinitionInput) {
			in.NetworkMode = ecstypes.NetworkModeHost
			ctr(in).PortMappings = []ecstypes.PortMapping{{ContainerPortRange: aws.String("8000-8010")}}
		}), "Invalid port mapping for container 'app': containerPortRange is only supported when networkMode is bridge or awsvpc."},
		{"containerPortRange reversed", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).PortMappings = []ecstypes.PortMapping{{ContainerPortRange: aws.String("8010-8000")}}
		}), `Invalid containerPortRange "8010-8000" for container 'app'`},
		{"containerPortRange overlap", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).PortMappings = []ecstypes.PortMapping{{ContainerPortRange: aws.String("8000-8010")}, {ContainerPortRange: aws.String("8005-8020")}}
		}), "Invalid port mappings for container 'app': container ports 8000-8010 and 8005-8020 overlap"},
		{"efs transit encryption", base(func(in *ecs.RegisterTaskDefinitionInput) {
			in.Volumes = []ecstypes.Volume{{Name: aws.String("v"), EfsVolumeConfiguration: &ecstypes.EFSVolumeConfiguration{FileSystemId: aws.String("fs-1"), TransitEncryption: ecstypes.EFSTransitEncryptionEnabled}}}
		}), `volumes[0].efsVolumeConfiguration.transitEncryption "ENABLED" is not supported by Berth. Berth mounts EFS volumes over plain NFS`},
		{"efs access point", base(func(in *ecs.RegisterTaskDefinitionInput) {
			in.Volumes = []ecstypes.Volume{{Name: aws.String("v"), EfsVolumeConfiguration: &ecstypes.EFSVolumeConfiguration{FileSystemId: aws.String("fs-1"),
				TransitEncryption: ecstypes.EFSTransitEncryptionEnabled, AuthorizationConfig: &ecstypes.EFSAuthorizationConfig{AccessPointId: aws.String("fsap-1")}}}}
		}), `volumes[0].efsVolumeConfiguration.authorizationConfig.accessPointId "fsap-1" is not supported by Berth. Berth has no EFS access points`},
		{"efs iam without transit encryption", base(func(in *ecs.RegisterTaskDefinitionInput) {
			in.Volumes = []ecstypes.Volume{{Name: aws.String("v"), EfsVolumeConfiguration: &ecstypes.EFSVolumeConfiguration{FileSystemId: aws.String("fs-1"),
				AuthorizationConfig: &ecstypes.EFSAuthorizationConfig{Iam: ecstypes.EFSAuthorizationConfigIAMEnabled}}}}
		}), "Invalid request provided: Create TaskDefinition: Transit encryption must be enabled when using EFS IAM authorization (volume 'v')."},
		{"over 64 KiB", base(func(in *ecs.RegisterTaskDefinitionInput) {
			ctr(in).Environment = []ecstypes.KeyValuePair{{Name: aws.String("BIG"), Value: aws.String(strings.Repeat("x", 65536))}}
		}), "Actual length: '"},
	} {
		_, err := c.RegisterTaskDefinition(ctx, tc.in)
		var ce *ecstypes.ClientException
		if !errors.As(err, &ce) {
			t.Errorf("%s: RegisterTaskDefinition = %v, want ClientException", tc.name, err)
			continue
		}
		if !strings.HasPrefix(aws.ToString(ce.Message), tc.want) {
			t.Errorf("%s: message %q, want it to start %q", tc.name, aws.ToString(ce.Message), tc.want)
		}
	}
	if out, err := c.ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{}); err != nil || len(out.TaskDefinitionArns) != 0 {
		t.Fatalf("refused task definitions were registered: %v %v", out, err)
	}

	// A definition Berth honours, then RunTask and CreateService members it refuses.
	td, err := c.RegisterTaskDefinition(ctx, base(func(in *ecs.RegisterTaskDefinitionInput) {
		ctr(in).LogConfiguration = &ecstypes.LogConfiguration{LogDriver: ecstypes.LogDriverJsonFile}
		ctr(in).Privileged = aws.Bool(false)
	}))
	if err != nil {
		t.Fatalf("RegisterTaskDefinition of honoured fields: %v", err)
	}
	if rev := td.TaskDefinition.Revision; rev != 1 {
		t.Errorf("first accepted revision is %d, want 1 (a refused call used a revision)", rev)
	}
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("default")}); err != nil {
		t.Fatal(err)
	}
	invalid := func(what string, err error, want string) {
		t.Helper()
		var ip *ecstypes.InvalidParameterException
		if !errors.As(err, &ip) {
			t.Errorf("%s = %v, want InvalidParameterException", what, err)
			return
		}
		if !strings.HasPrefix(aws.ToString(ip.Message), want) {
			t.Errorf("%s: message %q, want it to start %q", what, aws.ToString(ip.Message), want)
		}
	}
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("refused"), Overrides: &ecstypes.TaskOverride{
		ContainerOverrides: []ecstypes.ContainerOverride{{Name: aws.String("app"), EnvironmentFiles: []ecstypes.EnvironmentFile{{Type: ecstypes.EnvironmentFileTypeS3, Value: aws.String("arn:aws:s3:::b/k.env")}}}},
	}})
	invalid("RunTask environmentFiles override", err, "overrides.containerOverrides[0].environmentFiles is not supported by Berth.")
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("refused"), Overrides: &ecstypes.TaskOverride{
		ContainerOverrides: []ecstypes.ContainerOverride{{Name: aws.String("app"), Memory: aws.Int32(4096)}}, Memory: aws.String("128"),
	}})
	invalid("RunTask container memory override above the task's", err, "Invalid 'memory' setting for container 'app'. The container memory must not exceed the task memory.")
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("refused"), Overrides: &ecstypes.TaskOverride{
		ContainerOverrides: []ecstypes.ContainerOverride{{Name: aws.String("app"), Environment: []ecstypes.KeyValuePair{{Name: aws.String("BIG"), Value: aws.String(strings.Repeat("x", 8192))}}}},
	}})
	invalid("RunTask overrides over 8192 characters", err, "Container Overrides length must be at most 8192")
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("refused"), NetworkConfiguration: &ecstypes.NetworkConfiguration{
		AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-1"}},
	}})
	invalid("RunTask networkConfiguration of a bridge task", err, "Network Configuration is not valid for the given networkMode of this task definition.")
	// networkConfiguration of an awsvpc task is validated as AWS validates it.
	if _, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{Family: aws.String("vpc"), NetworkMode: ecstypes.NetworkModeAwsvpc,
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("busybox"), Memory: aws.Int32(32)}}}); err != nil {
		t.Fatalf("register an awsvpc task definition: %v", err)
	}
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("vpc")})
	invalid("RunTask awsvpc without networkConfiguration", err, "Network Configuration must be provided when networkMode 'awsvpc' is specified.")
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("vpc"), NetworkConfiguration: &ecstypes.NetworkConfiguration{
		AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{}}}})
	invalid("RunTask awsvpc with no subnets", err, "subnets can not be empty.")
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("vpc"), NetworkConfiguration: &ecstypes.NetworkConfiguration{
		AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-1"}, AssignPublicIp: ecstypes.AssignPublicIpEnabled}}})
	invalid("RunTask awsvpc with a public address", err, "assignPublicIp ENABLED is not supported by Berth")
	_, err = c.CreateService(ctx, &ecs.CreateServiceInput{ServiceName: aws.String("web"), TaskDefinition: aws.String("refused"), DesiredCount: aws.Int32(1),
		ServiceConnectConfiguration: &ecstypes.ServiceConnectConfiguration{Enabled: true}})
	invalid("CreateService serviceConnectConfiguration", err, "serviceConnectConfiguration is not supported by Berth. Berth has no Service Connect")
	_, err = c.CreateService(ctx, &ecs.CreateServiceInput{ServiceName: aws.String("web"), TaskDefinition: aws.String("refused"), DesiredCount: aws.Int32(1),
		ServiceRegistries: []ecstypes.ServiceRegistry{{RegistryArn: aws.String("arn:aws:servicediscovery:us-east-1:000000000000:service/srv-1")}}})
	// serviceRegistries is honoured (Cloud Map): an unknown Cloud Map service is refused.
	invalid("CreateService serviceRegistries", err, "Unable to validate the specified service registry arn:aws:servicediscovery:us-east-1:000000000000:service/srv-1: the Cloud Map service does not exist.")
	// loadBalancers is honoured (ELBv2 target groups): an unknown target group is AWS's error.
	_, err = c.CreateService(ctx, &ecs.CreateServiceInput{ServiceName: aws.String("web"), TaskDefinition: aws.String("refused"), DesiredCount: aws.Int32(1),
		LoadBalancers: []ecstypes.LoadBalancer{{TargetGroupArn: aws.String("arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/t/1"), ContainerName: aws.String("app"), ContainerPort: aws.Int32(80)}}})
	invalid("CreateService loadBalancers with an unknown target group", err, "Unable to validate the specified targetGroupArn")
	if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{ServiceName: aws.String("web"), TaskDefinition: aws.String("refused"), DesiredCount: aws.Int32(0)}); err != nil {
		t.Fatalf("CreateService of honoured fields: %v", err)
	}
	// ECS Exec (docs/exec.md): UpdateService takes enableExecuteCommand for its next tasks.
	if out, err := c.UpdateService(ctx, &ecs.UpdateServiceInput{Service: aws.String("web"), EnableExecuteCommand: aws.Bool(true)}); err != nil {
		t.Errorf("UpdateService enableExecuteCommand true: %v", err)
	} else if !out.Service.EnableExecuteCommand {
		t.Errorf("UpdateService enableExecuteCommand true: the service shows false")
	}

	// The AWS CLI sees the same errors (a service error's exit status: 254 for CLI v2, 255
	// for v1; the exception and message on stderr).
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("aws (the AWS CLI) not found in PATH: CLI half not run")
	}
	k := s.keys["000000000000"]
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+k[0], "AWS_SECRET_ACCESS_KEY="+k[1], "AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"register-task-definition", "--family", "cli", "--container-definitions",
			`[{"name":"app","image":"img","memory":32,"environmentFiles":[{"type":"s3","value":"arn:aws:s3:::bucket/a.env"}]}]`},
			"An error occurred (ClientException) when calling the RegisterTaskDefinition operation: containerDefinitions[0].environmentFiles is not supported by Berth."},
		{[]string{"register-task-definition", "--family", "cli", "--container-definitions",
			`[{"name":"app","image":"img","memory":32,"logConfiguration":{"logDriver":"awslogs"}}]`},
			`An error occurred (ClientException) when calling the RegisterTaskDefinition operation: containerDefinitions[0].logConfiguration.options: awslogs-group must be a log group name`},
		{[]string{"create-service", "--service-name", "cli", "--task-definition", "refused", "--desired-count", "1",
			"--service-connect-configuration", `{"enabled":true}`},
			"An error occurred (InvalidParameterException) when calling the CreateService operation: serviceConnectConfiguration is not supported by Berth."},
	} {
		cmd := exec.CommandContext(ctx, "aws", append(append([]string{"ecs"}, tc.args...), "--endpoint-url", s.url)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || (ee.ExitCode() != 254 && ee.ExitCode() != 255) {
			t.Errorf("aws ecs %s: %v (want exit 254 or 255)\n%s", tc.args[0], err, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("aws ecs %s said:\n%s\nwant it to contain %q", tc.args[0], out, tc.want)
		}
	}
}
