package etcdmetrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Metrics are the etcd request metrics of one process. A nil *Metrics records nothing.
type Metrics struct {
	latency   *prometheus.HistogramVec
	conflicts prometheus.Counter
	errors    *prometheus.CounterVec
}

// NewMetrics registers the etcd metrics on reg and returns them. A nil reg returns nil
// (no metrics).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_scheduler_etcd_request_duration_seconds",
			Help:    "Latency of etcd requests by operation (get, put, delete, txn, compact, do).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
		}, []string{"op"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_scheduler_etcd_txn_conflicts_total",
			Help: "etcd transactions whose compares failed: CAS conflicts, create-if-absent of an existing key, lost leader fences.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_etcd_request_errors_total",
			Help: "etcd requests that returned an error, by operation.",
		}, []string{"op"}),
	}
	reg.MustRegister(m.latency, m.conflicts, m.errors)
	return m
}

func (m *Metrics) observe(op string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(op).Inc()
	}
}

// TracerName is the instrumentation scope of the etcd request spans.
const TracerName = "github.com/berthhq/berth/services/scheduler/platform/etcdmetrics"

// startSpan starts a client span "etcd {op}" under ctx's span; the global tracer
// provider is a no-op unless the process installed one.
func startSpan(ctx context.Context, op string) (context.Context, trace.Span) {
	return otel.Tracer(TracerName).Start(ctx, "etcd "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "etcd"), attribute.String("db.operation.name", op)))
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// KV is a clientv3.KV that records every request in Metrics and as an OpenTelemetry
// span ("etcd get", "etcd txn", …).
type KV struct {
	kv clientv3.KV
	m  *Metrics
}

var _ clientv3.KV = (*KV)(nil)

// Wrap returns kv instrumented with m; with m nil it returns kv itself.
func Wrap(kv clientv3.KV, m *Metrics) clientv3.KV {
	if m == nil {
		return kv
	}
	return &KV{kv: kv, m: m}
}

// Put implements clientv3.KV.
func (k *KV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, "put")
	r, err := k.kv.Put(ctx, key, val, opts...)
	endSpan(span, err)
	k.m.observe("put", start, err)
	return r, err
}

// Get implements clientv3.KV.
func (k *KV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, "get")
	r, err := k.kv.Get(ctx, key, opts...)
	endSpan(span, err)
	k.m.observe("get", start, err)
	return r, err
}

// GetStream implements clientv3.KV; it records the time to open the stream.
func (k *KV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, "get_stream")
	r, err := k.kv.GetStream(ctx, key, opts...)
	endSpan(span, err)
	k.m.observe("get_stream", start, err)
	return r, err
}

// Delete implements clientv3.KV.
func (k *KV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, "delete")
	r, err := k.kv.Delete(ctx, key, opts...)
	endSpan(span, err)
	k.m.observe("delete", start, err)
	return r, err
}

// Compact implements clientv3.KV.
func (k *KV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, "compact")
	r, err := k.kv.Compact(ctx, rev, opts...)
	endSpan(span, err)
	k.m.observe("compact", start, err)
	return r, err
}

// Do implements clientv3.KV.
func (k *KV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, "do")
	r, err := k.kv.Do(ctx, op)
	endSpan(span, err)
	k.m.observe("do", start, err)
	if op.IsTxn() && err == nil && r.Txn() != nil && !r.Txn().Succeeded {
		k.m.conflicts.Inc()
	}
	return r, err
}

// Txn implements clientv3.KV: Commit records the txn's latency, and a failed compare as
// a conflict.
func (k *KV) Txn(ctx context.Context) clientv3.Txn {
	return &txn{txn: k.kv.Txn(ctx), m: k.m, ctx: ctx}
}

type txn struct {
	txn clientv3.Txn
	m   *Metrics
	ctx context.Context // the span's parent
}

func (t *txn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.txn = t.txn.If(cs...); return t }
func (t *txn) Then(ops ...clientv3.Op) clientv3.Txn { t.txn = t.txn.Then(ops...); return t }
func (t *txn) Else(ops ...clientv3.Op) clientv3.Txn { t.txn = t.txn.Else(ops...); return t }

func (t *txn) Commit() (*clientv3.TxnResponse, error) {
	start := time.Now()
	_, span := startSpan(t.ctx, "txn")
	r, err := t.txn.Commit()
	endSpan(span, err)
	t.m.observe("txn", start, err)
	if err == nil && !r.Succeeded {
		t.m.conflicts.Inc()
		span.SetAttributes(attribute.Bool("etcd.txn.succeeded", false))
	}
	return r, err
}

// Client is a clientv3.KV and clientv3.Watcher (what store.Client needs) whose KV is
// instrumented.
type Client struct {
	clientv3.KV
	clientv3.Watcher
}

// WrapClient returns cli with its KV instrumented with m, for components that take
// store.Client.
func WrapClient(cli *clientv3.Client, m *Metrics) Client {
	return Client{KV: Wrap(cli.KV, m), Watcher: cli.Watcher}
}
