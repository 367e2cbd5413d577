package metricstore

import (
	"context"
	"testing"
	"time"
)

func TestTSDBAggregate(t *testing.T) {
	s, err := OpenTSDB(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	m := Metric{Account: "1", Region: "r", Namespace: "App", Name: "Latency", Dimensions: map[string]string{"Host": "a"}}
	now := time.Now().UTC().Truncate(time.Minute)
	one := func(v float64) Stats { return Stats{SampleCount: 1, Sum: v, Minimum: v, Maximum: v} }
	pts := []Point{
		{Metric: m, Unit: "Seconds", Time: now, Stats: one(1)},
		{Metric: m, Unit: "Seconds", Time: now, Stats: one(3)}, // same millisecond: both kept
		{Metric: m, Unit: "Seconds", Time: now.Add(time.Minute), Stats: one(10)},
	}
	if err := s.Append(ctx, pts); err != nil {
		t.Fatal(err)
	}
	// Out of order (an hour old) and a same-timestamp datum again in another transaction.
	if err := s.Append(ctx, []Point{{Metric: m, Unit: "Seconds", Time: now.Add(-time.Hour), Stats: one(7)}, {Metric: m, Unit: "Seconds", Time: now, Stats: one(5)}}); err != nil {
		t.Fatal(err)
	}
	// Another metric (more dimensions) must not be counted.
	m2 := m
	m2.Dimensions = map[string]string{"Host": "a", "Az": "x"}
	if err := s.Append(ctx, []Point{{Metric: m2, Unit: "Seconds", Time: now, Stats: one(100)}}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Aggregate(ctx, Query{Metric: m, Start: now.Add(-2 * time.Hour), End: now.Add(2 * time.Minute), Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3 {
		t.Fatalf("buckets = %+v, want 3", b)
	}
	if got := b[1].Stats; got.SampleCount != 3 || got.Sum != 9 || got.Minimum != 1 || got.Maximum != 5 || !b[1].Start.Equal(now) {
		t.Fatalf("bucket at now = %+v", b[1])
	}
	if b[0].Stats.Sum != 7 || b[2].Stats.Sum != 10 {
		t.Fatalf("buckets = %+v", b)
	}
	if b, _ := s.Aggregate(ctx, Query{Metric: m, Unit: "Bytes", Start: now.Add(-2 * time.Hour), End: now.Add(2 * time.Minute), Period: time.Minute}); len(b) != 0 {
		t.Fatalf("unit filter: %+v", b)
	}
	list, err := s.List(ctx, Filter{Account: "1", Region: "r", Dimensions: map[string]string{"Az": ""}})
	if err != nil || len(list) != 1 || list[0].Dimensions["Az"] != "x" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if list, _ := s.List(ctx, Filter{Account: "2", Region: "r"}); len(list) != 0 {
		t.Fatalf("other account: %+v", list)
	}
}
