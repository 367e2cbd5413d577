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
)

// maxCachedKeys bounds the key cache; past it, expired entries are dropped, and if that is
// not enough the cache starts over.
const maxCachedKeys = 10000

// resolveTimeout bounds one key resolution: without it a request whose key is not cached
// waits as long as its client does when the scheduler cannot read etcd (no quorum).
const resolveTimeout = 10 * time.Second

// keyCache resolves access keys through the scheduler's AdminService.ResolveAccessKey and
// caches answers briefly: found keys for ttl, unknown keys for negTTL. Secrets stay in
// memory and are never logged.
type keyCache struct {
	admin       adminv1connect.AdminServiceClient
	ttl, negTTL time.Duration
	now         func() time.Time

	mu      sync.Mutex
	entries map[string]keyEntry
}

type keyEntry struct {
	cred    sigv4.Credential
	found   bool
	expires time.Time
}

func newKeyCache(admin adminv1connect.AdminServiceClient, ttl, negTTL time.Duration, now func() time.Time) *keyCache {
	return &keyCache{admin: admin, ttl: ttl, negTTL: negTTL, now: now, entries: map[string]keyEntry{}}
}

// Resolve implements sigv4.Resolver.
func (c *keyCache) Resolve(ctx context.Context, id string) (sigv4.Credential, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		if !e.found {
			return sigv4.Credential{}, sigv4.ErrUnknownKey
		}
		return e.cred, nil
	}
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
	if exp := res.Msg.GetExpiration(); exp != nil {
		if !now.Before(exp.AsTime()) {
			c.put(id, keyEntry{expires: now.Add(c.negTTL)})
			return sigv4.Credential{}, sigv4.ErrUnknownKey
		}
		if exp.AsTime().Before(expires) {
			expires = exp.AsTime() // session credentials are not cached past their expiration
		}
	}
	c.put(id, keyEntry{cred: cred, found: true, expires: expires})
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
