package etcdembed

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StartForTest starts a member in t.TempDir() on free loopback ports and
// returns its client; the member stops when the test ends. Logs are
// discarded and fsync is off. It fails the test if the member cannot start.
func StartForTest(t testing.TB) *clientv3.Client {
	t.Helper()
	return StartServerForTest(t).Client()
}

// StartServerForTest is StartForTest for tests that need the Server itself,
// for instance to Stop and Restart it.
func StartServerForTest(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{
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
