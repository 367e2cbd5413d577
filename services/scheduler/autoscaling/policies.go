package autoscaling

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Predefined metric types served for ECS services.
const (
	ECSServiceAverageCPUUtilization    = "ECSServiceAverageCPUUtilization"
	ECSServiceAverageMemoryUtilization = "ECSServiceAverageMemoryUtilization"
	ALBRequestCountPerTarget           = "ALBRequestCountPerTarget"
)

// Step scaling adjustment types.
const (
	ChangeInCapacity        = "ChangeInCapacity"
	ExactCapacity           = "ExactCapacity"
	PercentChangeInCapacity = "PercentChangeInCapacity"
)

// alarmARN is a CloudWatch alarm's ARN.
func alarmARN(s keys.Scope, name string) string {
	return fmt.Sprintf("arn:%s:cloudwatch:%s:%s:alarm:%s", keys.Partition, s.Region, s.Account, name)
}

// TargetTrackingAlarmNames returns the names of the two alarms AWS creates for a target
// tracking policy of resourceID whose ARN carries id: TargetTracking-{resource}-AlarmHigh-{uuid}
// and …-AlarmLow-{uuid} (the uuids differ per alarm; Berth derives them from the policy's).
func TargetTrackingAlarmNames(resourceID, id string) (high, low string) {
	u := uuid.MustParse(id)
	hi := uuid.NewSHA1(u, []byte("AlarmHigh")).String()
	lo := uuid.NewSHA1(u, []byte("AlarmLow")).String()
	return "TargetTracking-" + resourceID + "-AlarmHigh-" + hi, "TargetTracking-" + resourceID + "-AlarmLow-" + lo
}

// policyID is the uuid in a policy ARN.
func policyID(arn string) string {
	_, rest, _ := strings.Cut(arn, ":scalingPolicy:")
	id, _, _ := strings.Cut(rest, ":")
	return id
}

func checkTargetTracking(c *aasv1.TargetTrackingScalingPolicyConfiguration) error {
	if c == nil {
		return validation("TargetTrackingScalingPolicyConfiguration is required for a TargetTrackingScaling policy.")
	}
	if c.TargetValue == nil || !(c.GetTargetValue() > 0) || c.GetTargetValue() > 1.174271e+108 || math.IsNaN(c.GetTargetValue()) {
		return validation("TargetValue must be a number greater than 0 (at most 1.174271E108).")
	}
	if c.GetScaleInCooldown() < 0 || c.GetScaleOutCooldown() < 0 {
		return validation("ScaleInCooldown and ScaleOutCooldown must be greater than or equal to 0.")
	}
	pre, cust := c.GetPredefinedMetricSpecification(), c.GetCustomizedMetricSpecification()
	switch {
	case pre != nil && cust != nil:
		return validation("Specify either PredefinedMetricSpecification or CustomizedMetricSpecification, not both.")
	case pre == nil && cust == nil:
		return validation("Either PredefinedMetricSpecification or CustomizedMetricSpecification must be specified.")
	case pre != nil:
		switch pre.GetPredefinedMetricType() {
		case ECSServiceAverageCPUUtilization, ECSServiceAverageMemoryUtilization:
			if pre.ResourceLabel != nil {
				return validation("ResourceLabel is only valid for ALBRequestCountPerTarget.")
			}
		case ALBRequestCountPerTarget:
			if _, err := targetGroupDimension(pre.GetResourceLabel()); err != nil {
				return err
			}
		default:
			return validation("Unsupported PredefinedMetricType %s for ServiceNamespace ecs: use ECSServiceAverageCPUUtilization, ECSServiceAverageMemoryUtilization or ALBRequestCountPerTarget.", pre.GetPredefinedMetricType())
		}
	default:
		if len(cust.GetMetrics()) > 0 {
			return validation("CustomizedMetricSpecification.Metrics (metric math) is not supported by Berth; give Namespace, MetricName, Dimensions and Statistic.")
		}
		if cust.GetNamespace() == "" || cust.GetMetricName() == "" || cust.GetStatistic() == "" {
			return validation("CustomizedMetricSpecification requires Namespace, MetricName and Statistic.")
		}
		for _, d := range cust.GetDimensions() {
			if d.GetName() == "" || d.GetValue() == "" {
				return validation("CustomizedMetricSpecification.Dimensions: each dimension needs a Name and a Value.")
			}
		}
	}
	return nil
}

// targetGroupDimension is the TargetGroup dimension of an ALBRequestCountPerTarget
// ResourceLabel (app/{lb}/{id}/targetgroup/{tg}/{id} → targetgroup/{tg}/{id}).
func targetGroupDimension(label string) (string, error) {
	p := strings.Split(label, "/")
	if len(p) != 6 || p[0] != "app" || p[3] != "targetgroup" || slices.Contains(p, "") {
		return "", validation("ResourceLabel %q is not valid for ALBRequestCountPerTarget: use app/{load-balancer-name}/{id}/targetgroup/{target-group-name}/{id}.", label)
	}
	return strings.Join(p[3:], "/"), nil
}

// bound is a step's interval end; nil is infinite.
func lower(a *aasv1.StepAdjustment) float64 {
	if a.MetricIntervalLowerBound == nil {
		return math.Inf(-1)
	}
	return a.GetMetricIntervalLowerBound()
}

func upper(a *aasv1.StepAdjustment) float64 {
	if a.MetricIntervalUpperBound == nil {
		return math.Inf(1)
	}
	return a.GetMetricIntervalUpperBound()
}

func checkStep(c *aasv1.StepScalingPolicyConfiguration) error {
	if c == nil {
		return validation("StepScalingPolicyConfiguration is required for a StepScaling policy.")
	}
	switch c.GetAdjustmentType() {
	case ChangeInCapacity, ExactCapacity, PercentChangeInCapacity:
	case "":
		return validation("AdjustmentType is required for a StepScaling policy.")
	default:
		return validation("AdjustmentType %s is not valid: use ChangeInCapacity, ExactCapacity or PercentChangeInCapacity.", c.GetAdjustmentType())
	}
	if c.MinAdjustmentMagnitude != nil && c.GetAdjustmentType() != PercentChangeInCapacity {
		return validation("MinAdjustmentMagnitude is only valid with AdjustmentType PercentChangeInCapacity.")
	}
	if c.GetMinAdjustmentMagnitude() < 0 || c.GetCooldown() < 0 {
		return validation("Cooldown and MinAdjustmentMagnitude must be greater than or equal to 0.")
	}
	steps := slices.Clone(c.GetStepAdjustments())
	if len(steps) == 0 {
		return validation("StepAdjustments must contain at least one step adjustment.")
	}
	for _, st := range steps {
		if lower(st) >= upper(st) {
			return validation("Step adjustment's MetricIntervalLowerBound must be less than its MetricIntervalUpperBound.")
		}
		if c.GetAdjustmentType() == ExactCapacity && st.GetScalingAdjustment() < 0 {
			return validation("ScalingAdjustment must be greater than or equal to 0 with AdjustmentType ExactCapacity.")
		}
	}
	slices.SortFunc(steps, func(a, b *aasv1.StepAdjustment) int { return cmpFloat(lower(a), lower(b)) })
	for i := 1; i < len(steps); i++ {
		if upper(steps[i-1]) != lower(steps[i]) {
			return validation("Step adjustments can't overlap or have a gap: one ends at %v and the next starts at %v.", upper(steps[i-1]), lower(steps[i]))
		}
	}
	return nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PutScalingPolicy creates or updates a TargetTrackingScaling or StepScaling policy of a
// registered target (ObjectNotFoundException without one). A target tracking policy
// answers its two alarms (AlarmHigh, and AlarmLow unless DisableScaleIn) as AWS names
// them; Berth's leader evaluates the policy itself through Metrics. A step scaling
// policy acts when a CloudWatch alarm whose action is its PolicyARN calls
// InvokeAlarmAction. PredictiveScaling is refused.
func (h *Handler) PutScalingPolicy(ctx context.Context, req *connect.Request[aasv1.PutScalingPolicyRequest]) (*connect.Response[aasv1.PutScalingPolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.PutScalingPolicyRequest) (*aasv1.PutScalingPolicyResponse, error) {
		r, err := checkResource(in.GetServiceNamespace(), in.GetResourceId(), in.GetScalableDimension())
		if err != nil {
			return nil, err
		}
		name := in.GetPolicyName()
		if name == "" || len(name) > 256 || strings.Contains(name, ":") {
			return nil, validation("1 validation error detected: Value at 'policyName' failed to satisfy constraint: Member must have length between 1 and 256 and not contain ':'")
		}
		typ := in.GetPolicyType()
		if typ == "" {
			typ = StepScaling
		}
		switch typ {
		case TargetTrackingScaling:
			if in.StepScalingPolicyConfiguration != nil {
				return nil, validation("StepScalingPolicyConfiguration is not allowed for PolicyType TargetTrackingScaling.")
			}
			if err := checkTargetTracking(in.GetTargetTrackingScalingPolicyConfiguration()); err != nil {
				return nil, err
			}
		case StepScaling:
			if in.TargetTrackingScalingPolicyConfiguration != nil {
				return nil, validation("TargetTrackingScalingPolicyConfiguration is not allowed for PolicyType StepScaling.")
			}
			if err := checkStep(in.GetStepScalingPolicyConfiguration()); err != nil {
				return nil, err
			}
		default:
			return nil, validation("PolicyType %s is not supported by Berth: use TargetTrackingScaling or StepScaling.", typ)
		}
		if in.PredictiveScalingPolicyConfiguration != nil {
			return nil, validation("PredictiveScalingPolicyConfiguration is not supported by Berth.")
		}
		now := h.now()
		var out *aasv1.ScalingPolicy
		_, err = h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
			i := slices.IndexFunc(rec.Policies, func(p *aasv1.ScalingPolicy) bool { return p.GetPolicyName() == name })
			p := &aasv1.ScalingPolicy{
				PolicyName:        proto.String(name),
				PolicyType:        proto.String(typ),
				ServiceNamespace:  proto.String(r.namespace),
				ResourceId:        proto.String(r.id),
				ScalableDimension: proto.String(r.dimension),
				CreationTime:      proto.Float64(awsapi.Epoch(now)),
				Alarms:            []*aasv1.Alarm{},
			}
			if i >= 0 {
				old := rec.Policies[i]
				p.PolicyArn, p.CreationTime = old.PolicyArn, old.CreationTime
			} else {
				if len(rec.Policies) >= maxPolicies {
					return awserr.New("LimitExceededException", "A scalable target can have at most %d scaling policies.", maxPolicies)
				}
				p.PolicyArn = proto.String(PolicyARN(s, uuid.NewString(), r.id, name))
			}
			if typ == TargetTrackingScaling {
				c := proto.Clone(in.GetTargetTrackingScalingPolicyConfiguration()).(*aasv1.TargetTrackingScalingPolicyConfiguration)
				if c.ScaleOutCooldown == nil {
					c.ScaleOutCooldown = proto.Int32(defaultCooldown)
				}
				if c.ScaleInCooldown == nil {
					c.ScaleInCooldown = proto.Int32(defaultCooldown)
				}
				if c.DisableScaleIn == nil {
					c.DisableScaleIn = proto.Bool(false)
				}
				p.TargetTrackingScalingPolicyConfiguration = c
				high, low := TargetTrackingAlarmNames(r.id, policyID(p.GetPolicyArn()))
				p.Alarms = append(p.Alarms, &aasv1.Alarm{AlarmName: proto.String(high), AlarmArn: proto.String(alarmARN(s, high))})
				if !c.GetDisableScaleIn() {
					p.Alarms = append(p.Alarms, &aasv1.Alarm{AlarmName: proto.String(low), AlarmArn: proto.String(alarmARN(s, low))})
				}
			} else {
				c := proto.Clone(in.GetStepScalingPolicyConfiguration()).(*aasv1.StepScalingPolicyConfiguration)
				if c.MetricAggregationType == nil {
					c.MetricAggregationType = proto.String("Average")
				}
				if c.Cooldown == nil {
					c.Cooldown = proto.Int32(0)
				}
				p.StepScalingPolicyConfiguration = c
			}
			if i >= 0 {
				rec.Policies[i] = p
			} else {
				rec.Policies = append(rec.Policies, p)
			}
			out = p
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &aasv1.PutScalingPolicyResponse{PolicyArn: out.PolicyArn, Alarms: out.Alarms}, nil
	})
}

// DescribeScalingPolicies lists scaling policies of a namespace, optionally of one
// resource and dimension and only PolicyNames.
func (h *Handler) DescribeScalingPolicies(ctx context.Context, req *connect.Request[aasv1.DescribeScalingPoliciesRequest]) (*connect.Response[aasv1.DescribeScalingPoliciesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DescribeScalingPoliciesRequest) (*aasv1.DescribeScalingPoliciesResponse, error) {
		if err := checkNamespaceOnly(in.GetServiceNamespace(), in.GetScalableDimension()); err != nil {
			return nil, err
		}
		items, err := h.listTargets(ctx, s, in.GetServiceNamespace())
		if err != nil {
			return nil, err
		}
		out := []*aasv1.ScalingPolicy{}
		for _, it := range items {
			if !matches(it.Value, in.GetResourceId(), in.GetScalableDimension()) {
				continue
			}
			for _, p := range it.Value.GetPolicies() {
				if names := in.GetPolicyNames(); len(names) > 0 && !slices.Contains(names, p.GetPolicyName()) {
					continue
				}
				if p.Alarms == nil {
					p.Alarms = []*aasv1.Alarm{}
				}
				out = append(out, p)
			}
		}
		pg, next, err := page(out, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		return &aasv1.DescribeScalingPoliciesResponse{ScalingPolicies: pg, NextToken: next}, nil
	})
}

// DeleteScalingPolicy deletes a scaling policy (ObjectNotFoundException when absent).
func (h *Handler) DeleteScalingPolicy(ctx context.Context, req *connect.Request[aasv1.DeleteScalingPolicyRequest]) (*connect.Response[aasv1.DeleteScalingPolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *aasv1.DeleteScalingPolicyRequest) (*aasv1.DeleteScalingPolicyResponse, error) {
		r, err := checkResource(in.GetServiceNamespace(), in.GetResourceId(), in.GetScalableDimension())
		if err != nil {
			return nil, err
		}
		name := in.GetPolicyName()
		notFound := awserr.New("ObjectNotFoundException", "No scaling policy found for service namespace: %s, resource ID: %s, scalable dimension: %s, policy name: %s", r.namespace, r.id, r.dimension, name)
		_, err = h.mutate(ctx, s, r, func(rec *storev1.ScalableTargetRecord) error {
			i := slices.IndexFunc(rec.Policies, func(p *aasv1.ScalingPolicy) bool { return p.GetPolicyName() == name })
			if i < 0 {
				return notFound
			}
			rec.Policies = slices.Delete(rec.Policies, i, i+1)
			return nil
		})
		if err != nil {
			if e, ok := err.(*awserr.Error); ok && e.Type == "ObjectNotFoundException" {
				return nil, notFound
			}
			return nil, err
		}
		return &aasv1.DeleteScalingPolicyResponse{}, nil
	})
}
