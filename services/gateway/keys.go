package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/services/gateway/sigv4"
	"golang.org/x/sync/singleflight"
)

// maxCachedKeys bounds the key cache; past it, expired entries are dropped, and if that is
// not enough the cache starts over.
const maxCachedKeys = 10000

// resolveTimeout bounds one key resolution: without it a request whose key is not cached
// waits as long as its client does when the scheduler cannot read etcd (no quorum).
const resolveTimeout = 10 * time.Second

// keyCache resolves access keys through the scheduler's AdminService.ResolveAccessKey and
// caches answers briefly: found keys for ttl, unknown keys for negTTL. Secrets stay in
// memory and are never logged. Concurrent misses for one key share one resolution
// (singleflight), and a found key used in the last fifth of its ttl is re-resolved in
// the background while the cached answer still serves, so a busy key never makes every
// request in flight ask the scheduler at once when its entry expires.
type keyCache struct {
	admin       adminv1connect.AdminServiceClient
	ttl, negTTL time.Duration
	now         func() time.Time
	flight      singleflight.Group

	mu      sync.Mutex
	entries map[string]keyEntry
}

type keyEntry struct {
	cred    sigv4.Credential
	found   bool
	expires time.Time
	// refresh is when a use starts a background re-resolution (zero: never).
	refresh time.Time
}

func newKeyCache(admin adminv1connect.AdminServiceClient, ttl, negTTL time.Duration, now func() time.Time) *keyCache {
	return &keyCache{admin: admin, ttl: ttl, negTTL: negTTL, now: now, entries: map[string]keyEntry{}}
}

// Resolve implements sigv4.Resolver.
func (c *keyCache) Resolve(ctx context.Context, id string) (sigv4.Credential, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	refresh := ok && e.found && !e.refresh.IsZero() && !now.Before(e.refresh) && now.Before(e.expires)
	if refresh {
		// One background refresh per entry: the next uses see no refresh time.
		e.refresh = time.Time{}
		c.entries[id] = e
	}
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		if refresh {
			go func() { _, _ = c.resolveShared(context.WithoutCancel(ctx), id) }()
		}
		if !e.found {
			return sigv4.Credential{}, sigv4.ErrUnknownKey
		}
		return e.cred, nil
	}
	return c.resolveShared(ctx, id)
}

// resolveShared resolves id once for every caller waiting on it at the time.
func (c *keyCache) resolveShared(ctx context.Context, id string) (sigv4.Credential, error) {
	ch := c.flight.DoChan(id, func() (any, error) {
		// Detached from the first caller, whose cancellation must not fail the others.
		return c.resolve(context.WithoutCancel(ctx), id)
	})
	select {
	case <-ctx.Done():
		return sigv4.Credential{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return sigv4.Credential{}, r.Err
		}
		return r.Val.(sigv4.Credential), nil
	}
}

// resolve asks the scheduler for id and caches the answer.
func (c *keyCache) resolve(ctx context.Context, id string) (sigv4.Credential, error) {
	now := c.now()
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	res, err := c.admin.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: id}))
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		c.put(id, keyEntry{expires: now.Add(c.negTTL)})
		return sigv4.Credential{}, sigv4.ErrUnknownKey
	case err != nil:
		return sigv4.Credential{}, fmt.Errorf("resolve access key %s: %w", id, err)
	}
	k := res.Msg.GetAccessKey()
	if k.GetAccountId() == "" || res.Msg.GetSecretAccessKey() == "" {
		return sigv4.Credential{}, errors.New("resolve access key: answer without account or secret")
	}
	cred := sigv4.Credential{
		AccessKeyID:          id,
		SecretAccessKey:      res.Msg.GetSecretAccessKey(),
		AccountID:            k.GetAccountId(),
		ContainerInstanceARN: k.GetContainerInstanceArn(),
		PrincipalARN:         res.Msg.GetPrincipalArn(),
		PrincipalID:          res.Msg.GetPrincipalId(),
		SessionTokenSHA256:   res.Msg.GetSessionTokenSha256(),
	}
	expires := now.Add(c.ttl)
	refresh := now.Add(c.ttl - c.ttl/5)
	if exp := res.Msg.GetExpiration(); exp != nil {
		if !now.Before(exp.AsTime()) {
			c.put(id, keyEntry{expires: now.Add(c.negTTL)})
			return sigv4.Credential{}, sigv4.ErrUnknownKey
		}
		if exp.AsTime().Before(expires) {
			// Session credentials are not cached past their expiration, nor refreshed
			// ahead of it.
			expires, refresh = exp.AsTime(), time.Time{}
		}
	}
	c.put(id, keyEntry{cred: cred, found: true, expires: expires, refresh: refresh})
	return cred, nil
}

func (c *keyCache) put(id string, e keyEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedKeys {
		now := c.now()
		for k, v := range c.entries {
			if !now.Before(v.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedKeys {
			c.entries = map[string]keyEntry{}
		}
	}
	c.entries[id] = e
}
