package cloudwatch

import (
	"context"
	"strings"
	"sync"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// ECSNamespace is the namespace of the metrics Berth computes for ECS.
const ECSNamespace = "AWS/ECS"

// ECSMetrics turns the agents' task samples into AWS/ECS's metrics at 1-minute
// resolution, as "Amazon ECS service utilization metrics" defines them:
//
//   - CPUUtilization and MemoryUtilization per (ClusterName, ServiceName): the CPU units
//     (MiB) the service's tasks used ÷ the units (MiB) their task definitions reserve × 100.
//     SampleCount is the number of tasks; Minimum and Maximum are the tasks' own
//     utilizations; Average is the service's.
//   - CPUUtilization and MemoryUtilization per ClusterName: what the cluster's tasks used ÷
//     what its container instances registered × 100; CPUReservation and MemoryReservation
//     per ClusterName: what the running tasks reserve ÷ what the instances registered × 100.
//     SampleCount is the number of instances; Minimum and Maximum the instances' own values.
//
// A task whose definition reserves no CPU (or memory) is left out of the service's CPU (or
// memory) utilization: it has no denominator. Samples of one minute are written when the
// minute has passed (Flush).
type ECSMetrics struct {
	metrics *Metrics
	mu      sync.Mutex
	minutes map[time.Time]*minute
}

type minute struct {
	tasks     map[string]*taskAcc     // by task ARN
	instances map[string]*instanceAcc // by instance ARN
}

type taskAcc struct {
	scope              keys.Scope
	cluster, service   string
	cpuReserved, memRe float64
	cpuSum, memSum     float64
	n                  float64
}

type instanceAcc struct {
	scope                    keys.Scope
	cluster                  string
	cpuReg, memReg           float64
	cpuUsed, memUsed         float64 // sums over samples
	cpuReserved, memReserved float64 // sums over samples
	n                        float64
}

// NewECSMetrics returns the AWS/ECS metrics writer into m.
func NewECSMetrics(m *Metrics) *ECSMetrics {
	return &ECSMetrics{metrics: m, minutes: map[time.Time]*minute{}}
}

// Observe takes one agent sample (agentsession's OnTaskStats).
func (e *ECSMetrics) Observe(scope keys.Scope, cluster, instanceARN string, st *agentv1.TaskStats) {
	if st == nil || st.GetSampledAt() == nil {
		return
	}
	at := st.GetSampledAt().AsTime().Truncate(time.Minute)
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.minutes[at]
	if m == nil {
		m = &minute{tasks: map[string]*taskAcc{}, instances: map[string]*instanceAcc{}}
		e.minutes[at] = m
	}
	inst := m.instances[instanceARN]
	if inst == nil {
		inst = &instanceAcc{scope: scope, cluster: cluster}
		m.instances[instanceARN] = inst
	}
	inst.cpuReg, inst.memReg = float64(st.GetInstanceCpu()), float64(st.GetInstanceMemory())
	inst.n++
	for _, t := range st.GetTasks() {
		inst.cpuUsed += t.GetCpuUsed()
		inst.memUsed += t.GetMemoryUsed()
		inst.cpuReserved += float64(t.GetCpuReserved())
		inst.memReserved += float64(t.GetMemoryReserved())
		svc, ok := strings.CutPrefix(t.GetGroup(), "service:")
		if !ok {
			continue
		}
		acc := m.tasks[t.GetTaskArn()]
		if acc == nil {
			acc = &taskAcc{scope: scope, cluster: cluster, service: svc}
			m.tasks[t.GetTaskArn()] = acc
		}
		acc.cpuReserved, acc.memRe = float64(t.GetCpuReserved()), float64(t.GetMemoryReserved())
		acc.cpuSum += t.GetCpuUsed()
		acc.memSum += t.GetMemoryUsed()
		acc.n++
	}
}

// Run writes each minute's metrics once the minute (and a grace period for late
// samples) has passed, until ctx ends.
func (e *ECSMetrics) Run(ctx context.Context) error {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			if err := e.Flush(ctx, now.Add(-15*time.Second).Truncate(time.Minute)); err != nil {
				e.metrics.log.Warn("writing AWS/ECS metrics", "err", err)
			}
		}
	}
}

type utilKey struct {
	scope            keys.Scope
	cluster, service string
}

type ratio struct {
	used, reserved float64
	stats          metricstore.Stats // of the members' own percentages
}

func (r *ratio) add(used, reserved float64) {
	if reserved <= 0 {
		return
	}
	r.used += used
	r.reserved += reserved
	p := used / reserved * 100
	r.stats.Merge(metricstore.Stats{SampleCount: 1, Sum: p, Minimum: p, Maximum: p})
}

// point is the ratio's datapoint: the aggregate percentage as the average.
func (r *ratio) point(metric metricstore.Metric, at time.Time) (metricstore.Point, bool) {
	if r.reserved <= 0 {
		return metricstore.Point{}, false
	}
	avg := r.used / r.reserved * 100
	s := r.stats
	s.Sum = avg * s.SampleCount
	return metricstore.Point{Metric: metric, Unit: "Percent", Time: at, Stats: s}, true
}

// Flush writes the metrics of every minute before until.
func (e *ECSMetrics) Flush(ctx context.Context, until time.Time) error {
	e.mu.Lock()
	var done []time.Time
	for at := range e.minutes {
		if at.Before(until) {
			done = append(done, at)
		}
	}
	minutes := make([]*minute, len(done))
	for i, at := range done {
		minutes[i] = e.minutes[at]
		delete(e.minutes, at)
	}
	e.mu.Unlock()
	var points []metricstore.Point
	for i, m := range minutes {
		points = append(points, m.points(done[i])...)
	}
	if len(points) == 0 {
		return nil
	}
	return e.metrics.put(ctx, points)
}

func (m *minute) points(at time.Time) []metricstore.Point {
	svcCPU, svcMem := map[utilKey]*ratio{}, map[utilKey]*ratio{}
	for _, t := range m.tasks {
		k := utilKey{t.scope, t.cluster, t.service}
		if svcCPU[k] == nil {
			svcCPU[k], svcMem[k] = &ratio{}, &ratio{}
		}
		svcCPU[k].add(t.cpuSum/t.n, t.cpuReserved)
		svcMem[k].add(t.memSum/t.n, t.memRe)
	}
	type clusterRatios struct{ cpu, mem, cpuRes, memRes ratio }
	clusters := map[utilKey]*clusterRatios{}
	for _, in := range m.instances {
		k := utilKey{scope: in.scope, cluster: in.cluster}
		c := clusters[k]
		if c == nil {
			c = &clusterRatios{}
			clusters[k] = c
		}
		c.cpu.add(in.cpuUsed/in.n, in.cpuReg)
		c.mem.add(in.memUsed/in.n, in.memReg)
		c.cpuRes.add(in.cpuReserved/in.n, in.cpuReg)
		c.memRes.add(in.memReserved/in.n, in.memReg)
	}
	var out []metricstore.Point
	metric := func(k utilKey, name string, dims map[string]string) metricstore.Metric {
		return metricstore.Metric{Account: k.scope.Account, Region: k.scope.Region, Namespace: ECSNamespace, Name: name, Dimensions: dims}
	}
	for k, r := range svcCPU {
		dims := map[string]string{"ClusterName": k.cluster, "ServiceName": k.service}
		if p, ok := r.point(metric(k, "CPUUtilization", dims), at); ok {
			out = append(out, p)
		}
		if p, ok := svcMem[k].point(metric(k, "MemoryUtilization", dims), at); ok {
			out = append(out, p)
		}
	}
	for k, c := range clusters {
		dims := map[string]string{"ClusterName": k.cluster}
		for name, r := range map[string]*ratio{"CPUUtilization": &c.cpu, "MemoryUtilization": &c.mem, "CPUReservation": &c.cpuRes, "MemoryReservation": &c.memRes} {
			if p, ok := r.point(metric(k, name, dims), at); ok {
				out = append(out, p)
			}
		}
	}
	return out
}
