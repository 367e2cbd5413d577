package service

import (
	"testing"

	"github.com/berthhq/berth/services/scheduler/ecs/control"
)

// TestLargeServiceLaunchesInBatches: a service wanting more tasks than fit one placement
// txn reaches its count over consecutive passes, one txn's worth at a time. Before, the
// whole launch went into one txn and failed every pass: past ~15 tasks with etcd's
// default --max-txn-ops 128 ("too many operations in txn request"), near 750 with berth
// dev's 1,024 ("message larger than max", found by a new-user trial with desiredCount
// 1,000,000).
func TestLargeServiceLaunchesInBatches(t *testing.T) {
	for _, maxOps := range []int{0, control.DefaultMaxTxnOps} { // the test etcd keeps etcd's default
		e := newEnv(t, ReconcilerConfig{MaxTxnOps: maxOps})
		e.host("h1", 1<<20, 1<<20)
		td := e.taskDef("many", "busybox", 0, 8, false)
		want := 2*MaxLaunchPerPass + 20
		e.createService("many", td, int32(want), nil)
		e.pass()
		first := e.count("many").total
		if first == 0 || first > MaxLaunchPerPass || (maxOps == 0 && first >= control.DefaultMaxTxnOps/5) {
			t.Fatalf("maxOps %d: after one pass %d tasks, want one txn's worth (1..%d)", maxOps, first, MaxLaunchPerPass)
		}
		for i := 0; e.count("many").total < want && i < want; i++ {
			e.pass()
		}
		if got := e.count("many").total; got != want {
			t.Fatalf("maxOps %d: %d tasks after the passes, want %d", maxOps, got, want)
		}
	}
}
