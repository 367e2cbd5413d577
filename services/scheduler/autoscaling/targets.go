package autoscaling

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// serviceLinkedRole is the role AWS records for an ECS target registered without RoleARN.
func serviceLinkedRole(s keys.Scope) string {
	return fmt.Sprintf("arn:%s:iam::%s:role/aws-service-role/ecs.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_ECSService", keys.Partition, s.Account)
}

func checkTags(tags map[string]string) error {
	if len(tags) > 50 {
		return awserr.New("TooManyTagsException", "A scalable target can have at most 50 tags.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 {
			return validation("Tag key %q: keys are 1-128 characters and values at most 256.", k)
		}
	}
	return nil
}

// RegisterScalableTarget registers an ECS service's desired count as a scalable target or
// updates the registered one (MinCapacity, MaxCapacity, SuspendedState, RoleARN, Tags; an
// absent member keeps its value). The service must exist (ValidationException "ECS service
// doesn't exist"); a new target needs both capacities. When the service's desired count is
// outside the new [min, max] it is set to the nearest bound through ECS's UpdateService,
// as AWS does, and the activity recorded.
func (h *Handler) RegisterScalableTarget(ctx context.Context, req *connect.Request[aasv1.RegisterScalableTargetRequest]) (*connect.Response[aasv1.RegisterScalableTargetResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.RegisterScalableTargetRequest) (*aasv1.RegisterScalableTargetResponse, error) {
		r, err := checkResource(in.GetServiceNamespace(), in.GetResourceId(), in.GetScalableDimension())
		if err != nil {
			return nil, err
		}
		if in.MinCapacity != nil && in.GetMinCapacity() < 0 {
			return nil, validation("1 validation error detected: Value '%d' at 'minCapacity' failed to satisfy constraint: Member must have value greater than or equal to 0", in.GetMinCapacity())
		}
		if in.MaxCapacity != nil && in.GetMaxCapacity() < 0 {
			return nil, validation("1 validation error detected: Value '%d' at 'maxCapacity' failed to satisfy constraint: Member must have value greater than or equal to 0", in.GetMaxCapacity())
		}
		if err := checkTags(in.GetTags()); err != nil {
			return nil, err
		}
		cur, err := h.desiredCount(ctx, s, r)
		if err != nil {
			return nil, err
		}
		now := h.now()
		var rec *storev1.ScalableTargetRecord
		err = awsapi.Retry(ctx, func() error {
			old, rev, err := h.getTarget(ctx, s, r)
			var nf *awserr.Error
			if errors.As(err, &nf) && nf.Type == "ObjectNotFoundException" {
				old, err = nil, nil
			}
			if err != nil {
				return err
			}
			if old == nil {
				if in.MinCapacity == nil || in.MaxCapacity == nil {
					return validation("MinCapacity and MaxCapacity are required for registering a new scalable target.")
				}
				rec = &storev1.ScalableTargetRecord{Target: &aasv1.ScalableTarget{
					ServiceNamespace:  proto.String(r.namespace),
					ResourceId:        proto.String(r.id),
					ScalableDimension: proto.String(r.dimension),
					ScalableTargetArn: proto.String(targetARN(s)),
					RoleArn:           proto.String(serviceLinkedRole(s)),
					CreationTime:      proto.Float64(awsapi.Epoch(now)),
					SuspendedState:    &aasv1.SuspendedState{},
				}, Tags: map[string]string{}}
			} else {
				rec = old
			}
			t := rec.Target
			if in.MinCapacity != nil {
				t.MinCapacity = in.MinCapacity
			}
			if in.MaxCapacity != nil {
				t.MaxCapacity = in.MaxCapacity
			}
			if t.GetMinCapacity() > t.GetMaxCapacity() {
				return validation("Minimum capacity cannot be greater than maximum capacity")
			}
			if in.RoleArn != nil {
				t.RoleArn = in.RoleArn
			}
			if st := in.GetSuspendedState(); st != nil {
				t.SuspendedState = &aasv1.SuspendedState{
					DynamicScalingInSuspended:  proto.Bool(st.GetDynamicScalingInSuspended()),
					DynamicScalingOutSuspended: proto.Bool(st.GetDynamicScalingOutSuspended()),
					ScheduledScalingSuspended:  proto.Bool(st.GetScheduledScalingSuspended()),
				}
			}
			if rec.Tags == nil {
				rec.Tags = map[string]string{}
			}
			maps.Copy(rec.Tags, in.GetTags())
			if len(rec.Tags) > 50 {
				return awserr.New("TooManyTagsException", "A scalable target can have at most 50 tags.")
			}
			if old == nil {
				_, err = store.Create(ctx, h.kv, r.key(s), rec)
			} else {
				_, err = store.Update(ctx, h.kv, r.key(s), rev, rec)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if _, act := h.clamp(ctx, s, r, rec, cur, now); act != nil {
			if _, err := h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
				addActivities(rec, now, act)
				return nil
			}); err != nil {
				return nil, err
			}
		}
		return &aasv1.RegisterScalableTargetResponse{ScalableTargetArn: rec.Target.ScalableTargetArn}, nil
	})
}

// describeTarget is the target as DescribeScalableTargets answers it (SuspendedState's
// three members always written).
func describeTarget(rec *storev1.ScalableTargetRecord) *aasv1.ScalableTarget {
	t := proto.Clone(rec.GetTarget()).(*aasv1.ScalableTarget)
	st := t.GetSuspendedState()
	t.SuspendedState = &aasv1.SuspendedState{
		DynamicScalingInSuspended:  proto.Bool(st.GetDynamicScalingInSuspended()),
		DynamicScalingOutSuspended: proto.Bool(st.GetDynamicScalingOutSuspended()),
		ScheduledScalingSuspended:  proto.Bool(st.GetScheduledScalingSuspended()),
	}
	return t
}

// DescribeScalableTargets lists a namespace's targets, optionally only ResourceIds and one
// ScalableDimension, 50 a page (MaxResults, NextToken).
func (h *Handler) DescribeScalableTargets(ctx context.Context, req *connect.Request[aasv1.DescribeScalableTargetsRequest]) (*connect.Response[aasv1.DescribeScalableTargetsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DescribeScalableTargetsRequest) (*aasv1.DescribeScalableTargetsResponse, error) {
		if err := checkNamespaceOnly(in.GetServiceNamespace(), in.GetScalableDimension()); err != nil {
			return nil, err
		}
		items, err := h.listTargets(ctx, s, in.GetServiceNamespace())
		if err != nil {
			return nil, err
		}
		out := []*aasv1.ScalableTarget{}
		for _, it := range items {
			if ids := in.GetResourceIds(); len(ids) > 0 && !slices.Contains(ids, it.Value.GetTarget().GetResourceId()) {
				continue
			}
			out = append(out, describeTarget(it.Value))
		}
		pg, next, err := page(out, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		return &aasv1.DescribeScalableTargetsResponse{ScalableTargets: pg, NextToken: next}, nil
	})
}

// DeregisterScalableTarget deletes a target with its scaling policies and scheduled
// actions, as AWS does; the service keeps its desired count.
func (h *Handler) DeregisterScalableTarget(ctx context.Context, req *connect.Request[aasv1.DeregisterScalableTargetRequest]) (*connect.Response[aasv1.DeregisterScalableTargetResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DeregisterScalableTargetRequest) (*aasv1.DeregisterScalableTargetResponse, error) {
		r, err := checkResource(in.GetServiceNamespace(), in.GetResourceId(), in.GetScalableDimension())
		if err != nil {
			return nil, err
		}
		if _, err := store.Delete(ctx, h.kv, r.key(s), 0); errors.Is(err, store.ErrNotFound) {
			return nil, awserr.New("ObjectNotFoundException", "No scalable target found for service namespace: %s, resource ID: %s, scalable dimension: %s", r.namespace, r.id, r.dimension)
		} else if err != nil {
			return nil, err
		}
		return &aasv1.DeregisterScalableTargetResponse{}, nil
	})
}

// targetByARN finds the scope's target of a ScalableTargetARN (ResourceNotFoundException
// when none).
func (h *Handler) targetByARN(ctx context.Context, s keys.Scope, arn string) (resource, error) {
	items, err := h.listTargets(ctx, s, NamespaceECS)
	if err != nil {
		return resource{}, err
	}
	for _, it := range items {
		if t := it.Value.GetTarget(); t.GetScalableTargetArn() == arn {
			return checkResource(t.GetServiceNamespace(), t.GetResourceId(), t.GetScalableDimension())
		}
	}
	return resource{}, awserr.New("ResourceNotFoundException", "No scalable target found for ARN %s", arn)
}

// TagResource adds or replaces tags of a scalable target (by its ARN).
func (h *Handler) TagResource(ctx context.Context, req *connect.Request[aasv1.TagResourceRequest]) (*connect.Response[aasv1.TagResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.TagResourceRequest) (*aasv1.TagResourceResponse, error) {
		if err := checkTags(in.GetTags()); err != nil {
			return nil, err
		}
		r, err := h.targetByARN(ctx, s, in.GetResourceArn())
		if err != nil {
			return nil, err
		}
		_, err = h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
			if rec.Tags == nil {
				rec.Tags = map[string]string{}
			}
			maps.Copy(rec.Tags, in.GetTags())
			if len(rec.Tags) > 50 {
				return awserr.New("TooManyTagsException", "A scalable target can have at most 50 tags.")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &aasv1.TagResourceResponse{}, nil
	})
}

// UntagResource removes tags of a scalable target (by its ARN).
func (h *Handler) UntagResource(ctx context.Context, req *connect.Request[aasv1.UntagResourceRequest]) (*connect.Response[aasv1.UntagResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.UntagResourceRequest) (*aasv1.UntagResourceResponse, error) {
		r, err := h.targetByARN(ctx, s, in.GetResourceArn())
		if err != nil {
			return nil, err
		}
		_, err = h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
			for _, k := range in.GetTagKeys() {
				delete(rec.Tags, k)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &aasv1.UntagResourceResponse{}, nil
	})
}

// ListTagsForResource answers a scalable target's tags (by its ARN).
func (h *Handler) ListTagsForResource(ctx context.Context, req *connect.Request[aasv1.ListTagsForResourceRequest]) (*connect.Response[aasv1.ListTagsForResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.ListTagsForResourceRequest) (*aasv1.ListTagsForResourceResponse, error) {
		r, err := h.targetByARN(ctx, s, in.GetResourceArn())
		if err != nil {
			return nil, err
		}
		rec, _, err := h.getTarget(ctx, s, r)
		if err != nil {
			return nil, err
		}
		tags := rec.GetTags()
		if tags == nil {
			tags = map[string]string{}
		}
		return &aasv1.ListTagsForResourceResponse{Tags: tags}, nil
	})
}
