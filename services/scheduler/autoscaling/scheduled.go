package autoscaling

import (
	"context"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// actionSchedule parses a stored scheduled action's schedule.
func actionSchedule(a *aasv1.ScheduledAction) (schedule, error) {
	loc, err := location(a.GetTimezone())
	if err != nil {
		return nil, err
	}
	base := awsapi.FromEpoch(a.GetCreationTime())
	if a.StartTime != nil {
		base = awsapi.FromEpoch(a.GetStartTime())
	}
	return parseSchedule(a.GetSchedule(), loc, base, a.StartTime != nil)
}

func location(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, validation("Invalid Timezone %s: use an IANA time zone name such as Etc/UTC or America/New_York.", tz)
	}
	return loc, nil
}

// nextFire is when a scheduled action fires next after t (within StartTime and EndTime),
// or the zero time when never again.
func nextFire(a *aasv1.ScheduledAction, sched schedule, t time.Time) time.Time {
	if a.StartTime != nil {
		if start := awsapi.FromEpoch(a.GetStartTime()); t.Before(start) {
			t = start.Add(-time.Nanosecond)
		}
	}
	n := sched.next(t)
	if !n.IsZero() && a.EndTime != nil && n.After(awsapi.FromEpoch(a.GetEndTime())) {
		return time.Time{}
	}
	return n
}

// PutScheduledAction creates or updates a scheduled action of a registered target.
// Schedule is at(yyyy-mm-ddThh:mm:ss), rate(value unit) or cron(Minutes Hours
// Day-of-month Month Day-of-week Year) in Timezone (IANA name; default UTC), between
// StartTime and EndTime; when it fires, the target's MinCapacity / MaxCapacity become
// ScalableTargetAction's and the service's desired count is moved into them. An update
// keeps the members it does not send.
func (h *Handler) PutScheduledAction(ctx context.Context, req *connect.Request[aasv1.PutScheduledActionRequest]) (*connect.Response[aasv1.PutScheduledActionResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.PutScheduledActionRequest) (*aasv1.PutScheduledActionResponse, error) {
		r, err := checkResource(in.GetServiceNamespace(), in.GetResourceId(), in.GetScalableDimension())
		if err != nil {
			return nil, err
		}
		name := in.GetScheduledActionName()
		if name == "" || len(name) > 256 {
			return nil, validation("1 validation error detected: Value at 'scheduledActionName' failed to satisfy constraint: Member must have length between 1 and 256")
		}
		if act := in.GetScalableTargetAction(); act != nil {
			if act.MinCapacity != nil && act.GetMinCapacity() < 0 || act.MaxCapacity != nil && act.GetMaxCapacity() < 0 {
				return nil, validation("ScalableTargetAction: MinCapacity and MaxCapacity must be greater than or equal to 0.")
			}
			if act.MinCapacity != nil && act.MaxCapacity != nil && act.GetMinCapacity() > act.GetMaxCapacity() {
				return nil, validation("Minimum capacity cannot be greater than maximum capacity")
			}
		}
		now := h.now()
		_, err = h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
			var a *aasv1.ScheduledAction
			for _, x := range rec.ScheduledActions {
				if x.GetScheduledActionName() == name {
					a = x
				}
			}
			if a == nil {
				if len(rec.ScheduledActions) >= maxScheduled {
					return awserr.New("LimitExceededException", "A scalable target can have at most %d scheduled actions.", maxScheduled)
				}
				a = &aasv1.ScheduledAction{
					ScheduledActionName: proto.String(name),
					ScheduledActionArn:  proto.String(scheduledActionARN(s, r.id, name)),
					ServiceNamespace:    proto.String(r.namespace),
					ResourceId:          proto.String(r.id),
					ScalableDimension:   proto.String(r.dimension),
					CreationTime:        proto.Float64(awsapi.Epoch(now)),
				}
				rec.ScheduledActions = append(rec.ScheduledActions, a)
			}
			if in.Schedule != nil {
				a.Schedule = in.Schedule
			}
			if a.GetSchedule() == "" {
				return validation("Schedule is required for a new scheduled action.")
			}
			if in.Timezone != nil {
				a.Timezone = in.Timezone
			}
			if in.StartTime != nil {
				a.StartTime = in.StartTime
			}
			if in.EndTime != nil {
				a.EndTime = in.EndTime
			}
			if a.StartTime != nil && a.EndTime != nil && a.GetEndTime() < a.GetStartTime() {
				return validation("EndTime cannot be earlier than StartTime.")
			}
			if act := in.GetScalableTargetAction(); act != nil {
				a.ScalableTargetAction = &aasv1.ScalableTargetAction{MinCapacity: act.MinCapacity, MaxCapacity: act.MaxCapacity}
			}
			if act := a.GetScalableTargetAction(); act == nil || act.MinCapacity == nil && act.MaxCapacity == nil {
				return validation("ScalableTargetAction must specify MinCapacity, MaxCapacity or both.")
			}
			sched, err := actionSchedule(a)
			if err != nil {
				return err
			}
			if rec.ScheduledNext == nil {
				rec.ScheduledNext = map[string]float64{}
			}
			if n := nextFire(a, sched, now); n.IsZero() {
				delete(rec.ScheduledNext, name)
			} else {
				rec.ScheduledNext[name] = awsapi.Epoch(n)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &aasv1.PutScheduledActionResponse{}, nil
	})
}

// matches reports whether a target record passes a Describe call's ResourceId and
// ScalableDimension filters.
func matches(rec *storev1.ScalableTargetRecord, resourceID, dimension string) bool {
	t := rec.GetTarget()
	return (resourceID == "" || t.GetResourceId() == resourceID) && (dimension == "" || t.GetScalableDimension() == dimension)
}

// DescribeScheduledActions lists scheduled actions of a namespace, optionally of one
// resource and dimension and only ScheduledActionNames.
func (h *Handler) DescribeScheduledActions(ctx context.Context, req *connect.Request[aasv1.DescribeScheduledActionsRequest]) (*connect.Response[aasv1.DescribeScheduledActionsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DescribeScheduledActionsRequest) (*aasv1.DescribeScheduledActionsResponse, error) {
		if err := checkNamespaceOnly(in.GetServiceNamespace(), in.GetScalableDimension()); err != nil {
			return nil, err
		}
		items, err := h.listTargets(ctx, s, in.GetServiceNamespace())
		if err != nil {
			return nil, err
		}
		out := []*aasv1.ScheduledAction{}
		for _, it := range items {
			if !matches(it.Value, in.GetResourceId(), in.GetScalableDimension()) {
				continue
			}
			for _, a := range it.Value.GetScheduledActions() {
				if names := in.GetScheduledActionNames(); len(names) > 0 && !slices.Contains(names, a.GetScheduledActionName()) {
					continue
				}
				out = append(out, a)
			}
		}
		pg, next, err := page(out, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		return &aasv1.DescribeScheduledActionsResponse{ScheduledActions: pg, NextToken: next}, nil
	})
}

// DeleteScheduledAction deletes a scheduled action (ObjectNotFoundException when absent).
func (h *Handler) DeleteScheduledAction(ctx context.Context, req *connect.Request[aasv1.DeleteScheduledActionRequest]) (*connect.Response[aasv1.DeleteScheduledActionResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DeleteScheduledActionRequest) (*aasv1.DeleteScheduledActionResponse, error) {
		r, err := checkResource(in.GetServiceNamespace(), in.GetResourceId(), in.GetScalableDimension())
		if err != nil {
			return nil, err
		}
		name := in.GetScheduledActionName()
		notFound := awserr.New("ObjectNotFoundException", "No scheduled action found for service namespace: %s, resource ID: %s, scalable dimension: %s, scheduled action name: %s", r.namespace, r.id, r.dimension, name)
		_, err = h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
			i := slices.IndexFunc(rec.ScheduledActions, func(a *aasv1.ScheduledAction) bool { return a.GetScheduledActionName() == name })
			if i < 0 {
				return notFound
			}
			rec.ScheduledActions = slices.Delete(rec.ScheduledActions, i, i+1)
			delete(rec.ScheduledNext, name)
			return nil
		})
		if e, ok := err.(*awserr.Error); ok && e.Type == "ObjectNotFoundException" {
			return nil, notFound
		}
		if err != nil {
			return nil, err
		}
		return &aasv1.DeleteScheduledActionResponse{}, nil
	})
}

// DescribeScalingActivities lists the scaling activities of a namespace's targets (of the
// last six weeks, at most 100 a target), newest first.
func (h *Handler) DescribeScalingActivities(ctx context.Context, req *connect.Request[aasv1.DescribeScalingActivitiesRequest]) (*connect.Response[aasv1.DescribeScalingActivitiesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DescribeScalingActivitiesRequest) (*aasv1.DescribeScalingActivitiesResponse, error) {
		if err := checkNamespaceOnly(in.GetServiceNamespace(), in.GetScalableDimension()); err != nil {
			return nil, err
		}
		items, err := h.listTargets(ctx, s, in.GetServiceNamespace())
		if err != nil {
			return nil, err
		}
		out := []*aasv1.ScalingActivity{}
		for _, it := range items {
			if matches(it.Value, in.GetResourceId(), in.GetScalableDimension()) {
				out = append(out, it.Value.GetActivities()...)
			}
		}
		slices.SortStableFunc(out, func(a, b *aasv1.ScalingActivity) int {
			switch {
			case a.GetStartTime() > b.GetStartTime():
				return -1
			case a.GetStartTime() < b.GetStartTime():
				return 1
			}
			return 0
		})
		pg, next, err := page(out, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		return &aasv1.DescribeScalingActivitiesResponse{ScalingActivities: pg, NextToken: next}, nil
	})
}
