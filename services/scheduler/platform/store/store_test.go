package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func str(s string) *wrapperspb.StringValue { return wrapperspb.String(s) }

func TestKey(t *testing.T) {
	tests := []struct {
		parts   []string
		key     string
		prefix  string
		invalid bool
	}{
		{parts: []string{"tasks", "123456789012", "t1"}, key: "/berth/v1/tasks/123456789012/t1", prefix: "/berth/v1/tasks/123456789012/t1/"},
		{parts: []string{"clusters"}, key: "/berth/v1/clusters", prefix: "/berth/v1/clusters/"},
		{parts: nil, invalid: true},
		{parts: []string{"tasks", ""}, invalid: true},
		{parts: []string{"tasks", "a/b"}, invalid: true},
		{parts: []string{"/tasks"}, invalid: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.parts), func(t *testing.T) {
			key, err := store.Key(tt.parts...)
			if tt.invalid {
				if !errors.Is(err, store.ErrInvalidKey) {
					t.Fatalf("Key(%q) = %q, %v; want ErrInvalidKey", tt.parts, key, err)
				}
				return
			}
			if err != nil || key != tt.key {
				t.Fatalf("Key(%q) = %q, %v; want %q", tt.parts, key, err, tt.key)
			}
			prefix, err := store.KeyPrefix(tt.parts...)
			if err != nil || prefix != tt.prefix {
				t.Fatalf("KeyPrefix(%q) = %q, %v; want %q", tt.parts, prefix, err, tt.prefix)
			}
		})
	}
	if p := store.MustKeyPrefix(); p != store.Prefix {
		t.Errorf("MustKeyPrefix() = %q, want %q", p, store.Prefix)
	}
}

func TestInvalidKeysRejected(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	for _, key := range []string{"", "/other/x", "/berth/v1/", "/berth/v1/a/", "/berth/v1//a", "/berth/v1/a//b"} {
		if _, _, err := store.Get[*wrapperspb.StringValue](ctx, cli, key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Get(%q): err = %v, want ErrInvalidKey", key, err)
		}
		if _, err := store.Create(ctx, cli, key, str("x")); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Create(%q): err = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"/berth/v1/a", "/other/", "/berth/v1//", "/berth"} {
		if _, _, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, 10, ""); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("List(%q): err = %v, want ErrInvalidKey", prefix, err)
		}
	}
}

func TestRecordLifecycle(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	key := store.MustKey("things", "a")

	if _, _, err := store.Get[*wrapperspb.StringValue](ctx, cli, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get missing: err = %v, want ErrNotFound", err)
	}
	rev1, err := store.Create(ctx, cli, key, str("one"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := store.Create(ctx, cli, key, str("again")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create existing: err = %v, want ErrExists", err)
	}
	got, rev, err := store.Get[*wrapperspb.StringValue](ctx, cli, key)
	if err != nil || got.GetValue() != "one" || rev != rev1 {
		t.Fatalf("Get = %v, %d, %v; want one, %d", got, rev, err, rev1)
	}
	rev2, err := store.Update(ctx, cli, key, rev1, str("two"))
	if err != nil || rev2 <= rev1 {
		t.Fatalf("Update = %d, %v; want a revision after %d", rev2, err, rev1)
	}
	if _, err := store.Update(ctx, cli, key, rev1, str("stale")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update at stale revision: err = %v, want ErrConflict", err)
	}
	if _, err := store.Delete(ctx, cli, key, rev1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Delete at stale revision: err = %v, want ErrConflict", err)
	}
	if _, err := store.Delete(ctx, cli, key, rev2); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := store.Update(ctx, cli, key, rev2, str("gone")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update deleted: err = %v, want ErrNotFound", err)
	}
	if _, err := store.Delete(ctx, cli, key, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Delete missing: err = %v, want ErrNotFound", err)
	}
	if _, err := store.Create(ctx, cli, key, (*wrapperspb.StringValue)(nil)); err == nil {
		t.Fatal("Create of a nil message succeeded")
	}
}

func TestFencedWrites(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	// The leader's election key, as concurrency.Election would hold it.
	leaderKey := "/berth/v1/election/scheduler/abc"
	resp, err := cli.Put(ctx, leaderKey, "replica-1")
	if err != nil {
		t.Fatal(err)
	}
	fence := store.If(store.Fence(leaderKey, resp.Header.Revision))
	key := store.MustKey("counters", "c")
	if _, err := store.Create(ctx, cli, key, wrapperspb.Int64(0), fence); err != nil {
		t.Fatalf("fenced Create while leader: %v", err)
	}

	// Deposed: the election key is deleted and created again by another.
	if _, err := cli.Delete(ctx, leaderKey); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, leaderKey, "replica-2"); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, _, err = store.Mutate(ctx, cli, key, func(v *wrapperspb.Int64Value) error {
		calls++
		v.Value++
		return nil
	}, fence)
	if !errors.Is(err, store.ErrPreconditionFailed) || calls != 1 {
		t.Fatalf("fenced Mutate after losing leadership: err = %v after %d calls; want ErrPreconditionFailed after 1", err, calls)
	}
	if _, err := store.Delete(ctx, cli, key, 0, fence); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("fenced Delete after losing leadership: err = %v, want ErrPreconditionFailed", err)
	}
	if v, _, err := store.Get[*wrapperspb.Int64Value](ctx, cli, key); err != nil || v.GetValue() != 0 {
		t.Fatalf("after fenced writes: %v, %v; want 0", v, err)
	}
}

func TestMutateConcurrentCounter(t *testing.T) {
	s := etcdtest.StartServer(t)
	ctx := testCtx(t)
	key := store.MustKey("counters", "c")
	if _, err := store.Create(ctx, s.Client(), key, wrapperspb.Int64(0)); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		cli, err := s.NewClient() // two clients, as two replicas would have
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		wg.Go(func() {
			for range 50 {
				_, _, err := store.Mutate(ctx, cli, key, func(v *wrapperspb.Int64Value) error {
					calls.Add(1)
					v.Value++
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Mutate: %v", err)
	}
	v, _, err := store.Get[*wrapperspb.Int64Value](ctx, s.Client(), key)
	if err != nil || v.GetValue() != 100 {
		t.Fatalf("counter = %v, %v; want 100", v, err)
	}
	t.Logf("100 increments took %d calls of fn (%d retried after a conflict)", calls.Load(), calls.Load()-100)
}

func TestMutateConflictRetried(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	key := store.MustKey("counters", "c")
	if _, err := store.Create(ctx, cli, key, wrapperspb.Int64(0)); err != nil {
		t.Fatal(err)
	}
	// The first call writes behind Mutate's back, so its CAS must fail once.
	calls := 0
	v, _, err := store.Mutate(ctx, cli, key, func(v *wrapperspb.Int64Value) error {
		calls++
		if calls == 1 {
			if _, _, err := store.Mutate(ctx, cli, key, func(v *wrapperspb.Int64Value) error { v.Value += 10; return nil }); err != nil {
				return err
			}
		}
		v.Value++
		return nil
	})
	if err != nil || v.GetValue() != 11 || calls != 2 {
		t.Fatalf("Mutate = %v, %v after %d calls; want 11 after 2", v, err, calls)
	}

	// With one attempt, the conflict is returned.
	calls = 0
	_, _, err = store.Mutate(ctx, cli, key, func(v *wrapperspb.Int64Value) error {
		calls++
		if _, err := cli.Put(ctx, key, mustMarshal(t, wrapperspb.Int64(int64(100+calls)))); err != nil {
			return err
		}
		v.Value++
		return nil
	}, store.MaxAttempts(1))
	if !errors.Is(err, store.ErrConflict) || calls != 1 {
		t.Fatalf("Mutate with MaxAttempts(1) = %v after %d calls; want ErrConflict after 1", err, calls)
	}
}

func TestMutateNoChangeAndErrors(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	key := store.MustKey("things", "a")
	rev, err := store.Create(ctx, cli, key, str("one"))
	if err != nil {
		t.Fatal(err)
	}

	v, got, err := store.Mutate(ctx, cli, key, func(v *wrapperspb.StringValue) error {
		v.Value = "scribbled"
		return store.ErrNoChange
	})
	if err != nil || got != rev || v.GetValue() != "one" {
		t.Fatalf("Mutate with ErrNoChange = %v, %d, %v; want one, %d, nil", v, got, err, rev)
	}
	_, got, err = store.Mutate(ctx, cli, key, func(v *wrapperspb.StringValue) error { return nil })
	if err != nil || got != rev {
		t.Fatalf("Mutate without change = %d, %v; want %d (no write)", got, err, rev)
	}
	_, cur, _ := store.Get[*wrapperspb.StringValue](ctx, cli, key)
	if cur != rev {
		t.Fatalf("record rewritten by a no-op Mutate: revision %d, want %d", cur, rev)
	}

	boom := errors.New("boom")
	if _, _, err := store.Mutate(ctx, cli, key, func(v *wrapperspb.StringValue) error {
		v.Value = "half-done"
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Mutate with failing fn: err = %v, want boom", err)
	}
	if v, _, _ := store.Get[*wrapperspb.StringValue](ctx, cli, key); v.GetValue() != "one" {
		t.Fatalf("failing fn wrote %q", v.GetValue())
	}
	if _, _, err := store.Mutate(ctx, cli, store.MustKey("things", "missing"), func(*wrapperspb.StringValue) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Mutate missing: err = %v, want ErrNotFound", err)
	}
}

func TestMutateTxnMovesIndex(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	task := store.MustKey("tasks", "acct", "t1")
	idx := func(instance string) string { return store.MustKey("idx", "tasks-by-instance", "acct", instance, "t1") }
	if _, err := store.NewTxn(cli).Create(task, str("i-1")).PutIndex(idx("i-1")).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, err := store.MutateTxn(ctx, cli, task, func(v *wrapperspb.StringValue, txn *store.Txn) error {
		txn.Delete(idx(v.Value)).PutIndex(idx("i-2"))
		v.Value = "i-2"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, _, err := store.ListKeys(ctx, cli, store.MustKeyPrefix("idx", "tasks-by-instance", "acct"), 0, "")
	if err != nil || len(keys) != 1 || keys[0] != idx("i-2") {
		t.Fatalf("index keys = %q, %v; want [%s]", keys, err, idx("i-2"))
	}
}

func TestTxnAllOrNothing(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	existing := store.MustKey("things", "existing")
	rev, err := store.Create(ctx, cli, existing, str("v"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := store.MustKey("things", "a"), store.MustKey("things", "b")
	ia, ib := store.MustKey("idx", "things", "a"), store.MustKey("idx", "things", "b")

	tests := []struct {
		name string
		txn  *store.Txn
		want error
	}{
		{"revision conflict", store.NewTxn(cli).Create(a, str("a")).PutIndex(ia).Update(existing, rev+100, str("w")), store.ErrConflict},
		{"create over existing", store.NewTxn(cli).Create(a, str("a")).PutIndex(ia).Create(existing, str("w")), store.ErrExists},
		{"fence fails", store.NewTxn(cli).Create(a, str("a")).Create(b, str("b")).PutIndex(ia).PutIndex(ib).Delete(existing).
			If(store.Fence("/berth/v1/election/x", 42)), store.ErrPreconditionFailed},
		{"record gone", store.NewTxn(cli).Create(a, str("a")).IfModRevision(b, 7), store.ErrNotFound},
		{"key written twice", store.NewTxn(cli).Create(a, str("a")).PutIndex(a), store.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.txn.Commit(ctx); !errors.Is(err, tt.want) {
				t.Fatalf("Commit: err = %v, want %v", err, tt.want)
			}
			resp, err := cli.Get(ctx, store.Prefix, clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != existing || resp.Kvs[0].ModRevision != rev {
				t.Fatalf("failed txn changed the store: %v", resp.Kvs)
			}
		})
	}

	commitRev, err := store.NewTxn(cli).Create(a, str("a")).Create(b, str("b")).PutIndex(ia).PutIndex(ib).
		Update(existing, rev, str("w")).Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	resp, err := cli.Get(ctx, store.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 5 {
		t.Fatalf("after commit: %d keys, want 5", len(resp.Kvs))
	}
	for _, kv := range resp.Kvs {
		if kv.ModRevision != commitRev {
			t.Errorf("%s at revision %d, want %d (one txn)", kv.Key, kv.ModRevision, commitRev)
		}
	}
}

func mustMarshal(t testing.TB, m proto.Message) string {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCommitEach: txns committed together are written or not each on its own (a stale
// one fails with ErrConflict, the others land at one revision), and a key written by two
// of them, or a txn's building error, writes nothing at all.
func TestCommitEach(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	a, b, c := store.MustKey("each", "a"), store.MustKey("each", "b"), store.MustKey("each", "c")
	revA, err := store.Create(ctx, cli, a, str("a1"))
	if err != nil {
		t.Fatal(err)
	}
	revB, err := store.Create(ctx, cli, b, str("b1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(ctx, cli, b, revB, str("b2")); err != nil {
		t.Fatal(err)
	}
	rev, errs, err := store.CommitEach(ctx, cli, []*store.Txn{
		store.NewTxn(cli).Update(a, revA, str("a2")).Create(c, str("c1")),
		store.NewTxn(cli).Update(b, revB, str("b-stale")), // b moved on since revB
	})
	if err != nil || len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], store.ErrConflict) {
		t.Fatalf("CommitEach = %d, %v, %v; want the first written and the second ErrConflict", rev, errs, err)
	}
	for key, want := range map[string]string{a: "a2", b: "b2", c: "c1"} {
		got, r, err := store.Get[*wrapperspb.StringValue](ctx, cli, key)
		if err != nil || got.GetValue() != want {
			t.Errorf("%s = %q, %v; want %q", key, got.GetValue(), err, want)
		}
		if want != "b2" && r != rev {
			t.Errorf("%s at revision %d, want the commit's %d", key, r, rev)
		}
	}

	// One key written by two txns, or a txn that failed to build: nothing is written.
	_, _, err = store.CommitEach(ctx, cli, []*store.Txn{
		store.NewTxn(cli).Put(store.MustKey("each", "d"), str("d1")),
		store.NewTxn(cli).Put(store.MustKey("each", "d"), str("d2")),
	})
	if !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("two txns writing one key: %v, want ErrInvalidKey", err)
	}
	_, _, err = store.CommitEach(ctx, cli, []*store.Txn{
		store.NewTxn(cli).Put(store.MustKey("each", "e"), str("e1")),
		store.NewTxn(cli).Create(store.MustKey("each", "f"), (*wrapperspb.StringValue)(nil)),
	})
	if err == nil {
		t.Fatal("a txn with a building error was committed")
	}
	for _, k := range []string{store.MustKey("each", "d"), store.MustKey("each", "e")} {
		if _, _, err := store.Get[*wrapperspb.StringValue](ctx, cli, k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s written by a refused CommitEach: %v", k, err)
		}
	}
}

// Recheck turns a txn's revision compare into a compare on the value a commit in flight
// writes (what placement.Placer chains its group commits on): it holds once that value
// is there, fails with ErrConflict on any other value and ErrNotFound on a deleted key;
// Written returns what a txn puts.
func TestTxnRecheckOnValue(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	k, other := store.MustKey("recheck", "k"), store.MustKey("recheck", "other")
	rev, err := store.Create(ctx, cli, k, str("v1"))
	if err != nil {
		t.Fatal(err)
	}
	first := store.NewTxn(cli).Update(k, rev, str("v2")).PutIndex(other)
	v2, ok := first.Written(k)
	if !ok {
		t.Fatal("Written(k) = false for a key the txn updates")
	}
	if v, ok := first.Written(other); !ok || len(v) != 0 {
		t.Errorf("Written(index key) = %q, %v; want empty, true", v, ok)
	}
	if _, ok := store.NewTxn(cli).Delete(k).Written(k); ok {
		t.Error("Written = true for a key the txn deletes")
	}
	// The second txn chains on the first's value: sent first, it fails; after, it holds.
	second := store.NewTxn(cli).Update(k, rev, str("v3")).Recheck(k, 0, v2)
	if _, err := second.Commit(ctx); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("chained txn before the one it chains on: %v, want ErrConflict", err)
	}
	if _, err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rev3, err := second.Commit(ctx)
	if err != nil {
		t.Fatalf("chained txn after the one it chains on: %v", err)
	}
	if got, r, err := store.Get[*wrapperspb.StringValue](ctx, cli, k); err != nil || got.GetValue() != "v3" || r != rev3 {
		t.Fatalf("k = %q at %d, %v; want v3 at %d", got.GetValue(), r, err, rev3)
	}
	// Back to a revision compare.
	if _, err := store.NewTxn(cli).Update(k, rev, str("x")).Recheck(k, rev3, nil).Commit(ctx); err != nil {
		t.Fatalf("Recheck to the current revision: %v", err)
	}
	if _, err := cli.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := store.NewTxn(cli).Update(k, rev, str("y")).Recheck(k, 0, v2).Commit(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("value compare on a deleted key: %v, want ErrNotFound", err)
	}
	// Recheck needs a revision compare to replace, and a positive revision.
	if _, err := store.NewTxn(cli).Put(k, str("z")).Recheck(k, 0, v2).Commit(ctx); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Recheck without a compare on the key: %v, want ErrInvalidKey", err)
	}
	if err := store.NewTxn(cli).Update(k, rev, str("z")).Recheck(k, 0, nil).Err(); err == nil {
		t.Error("Recheck to revision 0 with no value: no error")
	}
}
