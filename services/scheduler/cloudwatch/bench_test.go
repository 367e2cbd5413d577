package cloudwatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkIngest1000Tasks: one minute of samples of 1,000 simulated tasks (50 agents of
// 20 tasks, 4 samples each, 100 services) through ECSMetrics into the tsdb store, flush
// included. ns/op is one minute's worth; tasks/s is printed.
func BenchmarkIngest1000Tasks(b *testing.B) {
	st, err := metricstore.OpenTSDB(b.TempDir(), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ecs := NewECSMetrics(NewMetrics(st, nil))
	ctx := context.Background()
	start := time.Now().Truncate(time.Minute).Add(-time.Duration(b.N+1) * time.Minute)
	msgs := make([]*agentv1.TaskStats, 50)
	for a := range msgs {
		m := &agentv1.TaskStats{InstanceCpu: 4096, InstanceMemory: 8192}
		for i := range 20 {
			n := a*20 + i
			m.Tasks = append(m.Tasks, &agentv1.TaskSample{TaskArn: fmt.Sprintf("arn:aws:ecs:us-east-1:1:task/c/%d", n),
				Group: fmt.Sprintf("service:svc-%d", n%100), CpuReserved: 256, MemoryReserved: 512, CpuUsed: float64(n % 256), MemoryUsed: 100})
		}
		msgs[a] = m
	}
	b.ResetTimer()
	for n := range b.N {
		minute := start.Add(time.Duration(n) * time.Minute)
		for s := range 4 {
			at := timestamppb.New(minute.Add(time.Duration(s) * 15 * time.Second))
			for a, m := range msgs {
				m.SampledAt = at
				ecs.Observe(scope, "c", fmt.Sprintf("i-%d", a), m)
			}
		}
		if err := ecs.Flush(ctx, minute.Add(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000*4)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkGetMetricDataServiceHour: GetMetricData of one service's CPUUtilization, an
// hour of 1-minute points, from a store holding 100 services' hour.
func BenchmarkGetMetricDataServiceHour(b *testing.B) {
	st, err := metricstore.OpenTSDB(b.TempDir(), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	m := NewMetrics(st, nil)
	h := &Handler{Metrics: m}
	end := time.Now().Truncate(time.Minute)
	var pts []metricstore.Point
	for svc := range 100 {
		for i := range 60 {
			v := float64(i)
			pts = append(pts, metricstore.Point{Metric: metricstore.Metric{Account: scope.Account, Region: scope.Region, Namespace: ECSNamespace, Name: "CPUUtilization",
				Dimensions: map[string]string{"ClusterName": "c", "ServiceName": fmt.Sprintf("svc-%d", svc)}}, Unit: "Percent", Time: end.Add(-time.Duration(60-i) * time.Minute),
				Stats: metricstore.Stats{SampleCount: 2, Sum: 2 * v, Minimum: v, Maximum: v}})
		}
	}
	if err := m.put(context.Background(), pts); err != nil {
		b.Fatal(err)
	}
	ctx := caller.With(context.Background(), caller.Identity{Account: scope.Account, Region: scope.Region})
	req := &cwv1.GetMetricDataRequest{StartTime: proto.Float64(float64(end.Add(-time.Hour).Unix())), EndTime: proto.Float64(float64(end.Unix())),
		MetricDataQueries: []*cwv1.MetricDataQuery{{Id: proto.String("cpu"), MetricStat: &cwv1.MetricStat{Period: proto.Int32(60), Stat: proto.String("Average"),
			Metric: &cwv1.Metric{Namespace: proto.String(ECSNamespace), MetricName: proto.String("CPUUtilization"),
				Dimensions: dimensionList(map[string]string{"ClusterName": "c", "ServiceName": "svc-7"})}}}}}
	b.ResetTimer()
	for range b.N {
		out, err := h.GetMetricData(ctx, connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		if n := len(out.Msg.GetMetricDataResults()[0].GetValues()); n != 60 {
			b.Fatalf("%d points, want 60", n)
		}
	}
}
