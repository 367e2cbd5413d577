package agentsession

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// presence keeps this replica's presence keys on one etcd lease, kept alive in the
// background. If the lease is lost (etcd unreachable longer than the TTL), the next
// keep-alive failure grants a new lease and writes every live key again.
type presence struct {
	cli *clientv3.Client
	ttl int64
	log *slog.Logger

	mu     sync.Mutex
	lease  clientv3.LeaseID
	keys   map[string]string // key → value, for re-putting on a new lease
	cancel context.CancelFunc
	closed bool
}

func newPresence(cli *clientv3.Client, ttl time.Duration, log *slog.Logger) *presence {
	secs := int64((ttl + time.Second - 1) / time.Second)
	return &presence{cli: cli, ttl: max(secs, 1), log: log, keys: map[string]string{}}
}

// ensureLease returns the current lease, granting one (and starting its keep-alive) if
// needed. Called with p.mu held.
func (p *presence) ensureLease(ctx context.Context) (clientv3.LeaseID, error) {
	if p.lease != 0 {
		return p.lease, nil
	}
	if p.closed {
		return 0, fmt.Errorf("presence: closed")
	}
	g, err := p.cli.Grant(ctx, p.ttl)
	if err != nil {
		return 0, fmt.Errorf("presence: grant lease: %w", err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := p.cli.KeepAlive(kctx, g.ID)
	if err != nil {
		cancel()
		return 0, fmt.Errorf("presence: keep lease alive: %w", err)
	}
	p.lease, p.cancel = g.ID, cancel
	go p.keepAlive(g.ID, ch)
	return g.ID, nil
}

// keepAlive drains the keep-alive channel; when it closes the lease is gone (or Close
// was called), so it re-grants and re-puts every key.
func (p *presence) keepAlive(id clientv3.LeaseID, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	for range ch {
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.lease != id {
		return
	}
	p.log.Warn("agentsession: presence lease lost; granting a new one", "lease", int64(id))
	p.lease = 0
	p.cancel()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lease, err := p.ensureLease(ctx)
		if err == nil {
			for k, v := range p.keys {
				if _, err = p.cli.Put(ctx, k, v, clientv3.WithLease(lease)); err != nil {
					break
				}
			}
		}
		cancel()
		if err == nil || p.closed {
			return
		}
		p.log.Warn("agentsession: re-grant presence lease", "err", err)
		p.lease = 0
		p.mu.Unlock()
		time.Sleep(time.Second)
		p.mu.Lock()
	}
}

// put writes key=value on the replica's lease.
func (p *presence) put(ctx context.Context, key, value string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	lease, err := p.ensureLease(ctx)
	if err != nil {
		return err
	}
	if _, err := p.cli.Put(ctx, key, value, clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("presence: put %s: %w", key, err)
	}
	p.keys[key] = value
	return nil
}

// del removes key if it still holds value (a newer session, here or on another replica,
// may have taken it over).
func (p *presence) del(ctx context.Context, key, value string) error {
	p.mu.Lock()
	if p.keys[key] == value {
		delete(p.keys, key)
	}
	p.mu.Unlock()
	_, err := p.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", value)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("presence: delete %s: %w", key, err)
	}
	return nil
}

// close revokes the lease, removing every presence key of this replica at once.
func (p *presence) close() {
	p.mu.Lock()
	p.closed = true
	lease, cancel := p.lease, p.cancel
	p.lease = 0
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if lease != 0 {
		ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		if _, err := p.cli.Revoke(ctx, lease); err != nil {
			p.log.Warn("agentsession: revoke presence lease", "err", err)
		}
	}
}
