package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// isType reports whether err is (wraps) the AWS SDK for Go's typed error T: the SDK only
// builds the typed error when the __type is one the model lists for the operation, so a
// match proves the error is a documented one for that action.
func isType[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

// TestDocumentedErrorsWithSDK provokes, through the real gateway and scheduler and the AWS
// SDK for Go v2, the documented error of each action Berth serves where Berth can (unknown
// cluster, service, task definition, target; a bad parameter; a busy cluster), and checks
// the SDK's typed error (errors.As) and, where the API reference gives one, AWS's message.
// The stack's shape recorder additionally fails the test on any error type the ECS model
// does not list for the operation (shapecheck.Model.CheckError).
func TestDocumentedErrorsWithSDK(t *testing.T) {
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	c := stack.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Fixtures: a cluster with a service (desired 1, so it cannot be deleted unforced) and a
	// registered task definition.
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("errs")}); err != nil {
		t.Fatal(err)
	}
	reg, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("errs"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("app"), Image: aws.String("127.0.0.1:5000/app:1"), Memory: aws.Int32(64),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tdARN := aws.ToString(reg.TaskDefinition.TaskDefinitionArn)
	if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: aws.String("errs"), ServiceName: aws.String("web"), TaskDefinition: aws.String(tdARN), DesiredCount: aws.Int32(1),
	}); err != nil {
		t.Fatal(err)
	}
	// A deleted (DRAINING, later INACTIVE) service: UpdateService answers
	// ServiceNotActiveException.
	if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: aws.String("errs"), ServiceName: aws.String("gone"), TaskDefinition: aws.String(tdARN), DesiredCount: aws.Int32(0),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String("errs"), Service: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	const (
		noCluster = "no-such-cluster"
		noService = "no-such-service"
		unknownCI = "arn:aws:ecs:us-east-1:111111111111:container-instance/errs/0123456789abcdef0123456789abcdef"
		unknownTk = "arn:aws:ecs:us-east-1:111111111111:task/errs/0123456789abcdef0123456789abcdef"
	)

	cases := []struct {
		op   string
		call func() error
		// typed is the SDK typed error the answer must be.
		typed func(error) bool
		// message, when set, is AWS's message from the API reference or the AWS CLI
		// examples, which the answer must carry exactly.
		message string
	}{
		// Unknown cluster: ClusterNotFoundException ("Cluster not found.").
		{"DescribeServices", func() error {
			_, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(noCluster), Services: []string{"web"}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"ListServices", func() error {
			_, err := c.ListServices(ctx, &ecs.ListServicesInput{Cluster: aws.String(noCluster)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"ListTasks", func() error {
			_, err := c.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(noCluster)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"DescribeTasks", func() error {
			_, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(noCluster), Tasks: []string{unknownTk}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"ListContainerInstances", func() error {
			_, err := c.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{Cluster: aws.String(noCluster)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"DescribeContainerInstances", func() error {
			_, err := c.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String(noCluster), ContainerInstances: []string{unknownCI}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"ListAttributes", func() error {
			_, err := c.ListAttributes(ctx, &ecs.ListAttributesInput{Cluster: aws.String(noCluster), TargetType: ecstypes.TargetTypeContainerInstance})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"RunTask", func() error {
			_, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(noCluster), TaskDefinition: aws.String(tdARN)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"StartTask", func() error {
			_, err := c.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(noCluster), TaskDefinition: aws.String(tdARN), ContainerInstances: []string{unknownCI}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"StopTask", func() error {
			_, err := c.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(noCluster), Task: aws.String(unknownTk)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"CreateService", func() error {
			_, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String(noCluster), ServiceName: aws.String("web"), TaskDefinition: aws.String(tdARN), DesiredCount: aws.Int32(1)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"UpdateCluster", func() error {
			_, err := c.UpdateCluster(ctx, &ecs.UpdateClusterInput{Cluster: aws.String(noCluster), Settings: []ecstypes.ClusterSetting{{Name: ecstypes.ClusterSettingNameContainerInsights, Value: aws.String("disabled")}}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"UpdateClusterSettings", func() error {
			_, err := c.UpdateClusterSettings(ctx, &ecs.UpdateClusterSettingsInput{Cluster: aws.String(noCluster), Settings: []ecstypes.ClusterSetting{{Name: ecstypes.ClusterSettingNameContainerInsights, Value: aws.String("disabled")}}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"PutClusterCapacityProviders", func() error {
			_, err := c.PutClusterCapacityProviders(ctx, &ecs.PutClusterCapacityProvidersInput{Cluster: aws.String(noCluster), CapacityProviders: []string{}, DefaultCapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"DeleteCluster", func() error {
			_, err := c.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String(noCluster)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"TagResource", func() error {
			_, err := c.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: aws.String("arn:aws:ecs:us-east-1:" + acct + ":cluster/" + noCluster), Tags: []ecstypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"ListTagsForResource", func() error {
			_, err := c.ListTagsForResource(ctx, &ecs.ListTagsForResourceInput{ResourceArn: aws.String("arn:aws:ecs:us-east-1:" + acct + ":cluster/" + noCluster)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"UntagResource", func() error {
			_, err := c.UntagResource(ctx, &ecs.UntagResourceInput{ResourceArn: aws.String("arn:aws:ecs:us-east-1:" + acct + ":cluster/" + noCluster), TagKeys: []string{"k"}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"UpdateContainerInstancesState", func() error {
			_, err := c.UpdateContainerInstancesState(ctx, &ecs.UpdateContainerInstancesStateInput{Cluster: aws.String(noCluster), ContainerInstances: []string{unknownCI}, Status: ecstypes.ContainerInstanceStatusDraining})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"DeregisterContainerInstance", func() error {
			_, err := c.DeregisterContainerInstance(ctx, &ecs.DeregisterContainerInstanceInput{Cluster: aws.String(noCluster), ContainerInstance: aws.String(unknownCI)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"GetTaskProtection", func() error {
			_, err := c.GetTaskProtection(ctx, &ecs.GetTaskProtectionInput{Cluster: aws.String(noCluster), Tasks: []string{unknownTk}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"UpdateTaskProtection", func() error {
			_, err := c.UpdateTaskProtection(ctx, &ecs.UpdateTaskProtectionInput{Cluster: aws.String(noCluster), Tasks: []string{unknownTk}, ProtectionEnabled: true})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"PutAttributes", func() error {
			_, err := c.PutAttributes(ctx, &ecs.PutAttributesInput{Cluster: aws.String(noCluster), Attributes: []ecstypes.Attribute{{Name: aws.String("a"), TargetId: aws.String(unknownCI)}}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"DeleteAttributes", func() error {
			_, err := c.DeleteAttributes(ctx, &ecs.DeleteAttributesInput{Cluster: aws.String(noCluster), Attributes: []ecstypes.Attribute{{Name: aws.String("a"), TargetId: aws.String(unknownCI)}}})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},

		// Unknown service: ServiceNotFoundException ("Service not found.").
		{"UpdateService", func() error {
			_, err := c.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("errs"), Service: aws.String(noService), DesiredCount: aws.Int32(0)})
			return err
		}, isType[*ecstypes.ServiceNotFoundException], "Service not found."},
		{"DeleteService", func() error {
			_, err := c.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String("errs"), Service: aws.String(noService)})
			return err
		}, isType[*ecstypes.ServiceNotFoundException], "Service not found."},
		{"ListTasks", func() error {
			_, err := c.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String("errs"), ServiceName: aws.String(noService)})
			return err
		}, isType[*ecstypes.ServiceNotFoundException], "Service not found."},
		{"ListServiceDeployments", func() error {
			_, err := c.ListServiceDeployments(ctx, &ecs.ListServiceDeploymentsInput{Cluster: aws.String("errs"), Service: aws.String(noService)})
			return err
		}, isType[*ecstypes.ServiceNotFoundException], ""},

		// Unknown task definition: ClientException ("Unable to describe task definition.").
		{"DescribeTaskDefinition", func() error {
			_, err := c.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String("no-such-family:1")})
			return err
		}, isType[*ecstypes.ClientException], "Unable to describe task definition."},
		{"DeregisterTaskDefinition", func() error {
			_, err := c.DeregisterTaskDefinition(ctx, &ecs.DeregisterTaskDefinitionInput{TaskDefinition: aws.String("no-such-family:1")})
			return err
		}, isType[*ecstypes.ClientException], ""},
		{"RunTask", func() error {
			_, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("errs"), TaskDefinition: aws.String("no-such-family:1")})
			return err
		}, isType[*ecstypes.ClientException], ""},
		{"CreateService", func() error {
			_, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("errs"), ServiceName: aws.String("web2"), TaskDefinition: aws.String("no-such-family:1"), DesiredCount: aws.Int32(1)})
			return err
		}, isType[*ecstypes.ClientException], ""},
		// DeleteTaskDefinitions of an ACTIVE revision: ClientException (only INACTIVE ones
		// can be deleted).
		{"DeleteTaskDefinitions", func() error {
			out, err := c.DeleteTaskDefinitions(ctx, &ecs.DeleteTaskDefinitionsInput{TaskDefinitions: []string{}})
			if err == nil {
				return fmt.Errorf("no error; failures %v", out.Failures)
			}
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},

		// Bad parameters: InvalidParameterException.
		{"RegisterTaskDefinition", func() error {
			_, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{Family: aws.String("bad family!"), ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("a"), Image: aws.String("i"), Memory: aws.Int32(64)}}})
			return err
		}, func(err error) bool {
			return isType[*ecstypes.ClientException](err) || isType[*ecstypes.InvalidParameterException](err)
		}, ""},
		{"CreateCluster", func() error {
			_, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("bad name!")})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"DescribeClusters", func() error {
			_, err := c.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: make([]string, 101)})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"ListClusters", func() error {
			_, err := c.ListClusters(ctx, &ecs.ListClustersInput{MaxResults: aws.Int32(101)})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"ListTaskDefinitions", func() error {
			_, err := c.ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{MaxResults: aws.Int32(101)})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"ListTaskDefinitionFamilies", func() error {
			_, err := c.ListTaskDefinitionFamilies(ctx, &ecs.ListTaskDefinitionFamiliesInput{MaxResults: aws.Int32(101)})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"PutAccountSetting", func() error {
			_, err := c.PutAccountSetting(ctx, &ecs.PutAccountSettingInput{Name: "noSuchSetting", Value: aws.String("enabled")})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"PutAccountSettingDefault", func() error {
			_, err := c.PutAccountSettingDefault(ctx, &ecs.PutAccountSettingDefaultInput{Name: "noSuchSetting", Value: aws.String("enabled")})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"DeleteAccountSetting", func() error {
			_, err := c.DeleteAccountSetting(ctx, &ecs.DeleteAccountSettingInput{Name: "noSuchSetting"})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"ListAccountSettings", func() error {
			_, err := c.ListAccountSettings(ctx, &ecs.ListAccountSettingsInput{Name: "noSuchSetting"})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"DescribeServiceDeployments", func() error {
			_, err := c.DescribeServiceDeployments(ctx, &ecs.DescribeServiceDeploymentsInput{ServiceDeploymentArns: make([]string, 21)})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"DescribeServiceRevisions", func() error {
			_, err := c.DescribeServiceRevisions(ctx, &ecs.DescribeServiceRevisionsInput{ServiceRevisionArns: make([]string, 21)})
			return err
		}, isType[*ecstypes.InvalidParameterException], ""},
		{"RegisterContainerInstance", func() error {
			_, err := c.RegisterContainerInstance(ctx, &ecs.RegisterContainerInstanceInput{Cluster: aws.String(noCluster)})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		// A service scaled above 0 cannot be deleted without force (DeleteService).
		{"DeleteService", func() error {
			_, err := c.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String("errs"), Service: aws.String("web")})
			return err
		}, isType[*ecstypes.InvalidParameterException], "The service cannot be stopped while it is scaled above 0."},
		// A service name in use by an ACTIVE service with other parameters (CreateService).
		{"CreateService", func() error {
			_, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("errs"), ServiceName: aws.String("web"), TaskDefinition: aws.String(tdARN), DesiredCount: aws.Int32(3)})
			return err
		}, isType[*ecstypes.InvalidParameterException], "Creation of service was not idempotent."},
		// A cluster with an active service cannot be deleted (DeleteCluster).
		{"DeleteCluster", func() error {
			_, err := c.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String("errs")})
			return err
		}, isType[*ecstypes.ClusterContainsServicesException], "The Cluster cannot be deleted while Services are active."},
		// Unknown attribute target: TargetNotFoundException.
		{"PutAttributes", func() error {
			_, err := c.PutAttributes(ctx, &ecs.PutAttributesInput{Cluster: aws.String("errs"), Attributes: []ecstypes.Attribute{{Name: aws.String("a"), TargetId: aws.String(unknownCI)}}})
			return err
		}, isType[*ecstypes.TargetNotFoundException], ""},
		{"DeleteAttributes", func() error {
			_, err := c.DeleteAttributes(ctx, &ecs.DeleteAttributesInput{Cluster: aws.String("errs"), Attributes: []ecstypes.Attribute{{Name: aws.String("a"), TargetId: aws.String(unknownCI)}}})
			return err
		}, isType[*ecstypes.TargetNotFoundException], ""},
		// A service that is not ACTIVE cannot be updated (UpdateService:
		// ServiceNotActiveException, "Service was not ACTIVE.").
		{"UpdateService", func() error {
			_, err := c.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("errs"), Service: aws.String("gone"), DesiredCount: aws.Int32(1)})
			return err
		}, isType[*ecstypes.ServiceNotActiveException], "Service was not ACTIVE."},
		// ECS Exec (docs/exec.md): unknown cluster, unknown task, non-interactive.
		{"ExecuteCommand", func() error {
			_, err := c.ExecuteCommand(ctx, &ecs.ExecuteCommandInput{Cluster: aws.String(noCluster), Task: aws.String(unknownTk), Command: aws.String("sh"), Interactive: true})
			return err
		}, isType[*ecstypes.ClusterNotFoundException], "Cluster not found."},
		{"ExecuteCommand", func() error {
			_, err := c.ExecuteCommand(ctx, &ecs.ExecuteCommandInput{Cluster: aws.String("errs"), Task: aws.String(unknownTk), Command: aws.String("sh"), Interactive: true})
			return err
		}, isType[*ecstypes.InvalidParameterException], "The task provided in the request was not found."},
		{"ExecuteCommand", func() error {
			_, err := c.ExecuteCommand(ctx, &ecs.ExecuteCommandInput{Cluster: aws.String("errs"), Task: aws.String(unknownTk), Command: aws.String("sh")})
			return err
		}, isType[*ecstypes.InvalidParameterException], "Interactive is the only mode supported currently."},
		// Unknown task in a known cluster (StopTask: InvalidParameterException).
		{"StopTask", func() error {
			_, err := c.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String("errs"), Task: aws.String(unknownTk)})
			return err
		}, isType[*ecstypes.InvalidParameterException], "The referenced task was not found."},
		// Unknown resource to tag: TagResource lists ResourceNotFoundException;
		// ListTagsForResource does not, and answers ClientException.
		{"TagResource", func() error {
			_, err := c.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: aws.String(unknownTk), Tags: []ecstypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
			return err
		}, isType[*ecstypes.ResourceNotFoundException], ""},
		{"UntagResource", func() error {
			_, err := c.UntagResource(ctx, &ecs.UntagResourceInput{ResourceArn: aws.String(unknownTk), TagKeys: []string{"k"}})
			return err
		}, isType[*ecstypes.ResourceNotFoundException], ""},
		{"ListTagsForResource", func() error {
			_, err := c.ListTagsForResource(ctx, &ecs.ListTagsForResourceInput{ResourceArn: aws.String("arn:aws:ecs:us-east-1:" + acct + ":task-definition/no-such-family:1")})
			return err
		}, isType[*ecstypes.ClientException], ""},
		// Unknown namespace: NamespaceNotFoundException.
		{"ListServicesByNamespace", func() error {
			_, err := c.ListServicesByNamespace(ctx, &ecs.ListServicesByNamespaceInput{Namespace: aws.String("no-such-namespace")})
			return err
		}, isType[*ecstypes.NamespaceNotFoundException], ""},
	}
	for _, tc := range cases {
		err := tc.call()
		if err == nil {
			t.Errorf("%s: no error", tc.op)
			continue
		}
		if !tc.typed(err) {
			t.Errorf("%s: error %T (%s) is not the documented typed error: %v", tc.op, err, apiErrorCode(err), err)
			continue
		}
		if tc.message != "" {
			var ae interface{ ErrorMessage() string }
			if errors.As(err, &ae) && ae.ErrorMessage() != tc.message {
				t.Errorf("%s: message %q, want AWS's %q", tc.op, ae.ErrorMessage(), tc.message)
			}
		}
	}

	// A common error (not in any operation's model list, on AWS's Common Errors page): an
	// unknown access key is UnrecognizedClientException, which the recorder accepts.
	stranger := ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(stack.url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIANOSUCHKEY0000000", SecretAccessKey: "x"}, nil
		}),
	})
	if _, err := stranger.ListClusters(ctx, &ecs.ListClustersInput{}); apiErrorCode(err) != "UnrecognizedClientException" {
		t.Errorf("unknown access key: %v", err)
	}
}
