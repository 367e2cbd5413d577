package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/services/gateway/sigv4"
)

// countingAdmin answers ResolveAccessKey for key "K" (after release is closed, when set)
// and counts the calls; other AdminService methods are not used by keyCache.
type countingAdmin struct {
	adminv1connect.AdminServiceClient
	calls   atomic.Int32
	release chan struct{}
	secret  atomic.Value // string
}

func (a *countingAdmin) ResolveAccessKey(ctx context.Context, req *connect.Request[adminv1.ResolveAccessKeyRequest]) (*connect.Response[adminv1.ResolveAccessKeyResponse], error) {
	a.calls.Add(1)
	if a.release != nil {
		<-a.release
	}
	if req.Msg.GetAccessKeyId() != "K" {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such key"))
	}
	return connect.NewResponse(&adminv1.ResolveAccessKeyResponse{
		AccessKey:       &adminv1.AccessKey{AccessKeyId: "K", AccountId: "111111111111"},
		SecretAccessKey: a.secret.Load().(string),
	}), nil
}

// TestKeyCacheSharesMisses: requests in flight for a key that is not cached wait for one
// resolution instead of each asking the scheduler.
func TestKeyCacheSharesMisses(t *testing.T) {
	admin := &countingAdmin{release: make(chan struct{})}
	admin.secret.Store("s1")
	c := newKeyCache(admin, 10*time.Second, 2*time.Second, time.Now)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			cred, err := c.Resolve(t.Context(), "K")
			if err == nil && cred.SecretAccessKey != "s1" {
				err = errors.New("wrong secret " + cred.SecretAccessKey)
			}
			errs <- err
		})
	}
	// Let every caller reach the shared resolution before it answers.
	time.Sleep(200 * time.Millisecond)
	close(admin.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := admin.calls.Load(); n != 1 {
		t.Errorf("ResolveAccessKey called %d times for 20 concurrent misses, want 1", n)
	}
	if _, err := c.Resolve(t.Context(), "nope"); !errors.Is(err, sigv4.ErrUnknownKey) {
		t.Errorf("unknown key: err = %v, want ErrUnknownKey", err)
	}
}

// TestKeyCacheRefreshesAhead: a key used in the last fifth of its ttl is re-resolved in
// the background (once) while the cached answer serves; after the ttl the new answer is
// what callers get, and a key whose entry expired is resolved again before use.
func TestKeyCacheRefreshesAhead(t *testing.T) {
	admin := &countingAdmin{}
	admin.secret.Store("s1")
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newKeyCache(admin, 10*time.Second, 2*time.Second, clock)
	if _, err := c.Resolve(t.Context(), "K"); err != nil {
		t.Fatal(err)
	}
	advance(5 * time.Second)
	if _, err := c.Resolve(t.Context(), "K"); err != nil || admin.calls.Load() != 1 {
		t.Fatalf("fresh entry: err %v, calls %d, want nil and 1", err, admin.calls.Load())
	}
	admin.secret.Store("s2") // the key's secret changes at the scheduler
	advance(4 * time.Second) // in the last fifth of the ttl
	cred, err := c.Resolve(t.Context(), "K")
	if err != nil || cred.SecretAccessKey != "s1" {
		t.Fatalf("refresh-ahead use: %v %q, want the cached s1 at once", err, cred.SecretAccessKey)
	}
	deadline := time.Now().Add(10 * time.Second)
	for admin.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Resolve(t.Context(), "K"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := admin.calls.Load(); n != 2 {
		t.Fatalf("calls = %d after the refresh-ahead uses, want 2 (one background refresh)", n)
	}
	cred, err = c.Resolve(t.Context(), "K")
	if err != nil || cred.SecretAccessKey != "s2" {
		t.Fatalf("after the refresh: %v %q, want s2", err, cred.SecretAccessKey)
	}
	advance(11 * time.Second) // past the refreshed entry's ttl: resolved before use
	admin.secret.Store("s3")
	cred, err = c.Resolve(t.Context(), "K")
	if err != nil || cred.SecretAccessKey != "s3" || admin.calls.Load() != 3 {
		t.Fatalf("expired entry: %v %q calls %d, want s3 and 3 calls", err, cred.SecretAccessKey, admin.calls.Load())
	}
}
