package control

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// writeCountingKV counts the write txns committed through it and calls gate (when set)
// with each one's number (1, 2, …) before it commits; reads counts the read-only txns
// (multi-key reads).
type writeCountingKV struct {
	clientv3.KV
	writes atomic.Int64
	reads  atomic.Int64
	gate   func(n int64)
}

func (k *writeCountingKV) Txn(ctx context.Context) clientv3.Txn {
	return &countingTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type countingTxn struct {
	clientv3.Txn
	kv     *writeCountingKV
	writes bool
}

func (t *countingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if !op.IsGet() {
			t.writes = true
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *countingTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *countingTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *countingTxn) Commit() (*clientv3.TxnResponse, error) {
	if !t.writes {
		t.kv.reads.Add(1)
	}
	if t.writes {
		n := t.kv.writes.Add(1)
		if t.kv.gate != nil {
			t.kv.gate(n)
		}
	}
	return t.Txn.Commit()
}

// TestStateChangesBatched: concurrent state changes of many tasks on several instances
// are committed together, one nested txn per instance (a batch under the default
// --max-txn-ops holds 8 changes). Tasks starting (PENDING to RUNNING) do not write their
// instances, so instance writes meanwhile (as by a placement) fail none of their
// batches; tasks stopping do, and the changes of a batch whose instances were written
// meanwhile are recorded again. Every task ends as reported and every counter agrees
// with the task records.
func TestStateChangesBatched(t *testing.T) {
	e := newEnv(t)
	e.createCluster("st")
	var hosts []*ecsv1.ContainerInstance
	for _, h := range []string{"h1", "h2", "h3", "h4"} {
		hosts = append(hosts, e.registerHost("st", h, 2048, 2048))
	}
	e.simpleTaskDef("stweb", 128, 128)
	var tasks []*ecsv1.Task
	for range 4 {
		run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("st"), TaskDefinition: proto.String("stweb"), Count: proto.Int32(10),
			PlacementStrategy: []*ecsv1.PlacementStrategy{{Type: proto.String("spread"), Field: proto.String("instanceId")}}})
		if len(run.GetTasks()) != 10 {
			t.Fatalf("run: %v", run.GetFailures())
		}
		tasks = append(tasks, run.GetTasks()...)
	}

	kv := &writeCountingKV{KV: sharedEtcd}
	s := e.s.Fenced(kv)
	kv.gate = func(n int64) {
		if n != 1 {
			return
		}
		// The first batch's instances change after it read them, as a placement would.
		for _, h := range hosts {
			k := keys.Instance(e.sc, "st", instanceID(h.GetContainerInstanceArn()))
			rec, rev, err := store.Get[*storev1.ContainerInstanceRecord](e.ctx, sharedEtcd, k)
			if err == nil {
				_, err = store.Update(e.ctx, sharedEtcd, k, rev, rec)
			}
			if err != nil {
				t.Errorf("write %s: %v", k, err)
			}
		}
	}
	for _, step := range []struct {
		status        string
		writes, reads int64
	}{
		// Five batches of 8, none failed: 5 write txns, each after one read of its
		// tasks and none of their instances.
		{"RUNNING", 5, 5},
		// The first batch fails (its instances changed) and its 8 changes go again at
		// the front of the queue: 6 write txns, each after a read of its tasks and one of
		// their instances.
		{"STOPPED", 6, 12},
	} {
		kv.writes.Store(0)
		kv.reads.Store(0)
		// Every change queued before the first batch starts, so the batches are known.
		applyQueued(t, e, s, tasks, step.status)
		for _, tk := range tasks {
			if got := e.describeTask("st", tk.GetTaskArn()).GetLastStatus(); got != step.status {
				t.Errorf("task %s is %s, want %s", tk.GetTaskArn(), got, step.status)
			}
		}
		e.checkCounters("st")
		if n := kv.writes.Load(); n != step.writes {
			t.Errorf("%s: %d write txns for %d state changes, want %d (batched; a failed batch redone in the next)", step.status, n, len(tasks), step.writes)
		}
		if n := kv.reads.Load(); n != step.reads {
			t.Errorf("%s: %d multi-key reads for %d state changes, want %d", step.status, n, len(tasks), step.reads)
		}
		t.Logf("%s: %d write txns for %d state changes", step.status, kv.writes.Load(), len(tasks))
	}
}

// TestStateChangesBatchTooLarge: a scheduler told a larger --max-txn-ops than its etcd
// has (this etcd keeps the default 128) sees its first batch refused (60 tasks of one
// instance STOPPED: one nested txn of some 300 operations), lowers the bound, as a
// refused RunTask group does, and commits the changes in smaller batches: every task
// ends STOPPED in a handful of txns, not one each.
func TestStateChangesBatchTooLarge(t *testing.T) {
	ectx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := etcdembed.Start(ectx, etcdembed.Config{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0", UnsafeNoFsync: true, MaxTxnOps: DefaultMaxTxnOps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es.Close() })
	srv := New(Config{KV: es.Client(), MaxTxnOps: 1024})
	t.Cleanup(srv.Close)
	e := (&env{t: t, s: srv}).scoped(newAccount(), testRegion)
	e.createCluster("big")
	e.registerHost("big", "h1", 8192, 8192)
	e.simpleTaskDef("bigweb", 64, 64)
	var tasks []*ecsv1.Task
	for range 6 {
		run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("big"), TaskDefinition: proto.String("bigweb"), Count: proto.Int32(10)})
		if len(run.GetTasks()) != 10 {
			t.Fatalf("run: %v", run.GetFailures())
		}
		tasks = append(tasks, run.GetTasks()...)
	}
	kv := &writeCountingKV{KV: es.Client()}
	s := e.s.Fenced(kv)
	applyQueued(t, e, s, tasks, "STOPPED")
	running := int32(0)
	for _, tk := range tasks {
		if got := e.describeTask("big", tk.GetTaskArn()).GetLastStatus(); got != "STOPPED" {
			t.Errorf("task %s is %s, want STOPPED", tk.GetTaskArn(), got)
		}
	}
	for _, c := range must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"big"}}).GetClusters() {
		running = c.GetRunningTasksCount() + c.GetPendingTasksCount()
	}
	if running != 0 {
		t.Errorf("cluster still counts %d tasks, want 0", running)
	}
	if got := s.placing.txnOps(); got != DefaultMaxTxnOps {
		t.Errorf("--max-txn-ops after the refusal: %d, want %d", got, DefaultMaxTxnOps)
	}
	// The refused batch of 60, then 60 in batches of 8 (8 txns).
	if n := kv.writes.Load(); n != 9 {
		t.Errorf("%d write txns for %d changes, want 9 (one refused, then 8 batches)", n, len(tasks))
	}
}

// applyQueued reports status for every task through s, as each task's agent would, with all
// the changes queued before the first batch starts, so a test knows the batches; it
// returns once every change has its outcome.
func applyQueued(t *testing.T, e *env, s *Server, tasks []*ecsv1.Task, status string) {
	t.Helper()
	s.states.mu.Lock()
	s.states.running = true
	s.states.mu.Unlock()
	var wg sync.WaitGroup
	for _, tk := range tasks {
		wg.Go(func() {
			if err := s.ApplyTaskStateChange(e.ctx, e.sc, tk.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tk.GetTaskArn(), LastStatus: status}); err != nil {
				t.Errorf("state change of %s: %v", tk.GetTaskArn(), err)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.states.mu.Lock()
		queued := len(s.states.queue)
		s.states.mu.Unlock()
		if queued == len(tasks) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d changes queued", queued, len(tasks))
		}
	}
	go s.states.run()
	wg.Wait()
}
