package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	aastypes "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// autoScalingService creates cluster/service (desired count n) in the stack's account.
func autoScalingService(t *testing.T, ctx context.Context, c *ecs.Client, cluster, service string, n int32) {
	t.Helper()
	if _, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		t.Fatal(err)
	}
	td, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String(service),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("app"), Image: aws.String("127.0.0.1:5000/app:1"), Memory: aws.Int32(64),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: aws.String(cluster), ServiceName: aws.String(service),
		TaskDefinition: td.TaskDefinition.TaskDefinitionArn, DesiredCount: aws.Int32(n),
	}); err != nil {
		t.Fatal(err)
	}
}

// desiredCountOf reads a service's desired count through ECS.
func desiredCountOf(t *testing.T, ctx context.Context, c *ecs.Client, cluster, service string) int32 {
	t.Helper()
	out, err := c.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(cluster), Services: []string{service}})
	if err != nil || len(out.Services) != 1 {
		t.Fatalf("DescribeServices: %v %v", out, err)
	}
	return out.Services[0].DesiredCount
}

// waitDesiredCount polls until the service's desired count is want (60 s at most).
func waitDesiredCount(t *testing.T, ctx context.Context, c *ecs.Client, cluster, service string, want int32) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := desiredCountOf(t, ctx, c, cluster, service)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s desiredCount = %d, want %d", cluster, service, got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func hasActivity(acts []aastypes.ScalingActivity, description, cause string) bool {
	for _, a := range acts {
		if aws.ToString(a.Description) == description && strings.HasPrefix(aws.ToString(a.Cause), cause) && a.StatusCode == aastypes.ScalingActivityStatusCodeSuccessful {
			return true
		}
	}
	return false
}

// TestAutoScalingSDK drives Application Auto Scaling with the AWS SDK for Go v2 through
// the gateway and a real scheduler: registering a target clamps the service's desired
// count, an at() scheduled action moves it on the leader's loop, a step scaling policy
// moves it when an alarm action invokes it, and bad input gets the service's own errors.
func TestAutoScalingSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "111111111111"
	stack := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ec := stack.clients[acct]
	c := aas.NewFromConfig(stack.awsConfig(acct, "us-east-1"))
	autoScalingService(t, ctx, ec, "as", "web", 1)
	const rid = "service/as/web"
	ns, dim := aastypes.ServiceNamespaceEcs, aastypes.ScalableDimensionECSServiceDesiredCount

	// Errors: the service's own types.
	for name, call := range map[string]func() error{
		"missing service": func() error {
			_, err := c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: ns, ScalableDimension: dim,
				ResourceId: aws.String("service/as/nope"), MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(2)})
			return err
		},
		"min > max": func() error {
			_, err := c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: ns, ScalableDimension: dim,
				ResourceId: aws.String(rid), MinCapacity: aws.Int32(5), MaxCapacity: aws.Int32(2)})
			return err
		},
		"other namespace": func() error {
			_, err := c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: aastypes.ServiceNamespaceDynamodb,
				ScalableDimension: aastypes.ScalableDimensionDynamoDBTableReadCapacityUnits, ResourceId: aws.String("table/t"),
				MinCapacity: aws.Int32(1), MaxCapacity: aws.Int32(2)})
			return err
		},
	} {
		if code := apiErrorCode(call()); code != "ValidationException" {
			t.Errorf("%s: error code %q, want ValidationException", name, code)
		}
	}
	_, err := c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String("service/as/nope"),
		PolicyName: aws.String("cpu"), PolicyType: aastypes.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &aastypes.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(50),
			PredefinedMetricSpecification: &aastypes.PredefinedMetricSpecification{PredefinedMetricType: aastypes.MetricTypeECSServiceAverageCPUUtilization}}})
	var onf *aastypes.ObjectNotFoundException
	if !errors.As(err, &onf) {
		t.Errorf("PutScalingPolicy on a service without a target: %v, want ObjectNotFoundException", err)
	}

	// Registering clamps the desired count into [min, max].
	reg, err := c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: ns, ScalableDimension: dim,
		ResourceId: aws.String(rid), MinCapacity: aws.Int32(2), MaxCapacity: aws.Int32(5),
		Tags: map[string]string{"team": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(aws.ToString(reg.ScalableTargetARN), "arn:aws:application-autoscaling:us-east-1:"+acct+":scalable-target/") {
		t.Errorf("ScalableTargetARN %q", aws.ToString(reg.ScalableTargetARN))
	}
	if got := desiredCountOf(t, ctx, ec, "as", "web"); got != 2 {
		t.Errorf("desiredCount after registering min 2 = %d, want 2", got)
	}
	targets, err := c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: ns})
	if err != nil || len(targets.ScalableTargets) != 1 {
		t.Fatalf("DescribeScalableTargets: %+v %v", targets, err)
	}
	tg := targets.ScalableTargets[0]
	if aws.ToInt32(tg.MinCapacity) != 2 || aws.ToInt32(tg.MaxCapacity) != 5 || aws.ToString(tg.ResourceId) != rid || tg.SuspendedState == nil ||
		aws.ToBool(tg.SuspendedState.ScheduledScalingSuspended) || tg.CreationTime == nil {
		t.Errorf("target %+v", tg)
	}
	tags, err := c.ListTagsForResource(ctx, &aas.ListTagsForResourceInput{ResourceARN: reg.ScalableTargetARN})
	if err != nil || tags.Tags["team"] != "web" {
		t.Errorf("ListTagsForResource: %v %v", tags, err)
	}

	// A cron syntax error is a ValidationException.
	_, err = c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid),
		ScheduledActionName: aws.String("bad"), Schedule: aws.String("cron(0 12 * * * *)"),
		ScalableTargetAction: &aastypes.ScalableTargetAction{MinCapacity: aws.Int32(1)}})
	if code := apiErrorCode(err); code != "ValidationException" {
		t.Errorf("cron with both day fields: %v, want ValidationException", err)
	}

	// An at() action a few seconds ahead moves the desired count.
	at := time.Now().UTC().Add(3 * time.Second).Format("2006-01-02T15:04:05")
	if _, err := c.PutScheduledAction(ctx, &aas.PutScheduledActionInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid),
		ScheduledActionName: aws.String("morning"), Schedule: aws.String("at(" + at + ")"), Timezone: aws.String("Etc/UTC"),
		ScalableTargetAction: &aastypes.ScalableTargetAction{MinCapacity: aws.Int32(4), MaxCapacity: aws.Int32(8)}}); err != nil {
		t.Fatal(err)
	}
	sched, err := c.DescribeScheduledActions(ctx, &aas.DescribeScheduledActionsInput{ServiceNamespace: ns, ResourceId: aws.String(rid)})
	if err != nil || len(sched.ScheduledActions) != 1 || aws.ToString(sched.ScheduledActions[0].Schedule) != "at("+at+")" ||
		!strings.Contains(aws.ToString(sched.ScheduledActions[0].ScheduledActionARN), ":scheduledAction:") {
		t.Fatalf("DescribeScheduledActions: %+v %v", sched, err)
	}
	waitDesiredCount(t, ctx, ec, "as", "web", 4)
	acts, err := c.DescribeScalingActivities(ctx, &aas.DescribeScalingActivitiesInput{ServiceNamespace: ns, ResourceId: aws.String(rid), ScalableDimension: dim})
	if err != nil {
		t.Fatal(err)
	}
	if !hasActivity(acts.ScalingActivities, "Setting min capacity to 4 and max capacity to 8", "scheduled action name morning was triggered") ||
		!hasActivity(acts.ScalingActivities, "Setting desired count to 4.", "minimum capacity was set to 4") ||
		!hasActivity(acts.ScalingActivities, "Setting desired count to 2.", "minimum capacity was set to 2") {
		b, _ := json.MarshalIndent(acts.ScalingActivities, "", " ")
		t.Errorf("activities:\n%s", b)
	}

	// Target tracking: stored with AWS's alarms and defaults.
	tt, err := c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid),
		PolicyName: aws.String("cpu50"), PolicyType: aastypes.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: &aastypes.TargetTrackingScalingPolicyConfiguration{TargetValue: aws.Float64(50),
			PredefinedMetricSpecification: &aastypes.PredefinedMetricSpecification{PredefinedMetricType: aastypes.MetricTypeECSServiceAverageCPUUtilization}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tt.Alarms) != 2 || !strings.HasPrefix(aws.ToString(tt.Alarms[0].AlarmName), "TargetTracking-"+rid+"-AlarmHigh-") ||
		!strings.HasPrefix(aws.ToString(tt.Alarms[1].AlarmName), "TargetTracking-"+rid+"-AlarmLow-") ||
		!strings.HasPrefix(aws.ToString(tt.PolicyARN), "arn:aws:autoscaling:us-east-1:"+acct+":scalingPolicy:") ||
		!strings.HasSuffix(aws.ToString(tt.PolicyARN), ":resource/ecs/"+rid+":policyName/cpu50") {
		t.Errorf("PutScalingPolicy: %s %+v", aws.ToString(tt.PolicyARN), tt.Alarms)
	}

	// Step scaling, invoked as a CloudWatch alarm action: +2 for a breach of 0 to 10,
	// +3 above.
	step, err := c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid),
		PolicyName: aws.String("step"), PolicyType: aastypes.PolicyTypeStepScaling,
		StepScalingPolicyConfiguration: &aastypes.StepScalingPolicyConfiguration{AdjustmentType: aastypes.AdjustmentTypeChangeInCapacity,
			Cooldown: aws.Int32(0), MetricAggregationType: aastypes.MetricAggregationTypeMaximum,
			StepAdjustments: []aastypes.StepAdjustment{
				{MetricIntervalLowerBound: aws.Float64(0), MetricIntervalUpperBound: aws.Float64(10), ScalingAdjustment: aws.Int32(2)},
				{MetricIntervalLowerBound: aws.Float64(10), ScalingAdjustment: aws.Int32(3)},
			}}})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := c.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{ServiceNamespace: ns, ResourceId: aws.String(rid)})
	if err != nil || len(pols.ScalingPolicies) != 2 {
		t.Fatalf("DescribeScalingPolicies: %+v %v", pols, err)
	}
	for _, p := range pols.ScalingPolicies {
		switch aws.ToString(p.PolicyName) {
		case "cpu50":
			c := p.TargetTrackingScalingPolicyConfiguration
			if c == nil || aws.ToInt32(c.ScaleOutCooldown) != 300 || aws.ToInt32(c.ScaleInCooldown) != 300 || aws.ToBool(c.DisableScaleIn) {
				t.Errorf("cpu50 configuration %+v", c)
			}
		case "step":
			c := p.StepScalingPolicyConfiguration
			if c == nil || len(c.StepAdjustments) != 2 || c.StepAdjustments[1].MetricIntervalUpperBound != nil ||
				aws.ToFloat64(c.StepAdjustments[0].MetricIntervalLowerBound) != 0 || c.StepAdjustments[0].MetricIntervalLowerBound == nil {
				t.Errorf("step configuration %+v", c)
			}
		}
	}
	scope := keys.Scope{Account: acct, Region: "us-east-1"}
	if err := stack.sched.AutoScaling().InvokeAlarmAction(ctx, scope, aws.ToString(step.PolicyARN), "web-cpu-high", "ALARM", 4); err != nil {
		t.Fatal(err)
	}
	if got := desiredCountOf(t, ctx, ec, "as", "web"); got != 6 {
		t.Errorf("desiredCount after the +2 step = %d, want 6", got)
	}
	if err := stack.sched.AutoScaling().InvokeAlarmAction(ctx, scope, aws.ToString(step.PolicyARN), "web-cpu-high", "ALARM", 25); err != nil {
		t.Fatal(err)
	}
	if got := desiredCountOf(t, ctx, ec, "as", "web"); got != 8 {
		t.Errorf("desiredCount after the +3 step (max 8) = %d, want 8", got)
	}
	acts, err = c.DescribeScalingActivities(ctx, &aas.DescribeScalingActivitiesInput{ServiceNamespace: ns})
	if err != nil || !hasActivity(acts.ScalingActivities, "Setting desired count to 6.", "monitor alarm web-cpu-high in state ALARM triggered policy step") {
		t.Errorf("activities after the alarm: %v", err)
	}

	// Suspended dynamic scaling holds the alarm's action back.
	if _, err := c.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid),
		MinCapacity: aws.Int32(1), SuspendedState: &aastypes.SuspendedState{DynamicScalingInSuspended: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid),
		PolicyName: aws.String("down"), PolicyType: aastypes.PolicyTypeStepScaling,
		StepScalingPolicyConfiguration: &aastypes.StepScalingPolicyConfiguration{AdjustmentType: aastypes.AdjustmentTypeExactCapacity,
			StepAdjustments: []aastypes.StepAdjustment{{MetricIntervalUpperBound: aws.Float64(0), ScalingAdjustment: aws.Int32(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	pols, _ = c.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{ServiceNamespace: ns, PolicyNames: []string{"down"}})
	if len(pols.ScalingPolicies) != 1 {
		t.Fatalf("DescribeScalingPolicies down: %+v", pols)
	}
	if err := stack.sched.AutoScaling().InvokeAlarmAction(ctx, scope, aws.ToString(pols.ScalingPolicies[0].PolicyARN), "web-cpu-low", "ALARM", -20); err != nil {
		t.Fatal(err)
	}
	if got := desiredCountOf(t, ctx, ec, "as", "web"); got != 8 {
		t.Errorf("desiredCount with scale-in suspended = %d, want 8", got)
	}

	// Deletes; a second delete is ObjectNotFoundException.
	if _, err := c.DeleteScalingPolicy(ctx, &aas.DeleteScalingPolicyInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid), PolicyName: aws.String("step")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteScheduledAction(ctx, &aas.DeleteScheduledActionInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid), ScheduledActionName: aws.String("morning")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeregisterScalableTarget(ctx, &aas.DeregisterScalableTargetInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeregisterScalableTarget(ctx, &aas.DeregisterScalableTargetInput{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: aws.String(rid)})
	if !errors.As(err, &onf) {
		t.Errorf("second DeregisterScalableTarget: %v, want ObjectNotFoundException", err)
	}
	targets, err = c.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: ns})
	if err != nil || targets.ScalableTargets == nil || len(targets.ScalableTargets) != 0 {
		t.Errorf("DescribeScalableTargets after deregistering: %+v %v", targets, err)
	}
}

// TestAutoScalingWithAWSCLI drives the same through the AWS CLI: register-scalable-target,
// put-scheduled-action with rate(1 minute) moving the service's desired count, and the
// CLI's error for a cron syntax error and for a policy on a service without a target.
func TestAutoScalingWithAWSCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; make deps installs it")
	}
	const acct = "222222222222"
	stack := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ec := stack.clients[acct]
	autoScalingService(t, ctx, ec, "cli", "api", 1)
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "aws", append([]string{"--endpoint-url", stack.url, "--region", "us-east-1", "--output", "json", "application-autoscaling"}, args...)...)
		cmd.Env = cliEnv(stack, acct)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	target := []string{"--service-namespace", "ecs", "--scalable-dimension", "ecs:service:DesiredCount", "--resource-id", "service/cli/api"}
	if out, err := run(append([]string{"register-scalable-target", "--min-capacity", "1", "--max-capacity", "4"}, target...)...); err != nil {
		t.Fatalf("register-scalable-target: %v\n%s", err, out)
	}
	out, err := run(append([]string{"put-scheduled-action", "--scheduled-action-name", "bad", "--schedule", "cron(0 25 * * ? *)",
		"--scalable-target-action", "MinCapacity=2"}, target...)...)
	if err == nil || !strings.Contains(out, "(ValidationException)") {
		t.Errorf("put-scheduled-action with hour 25: %v\n%s", err, out)
	}
	out, err = run("put-scaling-policy", "--service-namespace", "ecs", "--scalable-dimension", "ecs:service:DesiredCount",
		"--resource-id", "service/cli/missing", "--policy-name", "cpu", "--policy-type", "TargetTrackingScaling",
		"--target-tracking-scaling-policy-configuration", `{"TargetValue":50,"PredefinedMetricSpecification":{"PredefinedMetricType":"ECSServiceAverageCPUUtilization"}}`)
	if err == nil || !strings.Contains(out, "(ObjectNotFoundException)") {
		t.Errorf("put-scaling-policy on a service without a target: %v\n%s", err, out)
	}
	if out, err := run(append([]string{"put-scheduled-action", "--scheduled-action-name", "every-minute", "--schedule", "rate(1 minute)",
		"--scalable-target-action", "MinCapacity=3,MaxCapacity=4"}, target...)...); err != nil {
		t.Fatalf("put-scheduled-action: %v\n%s", err, out)
	}
	out, err = run("describe-scheduled-actions", "--service-namespace", "ecs", "--resource-id", "service/cli/api")
	if err != nil || !strings.Contains(out, `"rate(1 minute)"`) {
		t.Fatalf("describe-scheduled-actions: %v\n%s", err, out)
	}
	waitDesiredCount(t, ctx, ec, "cli", "api", 3)
	out, err = run("describe-scaling-activities", "--service-namespace", "ecs", "--resource-id", "service/cli/api")
	if err != nil || !strings.Contains(out, `"Setting desired count to 3."`) || !strings.Contains(out, "scheduled action name every-minute was triggered") {
		t.Errorf("describe-scaling-activities: %v\n%s", err, out)
	}
}
