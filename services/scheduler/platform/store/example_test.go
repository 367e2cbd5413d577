package store_test

import (
	"context"
	"fmt"
	"os"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// A record written with its index key in one txn, updated with Mutate, and
// found again through the index.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "store-example")
	defer os.RemoveAll(dir)
	srv, err := etcdembed.Start(ctx, etcdembed.Config{Dir: dir, ClientURL: "127.0.0.1:0", UnsafeNoFsync: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	kv := srv.Client()

	task := store.MustKey("tasks", "123456789012", "default", "t1")
	byInstance := store.MustKeyPrefix("idx", "tasks-by-instance", "123456789012", "default", "i-1")
	if _, err := store.NewTxn(kv).
		Create(task, wrapperspb.String("PENDING")).
		PutIndex(byInstance + "t1").
		Commit(ctx); err != nil {
		fmt.Println(err)
		return
	}

	_, _, err = store.Mutate(ctx, kv, task, func(status *wrapperspb.StringValue) error {
		status.Value = "RUNNING"
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	keys, _, err := store.ListKeys(ctx, kv, byInstance, 10, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range keys {
		id := k[len(byInstance):]
		status, _, err := store.Get[*wrapperspb.StringValue](ctx, kv, store.MustKey("tasks", "123456789012", "default", id))
		fmt.Println(id, status.GetValue(), err)
	}
	// Output: t1 RUNNING <nil>
}
