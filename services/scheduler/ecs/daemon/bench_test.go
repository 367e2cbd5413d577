package daemon

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// BenchmarkSteadyPass measures one pass of the daemon loop over a daemon in steady state
// on 100 hosts (its task running on each): the reads of the cluster's instances and
// tasks, Compute, and no write. Figures are printed, not asserted.
func BenchmarkSteadyPass(b *testing.B) {
	e := newEnv(b)
	for i := range 100 {
		e.host(fmt.Sprintf("h%03d", i), true)
	}
	td := e.daemonTD("agents", "img")
	must(e, e.d.CreateDaemon, &ecsv1.CreateDaemonRequest{
		DaemonName: proto.String("d"), ClusterArn: proto.String(e.cluster), DaemonTaskDefinitionArn: proto.String(td), CapacityProviderArns: []string{"pool"},
	})
	// A pass places as many tasks as one etcd txn holds: 100 hosts take several.
	for range 30 {
		if len(e.live("d")) == 100 {
			break
		}
		e.step()
	}
	e.step()
	if n := len(e.live("d")); n != 100 {
		b.Fatalf("%d daemon tasks, want 100", n)
	}
	b.ResetTimer()
	for range b.N {
		if err := e.r.Pass(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
