package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
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
