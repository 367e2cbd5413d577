package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

type strEvent = store.Event[*wrapperspb.StringValue]

// watcher runs store.Watch in the background and hands its events over a
// channel.
type watcher struct {
	events chan strEvent
	done   chan error
	cancel context.CancelFunc
}

func startWatch(t *testing.T, c store.Client, prefix string, from int64) *watcher {
	t.Helper()
	return startWatching(t, func(ctx context.Context, handler func(strEvent) error) error {
		return store.Watch(ctx, c, prefix, from, handler)
	})
}

// startWatching runs watch (store.Watch or store.WatchShared) in the background with a
// handler that hands its events over a channel; the test's end cancels it and expects
// context.Canceled.
func startWatching(t *testing.T, watch func(context.Context, func(strEvent) error) error) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{events: make(chan strEvent, 10000), done: make(chan error, 1), cancel: cancel}
	go func() {
		w.done <- watch(ctx, func(e strEvent) error {
			w.events <- e
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-w.done; !errors.Is(err, context.Canceled) {
			t.Errorf("watch returned %v, want context.Canceled", err)
		}
	})
	return w
}

// next returns the next event, failing the test after a timeout.
func (w *watcher) next(t *testing.T) strEvent {
	t.Helper()
	select {
	case e := <-w.events:
		return e
	case err := <-w.done:
		t.Fatalf("Watch ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event in 20s")
	}
	panic("unreachable")
}

// quiet fails the test if an event arrives within d.
func (w *watcher) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case e := <-w.events:
		t.Fatalf("unexpected event %v %s at %d", e.Type, e.Item.Key, e.Revision)
	case <-time.After(d):
	}
}

func keysOf(items []store.Item[*wrapperspb.StringValue]) []string {
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key+"="+it.Value.GetValue())
	}
	return keys
}

// createRetrying creates key, retrying while the client reconnects; an
// ErrExists on a retry means an earlier attempt landed.
func createRetrying(t *testing.T, kv clientv3.KV, key, value string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := store.Create(ctx, kv, key, wrapperspb.String(value))
		cancel()
		if err == nil || (attempt > 0 && errors.Is(err, store.ErrExists)) {
			return
		}
		if attempt == 30 {
			t.Fatalf("create %s: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestWatchDeliversPutsAndDeletes(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("things")
	seed(t, cli, prefix, 3)
	if _, err := cli.Put(ctx, "/berth/v1/thingsX", "not under the prefix"); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, cli, prefix, 0)

	e := w.next(t)
	if e.Type != store.EventResync || len(e.Items) != 3 {
		t.Fatalf("first event %v with %d items, want resync with 3", e.Type, len(e.Items))
	}
	k := prefix + "k00001"
	rev, err := store.Update(ctx, cli, k, e.Items[1].ModRevision, wrapperspb.String("new"))
	if err != nil {
		t.Fatal(err)
	}
	if e := w.next(t); e.Type != store.EventPut || e.Item.Key != k || e.Item.Value.GetValue() != "new" || e.Revision != rev || e.Item.ModRevision != rev {
		t.Fatalf("got %v %s=%v at %d, want put %s=new at %d", e.Type, e.Item.Key, e.Item.Value, e.Revision, k, rev)
	}
	rev, err = store.Delete(ctx, cli, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := w.next(t); e.Type != store.EventDelete || e.Item.Key != k || e.Revision != rev || e.Item.Value != nil {
		t.Fatalf("got %v %s at %d, want delete %s at %d", e.Type, e.Item.Key, e.Revision, k, rev)
	}

	// Resuming from a saved revision replays from there, without a resync.
	w2 := startWatch(t, cli, prefix, rev)
	if e := w2.next(t); e.Type != store.EventDelete || e.Revision != rev {
		t.Fatalf("resumed watch: got %v at %d, want the delete at %d", e.Type, e.Revision, rev)
	}
	w.quiet(t, 100*time.Millisecond)
}

func TestWatchHandlerErrorStopsWatch(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	boom := errors.New("boom")
	err := store.Watch(ctx, cli, store.MustKeyPrefix("things"), 0, func(strEvent) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Watch = %v, want boom", err)
	}
}

func TestWatchResumesAfterRestart(t *testing.T) {
	s := etcdtest.StartServer(t)
	writer := s.Client()
	watchCli, err := s.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watchCli.Close() })
	prefix := store.MustKeyPrefix("things")
	w := startWatch(t, watchCli, prefix, 0)
	if e := w.next(t); e.Type != store.EventResync || len(e.Items) != 0 {
		t.Fatalf("first event %v with %d items, want an empty resync", e.Type, len(e.Items))
	}

	const before, after = 40, 40
	var want []string
	write := func(i int) {
		k := fmt.Sprintf("%sk%05d", prefix, i)
		want = append(want, k)
		createRetrying(t, writer, k, k)
	}
	for i := range before {
		write(i)
	}
	// Stop while the watcher is likely still catching up.
	s.Stop()
	time.Sleep(200 * time.Millisecond) // let the client notice
	if err := s.Restart(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range after {
		write(before + i)
	}

	var got []string
	var lastRev int64
	for len(got) < before+after {
		e := w.next(t)
		if e.Type != store.EventPut {
			t.Fatalf("unexpected %v event at %d", e.Type, e.Revision)
		}
		if e.Revision <= lastRev {
			t.Fatalf("revision %d after %d", e.Revision, lastRev)
		}
		lastRev = e.Revision
		got = append(got, e.Item.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("watched %q,\nwant %q", got, want)
	}
	w.quiet(t, 300*time.Millisecond)
}

// pausableClient cuts its watches while paused, as a network partition
// would, leaving reads and writes alone.
type pausableClient struct {
	*clientv3.Client
	mu      sync.Mutex
	paused  bool
	cancels []context.CancelFunc
}

func (p *pausableClient) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		ch := make(chan clientv3.WatchResponse)
		close(ch)
		return ch
	}
	ctx, cancel := context.WithCancel(ctx)
	p.cancels = append(p.cancels, cancel)
	return p.Client.Watch(ctx, key, opts...)
}

func (p *pausableClient) setPaused(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = paused
	if paused {
		for _, cancel := range p.cancels {
			cancel()
		}
		p.cancels = nil
	}
}

func TestWatchResyncsAfterCompaction(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("things")
	seed(t, cli, prefix, 5)
	pc := &pausableClient{Client: cli}
	w := startWatch(t, pc, prefix, 0)
	if e := w.next(t); e.Type != store.EventResync || len(e.Items) != 5 {
		t.Fatalf("first event %v with %d items, want resync with 5", e.Type, len(e.Items))
	}
	k := func(i int) string { return fmt.Sprintf("%sk%05d", prefix, i) }
	if _, err := cli.Put(ctx, k(0), mustMarshal(t, wrapperspb.String("v2"))); err != nil {
		t.Fatal(err)
	}
	if e := w.next(t); e.Type != store.EventPut || e.Item.Key != k(0) {
		t.Fatalf("got %v %s, want put %s", e.Type, e.Item.Key, k(0))
	}

	// Disconnected, the watcher misses writes that compaction then erases.
	pc.setPaused(true)
	if _, err := cli.Put(ctx, k(1), mustMarshal(t, wrapperspb.String("v2"))); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Delete(ctx, cli, k(2), 0); err != nil {
		t.Fatal(err)
	}
	createRetrying(t, cli, k(5), "new")
	compactRev, err := etcdembed.Compact(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	pc.setPaused(false)

	e := w.next(t)
	if e.Type != store.EventResync {
		t.Fatalf("after compaction got %v %s, want resync", e.Type, e.Item.Key)
	}
	wantItems := []string{k(0) + "=v2", k(1) + "=v2", k(3) + "=" + k(3), k(4) + "=" + k(4), k(5) + "=new"}
	if got := keysOf(e.Items); !slices.Equal(got, wantItems) || e.Revision < compactRev {
		t.Fatalf("resync at %d = %q,\nwant %q at >= %d", e.Revision, got, wantItems, compactRev)
	}
	// And the watch goes on from the resync's revision.
	createRetrying(t, cli, k(6), "after")
	if e := w.next(t); e.Type != store.EventPut || e.Item.Key != k(6) {
		t.Fatalf("got %v %s, want put %s", e.Type, e.Item.Key, k(6))
	}
	w.quiet(t, 100*time.Millisecond)
}

func TestWatchFromCompactedRevisionResyncs(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("things")
	seed(t, cli, prefix, 3)
	if _, err := etcdembed.Compact(ctx, cli); err != nil {
		t.Fatal(err)
	}
	// A consumer restarting with a revision saved long ago.
	w := startWatch(t, cli, prefix, 1)
	if e := w.next(t); e.Type != store.EventResync || len(e.Items) != 3 {
		t.Fatalf("got %v with %d items, want resync with 3", e.Type, len(e.Items))
	}
}

func TestWatchResumesAfterDisconnect(t *testing.T) {
	cli := etcdtest.Start(t)
	prefix := store.MustKeyPrefix("things")
	pc := &pausableClient{Client: cli}
	w := startWatch(t, pc, prefix, 0)
	if e := w.next(t); e.Type != store.EventResync {
		t.Fatalf("first event %v, want resync", e.Type)
	}
	var want []string
	for i := range 9 {
		if i%3 == 0 {
			pc.setPaused(true)
		}
		k := fmt.Sprintf("%sk%05d", prefix, i)
		want = append(want, k)
		createRetrying(t, cli, k, k)
		if i%3 == 2 {
			pc.setPaused(false)
		}
	}
	var got []string
	for len(got) < len(want) {
		e := w.next(t)
		if e.Type != store.EventPut {
			t.Fatalf("unexpected %v event", e.Type)
		}
		got = append(got, e.Item.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("watched %q,\nwant %q", got, want)
	}
	w.quiet(t, 200*time.Millisecond)
}

// oldEtcdClient answers range streams as an etcd before 3.7 does.
type oldEtcdClient struct{ *clientv3.Client }

func (oldEtcdClient) GetStream(context.Context, string, ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	return nil, status.Error(codes.Unimplemented, "unknown method RangeStream for service etcdserverpb.KV")
}

func TestWatchResyncOfManyRecords(t *testing.T) {
	cli := etcdtest.Start(t)
	prefix := store.MustKeyPrefix("things")
	want := seed(t, cli, prefix, 2500)
	seed(t, cli, store.MustKeyPrefix("thingz"), 10)
	for name, c := range map[string]store.Client{"stream": cli, "pages": oldEtcdClient{cli}} {
		t.Run(name, func(t *testing.T) {
			w := startWatch(t, c, prefix, 0)
			e := w.next(t)
			var got []string
			for _, it := range e.Items {
				got = append(got, it.Key)
			}
			if e.Type != store.EventResync || !slices.Equal(got, want) {
				t.Fatalf("got %v with %d items, want resync with %d", e.Type, len(got), len(want))
			}
		})
	}
}

// TestWatchProgress: with WithProgress, a put under the prefix is followed by an
// EventProgress at its revision, and after a write elsewhere RequestProgress brings an
// EventProgress at that write's revision or later; without it no progress is delivered.
func TestWatchProgress(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("progress")
	events := make(chan strEvent, 100)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- store.Watch(wctx, cli, prefix, 0, func(e strEvent) error {
			events <- e
			return nil
		}, store.WithProgress())
	}()
	t.Cleanup(func() { cancel(); <-done })
	plain := startWatch(t, cli, prefix, 0) // no WithProgress
	next := func() strEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(20 * time.Second):
			t.Fatal("no watch event in 20s")
		}
		return strEvent{}
	}
	if e := next(); e.Type != store.EventResync {
		t.Fatalf("first event %v, want resync", e.Type)
	}
	if e := plain.next(t); e.Type != store.EventResync {
		t.Fatalf("plain watch: first event %v, want resync", e.Type)
	}
	rev, err := store.Create(ctx, cli, prefix+"a", wrapperspb.String("a"))
	if err != nil {
		t.Fatal(err)
	}
	if e := next(); e.Type != store.EventPut || e.Revision != rev {
		t.Fatalf("got %v at %d, want put at %d", e.Type, e.Revision, rev)
	}
	if e := next(); e.Type != store.EventProgress || e.Revision < rev {
		t.Fatalf("got %v at %d, want progress at %d or later", e.Type, e.Revision, rev)
	}
	other, err := cli.Put(ctx, "/berth/v1/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	// etcd drops a request that arrives while a watch of the stream (the plain one,
	// just created) has not caught up yet: ask again until one is answered.
	deadline := time.After(20 * time.Second)
	for caughtUp := false; !caughtUp; {
		if err := store.RequestProgress(ctx, cli); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-events:
			if e.Type != store.EventProgress {
				t.Fatalf("got %v, want progress", e.Type)
			}
			caughtUp = e.Revision >= other.Header.Revision
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no progress in 20s")
		}
	}
	if e := plain.next(t); e.Type != store.EventPut {
		t.Fatalf("plain watch: got %v, want the put", e.Type)
	}
	plain.quiet(t, 100*time.Millisecond)
}
