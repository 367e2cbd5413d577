package events

import (
	"context"
	"fmt"
	"regexp"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// ECS is what EventBridge needs of ECS, wired by app over ECS's own handler so that a
// target's tasks start through the RunTask code path (validation, placement, startedBy
// index) as a client's would.
type ECS interface {
	// RunTask runs req in scope s as the account's own RunTask call would; errors are
	// AWS errors (*awserr.Error) or internal faults.
	RunTask(ctx context.Context, s keys.Scope, req *ecsv1.RunTaskRequest) (*ecsv1.RunTaskResponse, error)
	// CheckTaskDefinition returns an error when ref (an ARN, family:revision or family)
	// names no ACTIVE task definition of s.
	CheckTaskDefinition(ctx context.Context, s keys.Scope, ref string) error
}

// StartedBy is the startedBy of the tasks a rule starts: "events-rule/{rule name}" cut
// to 36 characters, the most ECS's startedBy holds on AWS (RunTask's reference: "Up to
// 36 letters …"), as EventBridge's tasks show it.
func StartedBy(rule string) string {
	s := "events-rule/" + rule
	if len(s) > 36 {
		s = s[:36]
	}
	return s
}

var clusterARN = regexp.MustCompile(`^arn:aws:ecs:([a-z0-9-]+):([0-9]{12}):cluster/([A-Za-z0-9_-]{1,255})$`)

// checkTarget validates Targets[i]: an ECS cluster ARN of the caller's account and
// region with EcsParameters, every member either honoured or refused by name.
func (h *Handler) checkTarget(ctx context.Context, s keys.Scope, i int, t *eventsv1.Target) error {
	at := fmt.Sprintf("Targets[%d]", i)
	if err := checkName("targets.member.id", t.GetId()); err != nil {
		return err
	}
	m := clusterARN.FindStringSubmatch(t.GetArn())
	if m == nil || m[1] != s.Region || m[2] != s.Account {
		return validation("Parameter %s.Arn is not valid: Berth's EventBridge delivers to ECS clusters of this account and region (arn:aws:ecs:%s:%s:cluster/NAME) only, not %q.", at, s.Region, s.Account, t.GetArn())
	}
	for name, set := range map[string]bool{
		"AppSyncParameters": t.AppSyncParameters != nil, "BatchParameters": t.BatchParameters != nil,
		"HttpParameters": t.HttpParameters != nil, "KinesisParameters": t.KinesisParameters != nil,
		"RedshiftDataParameters": t.RedshiftDataParameters != nil, "RunCommandParameters": t.RunCommandParameters != nil,
		"SageMakerPipelineParameters": t.SageMakerPipelineParameters != nil, "SqsParameters": t.SqsParameters != nil,
	} {
		if set {
			return validation("Parameter %s.%s is not valid for an ECS cluster target.", at, name)
		}
	}
	switch {
	case t.InputPath != nil:
		return validation("Parameter %s.InputPath is not supported by Berth: give the task overrides in Input.", at)
	case t.InputTransformer != nil:
		return validation("Parameter %s.InputTransformer is not supported by Berth: give the task overrides in Input.", at)
	case t.DeadLetterConfig != nil:
		return validation("Parameter %s.DeadLetterConfig is not supported by Berth: it has no SQS queue to send failed invocations to (they are logged by the scheduler).", at)
	case t.RetryPolicy != nil:
		return validation("Parameter %s.RetryPolicy is not supported by Berth: a failed invocation is not retried.", at)
	case t.EcsParameters == nil:
		return validation("Parameter %s.EcsParameters is required for an ECS cluster target.", at)
	}
	req, err := runRequest("rule", t)
	if err != nil {
		return err
	}
	if h.ecs == nil {
		return validation("Parameter %s.Arn is not valid: this scheduler runs no ECS targets.", at)
	}
	if err := h.ecs.CheckTaskDefinition(ctx, s, req.GetTaskDefinition()); err != nil {
		return validation("Parameter %s.EcsParameters.TaskDefinitionArn is not valid: task definition %s does not exist.", at, req.GetTaskDefinition())
	}
	return nil
}

// runRequest is the ECS RunTask request a target makes when rule fires: every
// EcsParameters member passed on, TaskCount 1 by default, Input as the task overrides
// (the JSON of ECS's TaskOverride: containerOverrides, cpu, memory, taskRoleArn, …), and
// startedBy as StartedBy(rule).
func runRequest(rule string, t *eventsv1.Target) (*ecsv1.RunTaskRequest, error) {
	p := t.GetEcsParameters()
	if p.GetTaskDefinitionArn() == "" {
		return nil, validation("Parameter Targets.EcsParameters.TaskDefinitionArn is required.")
	}
	count := p.GetTaskCount()
	switch {
	case count == 0:
		count = 1
	case count < 1 || count > 10:
		return nil, validation("Parameter EcsParameters.TaskCount is not valid: %d is not between 1 and 10.", count)
	}
	if lt := p.GetLaunchType(); lt != "" && lt != "EC2" && lt != "FARGATE" && lt != "EXTERNAL" {
		return nil, validation("Parameter EcsParameters.LaunchType is not valid: %q is not one of EC2, FARGATE, EXTERNAL.", lt)
	}
	if pt := p.GetPropagateTags(); pt != "" && pt != "TASK_DEFINITION" {
		return nil, validation("Parameter EcsParameters.PropagateTags is not valid: %q is not TASK_DEFINITION.", pt)
	}
	if len(p.GetReferenceId()) > 1024 {
		return nil, validation("Parameter EcsParameters.ReferenceId is longer than 1024 characters.")
	}
	req := &ecsv1.RunTaskRequest{
		Cluster:              t.Arn,
		TaskDefinition:       p.TaskDefinitionArn,
		Count:                proto.Int32(count),
		LaunchType:           p.LaunchType,
		PlatformVersion:      p.PlatformVersion,
		Group:                p.Group,
		EnableEcsManagedTags: p.EnableEcsManagedTags,
		EnableExecuteCommand: p.EnableExecuteCommand,
		PropagateTags:        p.PropagateTags,
		ReferenceId:          p.ReferenceId,
		StartedBy:            proto.String(StartedBy(rule)),
	}
	if nc := p.GetNetworkConfiguration().GetAwsvpcConfiguration(); nc != nil {
		req.NetworkConfiguration = &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{
			Subnets: nc.Subnets, SecurityGroups: nc.SecurityGroups, AssignPublicIp: nc.AssignPublicIp,
		}}
	}
	for _, c := range p.CapacityProviderStrategy {
		req.CapacityProviderStrategy = append(req.CapacityProviderStrategy, &ecsv1.CapacityProviderStrategyItem{
			CapacityProvider: c.CapacityProvider, Weight: c.Weight, Base: c.Base})
	}
	for _, c := range p.PlacementConstraints {
		req.PlacementConstraints = append(req.PlacementConstraints, &ecsv1.PlacementConstraint{Type: c.Type, Expression: c.Expression})
	}
	for _, c := range p.PlacementStrategy {
		req.PlacementStrategy = append(req.PlacementStrategy, &ecsv1.PlacementStrategy{Type: c.Type, Field: c.Field})
	}
	for _, tag := range p.Tags {
		req.Tags = append(req.Tags, &ecsv1.Tag{Key: tag.Key, Value: tag.Value})
	}
	if in := t.GetInput(); in != "" {
		var o ecsv1.TaskOverride
		if err := protojson.Unmarshal([]byte(in), &o); err != nil {
			return nil, validation("Parameter Input is not valid for an ECS target: it must be the JSON of ECS's TaskOverride ({\"containerOverrides\": [...]}): %v", err)
		}
		req.Overrides = &o
	}
	return req, nil
}
