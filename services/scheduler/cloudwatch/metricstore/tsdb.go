package metricstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// DefaultRetention is how long data is kept: CloudWatch keeps 1-minute data 15 days.
const DefaultRetention = 15 * 24 * time.Hour

// MaxAge is how old a datapoint PutMetricData accepts may be (two weeks, as CloudWatch);
// the engine accepts samples out of order within it.
const MaxAge = 14 * 24 * time.Hour

// Label names of a series. A datum is four series (one per stat); dimension labels are
// "d." + the dimension name, so they cannot clash with these.
const (
	labelName      = "__name__"
	labelNamespace = "ns"
	labelAccount   = "acct"
	labelRegion    = "region"
	labelStat      = "stat"
	labelUnit      = "unit"
	dimPrefix      = "d."
)

var statNames = [4]string{"count", "sum", "min", "max"}

// TSDB is a Store in Prometheus's tsdb under a directory. Its time unit is the
// microsecond (the engine is unit agnostic): each datum gets its own timestamp within its
// millisecond from a rolling counter, so two datapoints of one metric sent for the same
// millisecond (which CloudWatch aggregates) are both kept instead of one being refused or
// dropped as a duplicate sample.
type TSDB struct {
	db  *tsdb.DB
	seq atomic.Uint64
}

// OpenTSDB opens (or creates) the store in dir, keeping data for retention
// (DefaultRetention when 0).
func OpenTSDB(dir string, retention time.Duration, log *slog.Logger) (*TSDB, error) {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := tsdb.DefaultOptions()
	us := func(d time.Duration) int64 { return d.Microseconds() }
	opts.RetentionDuration = us(retention)
	opts.MinBlockDuration = us(2 * time.Hour)
	opts.MaxBlockDuration = us(min(retention/10, 31*24*time.Hour))
	if opts.MaxBlockDuration < opts.MinBlockDuration {
		opts.MaxBlockDuration = opts.MinBlockDuration
	}
	opts.OutOfOrderTimeWindow = us(MaxAge + time.Hour)
	db, err := tsdb.Open(dir, log, nil, opts, nil)
	if err != nil {
		return nil, fmt.Errorf("metricstore: open %s: %w", dir, err)
	}
	return &TSDB{db: db}, nil
}

func seriesLabels(p *Point, stat string) labels.Labels {
	b := labels.NewScratchBuilder(6 + len(p.Metric.Dimensions))
	b.Add(labelName, p.Metric.Name)
	b.Add(labelNamespace, p.Metric.Namespace)
	b.Add(labelAccount, p.Metric.Account)
	b.Add(labelRegion, p.Metric.Region)
	b.Add(labelStat, stat)
	b.Add(labelUnit, p.Unit)
	for k, v := range p.Metric.Dimensions {
		b.Add(dimPrefix+k, v)
	}
	b.Sort()
	return b.Labels()
}

// Append implements Store: one transaction for all points.
func (s *TSDB) Append(ctx context.Context, points []Point) error {
	app := s.db.Appender(ctx)
	for i := range points {
		p := &points[i]
		t := p.Time.UnixMilli()*1000 + int64(s.seq.Add(1)%1000)
		vals := [4]float64{p.Stats.SampleCount, p.Stats.Sum, p.Stats.Minimum, p.Stats.Maximum}
		for j, stat := range statNames {
			if _, err := app.Append(0, seriesLabels(p, stat), t, vals[j]); err != nil {
				_ = app.Rollback()
				return fmt.Errorf("metricstore: append %s: %w", p.Metric.Name, err)
			}
		}
	}
	return app.Commit()
}

func (s *TSDB) matchers(m Metric) []*labels.Matcher {
	ms := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, labelAccount, m.Account),
		labels.MustNewMatcher(labels.MatchEqual, labelRegion, m.Region),
	}
	if m.Namespace != "" {
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, labelNamespace, m.Namespace))
	}
	if m.Name != "" {
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, labelName, m.Name))
	}
	for k, v := range m.Dimensions {
		if v == "" {
			ms = append(ms, labels.MustNewMatcher(labels.MatchRegexp, dimPrefix+k, ".+"))
		} else {
			ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, dimPrefix+k, v))
		}
	}
	return ms
}

// dimCount is how many dimension labels ls has.
func dimCount(ls labels.Labels) int {
	n := 0
	ls.Range(func(l labels.Label) {
		if strings.HasPrefix(l.Name, dimPrefix) {
			n++
		}
	})
	return n
}

// Aggregate implements Store.
func (s *TSDB) Aggregate(ctx context.Context, q Query) ([]Bucket, error) {
	if q.Period <= 0 {
		return nil, errors.New("metricstore: period must be positive")
	}
	q.Start = q.Start.Truncate(q.Period)
	mint, maxt := q.Start.UnixMicro(), q.End.UnixMicro()-1
	if maxt < mint {
		return nil, nil
	}
	qr, err := s.db.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	defer qr.Close()
	ms := s.matchers(q.Metric)
	if q.Unit != "" {
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, labelUnit, q.Unit))
	}
	period := q.Period.Microseconds()
	type slot struct {
		vals [4]float64
		seen [4]bool
		unit string
	}
	// (bucket start, sample time) → the four stats of one datum.
	samples := map[[2]int64]*slot{}
	set := qr.Select(ctx, false, nil, ms...)
	for set.Next() {
		series := set.At()
		ls := series.Labels()
		if dimCount(ls) != len(q.Metric.Dimensions) {
			continue // another metric: CloudWatch matches the full dimension set
		}
		idx := -1
		switch ls.Get(labelStat) {
		case "count":
			idx = 0
		case "sum":
			idx = 1
		case "min":
			idx = 2
		case "max":
			idx = 3
		}
		if idx < 0 {
			continue
		}
		unit := ls.Get(labelUnit)
		it := series.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			t, v := it.At()
			if t < mint || t > maxt {
				continue
			}
			key := [2]int64{t - t%period, t}
			sl := samples[key]
			if sl == nil {
				sl = &slot{unit: unit}
				samples[key] = sl
			}
			sl.vals[idx], sl.seen[idx] = v, true
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	if err := set.Err(); err != nil {
		return nil, err
	}
	buckets := map[int64]*Bucket{}
	for key, sl := range samples {
		if !(sl.seen[0] && sl.seen[1] && sl.seen[2] && sl.seen[3]) {
			continue
		}
		b := buckets[key[0]]
		if b == nil {
			b = &Bucket{Start: time.UnixMicro(key[0]).UTC(), Unit: sl.unit}
			buckets[key[0]] = b
		}
		b.Stats.Merge(Stats{SampleCount: sl.vals[0], Sum: sl.vals[1], Minimum: sl.vals[2], Maximum: sl.vals[3]})
	}
	out := make([]Bucket, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// List implements Store.
func (s *TSDB) List(ctx context.Context, f Filter) ([]Metric, error) {
	mint := f.Since.UnixMicro()
	if f.Since.IsZero() {
		mint = 0
	}
	qr, err := s.db.Querier(mint, time.Now().Add(24*time.Hour).UnixMicro())
	if err != nil {
		return nil, err
	}
	defer qr.Close()
	ms := s.matchers(Metric{Account: f.Account, Region: f.Region, Namespace: f.Namespace, Name: f.Name, Dimensions: f.Dimensions})
	ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, labelStat, "count"))
	seen := map[string]bool{}
	var out []Metric
	// Select without hints reads the series' samples only when iterated; we iterate
	// nothing but need each series to have data in the range, so hint it.
	set := qr.Select(ctx, false, &storage.SelectHints{Start: mint, End: time.Now().Add(24 * time.Hour).UnixMicro(), Func: "series"}, ms...)
	for set.Next() {
		ls := set.At().Labels()
		m := Metric{Account: f.Account, Region: f.Region, Namespace: ls.Get(labelNamespace), Name: ls.Get(labelName), Dimensions: map[string]string{}}
		ls.Range(func(l labels.Label) {
			if d, ok := strings.CutPrefix(l.Name, dimPrefix); ok {
				m.Dimensions[d] = l.Value
			}
		})
		if k := m.Key(); !seen[k] {
			seen[k] = true
			out = append(out, m)
		}
	}
	if err := set.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

// Close implements Store.
func (s *TSDB) Close() error { return s.db.Close() }
