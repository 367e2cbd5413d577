package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestGetMany(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("getmany")
	present := seed(t, cli, prefix, 300) // more than two chunks
	// Ask for every third key and a missing one after each, out of key order.
	var ask []string
	for i := len(present) - 1; i >= 0; i -= 3 {
		ask = append(ask, present[i], fmt.Sprintf("%smissing%03d", prefix, i))
	}
	// Between the first chunk's txn and the second, delete a key the second reads: it is
	// still returned, as of the first chunk's revision.
	gone := present[2]
	kv := &hookKV{KV: cli, before: func(n int) {
		if n == 2 {
			if _, err := cli.Delete(ctx, gone); err != nil {
				t.Error(err)
			}
		}
	}}
	items, err := store.GetMany[*wrapperspb.StringValue](ctx, kv, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(ask) {
		t.Fatalf("%d items for %d keys", len(items), len(ask))
	}
	for i, it := range items {
		if it.Key != ask[i] {
			t.Fatalf("item %d is %s, want %s", i, it.Key, ask[i])
		}
		if i%2 == 1 {
			if it.Value != nil || it.ModRevision != 0 {
				t.Fatalf("absent %s: %v at %d", it.Key, it.Value, it.ModRevision)
			}
			continue
		}
		if it.Value.GetValue() != it.Key || it.ModRevision == 0 || it.CreateRevision == 0 {
			t.Fatalf("%s: value %q revisions %d/%d", it.Key, it.Value.GetValue(), it.CreateRevision, it.ModRevision)
		}
	}

	if kv.n != 2 {
		t.Fatalf("%d txns for %d keys, want 2", kv.n, len(ask))
	}
	if got, _, err := store.Get[*wrapperspb.StringValue](ctx, cli, gone); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s not deleted: %v %v", gone, got, err)
	}

	if items, err := store.GetMany[*wrapperspb.StringValue](ctx, cli, nil); err != nil || len(items) != 0 {
		t.Fatalf("no keys: %v, %v", items, err)
	}
	if _, err := store.GetMany[*wrapperspb.StringValue](ctx, cli, []string{present[0], "not/a/key"}); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("bad key: %v, want ErrInvalidKey", err)
	}
	// A value that does not decode fails the call.
	if _, err := cli.Put(ctx, present[0], "\xff"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetMany[*wrapperspb.StringValue](ctx, cli, present[:1]); err == nil {
		t.Fatal("a value that does not decode was returned")
	}
}

// hookKV calls before(n) as the n-th txn is begun.
type hookKV struct {
	clientv3.KV
	n      int
	before func(n int)
}

func (h *hookKV) Txn(ctx context.Context) clientv3.Txn {
	h.n++
	h.before(h.n)
	return h.KV.Txn(ctx)
}

func TestListRevisions(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("revs")
	keys := seed(t, cli, prefix, 5)
	_, rev, err := store.Get[*wrapperspb.StringValue](ctx, cli, keys[2])
	if err != nil {
		t.Fatal(err)
	}
	newRev, err := store.Update(ctx, cli, keys[2], rev, wrapperspb.String("changed"))
	if err != nil {
		t.Fatal(err)
	}
	page, next, err := store.ListRevisions(ctx, cli, prefix, 3, "")
	if err != nil || len(page) != 3 || next == "" {
		t.Fatalf("first page: %v, %q, %v", page, next, err)
	}
	rest, last, err := store.ListRevisions(ctx, cli, prefix, 3, next)
	if err != nil || len(rest) != 2 || last != "" {
		t.Fatalf("second page: %v, %q, %v", rest, last, err)
	}
	all := append(page, rest...)
	for i, kr := range all {
		if kr.Key != keys[i] {
			t.Fatalf("key %d: %s, want %s", i, kr.Key, keys[i])
		}
		if i == 2 && kr.ModRevision != newRev {
			t.Fatalf("%s at %d, want the update's %d", kr.Key, kr.ModRevision, newRev)
		}
		if i != 2 && kr.ModRevision >= newRev {
			t.Fatalf("%s at %d, not before the update %d", kr.Key, kr.ModRevision, newRev)
		}
	}
}

// DeleteMany: over two chunks, unchanged keys go, a changed key stays (ErrConflict), an
// absent one is ErrNotFound, revision 0 deletes whatever is there; each outcome is its
// own. A repeated key fails the call before anything is deleted.
func TestDeleteMany(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("deletemany")
	seed(t, cli, prefix, 200)
	revs, _, err := store.ListRevisions(ctx, cli, prefix, 1000, "")
	if err != nil || len(revs) != 200 {
		t.Fatalf("%d revisions: %v", len(revs), err)
	}
	changed := revs[150].Key
	if _, err := cli.Put(ctx, changed, "new"); err != nil {
		t.Fatal(err)
	}
	items := append(revs[:0:0], revs...)
	items[10].ModRevision = 0 // whatever is there
	items = append(items, store.KeyRevision{Key: prefix + "absent", ModRevision: 5}, store.KeyRevision{Key: prefix + "absent0"})
	if _, err := store.DeleteMany(ctx, cli, []store.KeyRevision{items[0], items[0]}); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("repeated key: %v", err)
	}
	errs, err := store.DeleteMany(ctx, cli, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != len(items) {
		t.Fatalf("%d outcomes for %d keys", len(errs), len(items))
	}
	for i, e := range errs {
		var want error
		switch {
		case items[i].Key == changed:
			want = store.ErrConflict
		case i >= 200:
			want = store.ErrNotFound
		}
		if (want == nil && e != nil) || (want != nil && !errors.Is(e, want)) {
			t.Errorf("%s: %v, want %v", items[i].Key, e, want)
		}
	}
	left, _, err := store.ListRevisions(ctx, cli, prefix, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Key != changed {
		t.Fatalf("left %v, want only %s", left, changed)
	}
}
