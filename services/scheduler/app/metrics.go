package app

import (
	"context"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// LeaderServiceName is the health-check service name that reports SERVING only on the
// replica that currently leads (`grpcurl -d '{"service":"berth.scheduler.Leader"}'
// ... grpc.health.v1.Health/Check`).
const LeaderServiceName = "berth.scheduler.Leader"

// healthChecker answers grpc.health.v1.Health: the process and the API services are
// SERVING while the replica runs; LeaderServiceName is SERVING only while it leads.
type healthChecker struct{ a *App }

func (h healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	switch req.Service {
	case "", ecsv1connect.EcsServiceName, agentv1connect.AgentServiceName, adminv1connect.AdminServiceName:
		return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
	case LeaderServiceName:
		if h.a.IsLeader() {
			return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
		}
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, nil)
}

// handleIntrospection adds health, reflection and (with a registry) /metrics to mux.
func (a *App) handleIntrospection(mux *http.ServeMux) {
	mux.Handle(grpchealth.NewHandler(healthChecker{a}))
	reflector := grpcreflect.NewStaticReflector(
		ecsv1connect.EcsServiceName,
		agentv1connect.AgentServiceName,
		adminv1connect.AdminServiceName,
		grpchealth.HealthV1ServiceName,
	)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	if a.cfg.Registry != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{Registry: a.cfg.Registry}))
	}
}

// registerMetrics registers the replica-level metrics: leader status, agent sessions,
// heartbeat lag, and tasks by status. It returns the heartbeat hook (nil without a
// registry).
func (a *App) registerMetrics(reg prometheus.Registerer) func(time.Duration) {
	if reg == nil {
		return nil
	}
	lag := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "berth_scheduler_heartbeat_lag_seconds",
		Help:    "Agent heartbeat lag: receipt time minus the agent's sent_at (includes clock skew).",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 2, 5, 10, 30},
	})
	rollouts := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_scheduler_deployment_duration_seconds",
		Help:    "Service deployments from createdAt until their rolloutState became COMPLETED or FAILED, by that state.",
		Buckets: []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600},
	}, []string{"state"})
	a.rolloutDone = func(state string, d time.Duration) { rollouts.WithLabelValues(state).Observe(d.Seconds()) }
	reg.MustRegister(
		rollouts,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_scheduler_leader",
			Help: "1 while this replica leads (runs placement, reconciler and reaper loops), else 0.",
		}, func() float64 {
			if a.IsLeader() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_scheduler_agent_sessions",
			Help: "Agent sessions (bidi streams) held by this replica.",
		}, func() float64 { return float64(a.Sessions()) }),
		lag,
		&taskCollector{kv: a.cfg.Etcd, ttl: 5 * time.Second},
	)
	return func(d time.Duration) { lag.Observe(max(d, 0).Seconds()) }
}

var tasksDesc = prometheus.NewDesc("berth_scheduler_tasks",
	"Tasks by lastStatus over every container instance (PENDING, RUNNING); ALL counts every stored task, stopped ones included.",
	[]string{"status"}, nil)

// taskCollector reports tasks by status: RUNNING from a count-only read of every
// keys.InstanceRunning key, PENDING as the instance records' active_tasks summed (one
// range read; a cluster keeps no counters of its own) less RUNNING, and ALL from a
// count-only read of the task records; cached for ttl so frequent scrapes stay cheap.
type taskCollector struct {
	kv  clientv3.KV
	ttl time.Duration

	mu                      sync.Mutex
	at                      time.Time
	pending, running, total float64
	ok                      bool
}

// Describe implements prometheus.Collector.
func (c *taskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tasksDesc }

// Collect implements prometheus.Collector.
func (c *taskCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= c.ttl {
		c.at = time.Now()
		c.ok = c.read() == nil
	}
	if !c.ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, c.pending, "PENDING")
	ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, c.running, "RUNNING")
	ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, c.total, "ALL")
}

func (c *taskCollector) read() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := c.kv.Get(ctx, keys.AllInstances(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	var active int64
	for _, kv := range resp.Kvs {
		var rec storev1.ContainerInstanceRecord
		if proto.Unmarshal(kv.Value, &rec) != nil {
			continue
		}
		active += int64(rec.GetActiveTasks())
	}
	run, err := c.kv.Get(ctx, keys.AllInstanceRunning(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	cnt, err := c.kv.Get(ctx, keys.AllTasks(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	running := run.Count
	c.pending, c.running, c.total = float64(max(active-running, 0)), float64(running), float64(cnt.Count)
	return nil
}
