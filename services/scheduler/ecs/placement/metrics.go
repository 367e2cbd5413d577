package placement

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what Placer does: tasks placed, placement failures by reason (the AWS
// failures[] reasons, plus "conflicts" when Place gave up after revision conflicts and
// "error" for any other error), and the latency of Place. A nil *Metrics records nothing.
type Metrics struct {
	placed   prometheus.Counter
	failures *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewMetrics registers the placement metrics on reg; a nil reg returns nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		placed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_scheduler_placements_total",
			Help: "Tasks placed on container instances (committed).",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_placement_failures_total",
			Help: "Placement failures by reason: the AWS failures[] reason per instance considered (RESOURCE:CPU, RESOURCE:MEMORY, AGENT, ...), conflicts, or error.",
		}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_scheduler_place_duration_seconds",
			Help:    "Latency of one Place call (choose and commit, retries included).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
		}),
	}
	reg.MustRegister(m.placed, m.failures, m.latency)
	return m
}

// WithMetrics makes the Placer record into m (nil records nothing).
func WithMetrics(m *Metrics) Option { return func(p *Placer) { p.metrics = m } }

// observe records one Place call that started at start.
func (m *Metrics) observe(start time.Time, res PlaceResult, err error) {
	if m == nil {
		return
	}
	m.latency.Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, ErrConflicts):
		m.failures.WithLabelValues("conflicts").Inc()
	case err != nil:
		m.failures.WithLabelValues("error").Inc()
	}
	m.placed.Add(float64(len(res.Placed)))
	for _, f := range res.Failures {
		m.failures.WithLabelValues(f.Reason).Inc()
	}
}

// observeGroup records one PlaceGroup call that started at start: one latency sample, and
// the placements and failures of every request in the group.
func (m *Metrics) observeGroup(start time.Time, res []PlaceResult, err error) {
	if m == nil {
		return
	}
	m.observe(start, PlaceResult{}, err)
	for _, r := range res {
		m.placed.Add(float64(len(r.Placed)))
		for _, f := range r.Failures {
			m.failures.WithLabelValues(f.Reason).Inc()
		}
	}
}
