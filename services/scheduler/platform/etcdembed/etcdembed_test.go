package etcdembed_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

func TestRestartKeepsDataAndClient(t *testing.T) {
	s := etcdtest.StartServer(t)
	cli := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Stop()
	t.Logf("stop took %s", time.Since(start))
	start = time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %s", time.Since(start))
	start = time.Now()
	resp, err := cli.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first get after restart took %s", time.Since(start))
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart got %v, want v1", resp.Kvs)
	}
}

func TestCompact(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := cli.Put(ctx, "/k", string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := etcdembed.Compact(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "/k", clientv3.WithRev(rev-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("get at compacted revision: err = %v, want ErrCompacted", err)
	}
}

func TestStartOnBusyPortFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = etcdembed.Start(context.Background(), etcdembed.Config{Dir: t.TempDir(), ClientURL: l.Addr().String()})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Start on a busy port: err = %v, want EADDRINUSE", err)
	}
}

func TestStartRejectsNonLoopback(t *testing.T) {
	for _, u := range []string{"http://10.1.2.3:2379", "https://127.0.0.1:2379", "example.com:2379"} {
		if _, err := etcdembed.Start(context.Background(), etcdembed.Config{Dir: t.TempDir(), ClientURL: u}); err == nil {
			t.Errorf("Start with client URL %q succeeded", u)
		}
	}
}

func TestAutoCompactionConfigAccepted(t *testing.T) {
	s, err := etcdembed.Start(context.Background(), etcdembed.Config{
		Dir:                     t.TempDir(),
		ClientURL:               "127.0.0.1:0",
		UnsafeNoFsync:           true,
		AutoCompactionRetention: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Client().Put(context.Background(), "/k", "v"); err != nil {
		t.Fatal(err)
	}
}

// TestInProcessClient checks the in-process client against the member's gRPC one: each
// sees the other's writes, a watch through it gets a change made over gRPC, a streamed
// range read answers at the range's revision, etcd's own limits answer with etcd's errors
// (control's group commit falls back on ErrTooManyOps), and once the member stops a call
// fails instead of waiting.
func TestInProcessClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcdembed.Start(ctx, etcdembed.Config{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0", UnsafeNoFsync: true, MaxTxnOps: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local, err := s.InProcessClient()
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	remote := s.Client()

	if _, err := local.Put(ctx, "/a", "from local"); err != nil {
		t.Fatal(err)
	}
	if r, err := remote.Get(ctx, "/a"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "from local" {
		t.Fatalf("gRPC client reads %v, %v; want the in-process client's put", r, err)
	}

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := local.Watch(wctx, "/w/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created {
		t.Fatalf("first watch response %+v, want the created notification", wr)
	}
	put, err := remote.Put(ctx, "/w/1", "from gRPC")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case wr := <-wch:
		if len(wr.Events) != 1 || string(wr.Events[0].Kv.Value) != "from gRPC" || wr.Events[0].Kv.ModRevision != put.Header.Revision {
			t.Fatalf("watch got %+v, want the put at revision %d", wr.Events, put.Header.Revision)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for a put made over gRPC")
	}

	// store's listings read ranges with GetStream (etcd 3.7's RangeStream).
	var last int64
	for _, k := range []string{"/s/1", "/s/2", "/s/3"} {
		r, err := remote.Put(ctx, k, k)
		if err != nil {
			t.Fatal(err)
		}
		last = r.Header.Revision
	}
	stream, err := local.GetStream(ctx, "/s/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("GetStream: %v", err)
	}
	listed, err := clientv3.GetStreamToGetResponse(stream)
	if err != nil || len(listed.Kvs) != 3 || string(listed.Kvs[2].Key) != "/s/3" || listed.Header.Revision != last {
		t.Fatalf("GetStream of /s/: %+v, %v; want /s/1../s/3 at revision %d", listed, err, last)
	}

	ok, err := local.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("/a"), "=", 0)).Then(clientv3.OpPut("/b", "x")).Commit()
	if err != nil || ok.Succeeded {
		t.Fatalf("create-if-absent of an existing key: %+v, %v; want a failed compare", ok, err)
	}
	ops := []clientv3.Op{clientv3.OpPut("/1", ""), clientv3.OpPut("/2", ""), clientv3.OpPut("/3", ""), clientv3.OpPut("/4", ""), clientv3.OpPut("/5", "")}
	if _, err := local.Txn(ctx).Then(ops...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Fatalf("txn of 5 ops with --max-txn-ops 4: err = %v, want ErrTooManyOps", err)
	}

	s.Stop()
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if _, err := local.Get(sctx, "/a"); err == nil || sctx.Err() != nil {
		t.Fatalf("get after Stop: err = %v (context: %v), want an error before the deadline", err, sctx.Err())
	}
	if _, err := s.InProcessClient(); err == nil {
		t.Fatal("InProcessClient of a stopped member succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InProcessClient(); !errors.Is(err, etcdembed.ErrClosed) {
		t.Fatalf("InProcessClient after Close: err = %v, want ErrClosed", err)
	}
}
