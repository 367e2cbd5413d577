package etcdmetrics_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/etcdmetrics"
)

func TestKVRecordsLatencyAndConflicts(t *testing.T) {
	cli := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	kv := etcdmetrics.Wrap(cli, etcdmetrics.NewMetrics(reg))
	ctx := context.Background()
	if _, err := kv.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "/k"); err != nil {
		t.Fatal(err)
	}
	// A create-if-absent of an existing key fails its compare: one conflict.
	r, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("/k"), "=", 0)).
		Then(clientv3.OpPut("/k", "w")).Commit()
	if err != nil || r.Succeeded {
		t.Fatalf("txn: succeeded=%v err=%v", r != nil && r.Succeeded, err)
	}
	if got := counterValue(t, reg, "berth_scheduler_etcd_txn_conflicts_total"); got != 1 {
		t.Errorf("conflicts = %v, want 1", got)
	}
	n, err := testutil.GatherAndCount(reg, "berth_scheduler_etcd_request_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 { // put, get, txn series
		t.Errorf("latency series = %d, want 3", n)
	}
}

func TestWrapNilMetricsIsIdentity(t *testing.T) {
	cli := etcdtest.Start(t)
	if kv := etcdmetrics.Wrap(cli, etcdmetrics.NewMetrics(nil)); kv != clientv3.KV(cli) {
		t.Error("Wrap with nil metrics should return the KV unchanged")
	}
}

// counterValue gathers reg and returns the named counter's value.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}
