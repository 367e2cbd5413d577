package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's request metrics; a nil *metrics records nothing.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_gateway_requests_total",
			Help: "Requests by ECS action (or agent relay procedure, dev route) and HTTP status code.",
		}, []string{"action", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_gateway_request_duration_seconds",
			Help:    "Request latency by action and HTTP status code (agent relay streams last as long as the session).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"action", "code"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// observe records one request; requests that named no known action count as "unknown".
func (m *metrics) observe(action string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if action == "" {
		action = "unknown"
	}
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(action, c).Inc()
	m.latency.WithLabelValues(action, c).Observe(d.Seconds())
}
