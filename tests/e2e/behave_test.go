package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// TestBehavioursWithSDK drives issue 12's "behaviours found wrong" through the real
// gateway with the AWS SDK for Go v2, checking that each error comes back as the SDK's
// typed exception (what a Go deploy tool matches with errors.As) and that the fixed
// behaviours hold end to end: DAEMON with a desiredCount, a task cpu below 128 units,
// unknown clusters, ListServices without DRAINING services and with full pages, ListTasks
// of an unknown service,
// RegisterContainerInstance with an instance identity document, and RunTask with every
// instance DRAINING.
func TestBehavioursWithSDK(t *testing.T) {
	const acct = "333333333333"
	stack := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := stack.clients[acct]
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("b")}); err != nil {
		t.Fatal(err)
	}
	cluster := aws.String("b")

	// Task cpu below the EC2 minimum: ClientException.
	_, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("tiny"), Cpu: aws.String("64"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("img"), Memory: aws.Int32(64)}},
	})
	var ce *ecstypes.ClientException
	if !errors.As(err, &ce) || aws.ToString(ce.Message) != "Invalid 'cpu' setting for task. For more information, see the Troubleshooting section of the Amazon ECS Developer Guide." {
		t.Fatalf("task cpu 64: %v", err)
	}
	reg, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("web"), Cpu: aws.String("128"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("img"), Memory: aws.Int32(64)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	td := reg.TaskDefinition.TaskDefinitionArn

	// DAEMON with a desiredCount: InvalidParameterException, on create and on update.
	const daemonMsg = "The daemon scheduling strategy does not support a desired count for services. Remove the desired count value and try again"
	_, err = c.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: cluster, ServiceName: aws.String("mon"), TaskDefinition: td,
		SchedulingStrategy: ecstypes.SchedulingStrategyDaemon, DesiredCount: aws.Int32(1),
	})
	var ipe *ecstypes.InvalidParameterException
	if !errors.As(err, &ipe) || aws.ToString(ipe.Message) != daemonMsg {
		t.Fatalf("CreateService DAEMON with desiredCount: %v", err)
	}
	if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: cluster, ServiceName: aws.String("mon"), TaskDefinition: td, SchedulingStrategy: ecstypes.SchedulingStrategyDaemon,
	}); err != nil {
		t.Fatal(err)
	}
	_, err = c.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: cluster, Service: aws.String("mon"), DesiredCount: aws.Int32(2)})
	if !errors.As(err, &ipe) || aws.ToString(ipe.Message) != daemonMsg {
		t.Fatalf("UpdateService DAEMON with desiredCount: %v", err)
	}

	// Unknown cluster: ClusterNotFoundException.
	var cnf *ecstypes.ClusterNotFoundException
	if _, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String("nope"), Services: []string{"mon"}}); !errors.As(err, &cnf) {
		t.Fatalf("DescribeServices in an unknown cluster: %v", err)
	}
	if _, err := c.ListServices(ctx, &ecs.ListServicesInput{Cluster: aws.String("nope")}); !errors.As(err, &cnf) {
		t.Fatalf("ListServices in an unknown cluster: %v", err)
	}
	if _, err := c.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String("nope")}); !errors.As(err, &cnf) {
		t.Fatalf("ListTasks in an unknown cluster: %v", err)
	}

	// ListServices: DRAINING services are not listed, and pages are full.
	want := []string{}
	for _, n := range []string{"s1", "s2", "s3", "s4", "s5", "s6"} {
		if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{Cluster: cluster, ServiceName: aws.String(n), TaskDefinition: td, DesiredCount: aws.Int32(0)}); err != nil {
			t.Fatal(err)
		}
		if n == "s2" || n == "s4" {
			if _, err := c.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: cluster, Service: aws.String(n)}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want = append(want, "arn:aws:ecs:us-east-1:"+acct+":service/b/"+n)
	}
	want = append([]string{"arn:aws:ecs:us-east-1:" + acct + ":service/b/mon"}, want...)
	var got []string
	p := ecs.NewListServicesPaginator(c, &ecs.ListServicesInput{Cluster: cluster, MaxResults: aws.Int32(2)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if page.NextToken != nil && len(page.ServiceArns) != 2 {
			t.Fatalf("short page with a nextToken: %v", page.ServiceArns)
		}
		got = append(got, page.ServiceArns...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ListServices %v, want %v", got, want)
	}

	// ListTasks of a service that does not exist: ServiceNotFoundException.
	var snf *ecstypes.ServiceNotFoundException
	if _, err := c.ListTasks(ctx, &ecs.ListTasksInput{Cluster: cluster, ServiceName: aws.String("nope")}); !errors.As(err, &snf) {
		t.Fatalf("ListTasks of an unknown service: %v", err)
	}
	if _, err := c.ListTasks(ctx, &ecs.ListTasksInput{Cluster: cluster, ServiceName: aws.String("s1")}); err != nil {
		t.Fatalf("ListTasks of s1: %v", err)
	}

	// RegisterContainerInstance with an instance identity document.
	doc := `{"availabilityZone":"us-east-1c","instanceId":"i-0fedcba9876543210","region":"us-east-1","accountId":"` + acct + `"}`
	ri, err := c.RegisterContainerInstance(ctx, &ecs.RegisterContainerInstanceInput{
		Cluster: cluster, InstanceIdentityDocument: aws.String(doc), InstanceIdentityDocumentSignature: aws.String("sig"),
		TotalResources: []ecstypes.Resource{
			{Name: aws.String("CPU"), Type: aws.String("INTEGER"), IntegerValue: 1024},
			{Name: aws.String("MEMORY"), Type: aws.String("INTEGER"), IntegerValue: 1024},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ci := ri.ContainerInstance
	az := ""
	for _, a := range ci.Attributes {
		if aws.ToString(a.Name) == "ecs.availability-zone" {
			az = aws.ToString(a.Value)
		}
	}
	if aws.ToString(ci.Ec2InstanceId) != "i-0fedcba9876543210" || az != "us-east-1c" {
		t.Fatalf("registered ec2InstanceId %q ecs.availability-zone %q", aws.ToString(ci.Ec2InstanceId), az)
	}

	// RunTask with the only instance DRAINING: every unplaced task is explained.
	if _, err := c.UpdateContainerInstancesState(ctx, &ecs.UpdateContainerInstancesStateInput{
		Cluster: cluster, ContainerInstances: []string{aws.ToString(ci.ContainerInstanceArn)}, Status: ecstypes.ContainerInstanceStatusDraining,
	}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: cluster, TaskDefinition: td, Count: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Tasks) != 0 || len(rt.Failures) == 0 || aws.ToString(rt.Failures[0].Arn) != aws.ToString(ci.ContainerInstanceArn) ||
		aws.ToString(rt.Failures[0].Reason) != "DRAINING" {
		t.Fatalf("RunTask on a DRAINING cluster: tasks %d failures %+v", len(rt.Tasks), rt.Failures)
	}
}
