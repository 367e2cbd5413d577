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

	"github.com/berthhq/berth/services/scheduler/etcdembed"
)

func TestRestartKeepsDataAndClient(t *testing.T) {
	s := etcdembed.StartServerForTest(t)
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
	cli := etcdembed.StartForTest(t)
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
