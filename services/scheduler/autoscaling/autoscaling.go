package autoscaling

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	"github.com/berthhq/berth/gen/berth/applicationautoscaling/v1/applicationautoscalingv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// The one scalable resource Berth serves.
const (
	// NamespaceECS is the ServiceNamespace of ECS services.
	NamespaceECS = "ecs"
	// DimensionDesiredCount is the ScalableDimension of an ECS service's desired count.
	DimensionDesiredCount = "ecs:service:DesiredCount"
)

// Policy types (PutScalingPolicy's PolicyType).
const (
	TargetTrackingScaling = "TargetTrackingScaling"
	StepScaling           = "StepScaling"
)

const (
	maxActivities   = 100
	activityMaxAge  = 6 * 7 * 24 * time.Hour
	maxPolicies     = 50
	maxScheduled    = 200
	defaultCooldown = 300 // seconds: ECS's default ScaleOutCooldown / ScaleInCooldown
)

// ECS is what the handler needs of the ECS API: a service's existence and desired count
// (DescribeServices) and changing it (UpdateService with only desiredCount, the same code
// path as an UpdateService call). The scheduler's ECS handler satisfies it; calls carry
// the target's account and region as the caller.
type ECS interface {
	DescribeServices(context.Context, *connect.Request[ecsv1.DescribeServicesRequest]) (*connect.Response[ecsv1.DescribeServicesResponse], error)
	UpdateService(context.Context, *connect.Request[ecsv1.UpdateServiceRequest]) (*connect.Response[ecsv1.UpdateServiceResponse], error)
}

// MetricReader is the metrics source target tracking reads (CloudWatch's statistics):
// Statistic returns stat ("Average", "Sum", "Minimum", "Maximum", "SampleCount") of the
// metric namespace/metricName with exactly these dimensions over [start, end), in the
// scope's account and region; ok is false when there is no datapoint in the window.
type MetricReader interface {
	Statistic(ctx context.Context, scope keys.Scope, namespace, metricName string, dimensions map[string]string, stat string, start, end time.Time) (value float64, ok bool, err error)
}

// Handler implements applicationautoscalingv1connect.ApplicationAutoScalingServiceHandler
// for ECS services, and runs the leader's scaling loop (Run) and step scaling's alarm
// actions (InvokeAlarmAction).
type Handler struct {
	applicationautoscalingv1connect.UnimplementedApplicationAutoScalingServiceHandler
	// Logger receives internal faults and the loop's decisions; nil discards them.
	Logger *slog.Logger
	// Metrics is target tracking's metrics source; nil stores policies but evaluates none
	// (the loop logs that no metrics source is configured).
	Metrics MetricReader

	kv  clientv3.KV
	ecs ECS
	now func() time.Time
}

// New returns the handler over kv, scaling ECS services through ecs; now is the clock
// (time.Now when nil).
func New(kv clientv3.KV, ecs ECS, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{kv: kv, ecs: ecs, now: now}
}

func (h *Handler) log() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

func validation(format string, args ...any) *awserr.Error {
	return awserr.New("ValidationException", format, args...)
}

// resource is one scalable target's identity.
type resource struct {
	namespace, id, dimension string
	cluster, service         string
}

func (r resource) key(s keys.Scope) string {
	return keys.ScalableTarget(s, r.namespace, r.id, r.dimension)
}

// checkResource validates (ServiceNamespace, ResourceId, ScalableDimension) for ECS: only
// ecs / service/{cluster}/{service} / ecs:service:DesiredCount is served.
func checkResource(namespace, id, dimension string) (resource, error) {
	if namespace != NamespaceECS {
		return resource{}, validation("Unsupported service namespace, resource type or scalable dimension: Berth scales ServiceNamespace ecs only, not %s.", namespace)
	}
	if dimension != DimensionDesiredCount {
		return resource{}, validation("Unsupported service namespace, resource type or scalable dimension: ScalableDimension %s is not valid for ServiceNamespace ecs (use %s).", dimension, DimensionDesiredCount)
	}
	parts := strings.Split(id, "/")
	if len(parts) != 3 || parts[0] != "service" || parts[1] == "" || parts[2] == "" {
		return resource{}, validation("Unsupported service namespace, resource type or scalable dimension: ResourceId %s is not service/{cluster}/{service}.", id)
	}
	return resource{namespace: namespace, id: id, dimension: dimension, cluster: parts[1], service: parts[2]}, nil
}

func noTarget(r resource) *awserr.Error {
	return awserr.New("ObjectNotFoundException", "No scalable target registered for service namespace: %s, resource ID: %s, scalable dimension: %s", r.namespace, r.id, r.dimension)
}

// ecsContext is ctx acting as the target's account and region for the ECS calls.
func ecsContext(ctx context.Context, s keys.Scope) context.Context {
	return caller.With(ctx, caller.Identity{Account: s.Account, Region: s.Region})
}

// desiredCount reads the service's desired count; a service that is missing (or not
// ACTIVE, or in a missing cluster) is ValidationException "ECS service doesn't exist", as
// AWS answers RegisterScalableTarget.
func (h *Handler) desiredCount(ctx context.Context, s keys.Scope, r resource) (int32, error) {
	out, err := h.ecs.DescribeServices(ecsContext(ctx, s), connect.NewRequest(&ecsv1.DescribeServicesRequest{
		Cluster: proto.String(r.cluster), Services: []string{r.service}}))
	if err != nil {
		if e, ok := awserr.FromConnect(err); ok && e.Type != "ServerException" {
			return 0, validation("ECS service doesn't exist: %s", r.id)
		}
		return 0, err
	}
	for _, svc := range out.Msg.GetServices() {
		if svc.GetStatus() == "ACTIVE" {
			return svc.GetDesiredCount(), nil
		}
	}
	return 0, validation("ECS service doesn't exist: %s", r.id)
}

// setDesiredCount sets the service's desired count through ECS's UpdateService.
func (h *Handler) setDesiredCount(ctx context.Context, s keys.Scope, r resource, n int32) error {
	_, err := h.ecs.UpdateService(ecsContext(ctx, s), connect.NewRequest(&ecsv1.UpdateServiceRequest{
		Cluster: proto.String(r.cluster), Service: proto.String(r.service), DesiredCount: proto.Int32(n)}))
	return err
}

func errMessage(err error) string {
	if e, ok := awserr.FromConnect(err); ok {
		return e.Message
	}
	var e *awserr.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "An internal error occurred."
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// targetARN is arn:aws:application-autoscaling:{region}:{account}:scalable-target/{36 hex}.
func targetARN(s keys.Scope) string {
	return fmt.Sprintf("arn:%s:application-autoscaling:%s:%s:scalable-target/%s", keys.Partition, s.Region, s.Account, randomHex(18))
}

// PolicyARN returns a scaling policy's ARN as AWS forms it:
// arn:aws:autoscaling:{region}:{account}:scalingPolicy:{uuid}:resource/ecs/service/{cluster}/{service}:policyName/{name}.
func PolicyARN(s keys.Scope, id, resourceID, name string) string {
	return fmt.Sprintf("arn:%s:autoscaling:%s:%s:scalingPolicy:%s:resource/%s/%s:policyName/%s", keys.Partition, s.Region, s.Account, id, NamespaceECS, resourceID, name)
}

func scheduledActionARN(s keys.Scope, resourceID, name string) string {
	return fmt.Sprintf("arn:%s:autoscaling:%s:%s:scheduledAction:%s:resource/%s/%s:scheduledActionName/%s", keys.Partition, s.Region, s.Account, uuid.NewString(), NamespaceECS, resourceID, name)
}

// handle runs an action through awsapi.Handle.
func handle[Req, Res any](ctx context.Context, h *Handler, req *connect.Request[Req], fn func(context.Context, keys.Scope, *Req) (*Res, error)) (*connect.Response[Res], error) {
	return awsapi.Handle(ctx, h.Logger, req, fn)
}

// activity returns a Successful (or Failed, with err) activity of r at now.
func activity(r resource, now time.Time, description, cause string, err error, n int32) *aasv1.ScalingActivity {
	a := &aasv1.ScalingActivity{
		ActivityId:        proto.String(uuid.NewString()),
		ServiceNamespace:  proto.String(r.namespace),
		ResourceId:        proto.String(r.id),
		ScalableDimension: proto.String(r.dimension),
		Description:       proto.String(description),
		Cause:             proto.String(cause),
		StartTime:         proto.Float64(awsapi.Epoch(now)),
		EndTime:           proto.Float64(awsapi.Epoch(now)),
		StatusCode:        proto.String("Successful"),
		StatusMessage:     proto.String(fmt.Sprintf("Successfully set desired count to %d. Change successfully fulfilled by ecs.", n)),
	}
	if err != nil {
		a.StatusCode = proto.String("Failed")
		a.StatusMessage = proto.String(fmt.Sprintf("Failed to set desired count to %d. Reason: %s", n, errMessage(err)))
	}
	return a
}

// addActivities puts acts (oldest first) at the front of rec's activities, dropping those
// past maxActivities or six weeks old.
func addActivities(rec *storev1.ScalableTargetRecord, now time.Time, acts ...*aasv1.ScalingActivity) {
	all := make([]*aasv1.ScalingActivity, 0, len(acts)+len(rec.Activities))
	for i := len(acts) - 1; i >= 0; i-- {
		all = append(all, acts[i])
	}
	cutoff := awsapi.Epoch(now.Add(-activityMaxAge))
	for _, a := range rec.Activities {
		if a.GetStartTime() >= cutoff {
			all = append(all, a)
		}
	}
	if len(all) > maxActivities {
		all = all[:maxActivities]
	}
	rec.Activities = all
}

// clamp sets the service's desired count cur into rec's [min, max] when it is outside
// and returns the count the service has after it with the activity to record (nil when
// nothing was to change; StatusCode Failed when ECS refused).
func (h *Handler) clamp(ctx context.Context, s keys.Scope, r resource, rec *storev1.ScalableTargetRecord, cur int32, now time.Time) (int32, *aasv1.ScalingActivity) {
	t := rec.GetTarget()
	var n int32
	var cause string
	switch {
	case cur < t.GetMinCapacity():
		n, cause = t.GetMinCapacity(), fmt.Sprintf("minimum capacity was set to %d", t.GetMinCapacity())
	case cur > t.GetMaxCapacity():
		n, cause = t.GetMaxCapacity(), fmt.Sprintf("maximum capacity was set to %d", t.GetMaxCapacity())
	default:
		return cur, nil
	}
	err := h.setDesiredCount(ctx, s, r, n)
	act := activity(r, now, fmt.Sprintf("Setting desired count to %d.", n), cause, err, n)
	if err != nil {
		h.log().Warn("autoscaling: set desired count", "scope", s, "resource", r.id, "count", n, "err", err)
		return cur, act
	}
	return n, act
}

// getTarget reads a target's record; a missing one is noTarget.
func (h *Handler) getTarget(ctx context.Context, s keys.Scope, r resource) (*storev1.ScalableTargetRecord, int64, error) {
	rec, rev, err := store.Get[*storev1.ScalableTargetRecord](ctx, h.kv, r.key(s))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, noTarget(r)
	}
	return rec, rev, err
}

// mutate applies fn to a target's record (compare-and-swap, retried); a missing target is
// noTarget.
func (h *Handler) mutate(ctx context.Context, s keys.Scope, r resource, fn func(*storev1.ScalableTargetRecord) error) (*storev1.ScalableTargetRecord, error) {
	rec, _, err := store.Mutate(ctx, h.kv, r.key(s), fn)
	if errors.Is(err, store.ErrNotFound) {
		return nil, noTarget(r)
	}
	return rec, err
}

// listTargets reads a scope's ECS targets, in key order, optionally only those named.
func (h *Handler) listTargets(ctx context.Context, s keys.Scope, namespace string) ([]store.Item[*storev1.ScalableTargetRecord], error) {
	return store.ListAll[*storev1.ScalableTargetRecord](ctx, h.kv, keys.ScalableTargets(s, namespace))
}

// page returns items[token:token+max] and the next token; max is 1-50 (0: 50, as when
// absent), else ValidationException.
func page[T any](items []T, token string, max int32) ([]T, *string, error) {
	start := 0
	if token != "" {
		if _, err := fmt.Sscanf(token, "%d", &start); err != nil || start < 0 || start > len(items) {
			return nil, nil, awserr.New("InvalidNextTokenException", "Invalid token: %s", token)
		}
	}
	if max < 0 || max > 50 {
		return nil, nil, validation("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 50", max)
	}
	n := int(max)
	if n == 0 {
		n = 50
	}
	end := min(start+n, len(items))
	var next *string
	if end < len(items) {
		next = proto.String(fmt.Sprint(end))
	}
	return items[start:end], next, nil
}

func checkNamespaceOnly(namespace, dimension string) error {
	if namespace != NamespaceECS {
		return validation("Unsupported service namespace, resource type or scalable dimension: Berth scales ServiceNamespace ecs only, not %s.", namespace)
	}
	if dimension != "" && dimension != DimensionDesiredCount {
		return validation("Unsupported service namespace, resource type or scalable dimension: ScalableDimension %s is not valid for ServiceNamespace ecs (use %s).", dimension, DimensionDesiredCount)
	}
	return nil
}
