package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// Issue 35, "Inputs accepted and then ignored": each input is honoured or refused with
// AWS's error shape naming the member, through the real gateway with the AWS SDK for Go
// v2.

// wantRefused fails t unless err is an InvalidParameterException whose message names
// every one of names.
func wantRefused(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	if code := apiErrorCode(err); code != "InvalidParameterException" {
		t.Errorf("%s: %v (code %q), want InvalidParameterException", what, err, code)
		return
	}
	for _, n := range names {
		if !strings.Contains(errorMessage(err), n) {
			t.Errorf("%s: message %q does not name %q", what, errorMessage(err), n)
		}
	}
}

// TestClusterInputsHonouredOrRefused: CreateCluster, UpdateCluster and
// UpdateClusterSettings refuse containerInsights enabled/enhanced (no Container Insights
// metrics yet), an ECS Exec KMS key, log destination or logging OVERRIDE (no ECS Exec), a
// managed storage KMS key (no KMS) and a Service Connect default namespace (no Service
// Connect), naming the member; what Berth does honour (containerInsights disabled,
// executeCommandConfiguration logging DEFAULT or NONE) is accepted and described back.
func TestClusterInputsHonouredOrRefused(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "000000000000"
	s := startAPIStack(t, acct)
	c := s.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	insights := func(v string) []ecstypes.ClusterSetting {
		return []ecstypes.ClusterSetting{{Name: ecstypes.ClusterSettingNameContainerInsights, Value: aws.String(v)}}
	}
	for _, tc := range []struct {
		what  string
		in    *ecs.CreateClusterInput
		names []string
	}{
		{"containerInsights enabled", &ecs.CreateClusterInput{Settings: insights("enabled")}, []string{"containerInsights", "Container Insights"}},
		{"containerInsights enhanced", &ecs.CreateClusterInput{Settings: insights("enhanced")}, []string{"containerInsights"}},
		{"exec kmsKeyId", &ecs.CreateClusterInput{Configuration: &ecstypes.ClusterConfiguration{
			ExecuteCommandConfiguration: &ecstypes.ExecuteCommandConfiguration{KmsKeyId: aws.String("key")}}},
			[]string{"configuration.executeCommandConfiguration.kmsKeyId", "ECS Exec"}},
		{"exec logging OVERRIDE", &ecs.CreateClusterInput{Configuration: &ecstypes.ClusterConfiguration{
			ExecuteCommandConfiguration: &ecstypes.ExecuteCommandConfiguration{Logging: ecstypes.ExecuteCommandLoggingOverride}}},
			[]string{"configuration.executeCommandConfiguration.logging"}},
		{"exec logConfiguration", &ecs.CreateClusterInput{Configuration: &ecstypes.ClusterConfiguration{
			ExecuteCommandConfiguration: &ecstypes.ExecuteCommandConfiguration{LogConfiguration: &ecstypes.ExecuteCommandLogConfiguration{CloudWatchLogGroupName: aws.String("g")}}}},
			[]string{"configuration.executeCommandConfiguration.logConfiguration"}},
		{"managed storage kmsKeyId", &ecs.CreateClusterInput{Configuration: &ecstypes.ClusterConfiguration{
			ManagedStorageConfiguration: &ecstypes.ManagedStorageConfiguration{KmsKeyId: aws.String("key")}}},
			[]string{"configuration.managedStorageConfiguration.kmsKeyId", "KMS"}},
		{"fargate ephemeral storage kmsKeyId", &ecs.CreateClusterInput{Configuration: &ecstypes.ClusterConfiguration{
			ManagedStorageConfiguration: &ecstypes.ManagedStorageConfiguration{FargateEphemeralStorageKmsKeyId: aws.String("key")}}},
			[]string{"configuration.managedStorageConfiguration.fargateEphemeralStorageKmsKeyId"}},
		{"serviceConnectDefaults", &ecs.CreateClusterInput{ServiceConnectDefaults: &ecstypes.ClusterServiceConnectDefaultsRequest{Namespace: aws.String("ns")}},
			[]string{"serviceConnectDefaults.namespace", "Service Connect"}},
	} {
		tc.in.ClusterName = aws.String("refused")
		_, err := c.CreateCluster(ctx, tc.in)
		wantRefused(t, "CreateCluster "+tc.what, err, tc.names...)
	}
	if l, err := c.ListClusters(ctx, &ecs.ListClustersInput{}); err != nil || len(l.ClusterArns) != 0 {
		t.Fatalf("a refused CreateCluster created a cluster: %v %v", l, err)
	}

	out, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("ok"), Settings: insights("disabled"),
		Configuration: &ecstypes.ClusterConfiguration{ExecuteCommandConfiguration: &ecstypes.ExecuteCommandConfiguration{Logging: ecstypes.ExecuteCommandLoggingNone}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Cluster.Settings) != 1 || aws.ToString(out.Cluster.Settings[0].Value) != "disabled" ||
		out.Cluster.Configuration == nil || out.Cluster.Configuration.ExecuteCommandConfiguration.Logging != ecstypes.ExecuteCommandLoggingNone {
		t.Fatalf("created %+v", out.Cluster)
	}
	_, err = c.UpdateCluster(ctx, &ecs.UpdateClusterInput{Cluster: aws.String("ok"), Settings: insights("enabled")})
	wantRefused(t, "UpdateCluster containerInsights enabled", err, "containerInsights")
	_, err = c.UpdateCluster(ctx, &ecs.UpdateClusterInput{Cluster: aws.String("ok"),
		ServiceConnectDefaults: &ecstypes.ClusterServiceConnectDefaultsRequest{Namespace: aws.String("ns")}})
	wantRefused(t, "UpdateCluster serviceConnectDefaults", err, "serviceConnectDefaults.namespace")
	_, err = c.UpdateCluster(ctx, &ecs.UpdateClusterInput{Cluster: aws.String("ok"), Configuration: &ecstypes.ClusterConfiguration{
		ManagedStorageConfiguration: &ecstypes.ManagedStorageConfiguration{KmsKeyId: aws.String("k")}}})
	wantRefused(t, "UpdateCluster managedStorageConfiguration", err, "configuration.managedStorageConfiguration.kmsKeyId")
	_, err = c.UpdateClusterSettings(ctx, &ecs.UpdateClusterSettingsInput{Cluster: aws.String("ok"), Settings: insights("enhanced")})
	wantRefused(t, "UpdateClusterSettings containerInsights enhanced", err, "containerInsights")
	u, err := c.UpdateClusterSettings(ctx, &ecs.UpdateClusterSettingsInput{Cluster: aws.String("ok"), Settings: insights("disabled")})
	if err != nil || aws.ToString(u.Cluster.Settings[0].Value) != "disabled" {
		t.Fatalf("UpdateClusterSettings disabled: %+v %v", u, err)
	}
	d, err := c.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"ok"},
		Include: []ecstypes.ClusterField{ecstypes.ClusterFieldSettings, ecstypes.ClusterFieldConfigurations}})
	if err != nil || len(d.Clusters) != 1 || d.Clusters[0].ServiceConnectDefaults != nil ||
		d.Clusters[0].Configuration.ManagedStorageConfiguration != nil || aws.ToString(d.Clusters[0].Settings[0].Value) != "disabled" {
		t.Fatalf("refused updates changed the cluster: %+v %v", d, err)
	}
}

// TestAccountSettingsHonouredOrRefused: PutAccountSetting and PutAccountSettingDefault
// store the long-ARN formats and the values that describe what Berth does, and refuse the
// others (InvalidParameterException naming the setting and why), leaving nothing stored.
func TestAccountSettingsHonouredOrRefused(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "000000000000"
	s := startAPIStack(t, acct)
	c := s.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	refused := []struct {
		name  ecstypes.SettingName
		value string
		why   string
	}{
		{ecstypes.SettingNameContainerInsights, "enabled", "Container Insights"},
		{ecstypes.SettingNameContainerInsights, "enhanced", "Container Insights"},
		{ecstypes.SettingNameAwsvpcTrunking, "disabled", "network interfaces"},
		{ecstypes.SettingNameFargateFipsMode, "enabled", "FIPS"},
		{ecstypes.SettingNameDefaultLogDriverMode, "blocking", "non-blocking"},
		{ecstypes.SettingNameGuardDutyActivate, "on", "guardDutyActivate"},
	}
	for _, r := range refused {
		_, err := c.PutAccountSetting(ctx, &ecs.PutAccountSettingInput{Name: r.name, Value: aws.String(r.value)})
		wantRefused(t, "PutAccountSetting "+string(r.name)+"="+r.value, err, string(r.name), r.why)
		_, err = c.PutAccountSettingDefault(ctx, &ecs.PutAccountSettingDefaultInput{Name: r.name, Value: aws.String(r.value)})
		wantRefused(t, "PutAccountSettingDefault "+string(r.name)+"="+r.value, err, string(r.name), r.why)
	}
	if l, err := c.ListAccountSettings(ctx, &ecs.ListAccountSettingsInput{}); err != nil || len(l.Settings) != 0 {
		t.Fatalf("refused settings were stored: %+v %v", l, err)
	}

	honoured := map[ecstypes.SettingName]string{
		ecstypes.SettingNameServiceLongArnFormat:            "disabled",
		ecstypes.SettingNameTaskLongArnFormat:               "enabled",
		ecstypes.SettingNameContainerInstanceLongArnFormat:  "enabled",
		ecstypes.SettingNameContainerInsights:               "disabled",
		ecstypes.SettingNameAwsvpcTrunking:                  "enabled",
		ecstypes.SettingNameFargateFipsMode:                 "disabled",
		ecstypes.SettingNameDefaultLogDriverMode:            "non-blocking",
		ecstypes.SettingNameTagResourceAuthorization:        "off",
		ecstypes.SettingNameFargateTaskRetirementWaitPeriod: "14",
	}
	for name, v := range honoured {
		if _, err := c.PutAccountSetting(ctx, &ecs.PutAccountSettingInput{Name: name, Value: aws.String(v)}); err != nil {
			t.Errorf("PutAccountSetting %s=%s: %v", name, v, err)
		}
	}
	l, err := c.ListAccountSettings(ctx, &ecs.ListAccountSettingsInput{MaxResults: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[ecstypes.SettingName]string{}
	for _, st := range l.Settings {
		got[st.Name] = aws.ToString(st.Value)
	}
	for name, v := range honoured {
		if got[name] != v {
			t.Errorf("ListAccountSettings %s = %q, want %q", name, got[name], v)
		}
	}
}

// TestCapacityProviderManagedSettings: CreateCapacityProvider and UpdateCapacityProvider
// refuse managedScaling ENABLED (also implied by a managedScaling without status) and
// managedTerminationProtection ENABLED — Berth launches and terminates no instances —
// naming the member; managedScaling DISABLED and either managedDraining are stored and
// described back.
func TestCapacityProviderManagedSettings(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "000000000000"
	s := startAPIStack(t, acct)
	c := s.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, tc := range []struct {
		what string
		asg  ecstypes.AutoScalingGroupProvider
		name string
	}{
		{"managedScaling ENABLED", ecstypes.AutoScalingGroupProvider{ManagedScaling: &ecstypes.ManagedScaling{Status: ecstypes.ManagedScalingStatusEnabled}}, "managedScaling"},
		{"managedScaling without status", ecstypes.AutoScalingGroupProvider{ManagedScaling: &ecstypes.ManagedScaling{TargetCapacity: aws.Int32(80)}}, "managedScaling"},
		{"managedTerminationProtection ENABLED", ecstypes.AutoScalingGroupProvider{ManagedTerminationProtection: ecstypes.ManagedTerminationProtectionEnabled,
			ManagedScaling: &ecstypes.ManagedScaling{Status: ecstypes.ManagedScalingStatusEnabled}}, "managedTerminationProtection"},
	} {
		tc.asg.AutoScalingGroupArn = cpASG("refused")
		_, err := c.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{Name: aws.String("refused"), AutoScalingGroupProvider: &tc.asg})
		wantRefused(t, "CreateCapacityProvider "+tc.what, err, tc.name, "Berth launches")
	}
	out, err := c.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{Name: aws.String("pool"), AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProvider{
		AutoScalingGroupArn: cpASG("pool"), ManagedScaling: &ecstypes.ManagedScaling{Status: ecstypes.ManagedScalingStatusDisabled, TargetCapacity: aws.Int32(80)},
		ManagedTerminationProtection: ecstypes.ManagedTerminationProtectionDisabled, ManagedDraining: ecstypes.ManagedDrainingDisabled}})
	if err != nil {
		t.Fatal(err)
	}
	asg := out.CapacityProvider.AutoScalingGroupProvider
	if asg.ManagedScaling.Status != ecstypes.ManagedScalingStatusDisabled || aws.ToInt32(asg.ManagedScaling.TargetCapacity) != 80 || asg.ManagedDraining != ecstypes.ManagedDrainingDisabled {
		t.Fatalf("created %+v", asg)
	}
	_, err = c.UpdateCapacityProvider(ctx, &ecs.UpdateCapacityProviderInput{Name: aws.String("pool"), AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProviderUpdate{
		ManagedScaling: &ecstypes.ManagedScaling{Status: ecstypes.ManagedScalingStatusEnabled}}})
	wantRefused(t, "UpdateCapacityProvider managedScaling ENABLED", err, "managedScaling")
	_, err = c.UpdateCapacityProvider(ctx, &ecs.UpdateCapacityProviderInput{Name: aws.String("pool"), AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProviderUpdate{
		ManagedTerminationProtection: ecstypes.ManagedTerminationProtectionEnabled}})
	wantRefused(t, "UpdateCapacityProvider managedTerminationProtection ENABLED", err, "managedTerminationProtection")
	u, err := c.UpdateCapacityProvider(ctx, &ecs.UpdateCapacityProviderInput{Name: aws.String("pool"), AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProviderUpdate{
		ManagedDraining: ecstypes.ManagedDrainingEnabled, ManagedScaling: &ecstypes.ManagedScaling{TargetCapacity: aws.Int32(60)}}})
	if err != nil || u.CapacityProvider.AutoScalingGroupProvider.ManagedDraining != ecstypes.ManagedDrainingEnabled ||
		u.CapacityProvider.AutoScalingGroupProvider.ManagedScaling.Status != ecstypes.ManagedScalingStatusDisabled {
		t.Fatalf("UpdateCapacityProvider managedDraining ENABLED: %+v %v", u, err)
	}
}

// TestAwsvpcSecurityGroups: Berth has one security group, sg-berthallowall, which allows
// all traffic (Berth enforces no security group rules). RunTask, CreateService and
// UpdateService accept it, or securityGroups left out; any other group is refused as a
// group that does not exist (InvalidParameterException naming it and securityGroups),
// rather than recorded and not enforced. The service describes back what it was given.
func TestAwsvpcSecurityGroups(t *testing.T) {
	t.Parallel() // see main_test.go
	s := startAPIStack(t, cpAccount)
	c := s.clients[cpAccount]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("sg")}); err != nil {
		t.Fatal(err)
	}
	registerPoolInstance(t, ctx, c, "sg", "")
	if _, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{Family: aws.String("vpc"), NetworkMode: ecstypes.NetworkModeAwsvpc,
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("img"), Memory: aws.Int32(32)}}}); err != nil {
		t.Fatal(err)
	}
	vpc := func(groups ...string) *ecstypes.NetworkConfiguration {
		return &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-0abc"}, SecurityGroups: groups}}
	}
	_, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("sg"), TaskDefinition: aws.String("vpc"), NetworkConfiguration: vpc("sg-0123456789abcdef0")})
	wantRefused(t, "RunTask with sg-0123456789abcdef0", err, "sg-0123456789abcdef0", "does not exist", "securityGroups", "sg-berthallowall")
	_, err = c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("sg"), TaskDefinition: aws.String("vpc"), NetworkConfiguration: vpc("sg-berthallowall", "sg-0a")})
	wantRefused(t, "RunTask with sg-berthallowall and sg-0a", err, "sg-0a")
	_, err = c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("sg"), ServiceName: aws.String("bad"), TaskDefinition: aws.String("vpc"),
		DesiredCount: aws.Int32(0), NetworkConfiguration: vpc("sg-0123456789abcdef0")})
	wantRefused(t, "CreateService with sg-0123456789abcdef0", err, "sg-0123456789abcdef0", "securityGroups")

	for _, nc := range []*ecstypes.NetworkConfiguration{vpc("sg-berthallowall"), vpc()} {
		r, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("sg"), TaskDefinition: aws.String("vpc"), NetworkConfiguration: nc})
		if err != nil || len(r.Tasks) != 1 {
			t.Fatalf("RunTask with securityGroups %v: %v %+v", nc.AwsvpcConfiguration.SecurityGroups, err, r)
		}
	}
	svc, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("sg"), ServiceName: aws.String("ok"), TaskDefinition: aws.String("vpc"),
		DesiredCount: aws.Int32(0), NetworkConfiguration: vpc("sg-berthallowall")})
	if err != nil {
		t.Fatal(err)
	}
	if g := svc.Service.NetworkConfiguration.AwsvpcConfiguration.SecurityGroups; len(g) != 1 || g[0] != "sg-berthallowall" {
		t.Errorf("service securityGroups %v", g)
	}
	_, err = c.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("sg"), Service: aws.String("ok"), NetworkConfiguration: vpc("sg-0b")})
	wantRefused(t, "UpdateService with sg-0b", err, "sg-0b", "securityGroups")
}
