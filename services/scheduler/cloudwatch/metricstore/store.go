// Package metricstore keeps CloudWatch metric data: datapoints of (account, region,
// namespace, metric name, dimensions, unit) as statistic sets, aggregated per period on
// read. Store is the one interface the CloudWatch service uses; TSDB implements it with
// Prometheus's embedded time-series engine on the replica's disk (a remote engine can
// implement it later).
package metricstore

import (
	"context"
	"sort"
	"strings"
	"time"
)

// Metric identifies one metric as CloudWatch does: a metric is its namespace, name and
// full set of dimensions, in one account and region.
type Metric struct {
	Account    string
	Region     string
	Namespace  string
	Name       string
	Dimensions map[string]string
}

// Key is a canonical string of m (for maps and sorting).
func (m Metric) Key() string {
	var b strings.Builder
	b.WriteString(m.Account + "\x00" + m.Region + "\x00" + m.Namespace + "\x00" + m.Name)
	for _, k := range sortedKeys(m.Dimensions) {
		b.WriteString("\x00" + k + "=" + m.Dimensions[k])
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Stats is a statistic set: what one datum (Count 1, Sum = Min = Max = value) or a
// PutMetricData StatisticValues contributes, and what a period aggregates to.
type Stats struct {
	SampleCount float64
	Sum         float64
	Minimum     float64
	Maximum     float64
}

// Merge adds o to s.
func (s *Stats) Merge(o Stats) {
	if s.SampleCount == 0 {
		*s = o
		return
	}
	if o.SampleCount == 0 {
		return
	}
	s.SampleCount += o.SampleCount
	s.Sum += o.Sum
	s.Minimum = min(s.Minimum, o.Minimum)
	s.Maximum = max(s.Maximum, o.Maximum)
}

// Get returns the statistic named as CloudWatch names it (SampleCount, Sum, Minimum,
// Maximum, Average); ok is false for any other name.
func (s Stats) Get(stat string) (float64, bool) {
	switch stat {
	case "SampleCount":
		return s.SampleCount, true
	case "Sum":
		return s.Sum, true
	case "Minimum":
		return s.Minimum, true
	case "Maximum":
		return s.Maximum, true
	case "Average":
		if s.SampleCount == 0 {
			return 0, true
		}
		return s.Sum / s.SampleCount, true
	}
	return 0, false
}

// Point is one datapoint to store.
type Point struct {
	Metric Metric
	// Unit is the CloudWatch unit ("None" when not given).
	Unit  string
	Time  time.Time
	Stats Stats
}

// Query asks for a metric's data aggregated per Period over [Start, End).
type Query struct {
	Metric Metric
	// Unit, when set, keeps only the data stored with that unit.
	Unit       string
	Start, End time.Time
	// Period is the aggregation period; periods start at multiples of it since the epoch.
	Period time.Duration
}

// Bucket is one period's aggregate.
type Bucket struct {
	// Start is the period's start.
	Start time.Time
	Stats Stats
	// Unit is the unit of the data (the first seen when several were stored).
	Unit string
}

// Filter selects metrics for List: empty fields match any; a Dimensions entry with an
// empty value matches any value of that dimension.
type Filter struct {
	Account, Region string
	Namespace, Name string
	Dimensions      map[string]string
	// Since keeps only metrics with data at or after it.
	Since time.Time
}

// Store keeps metric data. Implementations are safe for concurrent use.
type Store interface {
	// Append stores points.
	Append(ctx context.Context, points []Point) error
	// Aggregate returns the periods of q that have data, oldest first.
	Aggregate(ctx context.Context, q Query) ([]Bucket, error)
	// List returns the metrics matching f, sorted by namespace, name and dimensions.
	List(ctx context.Context, f Filter) ([]Metric, error)
	// Close releases the store.
	Close() error
}
