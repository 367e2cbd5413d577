package placement

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

func TestMetricsCountPlacementsAndFailures(t *testing.T) {
	cli := etcdtest.Start(t)
	putInstance(t, cli, "m", "i0001", 1024, 1024, nil)
	m := NewMetrics(prometheus.NewRegistry())
	p := NewPlacer(cli, nil, WithMetrics(m))
	defer p.Close()
	ctx := context.Background()
	// Two fit; the third asks for more CPU than is left.
	for _, cpu := range []int32{512, 512, 512} {
		d := Demand{CPU: cpu, Memory: 1}
		if _, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "m", Request: Request{Demand: d}, Commit: reserveOnly("m", d)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.placed); got != 2 {
		t.Errorf("placements = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.failures.WithLabelValues(ReasonCPU)); got != 1 {
		t.Errorf("failures{reason=%s} = %v, want 1", ReasonCPU, got)
	}
	if got := testutil.CollectAndCount(m.latency); got != 1 {
		t.Errorf("latency series = %d, want 1", got)
	}
}
