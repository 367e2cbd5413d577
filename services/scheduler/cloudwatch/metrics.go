// Package cloudwatch serves Amazon CloudWatch's metrics and alarms (signing name
// `monitoring`): PutMetricData, GetMetricData, GetMetricStatistics, ListMetrics, metric
// alarms and their evaluation, and the AWS/ECS metrics Berth computes from its agents'
// task samples. Metric data lives in a metricstore.Store on the replica's disk; alarms in
// etcd (platform/keys/cloudwatch.go). See docs/cloudwatch.md.
package cloudwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Metrics reads and writes metric data of every (account, region) through one store.
type Metrics struct {
	store metricstore.Store
	log   *slog.Logger
	now   func() time.Time
}

// NewMetrics returns Metrics over store.
func NewMetrics(store metricstore.Store, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Metrics{store: store, log: log, now: time.Now}
}

// Statistics are the statistics CloudWatch computes (extended statistics, percentiles,
// are not kept: the store holds statistic sets).
var Statistics = []string{"SampleCount", "Average", "Sum", "Minimum", "Maximum"}

// Statistic returns one statistic (Average, Sum, Maximum, Minimum, SampleCount) of a
// metric over [start, end), all its datapoints in that range aggregated as one period;
// ok is false when the metric has no datapoint there. dimensions is the metric's full
// dimension set (CloudWatch matches it exactly). An unknown stat is an error.
func (m *Metrics) Statistic(ctx context.Context, scope keys.Scope, namespace, metricName string, dimensions map[string]string, stat string, start, end time.Time) (value float64, ok bool, err error) {
	if _, known := (metricstore.Stats{}).Get(stat); !known {
		return 0, false, fmt.Errorf("cloudwatch: unknown statistic %q", stat)
	}
	if !end.After(start) {
		return 0, false, nil
	}
	var total metricstore.Stats
	// Read with periods that cover [start, end) in whole seconds: one bucket per second
	// aligned at the epoch; merge them.
	buckets, err := m.store.Aggregate(ctx, metricstore.Query{
		Metric: metricstore.Metric{Account: scope.Account, Region: scope.Region, Namespace: namespace, Name: metricName, Dimensions: dimensions},
		Start:  start, End: end, Period: time.Second,
	})
	if err != nil {
		return 0, false, err
	}
	for _, b := range buckets {
		if b.Start.Before(start.Truncate(time.Second)) {
			continue
		}
		total.Merge(b.Stats)
	}
	if total.SampleCount == 0 {
		return 0, false, nil
	}
	v, _ := total.Get(stat)
	return v, true, nil
}

// series returns a metric's statistic per period over [start, end), oldest first.
func (m *Metrics) series(ctx context.Context, scope keys.Scope, metric metricstore.Metric, unit string, period time.Duration, start, end time.Time) ([]metricstore.Bucket, error) {
	metric.Account, metric.Region = scope.Account, scope.Region
	return m.store.Aggregate(ctx, metricstore.Query{Metric: metric, Unit: unit, Start: start, End: end, Period: period})
}

// put stores points of one scope.
func (m *Metrics) put(ctx context.Context, points []metricstore.Point) error {
	return m.store.Append(ctx, points)
}

// errNonFinite is a value CloudWatch refuses.
var errNonFinite = errors.New("non-finite")

func finite(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errNonFinite
	}
	return nil
}
