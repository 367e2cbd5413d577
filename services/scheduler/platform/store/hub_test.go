package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// partOf is an inbox-like part function: a key's part is everything up to and
// including its last slash.
func partOf(key string) string { return key[:strings.LastIndexByte(key, '/')+1] }

// startShared runs store.WatchShared in the background, like startWatch.
func startShared(t *testing.T, h *store.Hub, part string) *watcher {
	t.Helper()
	return startWatching(t, func(ctx context.Context, handler func(strEvent) error) error {
		return store.WatchShared(ctx, h, part, handler)
	})
}

// Each watcher gets its own part: a resync of it, then its puts and deletes, and
// nothing of another part or of a part no one watches; two watchers of one part both
// get its changes.
func TestWatchSharedDeliversEachPartItsOwn(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	root := store.MustKeyPrefix("inbox")
	a, b, c := root+"a/", root+"b/", root+"c/"
	seed(t, cli, a, 2)
	seed(t, cli, b, 1)
	h := store.NewHub(cli, root, partOf)
	wa, wb, wa2 := startShared(t, h, a), startShared(t, h, b), startShared(t, h, a)
	for _, c := range []struct {
		w    *watcher
		want int
	}{{wa, 2}, {wb, 1}, {wa2, 2}} {
		if e := c.w.next(t); e.Type != store.EventResync || len(e.Items) != c.want {
			t.Fatalf("first event %v with %d items, want resync with %d", e.Type, len(e.Items), c.want)
		}
	}
	// One txn writing to every part, as a group commit writes many instances' inboxes.
	txn := store.NewTxn(cli)
	txn.Put(a+"new", str("a"))
	txn.Put(b+"new", str("b"))
	txn.Put(c+"new", str("c"))
	txn.Delete(a + "k00000")
	rev, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watcher{wa, wa2} {
		e1, e2 := w.next(t), w.next(t)
		got := []string{e1.Type.String() + " " + e1.Item.Key, e2.Type.String() + " " + e2.Item.Key}
		slices.Sort(got)
		if want := []string{"delete " + a + "k00000", "put " + a + "new"}; !slices.Equal(got, want) || e1.Revision != rev || e2.Revision != rev {
			t.Fatalf("part a got %q at %d/%d, want %q at %d", got, e1.Revision, e2.Revision, want, rev)
		}
	}
	if e := wb.next(t); e.Type != store.EventPut || e.Item.Key != b+"new" || e.Item.Value.GetValue() != "b" {
		t.Fatalf("part b got %v %s", e.Type, e.Item.Key)
	}
	wa.quiet(t, 100*time.Millisecond)
	wb.quiet(t, 10*time.Millisecond)

	// A prefix outside the hub's, and one its part function never returns.
	whole := store.NewHub(cli, root, func(string) string { return root })
	for _, c := range []struct {
		h    *store.Hub
		part string
	}{{h, store.MustKeyPrefix("other")}, {whole, a}} {
		if err := store.WatchShared(ctx, c.h, c.part, func(strEvent) error { return nil }); err == nil {
			t.Fatalf("WatchShared of %s, not a part of the hub, did not fail", c.part)
		}
	}
}

// Watchers joining and leaving while a part is written: each one's resync plus its
// events is the part's final state, no change missed or repeated. This is what the
// ordering of joining, the shared watch's start and the list guarantees.
func TestWatchSharedJoinWhileWriting(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	root := store.MustKeyPrefix("inbox")
	part := root + "a/"
	h := store.NewHub(cli, root, partOf)
	const writes = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			k := fmt.Sprintf("%sk%05d", part, i%40)
			if i%3 == 2 {
				_, _ = cli.Delete(ctx, k)
				continue
			}
			if _, err := cli.Put(ctx, k, mustMarshal(t, str(fmt.Sprint(i)))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	type view struct {
		mu    sync.Mutex
		state map[string]string
		rev   int64
	}
	var views []*view
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	for j := range 12 {
		v := &view{state: map[string]string{}}
		views = append(views, v)
		wg.Go(func() {
			// The first watchers start the shared watch; later ones join it, and some
			// leave early (the last to leave stops it, the next to join starts it).
			time.Sleep(time.Duration(j) * 7 * time.Millisecond)
			lctx, cancel := context.WithCancel(wctx)
			defer cancel()
			if j%4 == 3 {
				time.AfterFunc(20*time.Millisecond, cancel)
			}
			_ = store.WatchShared(lctx, h, part, func(e strEvent) error {
				v.mu.Lock()
				defer v.mu.Unlock()
				if e.Revision < v.rev {
					t.Errorf("watcher %d: revision went back from %d to %d", j, v.rev, e.Revision)
				}
				v.rev = e.Revision
				switch e.Type {
				case store.EventResync:
					clear(v.state)
					for _, it := range e.Items {
						v.state[it.Key] = it.Value.GetValue()
					}
				case store.EventPut:
					v.state[e.Item.Key] = e.Item.Value.GetValue()
				case store.EventDelete:
					if _, ok := v.state[e.Item.Key]; !ok {
						t.Errorf("watcher %d: delete of %s it does not hold", j, e.Item.Key)
					}
					delete(v.state, e.Item.Key)
				}
				return nil
			})
		})
	}
	<-done
	resp, err := cli.Get(ctx, part, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, kv := range resp.Kvs {
		var v wrapperspb.StringValue
		if err := proto.Unmarshal(kv.Value, &v); err != nil {
			t.Fatal(err)
		}
		want[string(kv.Key)] = v.GetValue()
	}
	// The watchers still running catch up to the final revision.
	deadline := time.Now().Add(20 * time.Second)
	for j, v := range views {
		if j%4 == 3 {
			continue
		}
		for {
			v.mu.Lock()
			rev, got := v.rev, maps.Clone(v.state)
			v.mu.Unlock()
			if rev >= resp.Header.Revision {
				if !maps.Equal(got, want) {
					t.Errorf("watcher %d holds at %d\n%v\nthe store\n%v", j, rev, got, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("watcher %d at revision %d, the store at %d", j, rev, resp.Header.Revision)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop()
	wg.Wait()
}

// The shared watch cut off while writes happen resumes where it left off, and when the
// history it needed was compacted every watcher gets a resync of its part.
func TestWatchSharedResumesAndResyncs(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	root := store.MustKeyPrefix("inbox")
	a, b := root+"a/", root+"b/"
	seed(t, cli, a, 2)
	pc := &pausableClient{Client: cli}
	h := store.NewHub(pc, root, partOf)
	wa, wb := startShared(t, h, a), startShared(t, h, b)
	wa.next(t)
	wb.next(t)

	// Cut off: the writes arrive once the watch is back, without a resync.
	pc.setPaused(true)
	createRetrying(t, cli, a+"x", "1")
	createRetrying(t, cli, b+"y", "2")
	pc.setPaused(false)
	if e := wa.next(t); e.Type != store.EventPut || e.Item.Key != a+"x" {
		t.Fatalf("part a after a disconnect: %v %s", e.Type, e.Item.Key)
	}
	if e := wb.next(t); e.Type != store.EventPut || e.Item.Key != b+"y" {
		t.Fatalf("part b after a disconnect: %v %s", e.Type, e.Item.Key)
	}

	// Cut off while compaction erases what was missed: a resync each.
	pc.setPaused(true)
	createRetrying(t, cli, a+"z", "3")
	if _, err := store.Delete(ctx, cli, a+"k00000", 0); err != nil {
		t.Fatal(err)
	}
	compactRev, err := etcdembed.Compact(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	pc.setPaused(false)
	e := wa.next(t)
	if want := []string{a + "k00001=" + a + "k00001", a + "x=1", a + "z=3"}; e.Type != store.EventResync || !slices.Equal(keysOf(e.Items), want) || e.Revision < compactRev {
		t.Fatalf("part a after compaction: %v %q at %d, want resync %q at >= %d", e.Type, keysOf(e.Items), e.Revision, want, compactRev)
	}
	if e := wb.next(t); e.Type != store.EventResync || !slices.Equal(keysOf(e.Items), []string{b + "y=2"}) {
		t.Fatalf("part b after compaction: %v %q", e.Type, keysOf(e.Items))
	}
	// And the shared watch goes on.
	createRetrying(t, cli, b+"after", "4")
	if e := wb.next(t); e.Type != store.EventPut || e.Item.Key != b+"after" {
		t.Fatalf("part b: %v %s", e.Type, e.Item.Key)
	}
	wa.quiet(t, 100*time.Millisecond)
}

// A handler error ends that watcher's WatchShared with it; the others go on.
func TestWatchSharedHandlerError(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	root := store.MustKeyPrefix("inbox")
	h := store.NewHub(cli, root, partOf)
	w := startShared(t, h, root+"a/")
	w.next(t)
	boom := errors.New("boom")
	err := store.WatchShared(ctx, h, root+"a/", func(e strEvent) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("WatchShared returned %v, want the handler's error", err)
	}
	createRetrying(t, cli, root+"a/k", "v")
	if e := w.next(t); e.Type != store.EventPut || e.Item.Key != root+"a/k" {
		t.Fatalf("got %v %s", e.Type, e.Item.Key)
	}
}
