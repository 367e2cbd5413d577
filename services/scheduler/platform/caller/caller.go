// Package caller carries the identity of the caller of any AWS service's call (and of an
// agent's) through the scheduler. The gateway authenticates the request (SigV4) and sends
// the account and the region of the credential scope, and for an agent's instance-scoped
// credential the container instance, in the headers pkg/identity names. With TLS
// the scheduler believes them only from a peer that presented a gateway certificate
// (Interceptor.RequireGateway, Peer); without TLS (`berth dev`, a loopback listener) it
// trusts whoever reaches its internal listener.
package caller

import (
	"context"
	"errors"
	"regexp"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"

	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Identity is who is calling.
type Identity struct {
	// Account is the caller's 12-digit account id.
	Account string
	// Region is the region the call is served in, from the SigV4 credential scope.
	Region string
	// ContainerInstanceARN is set when the credential acts only for one instance's agent.
	ContainerInstanceARN string
	// RequestID is the gateway's request id, for logs; may be empty.
	RequestID string
	// Endpoint is the gateway's base URL as the caller reached it (identity.EndpointHeader); may
	// be empty.
	Endpoint string
	// PrincipalARN and PrincipalID are the authenticated principal's ARN and unique id
	// (identity.PrincipalARNHeader); empty when the gateway sent none.
	PrincipalARN, PrincipalID string
}

type ctxKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the identity in ctx and whether there is one.
func From(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}

var accountPattern = regexp.MustCompile(`^[0-9]{12}$`)

// regionPattern accepts region names: lowercase words and digits joined by '-' ("us-east-1",
// "us-gov-west-1", or an operator's own name in the gateway's allow-list), at most 32
// characters. The gateway checks the name against its allow-list; this check only keeps a
// malformed header from becoming a key part or an ARN field.
var regionPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidRegion reports whether r can be a region name (see regionPattern).
func ValidRegion(r string) bool { return len(r) <= 32 && regionPattern.MatchString(r) }

// Scope returns the (account, region) the identity's calls are served in.
func (id Identity) Scope() keys.Scope { return keys.Scope{Account: id.Account, Region: id.Region} }

// Principal returns the ARN and unique id of the principal the call acts as: those the
// gateway sent (PrincipalARNHeader), or, when it sent none (an account access key), the
// account's root user, arn:aws:iam::{account}:root, whose unique id is the account id —
// as STS GetCallerIdentity answers them.
func (id Identity) Principal() (arn, uniqueID string) {
	if id.PrincipalARN != "" {
		return id.PrincipalARN, id.PrincipalID
	}
	return "arn:aws:iam::" + id.Account + ":root", id.Account
}

// ErrNoAccount is returned by the interceptor when a call carries no valid account.
var ErrNoAccount = errors.New("missing or invalid " + identity.AccountHeader + " header")

// ErrNoRegion is returned by the interceptor when a call carries no valid region.
var ErrNoRegion = errors.New("missing or invalid " + identity.RegionHeader + " header")

// Peer is what the connection itself proved about the caller, before any header is read:
// the roles of its verified TLS client certificate and whether it presented the admin
// token. The scheduler's listener puts it in each request's context (WithPeer).
type Peer struct {
	// Gateway is set for a client certificate with the gateway role.
	Gateway bool
	// Admin is set for a client certificate with the admin role or a valid admin token.
	Admin bool
	// Scheduler is set for a client certificate with the scheduler role (another
	// replica: the log store's peer routes).
	Scheduler bool
	// Authenticated is set when the listener checked the connection at all (TLS with
	// client certificates); false on a plain listener, where nothing is proved.
	Authenticated bool
}

type peerKey struct{}

// WithPeer returns ctx carrying p.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the peer in ctx (the zero Peer when none was set).
func PeerFrom(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}

// ErrNotGateway is returned when identity headers come from a peer without a gateway
// certificate while the interceptor requires one.
var ErrNotGateway = errors.New("identity headers are accepted only from a client presenting a gateway certificate")

// Interceptor reads the identity headers of every unary and streaming call into the
// context, and refuses calls without a valid account or region with CodeUnauthenticated.
// With RequireGateway it first refuses, with CodePermissionDenied, every call whose peer
// (PeerFrom) is not a gateway: nobody else may say which account it acts for.
type Interceptor struct {
	// RequireGateway makes the identity headers count only from a gateway peer.
	RequireGateway bool
}

// check refuses a non-gateway peer when the interceptor requires one.
func (i Interceptor) check(ctx context.Context) error {
	if i.RequireGateway && !PeerFrom(ctx).Gateway {
		return connect.NewError(connect.CodePermissionDenied, ErrNotGateway)
	}
	return nil
}

func identityFrom(h interface{ Get(string) string }) (Identity, error) {
	id := Identity{
		Account:              h.Get(identity.AccountHeader),
		Region:               h.Get(identity.RegionHeader),
		ContainerInstanceARN: h.Get(identity.ContainerInstanceHeader),
		RequestID:            h.Get(identity.RequestIDHeader),
		Endpoint:             h.Get(identity.EndpointHeader),
		PrincipalARN:         h.Get(identity.PrincipalARNHeader),
		PrincipalID:          h.Get(identity.PrincipalIDHeader),
	}
	if !accountPattern.MatchString(id.Account) {
		return Identity{}, connect.NewError(connect.CodeUnauthenticated, ErrNoAccount)
	}
	if !ValidRegion(id.Region) {
		return Identity{}, connect.NewError(connect.CodeUnauthenticated, ErrNoRegion)
	}
	return id, nil
}

// WrapUnary implements connect.Interceptor.
func (i Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		if err := i.check(ctx); err != nil {
			return nil, err
		}
		id, err := identityFrom(req.Header())
		if err != nil {
			return nil, err
		}
		return next(With(ctx, id), req)
	}
}

// WrapStreamingClient implements connect.Interceptor; clients pass through.
func (Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (i Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := i.check(ctx); err != nil {
			return err
		}
		id, err := identityFrom(conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(With(ctx, id), conn)
	}
}
