package reaper

import (
	"context"
	"errors"
	"testing"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

const (
	acct = "000000000000"
	cl   = "c"
)

// testScope is acct in testRegion, where the tests run.
var testScope = keys.Scope{Account: acct, Region: testRegion}

// fakeControl applies the reaper's calls to the records directly.
type fakeControl struct{ kv clientv3.KV }

func (f fakeControl) SetAgentConnected(ctx context.Context, account keys.Scope, instanceARN string, connected bool) error {
	a, _ := arn.Parse(instanceARN)
	_, _, err := store.Mutate(ctx, f.kv, keys.Instance(account, a.Cluster, a.Name), func(r *storev1.ContainerInstanceRecord) error {
		r.ContainerInstance.AgentConnected = connected
		return nil
	})
	return err
}

func (f fakeControl) ApplyTaskStateChange(ctx context.Context, account keys.Scope, instanceARN string, ch *agentv1.TaskStateChange) error {
	a, _ := arn.Parse(ch.GetTaskArn())
	_, _, err := store.Mutate(ctx, f.kv, keys.Task(account, a.Cluster, a.Name), func(r *storev1.TaskRecord) error {
		r.Task.LastStatus = proto.String(ch.GetLastStatus())
		r.Task.StopCode = proto.String(ch.GetStopCode())
		r.Task.StoppedReason = proto.String(ch.GetStoppedReason())
		r.Task.StoppedAt = proto.Float64(float64(ch.GetStoppedAt().AsTime().UnixNano()) / 1e9)
		return nil
	})
	return err
}

func instARN(id string) string { return arn.ContainerInstanceARN("us-east-1", acct, cl, id, true) }

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func epoch(t time.Time) *float64         { return proto.Float64(float64(t.UnixNano()) / 1e9) }

func TestReaperWithControllableClock(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	must := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"i1", "i2"} {
		must(store.Create(ctx, cli, keys.Instance(testScope, cl, id), &storev1.ContainerInstanceRecord{ClusterName: cl, ContainerInstance: &ecsv1.ContainerInstance{
			ContainerInstanceArn: proto.String(instARN(id)), Status: proto.String("ACTIVE"), AgentConnected: true,
		}}))
	}
	// i2's agent holds a session somewhere; i1's does not.
	must2 := func(_ *clientv3.PutResponse, err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must2(cli.Put(ctx, keys.Presence(testScope, cl, "i2"), "r1 s1"))
	addTask := func(id, inst, last, desired string, created, stopped time.Time) {
		rec := &storev1.TaskRecord{ClusterName: cl, ContainerInstanceId: inst, Task: &ecsv1.Task{
			TaskArn: proto.String(arn.TaskARN("us-east-1", acct, cl, id, true)), ContainerInstanceArn: proto.String(instARN(inst)),
			LastStatus: proto.String(last), DesiredStatus: proto.String(desired), CreatedAt: epoch(created),
		}}
		if !stopped.IsZero() {
			rec.Task.StoppedAt = epoch(stopped)
		}
		txn := store.NewTxn(cli).Create(keys.Task(testScope, cl, id), rec)
		for _, k := range task.IndexKeys(testScope, rec) {
			txn.PutIndex(k)
		}
		must(txn.Commit(ctx))
	}
	now := clk.now()
	addTask("t1", "i1", "RUNNING", "RUNNING", now.Add(-time.Hour), time.Time{})
	addTask("t2", "i2", "PENDING", "RUNNING", now.Add(-20*time.Minute), time.Time{})
	addTask("t3", "i2", "STOPPED", "STOPPED", now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	addTask("t4", "i2", "STOPPED", "STOPPED", now.Add(-3*time.Hour), now.Add(-10*time.Minute))

	// A term: an election key this test owns.
	put, err := cli.Put(ctx, keys.Election("scheduler")+"x", "me")
	if err != nil {
		t.Fatal(err)
	}
	term := leader.Term{Key: keys.Election("scheduler") + "x", Rev: put.Header.Revision}

	r := New(Config{KV: cli, Control: func(kv clientv3.KV) Control { return fakeControl{kv} }, Now: clk.now,
		Grace: 30 * time.Second, LostAfter: 5 * time.Minute, PendingTimeout: 10 * time.Minute, Retention: time.Hour})

	st, err := r.Sweep(ctx, term)
	if err != nil || !st.InGrace {
		t.Fatalf("first sweep %+v %v: want grace", st, err)
	}
	clk.advance(31 * time.Second)
	st, err = r.Sweep(ctx, term)
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Disconnected: 1, TimedOut: 1, Collected: 1}) {
		t.Fatalf("sweep %+v", st)
	}
	i1, _, _ := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, cl, "i1"))
	if i1.GetContainerInstance().GetAgentConnected() {
		t.Fatal("i1 still connected")
	}
	t2, _, _ := store.Get[*storev1.TaskRecord](ctx, cli, keys.Task(testScope, cl, "t2"))
	if t2.GetTask().GetLastStatus() != "STOPPED" || t2.GetTask().GetStopCode() != StopCodeFailedToStart {
		t.Fatalf("t2 %v", t2.GetTask())
	}
	if e, _, err := store.Get[*storev1.InboxEntry](ctx, cli, keys.Inbox(testScope, "i2", "t2")); err != nil || e.GetStop() == nil {
		t.Fatalf("stop order for t2: %v %v", e, err)
	}
	if _, _, err := store.Get[*storev1.TaskRecord](ctx, cli, keys.Task(testScope, cl, "t3")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("t3 not collected: %v", err)
	}
	if ks, _, _ := store.ListKeys(ctx, cli, keys.TaskList(testScope, cl, "STOPPED", keys.DimInstance, "i2", ""), 10, ""); len(ks) != 1 {
		t.Fatalf("index keys after GC: %v", ks)
	}
	t1 := func() *ecsv1.Task {
		rec, _, err := store.Get[*storev1.TaskRecord](ctx, cli, keys.Task(testScope, cl, "t1"))
		if err != nil {
			t.Fatal(err)
		}
		return rec.GetTask()
	}
	// t1 keeps its status while its instance is disconnected, until LostAfter.
	clk.advance(5*time.Minute - time.Second)
	if st, _ = r.Sweep(ctx, term); st.Lost != 0 || t1().GetLastStatus() != "RUNNING" {
		t.Fatalf("lost too early: %+v %v", st, t1().GetLastStatus())
	}
	clk.advance(2 * time.Second)
	if st, err = r.Sweep(ctx, term); err != nil || st.Lost != 1 {
		t.Fatalf("sweep %+v %v", st, err)
	}
	if got := t1(); got.GetLastStatus() != "STOPPED" || got.GetStopCode() != StopCodeLost {
		t.Fatalf("t1 %v", got)
	}

	// A new term starts a new grace period.
	put2, _ := cli.Put(ctx, keys.Election("scheduler")+"y", "me")
	term2 := leader.Term{Key: keys.Election("scheduler") + "y", Rev: put2.Header.Revision}
	if st, _ = r.Sweep(ctx, term2); !st.InGrace {
		t.Fatal("no grace after a leader change")
	}

	// A deposed leader's writes are fenced: t4 is due for collection, but term's key is
	// gone.
	clk.advance(2 * time.Hour)
	if _, err := cli.Delete(ctx, term.Key); err != nil {
		t.Fatal(err)
	}
	r2 := New(Config{KV: cli, Control: func(kv clientv3.KV) Control { return fakeControl{kv} }, Now: clk.now, Grace: -1, Retention: time.Hour})
	if _, err := r2.Sweep(ctx, term); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("deposed sweep: %v", err)
	}
	if _, _, err := store.Get[*storev1.TaskRecord](ctx, cli, keys.Task(testScope, cl, "t4")); err != nil {
		t.Fatalf("t4 collected by a deposed leader: %v", err)
	}
	// So are its writes through Control (the kv Control is given is the term's fenced
	// one): i3's agent holds no session, but a deposed leader cannot mark it
	// disconnected.
	must(store.Create(ctx, cli, keys.Instance(testScope, cl, "i3"), &storev1.ContainerInstanceRecord{ClusterName: cl, ContainerInstance: &ecsv1.ContainerInstance{
		ContainerInstanceArn: proto.String(instARN("i3")), Status: proto.String("ACTIVE"), AgentConnected: true,
	}}))
	if _, err := r2.Sweep(ctx, term); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed sweep through Control: %v, want ErrFenced", err)
	}
	if i3, _, _ := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, cl, "i3")); !i3.GetContainerInstance().GetAgentConnected() {
		t.Fatal("i3 marked disconnected by a deposed leader")
	}
}
