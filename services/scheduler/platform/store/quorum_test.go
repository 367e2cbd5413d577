package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TestRequireQuorum: with etcd gone, reads and txns through RequireQuorum fail within
// its deadline (not the caller's much later one), and work again by themselves once etcd
// is back.
func TestRequireQuorum(t *testing.T) {
	srv := etcdtest.StartServer(t)
	kv := store.RequireQuorum(srv.Client().KV, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := kv.Put(ctx, "/q/a", "1"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for name, op := range map[string]func() error{
		"get": func() error { _, err := kv.Get(ctx, "/q/a"); return err },
		"txn": func() error { _, err := kv.Txn(ctx).Then().Commit(); return err },
		"put": func() error { _, err := kv.Put(ctx, "/q/b", "2"); return err },
	} {
		start := time.Now()
		err := op()
		if took := time.Since(start); err == nil || took > 2*time.Second {
			t.Errorf("%s without etcd: %v after %s; want an error within the 500ms deadline", name, err, took)
		}
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := kv.Get(ctx, "/q/a")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after etcd came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
