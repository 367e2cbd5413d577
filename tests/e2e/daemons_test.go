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

	"github.com/berthhq/berth/tests/e2e/harness"
)

// daemonTasks returns, for the RUNNING tasks of daemon task definition revisions named
// in tds, the task definition each instance runs, and fails on two live daemon tasks on
// one instance.
func daemonTasks(ctx context.Context, c *harness.Cluster, tds ...string) (map[string]string, error) {
	tasks, err := c.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, td := range tds {
		want[td] = true
	}
	out := map[string]string{}
	for _, t := range tasks {
		td := aws.ToString(t.TaskDefinitionArn)
		if !want[td] || aws.ToString(t.LastStatus) != "RUNNING" || aws.ToString(t.DesiredStatus) != "RUNNING" {
			continue
		}
		in := aws.ToString(t.ContainerInstanceArn)
		if prev, dup := out[in]; dup {
			return nil, fmt.Errorf("two daemon tasks on %s (%s, %s)", in, prev, td)
		}
		out[in] = td
	}
	return out, nil
}

// TestManagedDaemonsWithSDK drives ECS managed daemons through the gateway with the AWS
// SDK for Go v2 on a stack of four real agents: a daemon runs one task on each of the
// three hosts of its capacity provider, a fourth host joining the pool gets one,
// UpdateDaemon rolls every host to a new revision (the deployment ends SUCCESSFUL), bad
// input gets AWS's typed errors, and DeleteDaemon stops the tasks.
func TestManagedDaemonsWithSDK(t *testing.T) {
	c := harness.Start(t, harness.Options{Agents: 4})
	ctx := t.Context()
	cl := aws.String(harness.ClusterName)
	cis := c.WaitAgentsConnected(ctx)
	arnOf := func(i int) string { return aws.ToString(cis[c.Agents[i].Namespace].ContainerInstanceArn) }

	if _, err := c.ECS.CreateCapacityProvider(ctx, &ecs.CreateCapacityProviderInput{
		Name: aws.String("daemon-pool"), AutoScalingGroupProvider: &ecstypes.AutoScalingGroupProvider{AutoScalingGroupArn: aws.String("daemon-pool-asg")},
	}); err != nil {
		t.Fatalf("CreateCapacityProvider: %v", err)
	}
	if _, err := c.ECS.PutClusterCapacityProviders(ctx, &ecs.PutClusterCapacityProvidersInput{
		Cluster: cl, CapacityProviders: []string{"daemon-pool"}, DefaultCapacityProviderStrategy: []ecstypes.CapacityProviderStrategyItem{},
	}); err != nil {
		t.Fatalf("PutClusterCapacityProviders: %v", err)
	}
	join := func(i int) {
		t.Helper()
		if _, err := c.ECS.PutAttributes(ctx, &ecs.PutAttributesInput{Cluster: cl, Attributes: []ecstypes.Attribute{{
			Name: aws.String("berth.capacity-provider"), Value: aws.String("daemon-pool"), TargetId: aws.String(arnOf(i)),
		}}}); err != nil {
			t.Fatalf("PutAttributes: %v", err)
		}
	}
	for i := range 3 {
		join(i)
	}
	register := func(arg string) string {
		t.Helper()
		out, err := c.ECS.RegisterDaemonTaskDefinition(ctx, &ecs.RegisterDaemonTaskDefinitionInput{
			Family: aws.String("node-agent"),
			ContainerDefinitions: []ecstypes.DaemonContainerDefinition{{
				Name: aws.String("agent"), Image: aws.String(c.Image), Command: []string{"sleep", arg},
				Cpu: 10, Memory: aws.Int32(32), Essential: aws.Bool(true),
			}},
		})
		if err != nil {
			t.Fatalf("RegisterDaemonTaskDefinition: %v", err)
		}
		return aws.ToString(out.DaemonTaskDefinitionArn)
	}
	td1 := register("3600")

	// Bad input: AWS's typed errors.
	var cnf *ecstypes.ClusterNotFoundException
	if _, err := c.ECS.CreateDaemon(ctx, &ecs.CreateDaemonInput{DaemonName: aws.String("x"), ClusterArn: aws.String("no-such-cluster"),
		DaemonTaskDefinitionArn: aws.String(td1), CapacityProviderArns: []string{"daemon-pool"}}); !errors.As(err, &cnf) {
		t.Fatalf("CreateDaemon in an unknown cluster: %v, want ClusterNotFoundException", err)
	}
	var ipe *ecstypes.InvalidParameterException
	if _, err := c.ECS.CreateDaemon(ctx, &ecs.CreateDaemonInput{DaemonName: aws.String("x"), ClusterArn: cl,
		DaemonTaskDefinitionArn: aws.String(td1), CapacityProviderArns: []string{"daemon-pool"},
		DeploymentConfiguration: &ecstypes.DaemonDeploymentConfiguration{DrainPercent: aws.Float64(150)}}); !errors.As(err, &ipe) {
		t.Fatalf("CreateDaemon with drainPercent 150: %v, want InvalidParameterException", err)
	}
	if _, err := c.ECS.CreateDaemon(ctx, &ecs.CreateDaemonInput{DaemonName: aws.String("x"), ClusterArn: cl,
		DaemonTaskDefinitionArn: aws.String(td1), CapacityProviderArns: []string{"FARGATE"}}); !errors.As(err, &ipe) {
		t.Fatalf("CreateDaemon on FARGATE: %v, want InvalidParameterException", err)
	}
	var ce *ecstypes.ClientException
	if _, err := c.ECS.RegisterDaemonTaskDefinition(ctx, &ecs.RegisterDaemonTaskDefinitionInput{Family: aws.String("bad/family"),
		ContainerDefinitions: []ecstypes.DaemonContainerDefinition{{Name: aws.String("a"), Image: aws.String(c.Image), Memory: aws.Int32(32)}}}); !errors.As(err, &ce) {
		t.Fatalf("RegisterDaemonTaskDefinition with a bad family: %v, want ClientException", err)
	}
	var dnf *ecstypes.DaemonNotFoundException
	if _, err := c.ECS.DescribeDaemon(ctx, &ecs.DescribeDaemonInput{DaemonArn: aws.String("arn:aws:ecs:" + harness.Region + ":" + harness.AccountID + ":daemon/" + harness.ClusterName + "/nope")}); !errors.As(err, &dnf) {
		t.Fatalf("DescribeDaemon of an unknown daemon: %v, want DaemonNotFoundException", err)
	}

	created, err := c.ECS.CreateDaemon(ctx, &ecs.CreateDaemonInput{
		DaemonName: aws.String("node-agent"), ClusterArn: cl, DaemonTaskDefinitionArn: aws.String(td1),
		CapacityProviderArns:    []string{"daemon-pool"},
		DeploymentConfiguration: &ecstypes.DaemonDeploymentConfiguration{DrainPercent: aws.Float64(50)},
	})
	if err != nil {
		t.Fatalf("CreateDaemon: %v", err)
	}
	if created.Status != ecstypes.DaemonStatusActive || aws.ToString(created.DeploymentArn) == "" {
		t.Fatalf("CreateDaemon = %+v", created)
	}
	c.Eventually(ctx, 3*time.Minute, "a daemon task on each of the pool's 3 hosts", func() error {
		got, err := daemonTasks(ctx, c, td1)
		if err != nil {
			return err
		}
		for i := range 3 {
			if got[arnOf(i)] == "" {
				return fmt.Errorf("none on %s yet: %v", c.Agents[i].Name, got)
			}
		}
		if got[arnOf(3)] != "" || len(got) != 3 {
			return fmt.Errorf("daemon tasks outside the pool: %v", got)
		}
		return nil
	})

	// A fourth host joins the capacity provider: it gets one.
	join(3)
	c.Eventually(ctx, 3*time.Minute, "the joining host's daemon task", func() error {
		got, err := daemonTasks(ctx, c, td1)
		if err != nil {
			return err
		}
		if len(got) != 4 {
			return fmt.Errorf("daemon tasks on %d hosts: %v", len(got), got)
		}
		return nil
	})

	// UpdateDaemon rolls every host to revision 2.
	td2 := register("3601")
	upd, err := c.ECS.UpdateDaemon(ctx, &ecs.UpdateDaemonInput{
		DaemonArn: created.DaemonArn, DaemonTaskDefinitionArn: aws.String(td2), CapacityProviderArns: []string{"daemon-pool"},
		DeploymentConfiguration: &ecstypes.DaemonDeploymentConfiguration{DrainPercent: aws.Float64(50)},
	})
	if err != nil {
		t.Fatalf("UpdateDaemon: %v", err)
	}
	c.Eventually(ctx, 6*time.Minute, "the rollout to revision 2 SUCCESSFUL", func() error {
		got, err := daemonTasks(ctx, c, td1, td2)
		if err != nil {
			return err
		}
		if len(got) < 2 {
			return fmt.Errorf("only %d hosts run the daemon during the rollout (drainPercent 50 of 4): %v", len(got), got)
		}
		for in, td := range got {
			if td != td2 {
				return fmt.Errorf("%s still runs %s", in, td)
			}
		}
		if len(got) != 4 {
			return fmt.Errorf("revision 2 on %d hosts", len(got))
		}
		dd, err := c.ECS.DescribeDaemonDeployments(ctx, &ecs.DescribeDaemonDeploymentsInput{DaemonDeploymentArns: []string{aws.ToString(upd.DeploymentArn)}})
		if err != nil {
			return err
		}
		if len(dd.DaemonDeployments) != 1 || dd.DaemonDeployments[0].Status != ecstypes.DaemonDeploymentStatusSuccessful {
			return fmt.Errorf("deployment %+v", dd.DaemonDeployments)
		}
		return nil
	})
	desc, err := c.ECS.DescribeDaemon(ctx, &ecs.DescribeDaemonInput{DaemonArn: created.DaemonArn})
	if err != nil {
		t.Fatalf("DescribeDaemon: %v", err)
	}
	if cr := desc.Daemon.CurrentRevisions; len(cr) != 1 || aws.ToInt32(&cr[0].TotalRunningCount) != 4 {
		t.Fatalf("currentRevisions = %+v", cr)
	}
	revs, err := c.ECS.DescribeDaemonRevisions(ctx, &ecs.DescribeDaemonRevisionsInput{DaemonRevisionArns: []string{aws.ToString(desc.Daemon.CurrentRevisions[0].Arn)}})
	if err != nil || len(revs.DaemonRevisions) != 1 || aws.ToString(revs.DaemonRevisions[0].DaemonTaskDefinitionArn) != td2 {
		t.Fatalf("DescribeDaemonRevisions = %+v, %v", revs, err)
	}
	list, err := c.ECS.ListDaemonDeployments(ctx, &ecs.ListDaemonDeploymentsInput{DaemonArn: created.DaemonArn})
	if err != nil || len(list.DaemonDeployments) != 2 {
		t.Fatalf("ListDaemonDeployments = %+v, %v", list, err)
	}

	if _, err := c.ECS.DeleteDaemon(ctx, &ecs.DeleteDaemonInput{DaemonArn: created.DaemonArn}); err != nil {
		t.Fatalf("DeleteDaemon: %v", err)
	}
	c.Eventually(ctx, 3*time.Minute, "the deleted daemon's tasks stopped and the daemon gone", func() error {
		got, err := daemonTasks(ctx, c, td1, td2)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("still running: %v", got)
		}
		if _, err := c.ECS.DescribeDaemon(ctx, &ecs.DescribeDaemonInput{DaemonArn: created.DaemonArn}); !errors.As(err, &dnf) {
			return fmt.Errorf("DescribeDaemon after deletion: %v", err)
		}
		return nil
	})
}
