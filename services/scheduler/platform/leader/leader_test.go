package leader

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type replica struct {
	el     *Elector
	terms  chan Term
	lost   chan Term
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, cli *clientv3.Client, name string, ttl time.Duration) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{
		el:    New(Config{Client: cli, Identity: name, TTL: ttl, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}),
		terms: make(chan Term, 4), lost: make(chan Term, 4), cancel: cancel, done: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		_ = r.el.Run(ctx, func(ctx context.Context, term Term) {
			r.terms <- term
			<-ctx.Done()
			r.lost <- term
		})
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func TestFailoverWithinTTLAndFence(t *testing.T) {
	srv := etcdtest.StartServer(t)
	const ttl = 2 * time.Second
	cliA, err := srv.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, cliA, "a", ttl)
	var termA Term
	select {
	case termA = <-a.terms:
	case <-time.After(10 * time.Second):
		t.Fatal("a never led")
	}
	b := start(t, srv.Client(), "b", ttl)
	if who, err := b.el.Leader(context.Background()); err != nil || who != "a" {
		t.Fatalf("leader = %q, %v", who, err)
	}
	if !a.el.IsLeader() || b.el.IsLeader() {
		t.Fatal("IsLeader wrong")
	}

	// A leader write fenced by a's term lands while a leads.
	ctx := context.Background()
	key := "/berth/v1/test/fenced"
	if _, err := store.Create(ctx, srv.Client(), key, &storev1.AccountRecord{Id: "1"}, store.If(termA.Fence())); err != nil {
		t.Fatal(err)
	}

	// Stop the leader: its client goes away, so its session's keep-alives stop.
	stopped := time.Now()
	_ = cliA.Close()
	var termB Term
	select {
	case termB = <-b.terms:
	case <-time.After(ttl + 2*time.Second):
		t.Fatalf("b did not lead within TTL+2s")
	}
	t.Logf("failover took %v (TTL %v)", time.Since(stopped), ttl)
	select {
	case <-a.lost:
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("a's leader context was not cancelled")
	}

	// The deposed leader's write is rejected by the fence; the new leader's lands.
	_, err = store.Update(ctx, srv.Client(), key, mustRev(t, srv.Client(), key), &storev1.AccountRecord{Id: "2"}, store.If(termA.Fence()))
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("deposed leader's write: %v", err)
	}
	if _, err := store.Update(ctx, srv.Client(), key, mustRev(t, srv.Client(), key), &storev1.AccountRecord{Id: "3"}, store.If(termB.Fence())); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
}

func TestCleanStopHandsOverAtOnce(t *testing.T) {
	cli := etcdtest.Start(t)
	a := start(t, cli, "a", 10*time.Second)
	<-a.terms
	b := start(t, cli, "b", 10*time.Second)
	a.cancel() // closes a's session, revoking its lease
	select {
	case <-b.terms:
	case <-time.After(3 * time.Second):
		t.Fatal("b did not take over after a clean stop")
	}
}

func mustRev(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	_, rev, err := store.Get[*storev1.AccountRecord](context.Background(), cli, key)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
