package service

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Stop types of StopServiceDeployment.
const (
	StopRollback = "ROLLBACK"
	StopAbort    = "ABORT"
)

// msgDeploymentNotFound is the ServiceDeploymentNotFoundException message.
const msgDeploymentNotFound = "The service deployment does not exist."

// StopServiceDeployment stops a service deployment that is in progress (Amazon ECS
// developer guide, stop-service-deployment.html). stopType ROLLBACK (the default) marks it
// FAILED ("stopped by the user") and starts a new deployment of the service revision it
// replaced — the last COMPLETED deployment's task definition — marked as a rollback, so
// ListServiceDeployments shows the stopped deployment STOPPED and the rollback
// ROLLBACK_IN_PROGRESS, then ROLLBACK_SUCCESSFUL; it works whether or not the circuit
// breaker's rollback is configured. ABORT marks it FAILED without a rollback: the
// reconciler launches no more of its tasks and keeps the older deployments' tasks, as a
// circuit breaker without rollback does. Stopping a rollback deployment that is still in
// progress answers its ARN and changes nothing (the rollback continues, as AWS documents
// for ROLLBACK_IN_PROGRESS). Errors: ServiceDeploymentNotFoundException (unknown ARN, or a
// service under the EXTERNAL controller, which has none), ConflictException (the
// deployment has finished, or ROLLBACK finds no COMPLETED deployment to return to),
// InvalidParameterException (bad stopType). AWS reference: StopServiceDeployment.
func (h *Handler) StopServiceDeployment(ctx context.Context, req *connect.Request[ecsv1.StopServiceDeploymentRequest]) (*connect.Response[ecsv1.StopServiceDeploymentResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.StopServiceDeploymentRequest) (*ecsv1.StopServiceDeploymentResponse, error) {
		a := m.GetServiceDeploymentArn()
		if a == "" {
			return nil, awserr.InvalidParameterf("serviceDeploymentArn is required.")
		}
		stopType := m.GetStopType()
		if stopType == "" {
			stopType = StopRollback
		}
		if stopType != StopRollback && stopType != StopAbort {
			return nil, awserr.InvalidParameterf("Invalid stopType %q: valid values are ROLLBACK and ABORT.", stopType)
		}
		acc, cluster, svc, num, ok := parseChildARN("service-deployment", a)
		if !ok || acc != account || !ecsrules.ValidName(cluster) || !ecsrules.ValidName(svc) {
			return nil, awserr.New("ServiceDeploymentNotFoundException", msgDeploymentNotFound)
		}
		key := keys.Service(account, cluster, svc)
		err := awsapi.Retry(ctx, func() error {
			rec, rev, err := get[*storev1.ServiceRecord](ctx, h.kv, key)
			if err != nil {
				return fmt.Errorf("service: read %s: %w", svc, err)
			}
			if rec == nil {
				return awserr.New("ServiceDeploymentNotFoundException", msgDeploymentNotFound)
			}
			s := rec.GetService()
			d := findDeployment(s, "ecs-svc/"+num)
			if d == nil {
				return awserr.New("ServiceDeploymentNotFoundException", msgDeploymentNotFound)
			}
			dr := deploymentRecord(rec, d.GetId())
			if d.GetStatus() != DeploymentPrimary || d.GetRolloutState() != RolloutInProgress || s.GetStatus() != StatusActive {
				st, _ := deploymentStatus(d, dr)
				return awserr.New("ConflictException", "The service deployment %s is %s; only a deployment in progress can be stopped.", a, st)
			}
			if dr.GetRollback() {
				return nil // a rollback in progress continues
			}
			now := h.now()
			if stopType == StopRollback && shiftInProgress(dr) {
				// A traffic shift rolls back in place: its source still serves.
				src := dr.GetShift().GetSource()
				if !rollbackShift(rec, d, "stopped by the user.", now) {
					return awserr.New("ConflictException", "The service deployment %s cannot be rolled back: its source deployment no longer runs.", a)
				}
				ev := &events{svc: s.GetServiceName(), now: now}
				ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment stopped by the user (%s): rolling back to deployment %s.", s.GetServiceName(), d.GetId(), stopType, src))
				ev.apply(s)
				_, err = store.Update(ctx, h.kv, key, rev, rec)
				return err
			}
			var target *ecsv1.Deployment
			if stopType == StopRollback {
				if target = lastCompleted(s, d.GetId()); target == nil {
					return awserr.New("ConflictException", "The service deployment %s cannot be rolled back: the service has no earlier completed deployment.", a)
				}
			}
			d.RolloutState = proto.String(RolloutFailed)
			d.RolloutStateReason = proto.String("ECS deployment " + d.GetId() + " stopped by the user.")
			d.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			dr.FinishedAt, dr.NextLaunchAt = ts(now), nil
			ev := &events{svc: s.GetServiceName(), now: now}
			ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment stopped by the user (%s).", s.GetServiceName(), d.GetId(), stopType))
			if target != nil {
				id := NewDeploymentID()
				startDeploymentID(rec, account, id, target.GetTaskDefinition(), true, now)
				np := primary(s)
				np.RolloutStateReason = proto.String("ECS deployment stopped by the user: rolling back to deployment " + target.GetId() + ".")
				ev.add(fmt.Sprintf("(service %s) rolling back to deployment %s.", s.GetServiceName(), target.GetId()))
			}
			ev.apply(s)
			_, err = store.Update(ctx, h.kv, key, rev, rec)
			return err
		})
		if err != nil {
			return nil, err
		}
		h.kick.Kick()
		return &ecsv1.StopServiceDeploymentResponse{ServiceDeploymentArn: proto.String(a)}, nil
	})
}

// ContinueServiceDeployment acts on a PAUSE lifecycle hook a BLUE_GREEN, LINEAR or
// CANARY deployment waits at (DescribeServiceDeployments lists it in
// lifecycleHookDetails with status AWAITING_ACTION and its hookId): action CONTINUE (the
// default) marks the hook SUCCEEDED and the deployment goes on to its next stage (or
// step); ROLLBACK marks it FAILED and rolls the deployment back in place, as
// StopServiceDeployment does: all traffic returns to the source revision, whose tasks
// still run, and the new revision's tasks stop. Errors:
// ServiceDeploymentNotFoundException, InvalidParameterException (no hook of that id
// awaits action on the deployment), ConflictException (the deployment is not in
// progress). AWS reference: ContinueServiceDeployment.
func (h *Handler) ContinueServiceDeployment(ctx context.Context, req *connect.Request[ecsv1.ContinueServiceDeploymentRequest]) (*connect.Response[ecsv1.ContinueServiceDeploymentResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ContinueServiceDeploymentRequest) (*ecsv1.ContinueServiceDeploymentResponse, error) {
		a := m.GetServiceDeploymentArn()
		if a == "" || m.GetHookId() == "" {
			return nil, awserr.InvalidParameterf("serviceDeploymentArn and hookId are required.")
		}
		act := m.GetAction()
		if act == "" {
			act = actionContinue
		}
		if act != actionContinue && act != actionRollback {
			return nil, awserr.InvalidParameterf("Invalid action %q: valid values are CONTINUE and ROLLBACK.", act)
		}
		acc, cluster, svc, num, ok := parseChildARN("service-deployment", a)
		if !ok || acc != account || !ecsrules.ValidName(cluster) || !ecsrules.ValidName(svc) {
			return nil, awserr.New("ServiceDeploymentNotFoundException", msgDeploymentNotFound)
		}
		key := keys.Service(account, cluster, svc)
		err := awsapi.Retry(ctx, func() error {
			rec, rev, err := get[*storev1.ServiceRecord](ctx, h.kv, key)
			if err != nil {
				return fmt.Errorf("service: read %s: %w", svc, err)
			}
			if rec == nil {
				return awserr.New("ServiceDeploymentNotFoundException", msgDeploymentNotFound)
			}
			s := rec.GetService()
			d := findDeployment(s, "ecs-svc/"+num)
			if d == nil {
				return awserr.New("ServiceDeploymentNotFoundException", msgDeploymentNotFound)
			}
			dr := deploymentRecord(rec, d.GetId())
			run := awaitingHook(dr.GetShift(), m.GetHookId())
			if run == nil {
				return awserr.InvalidParameterf("The lifecycle hook %s of service deployment %s is not in AWAITING_ACTION status.", m.GetHookId(), a)
			}
			if d.GetStatus() != DeploymentPrimary || d.GetRolloutState() != RolloutInProgress || s.GetStatus() != StatusActive {
				st, _ := deploymentStatus(d, dr)
				return awserr.New("ConflictException", "The service deployment %s is %s; only a deployment in progress can be continued.", a, st)
			}
			now := h.now()
			ev := &events{svc: s.GetServiceName(), now: now}
			if act == actionContinue {
				run.Status = hookSucceeded
				ev.add(fmt.Sprintf("(service %s) (deployment %s) lifecycle hook %s at stage %s continued.", s.GetServiceName(), d.GetId(), run.GetHookId(), reportedStage(run.GetStage())))
			} else {
				run.Status = hookFailed
				src := dr.GetShift().GetSource()
				if !rollbackShift(rec, d, "lifecycle hook "+run.GetHookId()+" asked for a rollback.", now) {
					return awserr.New("ConflictException", "The service deployment %s cannot be rolled back: its source deployment no longer runs.", a)
				}
				ev.add(fmt.Sprintf("(service %s) (deployment %s) lifecycle hook %s at stage %s: rolling back to deployment %s.", s.GetServiceName(), d.GetId(), run.GetHookId(), reportedStage(run.GetStage()), src))
			}
			ev.apply(s)
			_, err = store.Update(ctx, h.kv, key, rev, rec)
			return err
		})
		if err != nil {
			return nil, err
		}
		h.kick.Kick()
		return &ecsv1.ContinueServiceDeploymentResponse{ServiceDeploymentArn: proto.String(a)}, nil
	})
}
