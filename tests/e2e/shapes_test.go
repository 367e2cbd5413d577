package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// TestResponseShapesTour calls every ECS action Berth serves at least once (all but
// ListServicesByNamespace answer 200), with the AWS
// SDK for Go v2, against a real `bin/berth dev` through devEnv's checking proxy, so each
// kind of answer Berth produces is walked through the ECS model's required lists (the
// test fails at its end on any missing member). It then checks that the proxy did see
// every action.
func TestResponseShapesTour(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env, shapes := devEnvShapes(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	push := exec.CommandContext(ctx, filepath.Join(root, "bin/berth"), "image", "demo", image)
	push.Env = env
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("berth image demo: %v\n%s", err, out)
	}
	c := ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(envValue(env, "AWS_ENDPOINT_URL")),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	})
	must := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	tags := []ecstypes.Tag{{Key: aws.String("team"), Value: aws.String("core")}}

	// Clusters and account settings.
	_, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("tour"), Tags: tags})
	must("CreateCluster", err)
	_, err = c.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"tour", "default"},
		Include: []ecstypes.ClusterField{ecstypes.ClusterFieldTags, ecstypes.ClusterFieldSettings, ecstypes.ClusterFieldStatistics}})
	must("DescribeClusters", err)
	_, err = c.ListClusters(ctx, &ecs.ListClustersInput{})
	must("ListClusters", err)
	settings := []ecstypes.ClusterSetting{{Name: ecstypes.ClusterSettingNameContainerInsights, Value: aws.String("disabled")}}
	_, err = c.UpdateClusterSettings(ctx, &ecs.UpdateClusterSettingsInput{Cluster: aws.String("tour"), Settings: settings})
	must("UpdateClusterSettings", err)
	_, err = c.UpdateCluster(ctx, &ecs.UpdateClusterInput{Cluster: aws.String("tour"), Settings: settings})
	must("UpdateCluster", err)
	_, err = c.PutClusterCapacityProviders(ctx, &ecs.PutClusterCapacityProvidersInput{Cluster: aws.String("tour"),
		CapacityProviders: []string{}, DefaultCapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{}})
	must("PutClusterCapacityProviders", err)
	_, err = c.PutAccountSetting(ctx, &ecs.PutAccountSettingInput{Name: ecstypes.SettingNameContainerInsights, Value: aws.String("disabled")})
	must("PutAccountSetting", err)
	_, err = c.PutAccountSettingDefault(ctx, &ecs.PutAccountSettingDefaultInput{Name: ecstypes.SettingNameTaskLongArnFormat, Value: aws.String("enabled")})
	must("PutAccountSettingDefault", err)
	_, err = c.ListAccountSettings(ctx, &ecs.ListAccountSettingsInput{EffectiveSettings: true})
	must("ListAccountSettings", err)
	_, err = c.DeleteAccountSetting(ctx, &ecs.DeleteAccountSettingInput{Name: ecstypes.SettingNameContainerInsights})
	must("DeleteAccountSetting", err)

	// An instance registered and deregistered by API, as the ECS agent does, in tour.
	reg, err := c.RegisterContainerInstance(ctx, &ecs.RegisterContainerInstanceInput{Cluster: aws.String("tour"),
		TotalResources: []ecstypes.Resource{{Name: aws.String("CPU"), Type: aws.String("INTEGER"), IntegerValue: 1024},
			{Name: aws.String("MEMORY"), Type: aws.String("INTEGER"), IntegerValue: 512}}})
	must("RegisterContainerInstance", err)
	_, err = c.DeregisterContainerInstance(ctx, &ecs.DeregisterContainerInstanceInput{Cluster: aws.String("tour"),
		ContainerInstance: reg.ContainerInstance.ContainerInstanceArn, Force: aws.Bool(true)})
	must("DeregisterContainerInstance", err)

	// Task definitions.
	register := func() *ecstypes.TaskDefinition {
		t.Helper()
		out, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String("tour"), Tags: tags,
			ContainerDefinitions: []ecstypes.ContainerDefinition{{
				Name: aws.String("app"), Image: aws.String(image), Memory: aws.Int32(32),
				Command:     []string{"sleep", "3600"},
				HealthCheck: &ecstypes.HealthCheck{Command: []string{"CMD", "/berth-testimage", "exit", "0"}},
			}},
		})
		must("RegisterTaskDefinition", err)
		return out.TaskDefinition
	}
	old, td := register(), register()
	_, err = c.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: td.TaskDefinitionArn, Include: []ecstypes.TaskDefinitionField{ecstypes.TaskDefinitionFieldTags}})
	must("DescribeTaskDefinition", err)
	_, err = c.ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String("tour")})
	must("ListTaskDefinitions", err)
	_, err = c.ListTaskDefinitionFamilies(ctx, &ecs.ListTaskDefinitionFamiliesInput{})
	must("ListTaskDefinitionFamilies", err)
	_, err = c.DeregisterTaskDefinition(ctx, &ecs.DeregisterTaskDefinitionInput{TaskDefinition: old.TaskDefinitionArn})
	must("DeregisterTaskDefinition", err)
	_, err = c.DeleteTaskDefinitions(ctx, &ecs.DeleteTaskDefinitionsInput{TaskDefinitions: []string{aws.ToString(old.TaskDefinitionArn)}})
	must("DeleteTaskDefinitions", err)

	// Container instances and attributes (the dev agent's instance in default).
	instances, err := c.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{})
	must("ListContainerInstances", err)
	if len(instances.ContainerInstanceArns) != 1 {
		t.Fatalf("container instances in default: %v", instances.ContainerInstanceArns)
	}
	instance := instances.ContainerInstanceArns[0]
	_, err = c.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{ContainerInstances: []string{instance, "nope"},
		Include: []ecstypes.ContainerInstanceField{ecstypes.ContainerInstanceFieldTags}})
	must("DescribeContainerInstances", err)
	attr := []ecstypes.Attribute{{Name: aws.String("tour.role"), Value: aws.String("web"), TargetId: aws.String(instance)}}
	_, err = c.PutAttributes(ctx, &ecs.PutAttributesInput{Attributes: attr})
	must("PutAttributes", err)
	_, err = c.ListAttributes(ctx, &ecs.ListAttributesInput{TargetType: ecstypes.TargetTypeContainerInstance, AttributeName: aws.String("tour.role")})
	must("ListAttributes", err)
	_, err = c.DeleteAttributes(ctx, &ecs.DeleteAttributesInput{Attributes: attr})
	must("DeleteAttributes", err)
	_, err = c.UpdateContainerInstancesState(ctx, &ecs.UpdateContainerInstancesStateInput{ContainerInstances: []string{instance}, Status: ecstypes.ContainerInstanceStatusActive})
	must("UpdateContainerInstancesState", err)

	// Tasks.
	run, err := c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: td.TaskDefinitionArn, Tags: tags})
	must("RunTask", err)
	started, err := c.StartTask(ctx, &ecs.StartTaskInput{TaskDefinition: td.TaskDefinitionArn, ContainerInstances: []string{instance}})
	must("StartTask", err)
	if len(run.Tasks) != 1 || len(started.Tasks) != 1 {
		t.Fatalf("RunTask %+v StartTask %+v", run.Failures, started.Failures)
	}
	_, err = c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: []string{aws.ToString(run.Tasks[0].TaskArn), "nope"}, Include: []ecstypes.TaskField{ecstypes.TaskFieldTags}})
	must("DescribeTasks", err)
	_, err = c.ListTasks(ctx, &ecs.ListTasksInput{})
	must("ListTasks", err)
	for _, task := range []ecstypes.Task{run.Tasks[0], started.Tasks[0]} {
		_, err = c.StopTask(ctx, &ecs.StopTaskInput{Task: task.TaskArn, Reason: aws.String("tour")})
		must("StopTask", err)
	}

	// A service, its deployments and revisions, task protection, tags.
	svc, err := c.CreateService(ctx, &ecs.CreateServiceInput{ServiceName: aws.String("tour"), TaskDefinition: td.TaskDefinitionArn, DesiredCount: aws.Int32(1),
		// Alarms without names: AWS answers "alarmNames": [], a member the model requires.
		DeploymentConfiguration: &ecstypes.DeploymentConfiguration{Alarms: &ecstypes.DeploymentAlarms{AlarmNames: []string{}}}})
	must("CreateService", err)
	var serviceTask string
	for serviceTask == "" {
		if ctx.Err() != nil {
			t.Fatal("the service's task never ran")
		}
		listed, err := c.ListTasks(ctx, &ecs.ListTasksInput{ServiceName: aws.String("tour")})
		must("ListTasks", err)
		if len(listed.TaskArns) > 0 {
			d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: listed.TaskArns})
			must("DescribeTasks", err)
			if len(d.Tasks) > 0 && aws.ToString(d.Tasks[0].LastStatus) == "RUNNING" {
				serviceTask = aws.ToString(d.Tasks[0].TaskArn)
				continue
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err = c.DescribeServices(ctx, &ecs.DescribeServicesInput{Services: []string{"tour", "nope"}, Include: []ecstypes.ServiceField{ecstypes.ServiceFieldTags}})
	must("DescribeServices", err)
	_, err = c.UpdateService(ctx, &ecs.UpdateServiceInput{Service: aws.String("tour"), DesiredCount: aws.Int32(1)})
	must("UpdateService", err)
	_, err = c.ListServices(ctx, &ecs.ListServicesInput{})
	must("ListServices", err)
	// ListServicesByNamespace needs a Service Connect namespace, which Berth has none of
	// yet: NamespaceNotFoundException, as AWS answers for an unknown one.
	if _, err = c.ListServicesByNamespace(ctx, &ecs.ListServicesByNamespaceInput{Namespace: aws.String("tour")}); apiErrorCode(err) != "NamespaceNotFoundException" {
		t.Errorf("ListServicesByNamespace of an unknown namespace: %v, want NamespaceNotFoundException", err)
	}
	deployments, err := c.ListServiceDeployments(ctx, &ecs.ListServiceDeploymentsInput{Service: aws.String("tour")})
	must("ListServiceDeployments", err)
	if len(deployments.ServiceDeployments) > 0 {
		arn := aws.ToString(deployments.ServiceDeployments[0].ServiceDeploymentArn)
		sd, err := c.DescribeServiceDeployments(ctx, &ecs.DescribeServiceDeploymentsInput{ServiceDeploymentArns: []string{arn}})
		must("DescribeServiceDeployments", err)
		if len(sd.ServiceDeployments) > 0 && sd.ServiceDeployments[0].TargetServiceRevision != nil {
			_, err = c.DescribeServiceRevisions(ctx, &ecs.DescribeServiceRevisionsInput{ServiceRevisionArns: []string{aws.ToString(sd.ServiceDeployments[0].TargetServiceRevision.Arn)}})
			must("DescribeServiceRevisions", err)
		}
	}
	_, err = c.UpdateTaskProtection(ctx, &ecs.UpdateTaskProtectionInput{Cluster: aws.String("default"), Tasks: []string{serviceTask}, ProtectionEnabled: true, ExpiresInMinutes: aws.Int32(5)})
	must("UpdateTaskProtection", err)
	_, err = c.GetTaskProtection(ctx, &ecs.GetTaskProtectionInput{Cluster: aws.String("default"), Tasks: []string{serviceTask}})
	must("GetTaskProtection", err)
	_, err = c.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: svc.Service.ServiceArn, Tags: tags})
	must("TagResource", err)
	_, err = c.ListTagsForResource(ctx, &ecs.ListTagsForResourceInput{ResourceArn: svc.Service.ServiceArn})
	must("ListTagsForResource", err)
	_, err = c.UntagResource(ctx, &ecs.UntagResourceInput{ResourceArn: svc.Service.ServiceArn, TagKeys: []string{"team"}})
	must("UntagResource", err)
	_, err = c.UpdateTaskProtection(ctx, &ecs.UpdateTaskProtectionInput{Cluster: aws.String("default"), Tasks: []string{serviceTask}, ProtectionEnabled: false})
	must("UpdateTaskProtection", err)
	_, err = c.DeleteService(ctx, &ecs.DeleteServiceInput{Service: aws.String("tour"), Force: aws.Bool(true)})
	must("DeleteService", err)
	_, err = c.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String("tour")})
	must("DeleteCluster", err)
	// No container may outlive the test (the private containerd's state is in its TempDir).
	all := []string{aws.ToString(run.Tasks[0].TaskArn), aws.ToString(started.Tasks[0].TaskArn), serviceTask}
	for {
		d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: all})
		must("DescribeTasks", err)
		stopped := 0
		for _, task := range d.Tasks {
			if aws.ToString(task.LastStatus) == "STOPPED" {
				stopped++
			}
		}
		if stopped == len(all) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("tasks not stopped: %d of %d", stopped, len(all))
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The proxy saw (and walked) an answer of every action called above.
	checked := shapes.Checked()
	var missing []string
	for _, op := range []string{
		"CreateCluster", "DescribeClusters", "ListClusters", "UpdateClusterSettings", "UpdateCluster", "PutClusterCapacityProviders",
		"PutAccountSetting", "PutAccountSettingDefault", "ListAccountSettings", "DeleteAccountSetting",
		"RegisterContainerInstance", "DeregisterContainerInstance",
		"RegisterTaskDefinition", "DescribeTaskDefinition", "ListTaskDefinitions", "ListTaskDefinitionFamilies", "DeregisterTaskDefinition", "DeleteTaskDefinitions",
		"ListContainerInstances", "DescribeContainerInstances", "PutAttributes", "ListAttributes", "DeleteAttributes", "UpdateContainerInstancesState",
		"RunTask", "StartTask", "DescribeTasks", "ListTasks", "StopTask",
		"CreateService", "DescribeServices", "UpdateService", "ListServices", "ListServiceDeployments",
		"UpdateTaskProtection", "GetTaskProtection", "TagResource", "ListTagsForResource", "UntagResource", "DeleteService", "DeleteCluster",
	} {
		if checked[op] == 0 {
			missing = append(missing, op)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no answer walked for %s", strings.Join(missing, ", "))
	}
}
