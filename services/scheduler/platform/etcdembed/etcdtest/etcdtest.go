// Package etcdtest starts embedded etcd members for tests: a real single-member etcd in
// the test's temp dir, stopped when the test ends. It lives apart from etcdembed so that
// production binaries, which link etcdembed, do not link the testing package.
package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
)

// Start starts a member in t.TempDir() on free loopback ports and
// returns its client; the member stops when the test ends. Logs are
// discarded and fsync is off. It fails the test if the member cannot start.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	return StartServer(t).Client()
}

// StartServer is Start for tests that need the Server itself,
// for instance to Stop and Restart it.
func StartServer(t testing.TB) *etcdembed.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcdembed.Start(ctx, etcdembed.Config{
		Dir:           t.TempDir(),
		ClientURL:     "http://127.0.0.1:0",
		UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
