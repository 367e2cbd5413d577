package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TokenPrefix starts every generated admin token, so a leaked one is recognisable.
const TokenPrefix = "berth-admin-"

// Bootstrap stores the admin bootstrap token (its SHA-256 only) unless one is stored
// already. token is the token to store; a random one (TokenPrefix and 64 hex digits) is
// generated when it is empty. It returns the token and true when this call stored it (the
// caller prints a generated token once, and never again), or "" and false when a token
// was stored before.
func Bootstrap(ctx context.Context, kv clientv3.KV, token string) (string, bool, error) {
	if token == "" {
		var err error
		if token, err = NewToken(); err != nil {
			return "", false, err
		}
	}
	sum := sha256.Sum256([]byte(token))
	_, err := store.Create(ctx, kv, keys.AdminToken(), wrapperspb.Bytes(sum[:]))
	switch {
	case errors.Is(err, store.ErrExists):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return token, true, nil
}

// SetToken stores token's SHA-256 as the admin token, replacing a different one stored
// before: `berth dev` keeps its token in its data dir (0600) and makes the stored hash
// match it at every start, so a data dir from a build without the token gets one.
func SetToken(ctx context.Context, kv clientv3.KV, token string) error {
	if token == "" {
		return errors.New("admin: empty token")
	}
	sum := sha256.Sum256([]byte(token))
	v, rev, err := store.Get[*wrapperspb.BytesValue](ctx, kv, keys.AdminToken())
	switch {
	case errors.Is(err, store.ErrNotFound):
		_, err = store.Create(ctx, kv, keys.AdminToken(), wrapperspb.Bytes(sum[:]))
	case err != nil:
	case subtle.ConstantTimeCompare(v.GetValue(), sum[:]) == 1:
	default:
		_, err = store.Update(ctx, kv, keys.AdminToken(), rev, wrapperspb.Bytes(sum[:]))
	}
	return err
}

// NewToken returns a random admin token: TokenPrefix and 64 hex digits.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return TokenPrefix + hex.EncodeToString(b), nil
}

// tokenCacheTTL is how long a verified token is believed without reading etcd again.
const tokenCacheTTL = 10 * time.Second

// Tokens verifies admin tokens against the stored hash.
type Tokens struct {
	kv clientv3.KV

	mu      sync.Mutex
	hash    []byte
	fetched time.Time
}

// NewTokens returns a verifier reading the hash from kv.
func NewTokens(kv clientv3.KV) *Tokens { return &Tokens{kv: kv} }

// Check reports whether token is the admin token. An empty token, a store without a
// token, and a store error all answer false.
func (t *Tokens) Check(ctx context.Context, token string) bool {
	if token == "" {
		return false
	}
	t.mu.Lock()
	hash, fresh := t.hash, time.Since(t.fetched) < tokenCacheTTL
	t.mu.Unlock()
	if !fresh {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, _, err := store.Get[*wrapperspb.BytesValue](ctx, t.kv, keys.AdminToken())
		if err != nil {
			return false
		}
		hash = v.GetValue()
		t.mu.Lock()
		t.hash, t.fetched = hash, time.Now()
		t.mu.Unlock()
	}
	sum := sha256.Sum256([]byte(token))
	return len(hash) == len(sum) && subtle.ConstantTimeCompare(hash, sum[:]) == 1
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header, or "".
func BearerToken(authorization string) string {
	scheme, tok, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// Guard is the AdminService's authorization (a connect.Interceptor). Every method needs
// an admin peer (caller.Peer.Admin: an admin certificate or the admin token) except
// ResolveAccessKey, which the gateway calls to verify signatures: it needs a gateway or
// admin peer when the listener authenticates peers (TLS), and is open on a plain listener
// (whose reach is the trust boundary, as for the identity headers), unless Strict.
type Guard struct {
	// Strict makes every method, ResolveAccessKey included, need an admin peer: `berth
	// dev`'s internal listener is plain HTTP on loopback, which every local process
	// reaches, so only the dev admin token (its data dir, 0600) opens it.
	Strict bool
}

// ErrNotAdmin is the refusal of an admin method to a caller without the admin credential.
var ErrNotAdmin = errors.New("AdminService needs an admin credential: the bootstrap token (Authorization: Bearer) or a client certificate with the admin role")

// ErrNotGatewayOrAdmin is ResolveAccessKey's refusal on an authenticated listener.
var ErrNotGatewayOrAdmin = errors.New("ResolveAccessKey is answered only to a gateway or admin certificate")

func (g Guard) allow(ctx context.Context, procedure string) error {
	p := caller.PeerFrom(ctx)
	if p.Admin {
		return nil
	}
	if procedure == adminv1connect.AdminServiceResolveAccessKeyProcedure && !g.Strict {
		if p.Gateway || !p.Authenticated {
			return nil
		}
		return connect.NewError(connect.CodePermissionDenied, ErrNotGatewayOrAdmin)
	}
	return connect.NewError(connect.CodeUnauthenticated, ErrNotAdmin)
}

// WrapUnary implements connect.Interceptor.
func (g Guard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient {
			if err := g.allow(ctx, req.Spec().Procedure); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor; clients pass through.
func (Guard) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor (AdminService has no streams
// today; one added later is guarded the same way).
func (g Guard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := g.allow(ctx, conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
