package app

import (
	"context"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// ecsTargets is EventBridge's way into ECS (events.ECS): the rule's account calls ECS's
// own RunTask and DescribeTaskDefinition in process, so a target's tasks go through the
// same validation, placement and indexes as a client's RunTask.
type ecsTargets struct{ srv *control.Server }

func (e ecsTargets) call(ctx context.Context, s keys.Scope) context.Context {
	return caller.With(ctx, caller.Identity{Account: s.Account, Region: s.Region})
}

func fromConnect(err error) error {
	if ae, ok := awserr.FromConnect(err); ok {
		return ae
	}
	return err
}

// RunTask implements events.ECS.
func (e ecsTargets) RunTask(ctx context.Context, s keys.Scope, req *ecsv1.RunTaskRequest) (*ecsv1.RunTaskResponse, error) {
	resp, err := e.srv.RunTask(e.call(ctx, s), connect.NewRequest(req))
	if err != nil {
		return nil, fromConnect(err)
	}
	return resp.Msg, nil
}

// CheckTaskDefinition implements events.ECS.
func (e ecsTargets) CheckTaskDefinition(ctx context.Context, s keys.Scope, ref string) error {
	resp, err := e.srv.DescribeTaskDefinition(e.call(ctx, s), connect.NewRequest(&ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: &ref}))
	if err != nil {
		return fromConnect(err)
	}
	if resp.Msg.GetTaskDefinition().GetStatus() != "ACTIVE" {
		return awserr.Clientf("The task definition %s is not ACTIVE.", ref)
	}
	return nil
}
