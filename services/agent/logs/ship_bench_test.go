package logs

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkShipper measures the shipper alone: 100,000 captured lines of 100 bytes
// read from the log file and shipped to an in-memory control plane; lines/s.
func BenchmarkShipper(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		st, err := NewStore(Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		plane := &fakePlane{streams: map[string]bool{"g|s": true}, events: map[string][]string{}}
		if err := st.SetDestination(taskARN, "app", Destination{Group: "g", Stream: "s", Blocking: true}); err != nil {
			b.Fatal(err)
		}
		out, _, closeFn, _ := st.Open(taskARN, "app")
		line := fmt.Sprintf("%0100d\n", 7)
		for range 100_000 {
			out.Write([]byte(line))
		}
		closeFn()
		b.StartTimer()
		NewShipper(ShipperConfig{Store: st, Client: plane}).Pass(context.Background())
		if n := len(plane.got("g|s")); n != 100_000 {
			b.Fatalf("shipped %d", n)
		}
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}
