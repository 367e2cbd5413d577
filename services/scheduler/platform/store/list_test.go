package store_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// seed creates n records under prefix named k0000.. in batched txns and
// returns their keys in order.
func seed(t testing.TB, kv clientv3.KV, prefix string, n int) []string {
	t.Helper()
	ctx := testCtx(t)
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("%sk%05d", prefix, i)
	}
	for batch := range slices.Chunk(keys, 100) {
		txn := store.NewTxn(kv)
		for _, k := range batch {
			txn.Create(k, wrapperspb.String(k))
		}
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	return keys
}

func TestListPagination(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("things")
	want := seed(t, cli, prefix, 250)
	// Neighbours that must never show up.
	for _, k := range []string{"/berth/v1/thing", "/berth/v1/things0", "/berth/v1/thingz/a"} {
		if _, err := cli.Put(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
	}

	for _, limit := range []int{7, 100, 250, 1000} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			var got []string
			token, pages := "", 0
			for {
				items, next, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, limit, token)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				pages++
				if len(items) > limit {
					t.Fatalf("page %d has %d items, limit %d", pages, len(items), limit)
				}
				for _, it := range items {
					if it.Value.GetValue() != it.Key || it.ModRevision == 0 {
						t.Fatalf("item %+v does not match its key", it)
					}
					got = append(got, it.Key)
				}
				if next == "" {
					break
				}
				token = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %d keys, want %d in order", len(got), len(want))
			}
			if wantPages := (250 + limit - 1) / limit; pages != wantPages {
				t.Errorf("%d pages, want %d (no empty last page)", pages, wantPages)
			}
		})
	}
}

func TestListPaginationWithConcurrentInserts(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("things")
	original := seed(t, cli, prefix, 250)

	seen := map[string]int{}
	var order []string
	token, page := "", 0
	for {
		items, next, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, 7, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			seen[it.Key]++
			order = append(order, it.Key)
		}
		if next == "" {
			break
		}
		token = next
		// Between pages, insert keys before, inside and after the cursor.
		page++
		for _, k := range []string{
			fmt.Sprintf("%sa%03d", prefix, page),     // before every original key
			fmt.Sprintf("%sk%05d-x", prefix, page*7), // between original keys
			fmt.Sprintf("%sz%03d", prefix, page),     // after every original key
		} {
			if _, err := store.Create(ctx, cli, k, wrapperspb.String(k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range original {
		if seen[k] != 1 {
			t.Errorf("%s listed %d times, want once", k, seen[k])
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", k, n)
		}
	}
	if !slices.IsSorted(order) {
		t.Error("pages out of key order")
	}
}

func TestListInvalidTokens(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("things", "acct-b")
	seed(t, cli, prefix, 20)
	other := store.MustKeyPrefix("things", "acct-a")
	seed(t, cli, other, 5)

	_, good, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, 5, "")
	if err != nil || good == "" {
		t.Fatalf("first page: %q, %v", good, err)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := map[string]string{
		"not base64":              "!!not-base64!!",
		"padded base64":           enc(prefix+"k00001") + "=",
		"another account's key":   enc(other + "k00000"),
		"before the prefix":       enc("/berth/v1/"),
		"the prefix itself":       enc(prefix),
		"prefix without slash":    enc("/berth/v1/things/acct-b"),
		"outside the store":       enc("/"),
		"token of another prefix": mustFirstToken(t, cli, other),
	}
	for name, token := range tests {
		t.Run(name, func(t *testing.T) {
			items, _, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, 5, token)
			if !errors.Is(err, store.ErrInvalidToken) {
				t.Fatalf("List with %q = %d items, %v; want ErrInvalidToken", token, len(items), err)
			}
			if _, _, err := store.ListKeys(ctx, cli, prefix, 5, token); !errors.Is(err, store.ErrInvalidToken) {
				t.Fatalf("ListKeys with %q: %v; want ErrInvalidToken", token, err)
			}
		})
	}
	// A token forged from a key inside the prefix is harmless: it starts
	// after that key.
	items, _, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, 100, enc(prefix+"k00017"))
	if err != nil || len(items) != 2 || items[0].Key != prefix+"k00018" {
		t.Fatalf("forged in-prefix token: %d items, %v; want k00018, k00019", len(items), err)
	}
}

func mustFirstToken(t *testing.T, kv clientv3.KV, prefix string) string {
	t.Helper()
	_, next, err := store.ListKeys(testCtx(t), kv, prefix, 1, "")
	if err != nil || next == "" {
		t.Fatalf("first page of %s: %q, %v", prefix, next, err)
	}
	return next
}

func TestListKeysAndLimits(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("idx", "tasks-by-instance", "acct", "default", "i-1")
	txn := store.NewTxn(cli)
	var want []string
	for i := range 1100 {
		k := fmt.Sprintf("%st%04d", prefix, i)
		want = append(want, k)
		txn.PutIndex(k)
		if len(want)%100 == 0 {
			if _, err := txn.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			txn = store.NewTxn(cli)
		}
	}
	keys, next, err := store.ListKeys(ctx, cli, prefix, 0, "")
	if err != nil || len(keys) != store.DefaultListLimit || next == "" {
		t.Fatalf("default limit: %d keys, next %q, %v", len(keys), next, err)
	}
	keys, next, err = store.ListKeys(ctx, cli, prefix, 5000, "")
	if err != nil || len(keys) != store.MaxListLimit || next == "" {
		t.Fatalf("capped limit: %d keys, next %q, %v", len(keys), next, err)
	}
	rest, last, err := store.ListKeys(ctx, cli, prefix, 5000, next)
	if err != nil || last != "" || !slices.Equal(append(keys, rest...), want) {
		t.Fatalf("second page: %d keys, next %q, %v", len(rest), last, err)
	}
	empty, next, err := store.ListKeys(ctx, cli, store.MustKeyPrefix("idx", "none"), 10, "")
	if err != nil || len(empty) != 0 || next != "" {
		t.Fatalf("empty prefix: %q, %q, %v", empty, next, err)
	}
}

// TestListAll: ListAll returns every record under the prefix, in key order, across more
// than one page of MaxListLimit, and none of a neighbouring prefix.
func TestListAll(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := testCtx(t)
	prefix := store.MustKeyPrefix("many")
	want := seed(t, cli, prefix, store.MaxListLimit+5)
	seed(t, cli, store.MustKeyPrefix("manyz"), 3)
	items, err := store.ListAll[*wrapperspb.StringValue](ctx, cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(items))
	for i, it := range items {
		if it.Value.GetValue() != it.Key {
			t.Fatalf("item %+v does not match its key", it)
		}
		got[i] = it.Key
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d keys, want %d in order", len(got), len(want))
	}
}
