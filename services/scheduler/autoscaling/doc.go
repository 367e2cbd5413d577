// Package autoscaling serves Application Auto Scaling (berth.applicationautoscaling.v1)
// for ECS services in the scheduler: ServiceNamespace "ecs", ScalableDimension
// "ecs:service:DesiredCount", ResourceId "service/{cluster}/{service}" (every other
// namespace is refused with ValidationException naming it).
//
// One etcd record per scalable target (store.v1.ScalableTargetRecord at
// keys.ScalableTarget) holds the target, its scaling policies, scheduled actions, recent
// scaling activities and the loop's bookkeeping, so each change is one compare-and-swap.
// The service's desired count is read with ECS's DescribeServices and set with ECS's
// UpdateService (the ECS interface), the same code path as a client's UpdateService.
//
// Served: RegisterScalableTarget / DescribeScalableTargets / DeregisterScalableTarget,
// PutScheduledAction / DescribeScheduledActions / DeleteScheduledAction (at, rate, and
// AWS's six-field cron with ?, L, W and #, parsed with robfig/cron plus the year field and
// those extensions; Timezone, StartTime, EndTime), PutScalingPolicy /
// DescribeScalingPolicies / DeleteScalingPolicy (TargetTrackingScaling, StepScaling),
// DescribeScalingActivities, TagResource / UntagResource / ListTagsForResource.
// GetPredictiveScalingForecast answers UnsupportedOperationException.
//
// The leader runs Run: scheduled actions fire on its tick; target tracking policies are
// evaluated once a minute through a MetricReader (CloudWatch's statistics); step scaling
// policies act when a CloudWatch alarm calls InvokeAlarmAction. See docs/autoscaling.md.
package autoscaling
