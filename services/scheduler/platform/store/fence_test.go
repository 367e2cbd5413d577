package store_test

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// FencedKV fences every write path while its election key lives, and refuses them all
// (ErrFenced, nothing written) once it is gone; reads pass; a caller's failed compare
// stays the caller's (Succeeded false, no error) while the fence holds.
func TestFencedKV(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	elect := store.MustKey("election", "fence-test")
	put, err := cli.Put(ctx, elect, "me")
	if err != nil {
		t.Fatal(err)
	}
	kv := store.FencedKV(cli, elect, put.Header.Revision)
	k := func(s string) string { return store.MustKey("fence", s) }

	// Leading: every path writes.
	if _, err := kv.Put(ctx, k("put"), "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := kv.Do(ctx, clientv3.OpPut(k("do"), "v")); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if r, err := kv.Delete(ctx, k("do")); err != nil || r.Deleted != 1 {
		t.Fatalf("Delete: %v %v", r, err)
	}
	if _, err := store.Create(ctx, kv, k("rec"), str("a")); err != nil {
		t.Fatalf("store.Create: %v", err)
	}
	if _, err := store.NewTxn(kv).IfAbsent(k("txn")).Put(k("txn"), str("b")).Commit(ctx); err != nil {
		t.Fatalf("store.Txn: %v", err)
	}
	// A compare of the caller's fails: the caller's answer, not the fence's.
	r, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.Value(k("put")), "=", "other")).Then(clientv3.OpPut(k("put"), "x")).Else(clientv3.OpGet(k("put"))).Commit()
	if err != nil || r.Succeeded || len(r.Responses) != 1 || string(r.Responses[0].GetResponseRange().GetKvs()[0].Value) != "v" {
		t.Fatalf("caller's compare failing: %+v %v", r, err)
	}
	if _, err := store.NewTxn(kv).IfAbsent(k("txn")).Put(k("txn"), str("c")).Commit(ctx); !errors.Is(err, store.ErrExists) {
		t.Fatalf("store.Txn on an existing key: %v, want ErrExists", err)
	}

	// Deposed: the election key is gone; every write path fails and writes nothing.
	if _, err := cli.Delete(ctx, elect); err != nil {
		t.Fatal(err)
	}
	fenced := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrFenced) || !errors.Is(err, store.ErrPreconditionFailed) {
			t.Errorf("%s by a deposed leader: %v, want ErrFenced and ErrPreconditionFailed", what, err)
		}
	}
	_, err = kv.Put(ctx, k("late"), "v")
	fenced("Put", err)
	_, err = kv.Do(ctx, clientv3.OpPut(k("late"), "v"))
	fenced("Do", err)
	_, err = kv.Delete(ctx, k("put"))
	fenced("Delete", err)
	_, err = kv.Txn(ctx).Then(clientv3.OpPut(k("late"), "v")).Commit()
	fenced("Txn", err)
	_, err = store.NewTxn(kv).IfAbsent(k("late")).Put(k("late"), str("v")).Commit(ctx)
	fenced("store.Txn", err)
	// With a failing compare of its own as well, the fence is what is reported.
	_, err = store.NewTxn(kv).IfAbsent(k("txn")).Put(k("txn"), str("d")).Commit(ctx)
	fenced("store.Txn with a failing compare", err)
	_, _, err = store.Mutate(ctx, kv, k("rec"), func(v *wrapperspb.StringValue) error { v.Value = "z"; return nil })
	fenced("store.Mutate", err)
	// A new term (same key, new revision) does not revive the old one.
	if _, err := cli.Put(ctx, elect, "someone else"); err != nil {
		t.Fatal(err)
	}
	_, err = kv.Put(ctx, k("late"), "v")
	fenced("Put under a new term", err)

	// Nothing written; reads pass through.
	if g, err := kv.Get(ctx, k("late")); err != nil || len(g.Kvs) != 0 {
		t.Fatalf("late key: %v %v, want absent", g, err)
	}
	if g, err := kv.Get(ctx, k("put")); err != nil || len(g.Kvs) != 1 || string(g.Kvs[0].Value) != "v" {
		t.Fatalf("put key: %v %v, want v", g, err)
	}
	if v, _, err := store.Get[*wrapperspb.StringValue](ctx, kv, k("rec")); err != nil || v.GetValue() != "a" {
		t.Fatalf("rec: %v %v, want a", v, err)
	}
}
