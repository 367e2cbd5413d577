package cloudwatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestDecide(t *testing.T) {
	pt := func(v float64) Datapoint { return Datapoint{Value: v} }
	miss := Datapoint{Missing: true}
	for _, tc := range []struct {
		name    string
		points  []Datapoint
		m       int
		treat   string
		current string
		want    string
	}{
		{"all breaching", []Datapoint{pt(90), pt(95), pt(91)}, 3, "missing", StateOK, StateAlarm},
		{"2 of 3", []Datapoint{pt(90), pt(10), pt(91)}, 2, "missing", StateOK, StateAlarm},
		{"1 of 3 needs 2", []Datapoint{pt(10), pt(10), pt(91)}, 2, "missing", StateAlarm, StateOK},
		{"all missing", []Datapoint{miss, miss, miss}, 3, "missing", StateOK, StateInsufficientData},
		{"missing ignored", []Datapoint{miss, pt(10), miss}, 1, "missing", StateAlarm, StateOK},
		{"missing as breaching", []Datapoint{miss, miss, pt(90)}, 3, "breaching", StateOK, StateAlarm},
		{"missing as not breaching", []Datapoint{miss, miss, miss}, 1, "notBreaching", StateAlarm, StateOK},
		{"ignore keeps state", []Datapoint{miss, miss}, 2, "ignore", StateAlarm, StateAlarm},
		{"ignore with data", []Datapoint{miss, pt(1)}, 2, "ignore", StateAlarm, StateOK},
	} {
		got, _ := Decide(tc.points, "GreaterThanThreshold", 80, tc.m, tc.treat, tc.current)
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if got, _ := Decide([]Datapoint{pt(80)}, "GreaterThanOrEqualToThreshold", 80, 1, "missing", StateOK); got != StateAlarm {
		t.Errorf(">= at the threshold: %s", got)
	}
	if got, _ := Decide([]Datapoint{pt(80)}, "LessThanThreshold", 80, 1, "missing", StateOK); got != StateOK {
		t.Errorf("< at the threshold: %s", got)
	}
}

type env struct {
	h   *Handler
	ev  *Evaluator
	ctx context.Context
	now *time.Time
}

type recordedAction struct{ arn, alarm, state string }

type actions struct {
	mu   sync.Mutex
	got  []recordedAction
	fail bool
}

func (a *actions) InvokeAlarmAction(_ context.Context, _ keys.Scope, arn, alarm, state string, _ float64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, recordedAction{arn, alarm, state})
	if a.fail {
		return errors.New("policy not found")
	}
	return nil
}

var scope = keys.Scope{Account: "123456789012", Region: "us-east-1"}

func newEnv(t *testing.T, acts AlarmActions) env {
	st, err := metricstore.OpenTSDB(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	clock := func() time.Time { return now }
	kv := etcdtest.Start(t)
	m := NewMetrics(st, nil)
	h := &Handler{Metrics: m, KV: kv, Actions: acts, now: clock}
	ev := &Evaluator{KV: kv, Metrics: m, Actions: acts, Log: h.log(), now: clock}
	return env{h: h, ev: ev, ctx: caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region}), now: &now}
}

func awsType(err error) string {
	var ae *awserr.Error
	if errors.As(err, &ae) {
		return ae.Type
	}
	if ce := new(connect.Error); errors.As(err, &ce) {
		if e, ok := awserr.FromConnect(err); ok {
			return e.Type
		}
	}
	return ""
}

func (e env) put(t *testing.T, name string, v float64, at time.Time) {
	t.Helper()
	_, err := e.h.PutMetricData(e.ctx, connect.NewRequest(&cwv1.PutMetricDataRequest{Namespace: proto.String("App"), MetricData: []*cwv1.MetricDatum{{
		MetricName: proto.String(name), Value: proto.Float64(v), Timestamp: proto.Float64(float64(at.Unix())),
		Dimensions: []*cwv1.Dimension{{Name: proto.String("Service"), Value: proto.String("web")}},
	}}}))
	if err != nil {
		t.Fatal(err)
	}
}

func TestPutMetricDataValidation(t *testing.T) {
	e := newEnv(t, nil)
	for name, tc := range map[string]struct {
		in   *cwv1.PutMetricDataRequest
		want string
	}{
		"AWS namespace": {&cwv1.PutMetricDataRequest{Namespace: proto.String("AWS/ECS"), MetricData: []*cwv1.MetricDatum{{MetricName: proto.String("m"), Value: proto.Float64(1)}}}, "InvalidParameterValue"},
		"no namespace":  {&cwv1.PutMetricDataRequest{MetricData: []*cwv1.MetricDatum{{MetricName: proto.String("m")}}}, "MissingParameter"},
		"no name":       {&cwv1.PutMetricDataRequest{Namespace: proto.String("A"), MetricData: []*cwv1.MetricDatum{{Value: proto.Float64(1)}}}, "MissingParameter"},
		"value and set": {&cwv1.PutMetricDataRequest{Namespace: proto.String("A"), MetricData: []*cwv1.MetricDatum{{MetricName: proto.String("m"), Value: proto.Float64(1),
			StatisticValues: &cwv1.StatisticSet{SampleCount: proto.Float64(1), Sum: proto.Float64(1), Minimum: proto.Float64(1), Maximum: proto.Float64(1)}}}}, "InvalidParameterCombination"},
		"old": {&cwv1.PutMetricDataRequest{Namespace: proto.String("A"), MetricData: []*cwv1.MetricDatum{{MetricName: proto.String("m"), Value: proto.Float64(1),
			Timestamp: proto.Float64(float64(e.now.Add(-15 * 24 * time.Hour).Unix()))}}}, "InvalidParameterValue"},
		"counts mismatch": {&cwv1.PutMetricDataRequest{Namespace: proto.String("A"), MetricData: []*cwv1.MetricDatum{{MetricName: proto.String("m"), Values: []float64{1, 2}, Counts: []float64{1}}}}, "InvalidParameterValue"},
	} {
		_, err := e.h.PutMetricData(e.ctx, connect.NewRequest(tc.in))
		if got := awsType(err); got != tc.want {
			t.Errorf("%s: %v, want %s", name, err, tc.want)
		}
	}
}

// TestAlarmLifecycle puts data, creates an alarm, evaluates it into ALARM (running its
// action) and back to OK, and reads the history CloudWatch writes.
func TestAlarmLifecycle(t *testing.T) {
	acts := &actions{}
	e := newEnv(t, acts)
	policy := "arn:aws:autoscaling:us-east-1:123456789012:scalingPolicy:abc:resource/ecs/service/c/web:policyName/out"
	_, err := e.h.PutMetricAlarm(e.ctx, connect.NewRequest(&cwv1.PutMetricAlarmRequest{
		AlarmName: proto.String("high"), Namespace: proto.String("App"), MetricName: proto.String("Cpu"),
		Dimensions: []*cwv1.Dimension{{Name: proto.String("Service"), Value: proto.String("web")}},
		Statistic:  proto.String("Average"), Period: proto.Int32(60), EvaluationPeriods: proto.Int32(2), DatapointsToAlarm: proto.Int32(2),
		Threshold: proto.Float64(80), ComparisonOperator: proto.String("GreaterThanThreshold"), AlarmActions: []string{policy},
	}))
	if err != nil {
		t.Fatal(err)
	}
	describe := func() *cwv1.MetricAlarm {
		out, err := e.h.DescribeAlarms(e.ctx, connect.NewRequest(&cwv1.DescribeAlarmsRequest{AlarmNames: []string{"high"}}))
		if err != nil || len(out.Msg.GetMetricAlarms()) != 1 {
			t.Fatalf("describe: %v %v", out, err)
		}
		return out.Msg.GetMetricAlarms()[0]
	}
	if a := describe(); a.GetStateValue() != StateInsufficientData || !a.GetActionsEnabled() || a.GetAlarmArn() != "arn:aws:cloudwatch:us-east-1:123456789012:alarm:high" {
		t.Fatalf("new alarm: %v", a)
	}
	minute := e.now.Truncate(time.Minute)
	e.put(t, "Cpu", 90, minute.Add(-2*time.Minute))
	e.put(t, "Cpu", 70, minute.Add(-time.Minute))
	if err := e.ev.EvaluateAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if a := describe(); a.GetStateValue() != StateOK {
		t.Fatalf("1 of 2 breaching: %s %s", a.GetStateValue(), a.GetStateReason())
	}
	e.put(t, "Cpu", 95, minute.Add(-time.Minute)) // average of the last minute: 82.5
	if err := e.ev.EvaluateAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	a := describe()
	if a.GetStateValue() != StateAlarm || !strings.HasPrefix(a.GetStateReason(), "Threshold Crossed: 2 out of the last 2 datapoints [82.5 (") {
		t.Fatalf("alarm: %s %q", a.GetStateValue(), a.GetStateReason())
	}
	if len(acts.got) != 1 || acts.got[0] != (recordedAction{policy, "high", StateAlarm}) {
		t.Fatalf("actions: %v", acts.got)
	}
	// Still in ALARM: an Auto Scaling action runs again.
	if err := e.ev.EvaluateAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	if len(acts.got) != 2 {
		t.Fatalf("actions after a second evaluation: %v", acts.got)
	}
	hist, err := e.h.DescribeAlarmHistory(e.ctx, connect.NewRequest(&cwv1.DescribeAlarmHistoryRequest{AlarmName: proto.String("high")}))
	if err != nil {
		t.Fatal(err)
	}
	var summaries []string
	for _, it := range hist.Msg.GetAlarmHistoryItems() {
		summaries = append(summaries, it.GetHistoryItemType()+": "+it.GetHistorySummary())
	}
	want := []string{
		"Action: Successfully executed action " + policy,
		"StateUpdate: Alarm updated from OK to ALARM",
		"StateUpdate: Alarm updated from INSUFFICIENT_DATA to OK",
		`ConfigurationUpdate: Alarm "high" created`,
	}
	if strings.Join(summaries, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(summaries, "\n"), strings.Join(want, "\n"))
	}
	// Disabled actions do not run; SetAlarmState records the change.
	if _, err := e.h.DisableAlarmActions(e.ctx, connect.NewRequest(&cwv1.DisableAlarmActionsRequest{AlarmNames: []string{"high"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.SetAlarmState(e.ctx, connect.NewRequest(&cwv1.SetAlarmStateRequest{AlarmName: proto.String("high"), StateValue: proto.String(StateOK), StateReason: proto.String("test")})); err != nil {
		t.Fatal(err)
	}
	if a := describe(); a.GetStateValue() != StateOK || a.GetStateReason() != "test" || a.GetActionsEnabled() {
		t.Fatalf("after SetAlarmState: %v", a)
	}
	// DeleteAlarms is all or nothing.
	_, err = e.h.DeleteAlarms(e.ctx, connect.NewRequest(&cwv1.DeleteAlarmsRequest{AlarmNames: []string{"high", "nope"}}))
	if awsType(err) != "ResourceNotFound" {
		t.Fatalf("delete with a missing name: %v", err)
	}
	describe()
	if _, err := e.h.DeleteAlarms(e.ctx, connect.NewRequest(&cwv1.DeleteAlarmsRequest{AlarmNames: []string{"high"}})); err != nil {
		t.Fatal(err)
	}
}

// TestStatisticAndECSMetrics feeds agent samples through ECSMetrics and reads the
// service's CPUUtilization with Statistic, the Application Auto Scaling entry point.
func TestStatisticAndECSMetrics(t *testing.T) {
	e := newEnv(t, nil)
	ecs := NewECSMetrics(e.h.Metrics)
	minute := e.now.Truncate(time.Minute).Add(-time.Minute)
	sample := func(at time.Time, used1, used2 float64) *agentv1.TaskStats {
		return &agentv1.TaskStats{SampledAt: timestamppb.New(at), InstanceCpu: 2048, InstanceMemory: 4096, Tasks: []*agentv1.TaskSample{
			{TaskArn: "t1", Group: "service:web", CpuReserved: 256, MemoryReserved: 512, CpuUsed: used1, MemoryUsed: 128},
			{TaskArn: "t2", Group: "service:web", CpuReserved: 256, MemoryReserved: 512, CpuUsed: used2, MemoryUsed: 256},
			{TaskArn: "t3", Group: "family:batch", CpuReserved: 512, MemoryReserved: 1024, CpuUsed: 512, MemoryUsed: 0},
		}}
	}
	ecs.Observe(scope, "prod", "i-1", sample(minute.Add(10*time.Second), 64, 128))
	ecs.Observe(scope, "prod", "i-1", sample(minute.Add(40*time.Second), 128, 128))
	if err := ecs.Flush(e.ctx, minute.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	svc := map[string]string{"ClusterName": "prod", "ServiceName": "web"}
	check := func(name string, dims map[string]string, stat string, want float64) {
		t.Helper()
		v, ok, err := e.h.Metrics.Statistic(e.ctx, scope, ECSNamespace, name, dims, stat, minute, minute.Add(time.Minute))
		if err != nil || !ok || v != want {
			t.Errorf("%s %v %s = %v, %v, %v; want %v", name, dims, stat, v, ok, err, want)
		}
	}
	// t1 used 96 of 256 units (37.5 %), t2 128 of 256 (50 %): the service 224/512.
	check("CPUUtilization", svc, "Average", 43.75)
	check("CPUUtilization", svc, "Maximum", 50)
	check("CPUUtilization", svc, "Minimum", 37.5)
	check("CPUUtilization", svc, "SampleCount", 2)
	check("MemoryUtilization", svc, "Average", 37.5)
	cluster := map[string]string{"ClusterName": "prod"}
	check("CPUReservation", cluster, "Average", 50)                 // 1024 of 2048
	check("CPUUtilization", cluster, "Average", (96+128+512)/20.48) // all tasks' use
	check("MemoryReservation", cluster, "Average", 50)
	if _, ok, err := e.h.Metrics.Statistic(e.ctx, scope, ECSNamespace, "CPUUtilization", svc, "Average", minute.Add(time.Minute), minute.Add(2*time.Minute)); ok || err != nil {
		t.Errorf("no datapoint: ok=%v err=%v", ok, err)
	}
	// GetMetricData reads the same series.
	out, err := e.h.GetMetricData(e.ctx, connect.NewRequest(&cwv1.GetMetricDataRequest{
		StartTime: proto.Float64(float64(minute.Add(-time.Hour).Unix())), EndTime: proto.Float64(float64(e.now.Unix())),
		MetricDataQueries: []*cwv1.MetricDataQuery{{Id: proto.String("cpu"), MetricStat: &cwv1.MetricStat{
			Metric: &cwv1.Metric{Namespace: proto.String(ECSNamespace), MetricName: proto.String("CPUUtilization"), Dimensions: dimensionList(svc)},
			Period: proto.Int32(60), Stat: proto.String("Average")}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := out.Msg.GetMetricDataResults()[0]
	if r.GetStatusCode() != "Complete" || len(r.GetValues()) != 1 || r.GetValues()[0] != 43.75 || r.GetTimestamps()[0] != float64(minute.Unix()) {
		t.Fatalf("GetMetricData: %v", r)
	}
	_, err = e.h.GetMetricData(e.ctx, connect.NewRequest(&cwv1.GetMetricDataRequest{
		StartTime: proto.Float64(1), EndTime: proto.Float64(2),
		MetricDataQueries: []*cwv1.MetricDataQuery{{Id: proto.String("e"), Expression: proto.String("SUM(METRICS())")}},
	}))
	if awsType(err) != "InvalidParameterValue" {
		t.Fatalf("expression: %v", err)
	}
}
