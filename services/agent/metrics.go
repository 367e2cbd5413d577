package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/berthhq/berth/services/agent/tasks"
)

// containerdMetrics records the latency of every containerd gRPC call by method and
// status code, through client interceptors on the runtime gate's connection.
type containerdMetrics struct {
	latency *prometheus.HistogramVec
}

func newContainerdMetrics(reg prometheus.Registerer) *containerdMetrics {
	m := &containerdMetrics{latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_agent_containerd_call_duration_seconds",
		Help:    "Latency of containerd gRPC calls by method and gRPC status code (streams: until established).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"method", "code"})}
	reg.MustRegister(m.latency)
	return m
}

// dialOptions returns the interceptors to pass to the gate.
func (m *containerdMetrics) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			start := time.Now()
			err := invoker(ctx, method, req, reply, cc, opts...)
			m.latency.WithLabelValues(method, status.Code(err).String()).Observe(time.Since(start).Seconds())
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			start := time.Now()
			s, err := streamer(ctx, desc, cc, method, opts...)
			m.latency.WithLabelValues(method, status.Code(err).String()).Observe(time.Since(start).Seconds())
			return s, err
		}),
	}
}

var agentTasksDesc = prometheus.NewDesc("berth_agent_tasks",
	"Tasks this agent holds, by lastStatus (PENDING, RUNNING, STOPPED until cleanup).",
	[]string{"status"}, nil)

// taskCollector reports the manager's tasks by status at scrape time.
type taskCollector struct{ m *tasks.Manager }

// Describe implements prometheus.Collector.
func (c taskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- agentTasksDesc }

// Collect implements prometheus.Collector.
func (c taskCollector) Collect(ch chan<- prometheus.Metric) {
	for s, n := range c.m.CountByStatus() {
		ch <- prometheus.MustNewConstMetric(agentTasksDesc, prometheus.GaugeValue, float64(n), s)
	}
}

// newContainerEvents returns berth_agent_container_events_total: container lifecycle
// events by kind ("start", "start_failed", "exit", "oom"; tasks.Config.OnContainer).
func newContainerEvents() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_agent_container_events_total",
		Help: "Container lifecycle events on this agent: start (a process started, restarts included), start_failed, exit, oom (an exit killed for memory).",
	}, []string{"event"})
	for _, ev := range []string{"start", "start_failed", "exit", "oom"} {
		c.WithLabelValues(ev)
	}
	return c
}
