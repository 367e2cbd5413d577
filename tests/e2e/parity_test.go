package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"
)

// The AWS parity leftovers of issue 35, each through the real gateway with the AWS SDK
// for Go v2.

// TestDescribeServicesMissingARN: a service DescribeServices does not find by name comes
// back in failures[] as arn:aws:ecs:REGION:ACCOUNT:service/NAME, without the cluster, as
// AWS answers it (DescribeServices API reference, Failure; AWS's own answers quoted in
// aws-actions/amazon-ecs-deploy-task-definition#312 and #369: "arn:aws:ecs:us-east-2:***:
// service/pawebapp-service is MISSING" for a service given by name); one given by ARN
// comes back with the ARN given.
func TestDescribeServicesMissingARN(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "000000000000"
	s := startAPIStack(t, acct)
	c := s.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("parity")}); err != nil {
		t.Fatal(err)
	}
	long := "arn:aws:ecs:us-east-1:" + acct + ":service/parity/by-long-arn"
	short := "arn:aws:ecs:us-east-1:" + acct + ":service/by-short-arn"
	d, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String("parity"), Services: []string{"by-name", long, short}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"arn:aws:ecs:us-east-1:" + acct + ":service/by-name", long, short}
	if len(d.Services) != 0 || len(d.Failures) != len(want) {
		t.Fatalf("DescribeServices: %d services, failures %+v; want %d failures", len(d.Services), d.Failures, len(want))
	}
	for i, f := range d.Failures {
		if aws.ToString(f.Arn) != want[i] || aws.ToString(f.Reason) != "MISSING" {
			t.Errorf("failures[%d] = %s %s, want %s MISSING", i, aws.ToString(f.Arn), aws.ToString(f.Reason), want[i])
		}
	}
}

// TestDeletedClusterDescribedInactive: a deleted cluster stays describable with status
// INACTIVE, by name or ARN and with include, while ListClusters no longer lists it
// (DescribeClusters API reference: "INACTIVE clusters may remain discoverable";
// DeleteCluster: the cluster "transitions to INACTIVE").
func TestDeletedClusterDescribedInactive(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "000000000000"
	s := startAPIStack(t, acct)
	c := s.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"kept", "gone"} {
		if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(name),
			Tags: []ecstypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	del, err := c.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String("gone")})
	if err != nil || aws.ToString(del.Cluster.Status) != "INACTIVE" {
		t.Fatalf("DeleteCluster: %+v %v", del, err)
	}
	gone := "arn:aws:ecs:us-east-1:" + acct + ":cluster/gone"
	d, err := c.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"gone", gone},
		Include: []ecstypes.ClusterField{ecstypes.ClusterFieldTags, ecstypes.ClusterFieldStatistics, ecstypes.ClusterFieldSettings}})
	if err != nil || len(d.Failures) != 0 || len(d.Clusters) != 2 {
		t.Fatalf("DescribeClusters of the deleted cluster: %+v %v", d, err)
	}
	for _, cl := range d.Clusters {
		if aws.ToString(cl.ClusterArn) != gone || aws.ToString(cl.Status) != "INACTIVE" {
			t.Errorf("deleted cluster described as %s %s, want %s INACTIVE", aws.ToString(cl.ClusterArn), aws.ToString(cl.Status), gone)
		}
	}
	l, err := c.ListClusters(ctx, &ecs.ListClustersInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range l.ClusterArns {
		if a == gone {
			t.Errorf("ListClusters lists the deleted cluster: %v", l.ClusterArns)
		}
	}
	if len(l.ClusterArns) != 1 {
		t.Errorf("ListClusters = %v, want only kept", l.ClusterArns)
	}
}

// TestFargatePidIpcModeMessages: RegisterTaskDefinition of a Fargate task definition with
// pidMode host or an ipcMode is refused with AWS's ClientException texts
// (RegisterTaskDefinition API reference: pidMode "On Fargate for Linux containers, the
// only valid value is task"; ipcMode "not supported for ... tasks run on Fargate"; AWS's
// answer quoted in aws/aws-cdk#29995).
func TestFargatePidIpcModeMessages(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "000000000000"
	s := startAPIStack(t, acct)
	c := s.clients[acct]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := func(mod func(*ecs.RegisterTaskDefinitionInput)) *ecs.RegisterTaskDefinitionInput {
		in := &ecs.RegisterTaskDefinitionInput{
			Family: aws.String("fg"), NetworkMode: ecstypes.NetworkModeAwsvpc, Cpu: aws.String("256"), Memory: aws.String("512"),
			RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
			ContainerDefinitions:    []ecstypes.ContainerDefinition{{Name: aws.String("app"), Image: aws.String("img")}},
		}
		mod(in)
		return in
	}
	for _, tc := range []struct {
		name string
		in   *ecs.RegisterTaskDefinitionInput
		want string
	}{
		{"pidMode host", in(func(in *ecs.RegisterTaskDefinitionInput) { in.PidMode = ecstypes.PidModeHost }),
			"Tasks using the Fargate launch type do not support pidMode 'host'. The supported value for pidMode is 'task'."},
		{"ipcMode task", in(func(in *ecs.RegisterTaskDefinitionInput) { in.IpcMode = ecstypes.IpcModeTask }),
			"Tasks using the Fargate launch type do not support ipcMode."},
	} {
		_, err := c.RegisterTaskDefinition(ctx, tc.in)
		if code := apiErrorCode(err); code != "ClientException" || errorMessage(err) != tc.want {
			t.Errorf("%s: %v (code %q), want ClientException %q", tc.name, err, code, tc.want)
		}
	}
	// pidMode task is Fargate's one pidMode.
	if _, err := c.RegisterTaskDefinition(ctx, in(func(in *ecs.RegisterTaskDefinitionInput) { in.PidMode = ecstypes.PidModeTask })); err != nil {
		t.Errorf("Fargate task definition with pidMode task: %v", err)
	}
}

// errorMessage returns the message of an AWS API error, "" for another error.
func errorMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return ""
}
