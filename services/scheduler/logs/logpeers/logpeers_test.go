package logpeers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/logs/logpeers"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

var sc = logstore.Scope{Account: "123456789012", Region: "us-east-1"}

type replica struct {
	store  *logstore.Store
	peers  *logpeers.Peers
	srv    *httptest.Server
	cancel context.CancelFunc
}

// start runs a replica: its store in dir, its peer routes on a real HTTP server, its
// membership in etcd.
func start(t *testing.T, cfg logpeers.Config, dir string) *replica {
	t.Helper()
	st, err := logstore.Open(logstore.Config{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{store: st}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	cfg.Store, cfg.URL, cfg.TTL = st, r.srv.URL, time.Second
	r.peers = logpeers.New(cfg)
	mux.Handle("/", r.peers.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.peers.Run(ctx)
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	r.cancel()
	r.srv.Close()
	r.store.Close()
}

func waitReady(t *testing.T, r *replica) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !r.peers.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("replica never in sync")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(t *testing.T, s *logstore.Store) int {
	t.Helper()
	out, err := s.GetEvents(sc, logstore.GetEventsInput{Group: "/g", Stream: "s", StartFromHead: true, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Events)
}

// TestPeers: over real HTTP and etcd, a change through either replica is on both when it
// is acknowledged; a member that is gone but still holds its lease fails writes until
// the lease expires; a replica that comes back with an empty disk refuses reads until it
// has caught up, then holds everything.
func TestPeers(t *testing.T) {
	etcd := etcdtest.Start(t)
	dirA := t.TempDir()
	a := start(t, logpeers.Config{Etcd: etcd, Replica: "a"}, dirA)
	b := start(t, logpeers.Config{Etcd: etcd, Replica: "b"}, t.TempDir())
	waitReady(t, a)
	waitReady(t, b)
	if err := a.store.EnsureStream(sc, "/g", "s", true); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	put := func(s *logstore.Store, n int) error {
		_, err := s.PutEvents(sc, "/g", "s", []logstore.InputEvent{{Timestamp: now, Message: fmt.Sprint(n)}})
		return err
	}
	for i := range 20 {
		if err := put([]*logstore.Store{a.store, b.store}[i%2], i); err != nil {
			t.Fatal(err)
		}
	}
	if ca, cb := count(t, a.store), count(t, b.store); ca != 20 || cb != 20 {
		t.Fatalf("a has %d events, b %d; want 20 each", ca, cb)
	}

	// a dies without leaving: b's writes fail until a's lease expires, then succeed.
	a.srv.CloseClientConnections()
	a.srv.Close()
	err := put(b.store, 20)
	if !logstore.IsType(err, logstore.ServiceUnavailable) {
		t.Fatalf("write with a member down: %v, want ServiceUnavailable", err)
	}
	a.cancel() // its session ends: the lease is revoked
	a.store.Close()
	deadline := time.Now().Add(15 * time.Second)
	for put(b.store, 21) != nil {
		if time.Now().After(deadline) {
			t.Fatal("writes never resumed after a left")
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := count(t, b.store) // 20, the stored-but-unreplicated one, 21

	// a returns with its disk lost.
	a2 := start(t, logpeers.Config{Etcd: etcd, Replica: "a"}, t.TempDir())
	waitReady(t, a2)
	if got := count(t, a2.store); got != want {
		t.Fatalf("a after catch-up has %d events, want %d", got, want)
	}
	if err := put(a2.store, 22); err != nil {
		t.Fatal(err)
	}
	if got := count(t, b.store); got != want+1 {
		t.Fatalf("b has %d events after a write through the returned a, want %d", got, want+1)
	}
}
