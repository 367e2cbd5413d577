package store_test

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// The embedded etcd in these benchmarks runs without fsync, so the figures
// are client, gRPC and etcd CPU cost on loopback, not disk latency.

func BenchmarkGet(b *testing.B) {
	cli := etcdtest.Start(b)
	ctx := context.Background()
	key := store.MustKey("things", "a")
	if _, err := store.Create(ctx, cli, key, wrapperspb.String("value")); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := store.Get[*wrapperspb.StringValue](ctx, cli, key); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreate(b *testing.B) {
	cli := etcdtest.Start(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := store.Create(ctx, cli, fmt.Sprintf("/berth/v1/things/k%09d", i), wrapperspb.String("value")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTxn writes a record and two index keys under a leader fence, as
// placement does.
func BenchmarkTxn(b *testing.B) {
	cli := etcdtest.Start(b)
	ctx := context.Background()
	resp, err := cli.Put(ctx, "/berth/v1/election/scheduler/x", "me")
	if err != nil {
		b.Fatal(err)
	}
	fence := store.Fence("/berth/v1/election/scheduler/x", resp.Header.Revision)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("t%09d", i)
		_, err := store.NewTxn(cli).If(fence).
			Create(store.MustKey("tasks", "acct", id), wrapperspb.String("value")).
			PutIndex(store.MustKey("idx", "tasks-by-instance", "acct", "default", "i-1", id)).
			PutIndex(store.MustKey("idx", "tasks-by-family", "acct", "web", id)).
			Commit(ctx)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMutate(b *testing.B) {
	cli := etcdtest.Start(b)
	ctx := context.Background()
	key := store.MustKey("counters", "c")
	if _, err := store.Create(ctx, cli, key, wrapperspb.Int64(0)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := store.Mutate(ctx, cli, key, func(v *wrapperspb.Int64Value) error { v.Value++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListPage reads one page of a prefix holding one page or 10,000
// records, starting at the beginning, the middle or near the end of the
// prefix. Values read, sent and decoded are O(page); etcd still walks its
// in-memory index from the page's start to the end of the prefix to fill
// RangeResponse.Count, which cannot be turned off (etcd 3.7), so a page's
// cost grows by ~60ns per key after it: compare "at=0" with "at=9990".
func BenchmarkListPage(b *testing.B) {
	cases := []struct{ n, page, at int }{
		{10, 10, 0}, {10_000, 10, 0}, {10_000, 10, 5000}, {10_000, 10, 9990},
		{100, 100, 0}, {10_000, 100, 0}, {10_000, 100, 5000}, {10_000, 100, 9900},
	}
	// One member per prefix size, started here: a sub-benchmark's cleanup
	// would stop it after each run.
	clis := map[int]*clientv3.Client{}
	prefix := store.MustKeyPrefix("things")
	for _, c := range cases {
		if clis[c.n] == nil {
			cli := etcdtest.Start(b)
			seed(b, cli, prefix, c.n)
			// A neighbouring prefix holds as many keys again, to show it
			// is not walked.
			seed(b, cli, store.MustKeyPrefix("thingz"), c.n)
			clis[c.n] = cli
		}
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("page=%d/keys=%d/at=%d", c.page, c.n, c.at), func(b *testing.B) {
			ctx := context.Background()
			cli := clis[c.n]
			// Page to the starting position.
			token := ""
			for read := 0; read < c.at; read += store.MaxListLimit {
				_, next, err := store.ListKeys(ctx, cli, prefix, min(store.MaxListLimit, c.at-read), token)
				if err != nil {
					b.Fatal(err)
				}
				token = next
			}
			for b.Loop() {
				items, _, err := store.List[*wrapperspb.StringValue](ctx, cli, prefix, c.page, token)
				if err != nil {
					b.Fatal(err)
				}
				if len(items) != c.page {
					b.Fatalf("%d items, want %d", len(items), c.page)
				}
			}
		})
	}
}
