package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// BenchmarkPass measures reconcile passes over 1,000 REPLICA services of 10 running tasks
// each (10,000 tasks on 100 instances of one cluster) in steady state. full: Pass lists
// the services, the cluster's tasks and instances, recomputes every service's counts and
// deployment state, and writes nothing. unchanged: what Run does when nothing changed
// (service keys and revisions only). one-service-changed: what Run does after a task of
// one service changed. The setup's first pass, which places all 10,000 tasks, is logged.
func BenchmarkPass(b *testing.B) {
	const services, perService, hosts = 1000, 10, 100
	e := newEnv(b, ReconcilerConfig{})
	p := placement.NewPlacer(sharedEtcd, nil)
	b.Cleanup(p.Close)
	e.r = NewReconciler(ReconcilerConfig{Client: sharedEtcd, Placer: p, Now: e.clock.Now})
	// Remove this run's tasks afterwards (newEnv removes its services): passes read every
	// account's services, and the benchmark runs more than once.
	b.Cleanup(func() {
		for _, prefix := range []string{store.MustKeyPrefix("tasks", e.acc)} {
			if _, err := sharedEtcd.Delete(context.Background(), prefix, clientv3.WithPrefix()); err != nil {
				b.Error(err)
			}
		}
	})
	for i := range hosts {
		e.host(fmt.Sprintf("h%03d", i), 1024*64, 1024*64)
	}
	td := e.taskDef("bench", "img", 16, 16, false)
	for i := range services {
		e.createService(fmt.Sprintf("svc-%04d", i), td, perService, nil)
	}
	start := time.Now()
	e.pass()
	launch := time.Since(start)
	// Mark every task RUNNING directly in the store (the agent's report, without the
	// per-task round trips of ApplyTaskStateChange), 50 tasks per txn.
	ctx := context.Background()
	items, err := store.ListAll[*storev1.TaskRecord](ctx, sharedEtcd, keys.Tasks(e.sc, e.cluster))
	if err != nil {
		b.Fatal(err)
	}
	if len(items) != services*perService {
		b.Fatalf("%d tasks placed, want %d", len(items), services*perService)
	}
	for i := 0; i < len(items); i += 50 {
		txn := store.NewTxn(sharedEtcd)
		for _, it := range items[i:min(i+50, len(items))] {
			it.Value.Task.LastStatus = proto.String("RUNNING")
			it.Value.Task.StartedAt = proto.Float64(awsapi.Epoch(e.clock.Now()))
			txn.Update(it.Key, it.ModRevision, it.Value)
		}
		if _, err := txn.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Tasks count as started once RUNNING for StableAfter (40 s by default): without this
	// wait no service reaches steady state and every pass reconciles all of them.
	e.clock.Advance(DefaultStableAfter)
	e.pass() // records the steady state once
	b.Run("full", func(b *testing.B) {
		for range b.N {
			if err := e.r.Pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What Run does between changes: list the services, find no cluster changed.
	b.Run("unchanged", func(b *testing.B) {
		e.r.markAll(false)
		for range b.N {
			if err := e.r.pass(ctx, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What Run does when a task of one service changed: reconcile that service only,
	// reading its tasks through the ListTasks index.
	b.Run("one-service-changed", func(b *testing.B) {
		e.r.markAll(false)
		for range b.N {
			e.r.dmu.Lock()
			e.r.markService(keys.ClusterRef{Scope: e.sc, Cluster: e.cluster}, "svc-0500")
			e.r.dmu.Unlock()
			if err := e.r.pass(ctx, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Logf("first pass, placing %d tasks: %v", services*perService, launch)
	s := e.service("svc-0999")
	if s.GetRunningCount() != perService || s.GetDeployments()[0].GetRolloutState() != RolloutCompleted {
		b.Fatalf("service not steady: %v", s)
	}
}

// BenchmarkCompute measures Compute alone (no etcd) on one service: steady (10 tasks
// RUNNING, the record already steady: the common case of a full pass) and a rolling
// update of 100 tasks half way (100 old, 50 new RUNNING, 20 stopped).
func BenchmarkCompute(b *testing.B) {
	steady := newWorld(b, 10, 100, 200)
	steady.running(10, dep1, time.Hour)
	steady.settled(10)
	rolling := newWorld(b, 100, 50, 200)
	rolling.running(100, dep1, time.Hour)
	rolling.deploy(dep2, tdV2)
	rolling.running(50, dep2, time.Minute)
	rolling.failed(20, dep2, time.Minute)
	for _, bc := range []struct {
		name string
		w    *world
	}{{"steady-10", steady}, {"rolling-100", rolling}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := Compute(bc.w.st, bc.w.pol); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
