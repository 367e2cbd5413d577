package placement

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldKV counts the txns committed through it and, once armed with hold, keeps the next
// one in flight: its Commit closes sent and waits for release to be closed. While lie
// is set it applies its txns but answers with an error, as a timeout after etcd applied
// the txn would.
type heldKV struct {
	clientv3.KV
	txns atomic.Int64
	lie  atomic.Bool

	mu            sync.Mutex
	sent, release chan struct{}
}

func (h *heldKV) hold() (sent, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent, h.release = make(chan struct{}), make(chan struct{})
	return h.sent, h.release
}

func (h *heldKV) Txn(ctx context.Context) clientv3.Txn {
	h.mu.Lock()
	sent, release := h.sent, h.release
	h.sent, h.release = nil, nil
	h.mu.Unlock()
	return &heldTxn{Txn: h.KV.Txn(ctx), kv: h, sent: sent, release: release}
}

type heldTxn struct {
	clientv3.Txn
	kv            *heldKV
	sent, release chan struct{}
}

func (t *heldTxn) If(cs ...clientv3.Cmp) clientv3.Txn     { t.Txn = t.Txn.If(cs...); return t }
func (t *heldTxn) Then(ops ...clientv3.Op) clientv3.Txn   { t.Txn = t.Txn.Then(ops...); return t }
func (t *heldTxn) Else(ops ...clientv3.Op) clientv3.Txn   { t.Txn = t.Txn.Else(ops...); return t }
func (t *heldTxn) Commit() (*clientv3.TxnResponse, error) { return t.commit() }

func (t *heldTxn) commit() (*clientv3.TxnResponse, error) {
	if t.sent != nil {
		close(t.sent)
		<-t.release
	}
	t.kv.txns.Add(1)
	resp, err := t.Txn.Commit()
	if err == nil && t.kv.lie.Load() {
		return nil, context.DeadlineExceeded
	}
	return resp, err
}

// waitChained waits until p's cache holds instance id of cluster as written by a commit
// in flight that chains on another commit in flight: a second group planned on the
// first's reservations and waits for it to land.
func waitChained(t *testing.T, p *Placer, cluster, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		cc := p.cached(testScope, cluster)
		chained := false
		if cc != nil {
			cc.mu.Lock()
			e := cc.entries[id]
			chained = e != nil && e.flight != nil && e.flight.state == inFlight &&
				e.below != nil && e.below.flight != nil && e.below.flight.state == inFlight
			cc.mu.Unlock()
		}
		if chained {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second commit chained on instance %s within 10s", id)
		}
	}
}

// placeAsync runs PlaceGroup of n requests of d on cluster through kv in a goroutine.
func placeAsync(p *Placer, kv clientv3.KV, cluster string, d Demand, n int, commit GroupCommitFunc) <-chan groupOutcome {
	out := make(chan groupOutcome, 1)
	go func() {
		reqs := make([]Request, n)
		for i := range reqs {
			reqs[i] = Request{Demand: d}
		}
		res, err := p.PlaceGroup(context.Background(), kv, testScope, cluster, reqs, commit)
		out <- groupOutcome{res, err}
	}()
	return out
}

type groupOutcome struct {
	res []PlaceResult
	err error
}

// placedCount is how many of res's requests were placed, and the failure reasons of the
// others.
func placedCount(res []PlaceResult) (int, []string) {
	n := 0
	var reasons []string
	for _, r := range res {
		n += len(r.Placed)
		for _, f := range r.Failures {
			reasons = append(reasons, f.Reason)
		}
	}
	return n, reasons
}

// pipelineDemand is what the pipeline tests place: one slot is 128 CPU units and MiB.
var pipelineDemand = Demand{CPU: 128, Memory: 128}

// newPipeline starts etcd and a Placer over cluster's instances ids, each with room for
// slots tasks of pipelineDemand, warms the Placer's cache of the cluster, and returns them
// with a heldKV over the client and a group hook writing the reservations and a task
// record per placement. The Placer closes when t ends.
func newPipeline(t *testing.T, cluster string, slots int32, ids ...string) (*clientv3.Client, *Placer, *heldKV, GroupCommitFunc) {
	t.Helper()
	cli := etcdtest.Start(t)
	p := NewPlacer(cli, nil)
	t.Cleanup(p.Close)
	for _, id := range ids {
		putInstance(t, cli, cluster, id, slots*128, slots*128, nil)
	}
	kv := &heldKV{KV: cli}
	if _, err := p.PlaceGroup(context.Background(), kv, testScope, cluster, nil, nil); err != nil {
		t.Fatal(err) // nothing to place: starts the cache, commits nothing
	}
	var seq int64
	return cli, p, kv, groupCommit(cluster, pipelineDemand, &seq, &sync.Mutex{})
}

// A group planned while another group's commit on the same instance is in flight plans
// on that commit's reservations and is sent once it lands, chained on the bytes it
// wrote: two txns in all, no conflict, and the instance ends exactly full.
func TestPlacerChainsOnCommitInFlight(t *testing.T) {
	cli, p, kv, commit := newPipeline(t, "chain", 4, "i0")
	d := pipelineDemand

	sent, release := kv.hold()
	first := placeAsync(p, kv, "chain", d, 1, commit)
	<-sent
	second := placeAsync(p, kv, "chain", d, 3, commit) // the room the first leaves
	waitChained(t, p, "chain", "i0")
	if n := kv.txns.Load(); n != 0 {
		t.Fatalf("%d txns committed while the first was held: the second did not wait for it", n)
	}
	close(release)
	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("first: %v, second: %v", r1.err, r2.err)
	}
	if n, _ := placedCount(r1.res); n != 1 {
		t.Errorf("first group placed %d, want 1", n)
	}
	if n, reasons := placedCount(r2.res); n != 3 || len(reasons) != 0 {
		t.Errorf("second group placed %d, failures %v; want 3", n, reasons)
	}
	if r2.res[0].Revision <= r1.res[0].Revision {
		t.Errorf("second group committed at %d, not after the first's %d", r2.res[0].Revision, r1.res[0].Revision)
	}
	if n := kv.txns.Load(); n != 2 {
		t.Errorf("%d txns for two groups, want 2 (no conflict, no retry)", n)
	}
	checkInstance(t, cli, "chain", "i0", 0, 4)
}

// When a commit in flight fails (here another writer changed its instance first), the
// cache goes back to what it planned on, the group chained on it plans again rather than
// being sent, and both groups land on a fresh read without over-committing the instance.
func TestPlacerChainedGroupReplansWhenFirstFails(t *testing.T) {
	ctx := context.Background()
	cli, p, kv, commit := newPipeline(t, "fail", 4, "i0")
	d := pipelineDemand

	sent, release := kv.hold()
	first := placeAsync(p, kv, "fail", d, 1, commit)
	<-sent
	second := placeAsync(p, kv, "fail", d, 1, commit)
	waitChained(t, p, "fail", "i0")
	// Another scheduler places a task on the instance meanwhile.
	if _, _, err := store.Mutate(ctx, cli, keys.Instance(testScope, "fail", "i0"), func(rec *storev1.ContainerInstanceRecord) error {
		rec.ActiveTasks++
		return Reserve(rec.ContainerInstance, d)
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("first: %v, second: %v", r1.err, r2.err)
	}
	if n1, _ := placedCount(r1.res); n1 != 1 {
		t.Errorf("first group placed %d, want 1", n1)
	}
	if n2, _ := placedCount(r2.res); n2 != 1 {
		t.Errorf("second group placed %d, want 1", n2)
	}
	// The first's failed txn, then one each on a fresh read; the second was never sent
	// chained on the failed one.
	if n := kv.txns.Load(); n != 3 {
		t.Errorf("%d txns, want 3", n)
	}
	checkInstance(t, cli, "fail", "i0", 128, 3)
	// The cache is right: one slot left.
	res, err := p.PlaceGroup(ctx, kv, testScope, "fail", []Request{{Demand: d}, {Demand: d}}, commit)
	if err != nil {
		t.Fatal(err)
	}
	if n, reasons := placedCount(res); n != 1 || len(reasons) != 1 || reasons[0] != ReasonCPU {
		t.Errorf("then placed %d, failures %v; want 1 and one RESOURCE:CPU", n, reasons)
	}
	checkInstance(t, cli, "fail", "i0", 0, 4)
}

// checkInstance fails t unless the instance record in etcd has cpu CPU units remaining
// and pending tasks counted.
func checkInstance(t *testing.T, cli *clientv3.Client, cluster, id string, cpu int64, pending int32) {
	t.Helper()
	rec, _, err := store.Get[*storev1.ContainerInstanceRecord](context.Background(), cli, keys.Instance(testScope, cluster, id))
	if err != nil {
		t.Fatal(err)
	}
	if got := FromRecord(id, rec, 0).CPU; got != cpu || rec.ActiveTasks != pending {
		t.Errorf("instance %s: %d CPU units remaining and %d active tasks, want %d and %d", id, got, rec.ActiveTasks, cpu, pending)
	}
}

// A group that has a choice takes an instance no commit in flight writes, and is sent at
// once rather than after the commit in flight lands.
func TestPlacerSendsDisjointGroupAtOnce(t *testing.T) {
	cli, p, kv, commit := newPipeline(t, "two", 4, "a", "b")
	d := pipelineDemand
	sent, release := kv.hold()
	first := placeAsync(p, kv, "two", d, 1, commit)
	<-sent
	r2 := <-placeAsync(p, kv, "two", d, 1, commit) // returns while the first is held
	close(release)
	r1 := <-first
	if r1.err != nil || r2.err != nil {
		t.Fatalf("first: %v, second: %v", r1.err, r2.err)
	}
	a, b := r1.res[0].Placed[0].InstanceID, r2.res[0].Placed[0].InstanceID
	if a == b {
		t.Fatalf("both groups on instance %s", a)
	}
	if r2.res[0].Revision >= r1.res[0].Revision {
		t.Errorf("second group at revision %d, first at %d: the second did not land first", r2.res[0].Revision, r1.res[0].Revision)
	}
	checkInstance(t, cli, "two", a, 3*128, 1)
	checkInstance(t, cli, "two", b, 3*128, 1)
}

// A request refused for want of room that a commit in flight took waits for that
// commit: when it fails (here its If compare), the request is planned again and placed,
// rather than refused for room that was never taken.
func TestPlacerRefusalWaitsForCommitInFlight(t *testing.T) {
	ctx := context.Background()
	cli, p, kv, _ := newPipeline(t, "refuse", 1, "i0") // room for one
	d := pipelineDemand
	hook := reserveOnly("refuse", d)
	sent, release := kv.hold()
	firstErr := make(chan error, 1)
	go func() {
		_, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "refuse", Request: Request{Demand: d}, Commit: hook, KV: kv,
			If: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(store.MustKey("refuse-guard")), ">", 0)}}) // fails in etcd
		firstErr <- err
	}()
	<-sent
	type outcome struct {
		res PlaceResult
		err error
	}
	second := make(chan outcome, 1)
	go func() {
		res, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "refuse", Request: Request{Demand: d}, Commit: hook, KV: kv})
		second <- outcome{res, err}
	}()
	select {
	case r := <-second:
		t.Fatalf("second placement answered while the first was in flight: placed %d, failures %v, %v", len(r.res.Placed), r.res.Failures, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-firstErr; !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("first placement: %v, want ErrPreconditionFailed", err)
	}
	r := <-second
	if r.err != nil || len(r.res.Placed) != 1 {
		t.Fatalf("second placement: placed %d, failures %v, %v; want it placed once the first failed", len(r.res.Placed), r.res.Failures, r.err)
	}
	checkInstance(t, cli, "refuse", "i0", 0, 1)
}

// When the cluster's cache is dropped (its watch met a record it cannot decode) while a
// commit is in flight, that commit still settles and the group chained on it does not
// wait forever.
func TestPlacerChainSettlesWhenCacheDropped(t *testing.T) {
	cli, p, kv, commit := newPipeline(t, "drop", 4, "i0")
	d := pipelineDemand
	sent, release := kv.hold()
	first := placeAsync(p, kv, "drop", d, 1, commit)
	<-sent
	second := placeAsync(p, kv, "drop", d, 1, commit)
	waitChained(t, p, "drop", "i0")
	if _, err := cli.Put(context.Background(), keys.Instance(testScope, "drop", "bad"), "\xff\xff\xff"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.cached(testScope, "drop") != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cache was not dropped after its watch met an undecodable record")
		}
	}
	close(release)
	if r1 := <-first; r1.err != nil {
		t.Fatalf("first group: %v", r1.err)
	}
	select {
	case <-second: // placed, or failed on the broken watch: either way it answered
	case <-time.After(10 * time.Second):
		t.Fatal("the group chained on the first still waits 10s after the first landed")
	}
}

// A commit whose answer is lost (an error after etcd applied it) leaves its instances to
// be re-read by the next plan: that plan sees the room the commit took and lands at the
// first try.
func TestPlacerRereadsAfterAmbiguousCommit(t *testing.T) {
	ctx := context.Background()
	cli, p, kv, _ := newPipeline(t, "lost", 2, "i0")
	d := pipelineDemand
	hook := reserveOnly("lost", d)
	kv.lie.Store(true)
	if _, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "lost", Request: Request{Demand: d}, Commit: hook, KV: kv}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first placement: %v, want the lost answer's error", err)
	}
	kv.lie.Store(false)
	kv.txns.Store(0)
	res, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "lost", Request: Request{Demand: d, Count: 2}, Commit: hook, KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Placed) != 1 || len(res.Failures) != 1 || res.Failures[0].Reason != ReasonCPU {
		t.Errorf("then placed %d, failures %+v; want 1 and one RESOURCE:CPU (the lost commit took the other slot)", len(res.Placed), res.Failures)
	}
	if n := kv.txns.Load(); n != 1 {
		t.Errorf("%d txns, want 1: the plan was made on a stale instance", n)
	}
	checkInstance(t, cli, "lost", "i0", 0, 2)
}
