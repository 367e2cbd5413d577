package agentsession

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// inboxAcks: 200 sessions acking at once delete their entries in fewer txns than acks;
// each entry goes only at the revision acked (a replaced one stays, ErrConflict), a gone
// one is ErrNotFound, and one key named at two revisions in one batch gets the outcome of
// each.
func TestInboxAcksBatch(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	const n = 200
	items := make([]store.KeyRevision, n)
	for i := range n {
		k := keys.Inbox(testScope, "i-1", fmt.Sprintf("t%03d", i))
		r, err := cli.Put(ctx, k, "assignment")
		if err != nil {
			t.Fatal(err)
		}
		items[i] = store.KeyRevision{Key: k, ModRevision: r.Header.Revision}
	}
	replaced := items[7]
	r, err := cli.Put(ctx, replaced.Key, "stop order")
	if err != nil {
		t.Fatal(err)
	}
	rev0 := r.Header.Revision
	acks := &inboxAcks{kv: cli}
	var wg sync.WaitGroup
	outcomes := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs, err := acks.delete(ctx, items[i:i+1])
			if err != nil {
				t.Error(err)
				return
			}
			outcomes[i] = errs[0]
		})
	}
	close(start)
	wg.Wait()
	for i, e := range outcomes {
		if i == 7 && !errors.Is(e, store.ErrConflict) || i != 7 && e != nil {
			t.Errorf("%s: %v", items[i].Key, e)
		}
	}
	r2, err := cli.Get(ctx, keys.InboxOf(testScope, "i-1"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(r2.Kvs) != 1 || string(r2.Kvs[0].Key) != replaced.Key {
		t.Fatalf("%d keys left at revision %d (deletes from %d), want only %s", len(r2.Kvs), r2.Header.Revision, rev0, replaced.Key)
	}
	if txns := r2.Header.Revision - rev0; txns >= n {
		t.Fatalf("%d txns for %d acks: not batched", txns, n)
	} else {
		t.Logf("%d acks in %d txns", n, txns)
	}
	// The same key at its stale and its current revision, and a gone key, in one call.
	cur := store.KeyRevision{Key: replaced.Key, ModRevision: rev0}
	errs, err := acks.delete(ctx, []store.KeyRevision{replaced, cur, items[0]})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], store.ErrConflict) || errs[1] != nil || !errors.Is(errs[2], store.ErrNotFound) {
		t.Fatalf("outcomes %v", errs)
	}
}
