package autoscaling

import (
	"context"
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	aasv1 "github.com/berthhq/berth/gen/berth/applicationautoscaling/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// fakeMetrics answers every one-minute window of a metric with the same value (or none);
// it records what it was asked.
type fakeMetrics struct {
	values map[string]float64 // by metric name; absent = no data
	asked  []string
	dims   map[string]string
	stat   string
}

func (f *fakeMetrics) Statistic(_ context.Context, _ keys.Scope, namespace, name string, dims map[string]string, stat string, start, end time.Time) (float64, bool, error) {
	f.asked = append(f.asked, namespace+"/"+name)
	f.dims, f.stat = maps.Clone(dims), stat
	v, ok := f.values[name]
	return v, ok, nil
}

func ttPolicy(name string, target float64, metric string, disableIn bool) *aasv1.ScalingPolicy {
	return &aasv1.ScalingPolicy{
		PolicyName: proto.String(name),
		PolicyType: proto.String(TargetTrackingScaling),
		PolicyArn:  proto.String(PolicyARN(keys.Scope{Account: "1", Region: "r"}, "6a2f9b4c-0d3e-4b5a-9c8d-7e6f5a4b3c2d", "service/c/s", name)),
		TargetTrackingScalingPolicyConfiguration: &aasv1.TargetTrackingScalingPolicyConfiguration{
			TargetValue:                   proto.Float64(target),
			PredefinedMetricSpecification: &aasv1.PredefinedMetricSpecification{PredefinedMetricType: proto.String(metric)},
			ScaleOutCooldown:              proto.Int32(60),
			ScaleInCooldown:               proto.Int32(300),
			DisableScaleIn:                proto.Bool(disableIn),
		},
	}
}

func TestDecideTargetTracking(t *testing.T) {
	s := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	r, _ := checkResource(NamespaceECS, "service/c/s", DimensionDesiredCount)
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	rec := func(min, max int32, policies ...*aasv1.ScalingPolicy) *storev1.ScalableTargetRecord {
		return &storev1.ScalableTargetRecord{
			Target:   &aasv1.ScalableTarget{MinCapacity: proto.Int32(min), MaxCapacity: proto.Int32(max), SuspendedState: &aasv1.SuspendedState{}},
			Policies: policies,
		}
	}
	cpu := func(target float64) *aasv1.ScalingPolicy {
		return ttPolicy("cpu", target, ECSServiceAverageCPUUtilization, false)
	}
	mem := func(target float64, off bool) *aasv1.ScalingPolicy {
		return ttPolicy("mem", target, ECSServiceAverageMemoryUtilization, off)
	}
	for _, tc := range []struct {
		name    string
		rec     *storev1.ScalableTargetRecord
		values  map[string]float64
		cur     int32
		want    int32 // 0: no change
		wantOut bool
	}{
		{"above target scales out proportionally", rec(1, 10, cpu(50)), map[string]float64{"CPUUtilization": 90}, 2, 4, true},
		{"just above target adds at least one", rec(1, 10, cpu(50)), map[string]float64{"CPUUtilization": 51}, 4, 5, true},
		{"scale out stops at max", rec(1, 3, cpu(50)), map[string]float64{"CPUUtilization": 100}, 2, 3, true},
		{"at max nothing changes", rec(1, 3, cpu(50)), map[string]float64{"CPUUtilization": 100}, 3, 0, false},
		{"no data, no scaling", rec(1, 10, cpu(50)), map[string]float64{}, 2, 0, false},
		{"near target holds", rec(1, 10, cpu(50)), map[string]float64{"CPUUtilization": 48}, 4, 0, false},
		{"well below target scales in by 10% at most", rec(1, 40, cpu(50)), map[string]float64{"CPUUtilization": 10}, 30, 27, false},
		{"scale in of a small service is one", rec(1, 10, cpu(50)), map[string]float64{"CPUUtilization": 5}, 3, 2, false},
		{"scale in stops at min", rec(3, 10, cpu(50)), map[string]float64{"CPUUtilization": 5}, 3, 0, false},
		{"largest scale-out of two policies wins", rec(1, 20, cpu(50), mem(50, false)), map[string]float64{"CPUUtilization": 75, "MemoryUtilization": 100}, 4, 8, true},
		{"scale in needs every policy low", rec(1, 20, cpu(50), mem(50, false)), map[string]float64{"CPUUtilization": 10, "MemoryUtilization": 48}, 4, 0, false},
		{"DisableScaleIn holds scale in", rec(1, 20, mem(50, true)), map[string]float64{"MemoryUtilization": 5}, 4, 0, false},
		{"DisableScaleIn still scales out", rec(1, 20, mem(50, true)), map[string]float64{"MemoryUtilization": 100}, 4, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{values: tc.values}
			d, ok, err := decide(context.Background(), m, s, r, tc.rec, tc.cur, now)
			if err != nil {
				t.Fatal(err)
			}
			got := int32(0)
			if ok {
				got = d.desired
			}
			if got != tc.want || ok && d.out != tc.wantOut {
				t.Fatalf("decide = %d (out %v, ok %v), want %d (out %v)", d.desired, d.out, ok, tc.want, tc.wantOut)
			}
		})
	}
}

func TestDecideCooldownsAndSuspension(t *testing.T) {
	s := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	r, _ := checkResource(NamespaceECS, "service/c/s", DimensionDesiredCount)
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	high := &fakeMetrics{values: map[string]float64{"CPUUtilization": 90}}
	low := &fakeMetrics{values: map[string]float64{"CPUUtilization": 5}}
	mk := func() *storev1.ScalableTargetRecord {
		return &storev1.ScalableTargetRecord{
			Target:   &aasv1.ScalableTarget{MinCapacity: proto.Int32(1), MaxCapacity: proto.Int32(10), SuspendedState: &aasv1.SuspendedState{}},
			Policies: []*aasv1.ScalingPolicy{ttPolicy("cpu", 50, ECSServiceAverageCPUUtilization, false)},
		}
	}
	check := func(name string, m MetricReader, rec *storev1.ScalableTargetRecord, wantOK bool) {
		t.Helper()
		_, ok, err := decide(context.Background(), m, s, r, rec, 4, now)
		if err != nil || ok != wantOK {
			t.Errorf("%s: ok %v err %v, want ok %v", name, ok, err, wantOK)
		}
	}
	rec := mk()
	rec.LastScaleOut = awsapi.Epoch(now.Add(-30 * time.Second)) // ScaleOutCooldown 60 s
	check("scale out within its cooldown", high, rec, false)
	check("scale in within a scale-out's cooldown", low, rec, false)
	rec.LastScaleOut = awsapi.Epoch(now.Add(-2 * time.Minute))
	check("scale out after its cooldown", high, rec, true)
	rec = mk()
	rec.LastScaleIn = awsapi.Epoch(now.Add(-2 * time.Minute)) // ScaleInCooldown 300 s
	check("scale in within its cooldown", low, rec, false)
	check("scale out during a scale-in cooldown", high, rec, true)
	rec = mk()
	rec.Target.SuspendedState.DynamicScalingOutSuspended = proto.Bool(true)
	check("scale out suspended", high, rec, false)
	check("scale in not suspended", low, rec, true)
	rec.Target.SuspendedState.DynamicScalingInSuspended = proto.Bool(true)
	check("scale in suspended", low, rec, false)
}

func TestDecideMetrics(t *testing.T) {
	s := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	r, _ := checkResource(NamespaceECS, "service/web/api", DimensionDesiredCount)
	now := time.Now()
	alb := ttPolicy("alb", 100, ALBRequestCountPerTarget, false)
	alb.TargetTrackingScalingPolicyConfiguration.PredefinedMetricSpecification.ResourceLabel = proto.String("app/lb/50dc6c495c0c9188/targetgroup/tg/943f017f100becff")
	custom := ttPolicy("q", 10, ECSServiceAverageCPUUtilization, false)
	custom.TargetTrackingScalingPolicyConfiguration.PredefinedMetricSpecification = nil
	custom.TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification = &aasv1.CustomizedMetricSpecification{
		Namespace: proto.String("App"), MetricName: proto.String("QueueDepth"), Statistic: proto.String("Maximum"),
		Dimensions: []*aasv1.MetricDimension{{Name: proto.String("Queue"), Value: proto.String("jobs")}},
	}
	for _, tc := range []struct {
		p      *aasv1.ScalingPolicy
		metric string
		dims   map[string]string
		stat   string
	}{
		{ttPolicy("cpu", 50, ECSServiceAverageCPUUtilization, false), "AWS/ECS/CPUUtilization", map[string]string{"ClusterName": "web", "ServiceName": "api"}, "Average"},
		{ttPolicy("mem", 50, ECSServiceAverageMemoryUtilization, false), "AWS/ECS/MemoryUtilization", map[string]string{"ClusterName": "web", "ServiceName": "api"}, "Average"},
		{alb, "AWS/ApplicationELB/RequestCountPerTarget", map[string]string{"TargetGroup": "targetgroup/tg/943f017f100becff"}, "Sum"},
		{custom, "App/QueueDepth", map[string]string{"Queue": "jobs"}, "Maximum"},
	} {
		m := &fakeMetrics{}
		rec := &storev1.ScalableTargetRecord{Target: &aasv1.ScalableTarget{MinCapacity: proto.Int32(1), MaxCapacity: proto.Int32(2)}, Policies: []*aasv1.ScalingPolicy{tc.p}}
		if _, _, err := decide(context.Background(), m, s, r, rec, 1, now); err != nil {
			t.Fatal(err)
		}
		if len(m.asked) == 0 || m.asked[0] != tc.metric || !maps.Equal(m.dims, tc.dims) || m.stat != tc.stat {
			t.Errorf("%s: asked %v dims %v stat %s, want %s %v %s", tc.p.GetPolicyName(), m.asked, m.dims, m.stat, tc.metric, tc.dims, tc.stat)
		}
	}
}
