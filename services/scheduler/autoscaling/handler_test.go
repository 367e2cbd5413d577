package autoscaling

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// fakeECS is the ECS seam: services by "cluster/service" with their desired counts.
type fakeECS struct {
	mu       sync.Mutex
	services map[string]int32
	updates  []int32
	refuse   error // UpdateService's answer when set
}

func (f *fakeECS) DescribeServices(ctx context.Context, req *connect.Request[ecsv1.DescribeServicesRequest]) (*connect.Response[ecsv1.DescribeServicesResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := caller.From(ctx); !ok {
		return nil, awserr.ToConnect(awserr.New("AccessDeniedException", "no caller"))
	}
	out := &ecsv1.DescribeServicesResponse{}
	for _, s := range req.Msg.GetServices() {
		if n, ok := f.services[req.Msg.GetCluster()+"/"+s]; ok {
			out.Services = append(out.Services, &ecsv1.Service{ServiceName: proto.String(s), Status: proto.String("ACTIVE"), DesiredCount: n})
		} else {
			out.Failures = append(out.Failures, &ecsv1.Failure{Reason: proto.String("MISSING")})
		}
	}
	return connect.NewResponse(out), nil
}

func (f *fakeECS) UpdateService(ctx context.Context, req *connect.Request[ecsv1.UpdateServiceRequest]) (*connect.Response[ecsv1.UpdateServiceResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := req.Msg.GetCluster() + "/" + req.Msg.GetService()
	if f.refuse != nil {
		return nil, f.refuse
	}
	if _, ok := f.services[k]; !ok {
		return nil, awserr.ToConnect(awserr.ServiceNotFoundError())
	}
	f.services[k] = req.Msg.GetDesiredCount()
	f.updates = append(f.updates, req.Msg.GetDesiredCount())
	return connect.NewResponse(&ecsv1.UpdateServiceResponse{}), nil
}

func (f *fakeECS) count(k string) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.services[k]
}

type harness struct {
	h     *Handler
	ecs   *fakeECS
	ctx   context.Context
	clock time.Time
}

func newHarness(t *testing.T) *harness {
	hs := &harness{ecs: &fakeECS{services: map[string]int32{"c/web": 1}}, clock: time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)}
	hs.h = New(etcdtest.Start(t), hs.ecs, func() time.Time { return hs.clock })
	hs.ctx = caller.With(context.Background(), caller.Identity{Account: "111111111111", Region: "us-east-1"})
	return hs
}

const rid = "service/c/web"

func wantErr(t *testing.T, name string, err error, typ, msg string) {
	t.Helper()
	e, ok := awserr.FromConnect(err)
	if !ok || e.Type != typ || !strings.Contains(e.Message, msg) {
		t.Errorf("%s: %v, want %s containing %q", name, err, typ, msg)
	}
}

func (hs *harness) register(t *testing.T, min, max *int32, st *aasv1.SuspendedState) error {
	t.Helper()
	_, err := hs.h.RegisterScalableTarget(hs.ctx, connect.NewRequest(&aasv1.RegisterScalableTargetRequest{
		ServiceNamespace: proto.String("ecs"), ScalableDimension: proto.String(DimensionDesiredCount), ResourceId: proto.String(rid),
		MinCapacity: min, MaxCapacity: max, SuspendedState: st}))
	return err
}

func TestValidation(t *testing.T) {
	hs := newHarness(t)
	ns, dim := proto.String("ecs"), proto.String(DimensionDesiredCount)
	reg := func(ns, dim, id string, min, max *int32) error {
		_, err := hs.h.RegisterScalableTarget(hs.ctx, connect.NewRequest(&aasv1.RegisterScalableTargetRequest{
			ServiceNamespace: proto.String(ns), ScalableDimension: proto.String(dim), ResourceId: proto.String(id), MinCapacity: min, MaxCapacity: max}))
		return err
	}
	one, two := proto.Int32(1), proto.Int32(2)
	wantErr(t, "dynamodb", reg("dynamodb", "dynamodb:table:ReadCapacityUnits", "table/t", one, two), "ValidationException", "not dynamodb")
	wantErr(t, "ecs with another dimension", reg("ecs", "ecs:service:Other", rid, one, two), "ValidationException", "ecs:service:Other")
	wantErr(t, "bad resource id", reg("ecs", DimensionDesiredCount, "service/c", one, two), "ValidationException", "service/{cluster}/{service}")
	wantErr(t, "missing service", reg("ecs", DimensionDesiredCount, "service/c/nope", one, two), "ValidationException", "ECS service doesn't exist: service/c/nope")
	wantErr(t, "min > max", reg("ecs", DimensionDesiredCount, rid, two, one), "ValidationException", "Minimum capacity cannot be greater than maximum capacity")
	wantErr(t, "new without max", reg("ecs", DimensionDesiredCount, rid, one, nil), "ValidationException", "MinCapacity and MaxCapacity are required")
	wantErr(t, "negative", reg("ecs", DimensionDesiredCount, rid, proto.Int32(-1), one), "ValidationException", "minCapacity")

	put := func(name, sched, tz string, act *aasv1.ScalableTargetAction) error {
		_, err := hs.h.PutScheduledAction(hs.ctx, connect.NewRequest(&aasv1.PutScheduledActionRequest{ServiceNamespace: ns, ScalableDimension: dim,
			ResourceId: proto.String(rid), ScheduledActionName: proto.String(name), Schedule: proto.String(sched), Timezone: proto.String(tz), ScalableTargetAction: act}))
		return err
	}
	wantErr(t, "scheduled action without a target", put("a", "rate(1 minute)", "", &aasv1.ScalableTargetAction{MinCapacity: one}),
		"ObjectNotFoundException", "No scalable target registered for service namespace: ecs, resource ID: service/c/web, scalable dimension: ecs:service:DesiredCount")
	if err := reg("ecs", DimensionDesiredCount, rid, proto.Int32(0), proto.Int32(4)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "bad timezone", put("a", "rate(1 minute)", "Mars/Olympus", &aasv1.ScalableTargetAction{MinCapacity: one}), "ValidationException", "Mars/Olympus")
	wantErr(t, "cron syntax", put("a", "cron(0 9 * * MON *)", "", &aasv1.ScalableTargetAction{MinCapacity: one}), "ValidationException", "cron(0 9 * * MON *)")
	wantErr(t, "action min > max", put("a", "rate(1 minute)", "", &aasv1.ScalableTargetAction{MinCapacity: two, MaxCapacity: one}), "ValidationException", "Minimum capacity")
	wantErr(t, "no action", put("a", "rate(1 minute)", "", nil), "ValidationException", "ScalableTargetAction")

	policy := func(in *aasv1.PutScalingPolicyRequest) error {
		in.ServiceNamespace, in.ScalableDimension = ns, dim
		if in.ResourceId == nil {
			in.ResourceId = proto.String(rid)
		}
		in.PolicyName = proto.String("p")
		_, err := hs.h.PutScalingPolicy(hs.ctx, connect.NewRequest(in))
		return err
	}
	tt := func(c *aasv1.TargetTrackingScalingPolicyConfiguration) *aasv1.PutScalingPolicyRequest {
		return &aasv1.PutScalingPolicyRequest{PolicyType: proto.String(TargetTrackingScaling), TargetTrackingScalingPolicyConfiguration: c}
	}
	cpu := &aasv1.PredefinedMetricSpecification{PredefinedMetricType: proto.String(ECSServiceAverageCPUUtilization)}
	wantErr(t, "policy without a target", policy(&aasv1.PutScalingPolicyRequest{ResourceId: proto.String("service/c/other"), PolicyType: proto.String(TargetTrackingScaling),
		TargetTrackingScalingPolicyConfiguration: &aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(50), PredefinedMetricSpecification: cpu}}),
		"ObjectNotFoundException", "No scalable target registered")
	wantErr(t, "target 0", policy(tt(&aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(0), PredefinedMetricSpecification: cpu})), "ValidationException", "TargetValue")
	wantErr(t, "no metric", policy(tt(&aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(50)})), "ValidationException", "PredefinedMetricSpecification")
	wantErr(t, "dynamodb metric", policy(tt(&aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(50),
		PredefinedMetricSpecification: &aasv1.PredefinedMetricSpecification{PredefinedMetricType: proto.String("DynamoDBReadCapacityUtilization")}})), "ValidationException", "DynamoDBReadCapacityUtilization")
	wantErr(t, "ALB without label", policy(tt(&aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(50),
		PredefinedMetricSpecification: &aasv1.PredefinedMetricSpecification{PredefinedMetricType: proto.String(ALBRequestCountPerTarget)}})), "ValidationException", "ResourceLabel")
	wantErr(t, "metric math", policy(tt(&aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(50),
		CustomizedMetricSpecification: &aasv1.CustomizedMetricSpecification{Metrics: []*aasv1.TargetTrackingMetricDataQuery{{Id: proto.String("m1")}}}})), "ValidationException", "metric math")
	step := func(steps ...*aasv1.StepAdjustment) *aasv1.PutScalingPolicyRequest {
		return &aasv1.PutScalingPolicyRequest{PolicyType: proto.String(StepScaling), StepScalingPolicyConfiguration: &aasv1.StepScalingPolicyConfiguration{
			AdjustmentType: proto.String(ChangeInCapacity), StepAdjustments: steps}}
	}
	b := proto.Float64
	wantErr(t, "steps with a gap", policy(step(&aasv1.StepAdjustment{MetricIntervalLowerBound: b(0), MetricIntervalUpperBound: b(10), ScalingAdjustment: 1},
		&aasv1.StepAdjustment{MetricIntervalLowerBound: b(20), ScalingAdjustment: 2})), "ValidationException", "gap")
	wantErr(t, "overlapping steps", policy(step(&aasv1.StepAdjustment{MetricIntervalLowerBound: b(0), ScalingAdjustment: 1},
		&aasv1.StepAdjustment{MetricIntervalLowerBound: b(5), ScalingAdjustment: 2})), "ValidationException", "overlap")
	wantErr(t, "no steps", policy(step()), "ValidationException", "StepAdjustments")
	wantErr(t, "predictive", policy(&aasv1.PutScalingPolicyRequest{PolicyType: proto.String("PredictiveScaling")}), "ValidationException", "PredictiveScaling")

	_, err := hs.h.DeleteScalingPolicy(hs.ctx, connect.NewRequest(&aasv1.DeleteScalingPolicyRequest{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: proto.String(rid), PolicyName: proto.String("nope")}))
	wantErr(t, "delete a missing policy", err, "ObjectNotFoundException", "policy name: nope")
	_, err = hs.h.DeleteScheduledAction(hs.ctx, connect.NewRequest(&aasv1.DeleteScheduledActionRequest{ServiceNamespace: ns, ScalableDimension: dim, ResourceId: proto.String(rid), ScheduledActionName: proto.String("nope")}))
	wantErr(t, "delete a missing action", err, "ObjectNotFoundException", "scheduled action name: nope")
	_, err = hs.h.DescribeScalableTargets(hs.ctx, connect.NewRequest(&aasv1.DescribeScalableTargetsRequest{ServiceNamespace: ns, NextToken: proto.String("x")}))
	wantErr(t, "bad token", err, "InvalidNextTokenException", "x")
	_, err = hs.h.DescribeScalingActivities(hs.ctx, connect.NewRequest(&aasv1.DescribeScalingActivitiesRequest{ServiceNamespace: ns, MaxResults: 51}))
	wantErr(t, "MaxResults 51", err, "ValidationException", "maxResults")
	_, err = hs.h.DescribeScheduledActions(hs.ctx, connect.NewRequest(&aasv1.DescribeScheduledActionsRequest{ServiceNamespace: proto.String("ec2")}))
	wantErr(t, "describe another namespace", err, "ValidationException", "not ec2")
}

// TestScheduledCronInTimezone fires a weekday cron action at 08:00 New York time (13:00
// UTC in March), and holds it while ScheduledScalingSuspended.
func TestScheduledCronInTimezone(t *testing.T) {
	hs := newHarness(t)
	if err := hs.register(t, proto.Int32(1), proto.Int32(10), nil); err != nil {
		t.Fatal(err)
	}
	hs.clock = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // Monday 07:00 EST
	_, err := hs.h.PutScheduledAction(hs.ctx, connect.NewRequest(&aasv1.PutScheduledActionRequest{
		ServiceNamespace: proto.String("ecs"), ScalableDimension: proto.String(DimensionDesiredCount), ResourceId: proto.String(rid),
		ScheduledActionName: proto.String("open"), Schedule: proto.String("cron(0 8 ? * MON-FRI *)"), Timezone: proto.String("America/New_York"),
		ScalableTargetAction: &aasv1.ScalableTargetAction{MinCapacity: proto.Int32(3)}}))
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	hs.clock = time.Date(2026, 3, 2, 12, 59, 0, 0, time.UTC)
	hs.h.pass(hs.ctx, hs.clock, false, &warned)
	if n := hs.ecs.count("c/web"); n != 1 {
		t.Fatalf("before 08:00 New York: desired %d, want 1", n)
	}
	hs.clock = time.Date(2026, 3, 2, 13, 0, 3, 0, time.UTC)
	hs.h.pass(hs.ctx, hs.clock, false, &warned)
	if n := hs.ecs.count("c/web"); n != 3 {
		t.Fatalf("after 08:00 New York: desired %d, want 3", n)
	}
	targets, _ := hs.h.DescribeScalableTargets(hs.ctx, connect.NewRequest(&aasv1.DescribeScalableTargetsRequest{ServiceNamespace: proto.String("ecs")}))
	if tg := targets.Msg.GetScalableTargets()[0]; tg.GetMinCapacity() != 3 || tg.GetMaxCapacity() != 10 {
		t.Errorf("target after the action: min %d max %d", tg.GetMinCapacity(), tg.GetMaxCapacity())
	}
	acts, _ := hs.h.DescribeScalingActivities(hs.ctx, connect.NewRequest(&aasv1.DescribeScalingActivitiesRequest{ServiceNamespace: proto.String("ecs")}))
	var texts []string
	for _, a := range acts.Msg.GetScalingActivities() {
		texts = append(texts, a.GetDescription()+" | "+a.GetCause()+" | "+a.GetStatusCode())
	}
	want := []string{
		"Setting min capacity to 3 | scheduled action name open was triggered | Successful",
		"Setting desired count to 3. | minimum capacity was set to 3 | Successful",
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") && strings.Join(texts, "\n") != strings.Join([]string{want[1], want[0]}, "\n") {
		t.Errorf("activities:\n%s", strings.Join(texts, "\n"))
	}

	// Suspended: Tuesday's run is skipped, and not run late after resuming.
	if err := hs.register(t, proto.Int32(1), nil, &aasv1.SuspendedState{ScheduledScalingSuspended: proto.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	hs.ecs.services["c/web"] = 1
	hs.clock = time.Date(2026, 3, 3, 13, 0, 3, 0, time.UTC)
	hs.h.pass(hs.ctx, hs.clock, false, &warned)
	if n := hs.ecs.count("c/web"); n != 1 {
		t.Fatalf("suspended: desired %d, want 1", n)
	}
	if err := hs.register(t, nil, nil, &aasv1.SuspendedState{}); err != nil {
		t.Fatal(err)
	}
	hs.clock = time.Date(2026, 3, 3, 13, 5, 0, 0, time.UTC)
	hs.h.pass(hs.ctx, hs.clock, false, &warned)
	if n := hs.ecs.count("c/web"); n != 1 {
		t.Fatalf("resumed: the skipped run ran late (desired %d)", n)
	}
	rec, _, err := hs.h.getTarget(hs.ctx, keys.Scope{Account: "111111111111", Region: "us-east-1"}, resource{namespace: "ecs", id: rid, dimension: DimensionDesiredCount})
	if err != nil {
		t.Fatal(err)
	}
	if next := awsapi.FromEpoch(rec.GetScheduledNext()["open"]).UTC(); !next.Equal(time.Date(2026, 3, 4, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("next run %v, want Wednesday 13:00 UTC", next)
	}
}

// TestRegisterClampsAndKeeps: re-registering updates only what is sent (MinCapacity 0 is
// a value), and a lower MaxCapacity moves the desired count down.
func TestRegisterClampsAndKeeps(t *testing.T) {
	hs := newHarness(t)
	hs.ecs.services["c/web"] = 6
	if err := hs.register(t, proto.Int32(2), proto.Int32(8), nil); err != nil {
		t.Fatal(err)
	}
	if err := hs.register(t, nil, proto.Int32(4), nil); err != nil {
		t.Fatal(err)
	}
	if n := hs.ecs.count("c/web"); n != 4 {
		t.Errorf("desired after max 4: %d", n)
	}
	if err := hs.register(t, proto.Int32(0), nil, nil); err != nil {
		t.Fatal(err)
	}
	out, _ := hs.h.DescribeScalableTargets(hs.ctx, connect.NewRequest(&aasv1.DescribeScalableTargetsRequest{ServiceNamespace: proto.String("ecs")}))
	tg := out.Msg.GetScalableTargets()[0]
	if tg.MinCapacity == nil || tg.GetMinCapacity() != 0 || tg.GetMaxCapacity() != 4 {
		t.Errorf("target: min %v max %d, want 0 and 4", tg.MinCapacity, tg.GetMaxCapacity())
	}
	acts, _ := hs.h.DescribeScalingActivities(hs.ctx, connect.NewRequest(&aasv1.DescribeScalingActivitiesRequest{ServiceNamespace: proto.String("ecs")}))
	if a := acts.Msg.GetScalingActivities(); len(a) != 1 || a[0].GetCause() != "maximum capacity was set to 4" || a[0].GetDescription() != "Setting desired count to 4." {
		t.Errorf("activities %v", a)
	}
}

// TestTargetTrackingPass: the leader's round reads the policy's metric through
// MetricReader, scales the service out through ECS and records AWS's activity; without a
// MetricReader the policy is kept and nothing scales.
func TestTargetTrackingPass(t *testing.T) {
	hs := newHarness(t)
	hs.ecs.services["c/web"] = 2
	if err := hs.register(t, proto.Int32(1), proto.Int32(10), nil); err != nil {
		t.Fatal(err)
	}
	out, err := hs.h.PutScalingPolicy(hs.ctx, connect.NewRequest(&aasv1.PutScalingPolicyRequest{
		ServiceNamespace: proto.String("ecs"), ScalableDimension: proto.String(DimensionDesiredCount), ResourceId: proto.String(rid),
		PolicyName: proto.String("cpu60"), PolicyType: proto.String(TargetTrackingScaling),
		TargetTrackingScalingPolicyConfiguration: &aasv1.TargetTrackingScalingPolicyConfiguration{TargetValue: proto.Float64(60),
			PredefinedMetricSpecification: &aasv1.PredefinedMetricSpecification{PredefinedMetricType: proto.String(ECSServiceAverageCPUUtilization)}}}))
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	hs.h.pass(hs.ctx, hs.clock, true, &warned)
	if !warned || hs.ecs.count("c/web") != 2 {
		t.Fatalf("without metrics: warned %v, desired %d", warned, hs.ecs.count("c/web"))
	}
	hs.h.Metrics = &fakeMetrics{values: map[string]float64{"CPUUtilization": 90}}
	hs.h.pass(hs.ctx, hs.clock, true, &warned)
	if n := hs.ecs.count("c/web"); n != 3 {
		t.Fatalf("CPU 90%% on a 60%% target with 2 tasks: desired %d, want 3", n)
	}
	acts, _ := hs.h.DescribeScalingActivities(hs.ctx, connect.NewRequest(&aasv1.DescribeScalingActivitiesRequest{ServiceNamespace: proto.String("ecs")}))
	a := acts.Msg.GetScalingActivities()[0]
	high := out.Msg.GetAlarms()[0].GetAlarmName()
	if a.GetDescription() != "Setting desired count to 3." || a.GetCause() != "monitor alarm "+high+" in state ALARM triggered policy cpu60" ||
		a.GetStatusCode() != "Successful" || a.GetStatusMessage() != "Successfully set desired count to 3. Change successfully fulfilled by ecs." {
		t.Errorf("activity %v", a)
	}
	// Within ScaleOutCooldown (300 s) the next round does not scale again.
	hs.clock = hs.clock.Add(time.Minute)
	hs.h.pass(hs.ctx, hs.clock, true, &warned)
	if n := hs.ecs.count("c/web"); n != 3 {
		t.Errorf("within the cooldown: desired %d, want 3", n)
	}
}

// TestFailedActivity: when ECS refuses the new desired count the activity is Failed with
// ECS's reason, and the service keeps its count.
func TestFailedActivity(t *testing.T) {
	hs := newHarness(t)
	hs.ecs.refuse = awserr.ToConnect(awserr.New("ServiceNotActiveException", "Service was not ACTIVE."))
	if err := hs.register(t, proto.Int32(3), proto.Int32(5), nil); err != nil {
		t.Fatal(err)
	}
	acts, _ := hs.h.DescribeScalingActivities(hs.ctx, connect.NewRequest(&aasv1.DescribeScalingActivitiesRequest{ServiceNamespace: proto.String("ecs")}))
	a := acts.Msg.GetScalingActivities()
	if len(a) != 1 || a[0].GetStatusCode() != "Failed" || a[0].GetDescription() != "Setting desired count to 3." ||
		a[0].GetStatusMessage() != "Failed to set desired count to 3. Reason: Service was not ACTIVE." || hs.ecs.count("c/web") != 1 {
		t.Errorf("activities %v, desired %d", a, hs.ecs.count("c/web"))
	}
}
