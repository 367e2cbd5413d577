package logstore

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPutEvents measures ingest through PutEvents in batches of 1,000 lines of
// ~100 bytes with fsync on (as the scheduler runs it); it reports lines/s.
func BenchmarkPutEvents(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir()})
	must(b, err)
	defer s.Close()
	must(b, s.EnsureStream(sc, "/bench", "s", true))
	batch := make([]InputEvent, 1000)
	msg := fmt.Sprintf("%0100d", 0)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		now := time.Now().UnixMilli()
		for i := range batch {
			batch[i] = InputEvent{Timestamp: now, Message: msg}
		}
		if _, err := s.PutEvents(sc, "/bench", "s", batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/time.Since(start).Seconds(), "lines/s")
}

// BenchmarkGetLast1000 measures GetEvents of the last 1,000 lines of a stream of
// 200,000 (the `aws logs get-log-events --limit 1000` read); goal ≤ 50 ms.
func BenchmarkGetLast1000(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), NoSync: true})
	must(b, err)
	defer s.Close()
	must(b, s.EnsureStream(sc, "/bench", "s", true))
	batch := make([]InputEvent, 5000)
	now := time.Now().UnixMilli()
	for n := range 40 {
		for i := range batch {
			batch[i] = InputEvent{Timestamp: now - 100_000 + int64(n*len(batch)+i)/2, Message: fmt.Sprintf("%090d", n*len(batch)+i)}
		}
		if _, err := s.PutEvents(sc, "/bench", "s", batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		out, err := s.GetEvents(sc, GetEventsInput{Group: "/bench", Stream: "s", Limit: 1000})
		if err != nil || len(out.Events) != 1000 {
			b.Fatal(err, len(out.Events))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/read")
}
