package awsapi

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Handle runs an AWS action, whichever service it belongs to: fn gets the caller's
// (account, region) scope (from caller.From; a call without an account or region is
// refused with AccessDeniedException) and the request message (never nil, also for a nil
// request). It returns fn's response wrapped for Connect, or fn's error converted with
// ToConnect, which logs it to log first when it is not an AWS exception (a nil log
// discards). A precondition of every action of one service (Secrets Manager's keyring)
// is checked inside fn, so that its error takes this same way out.
func Handle[Req, Resp any](ctx context.Context, log *slog.Logger, req *connect.Request[Req], fn func(ctx context.Context, account keys.Scope, msg *Req) (*Resp, error)) (*connect.Response[Resp], error) {
	// caller.Interceptor, on every Connect handler app serves, has already refused a call
	// without a valid account or region (CodeUnauthenticated) before it reaches here. This
	// check stays as the guard of the calls that bypass it: in-process ones (App.ECS in
	// `berth dev`, the packages' tests), which would otherwise read and write under an
	// empty account or region.
	id, ok := caller.From(ctx)
	if !ok || id.Account == "" {
		return nil, awserr.ToConnect(awserr.New("AccessDeniedException", "The request carries no account."))
	}
	if id.Region == "" {
		// Every resource lives in a region; a call without one would silently land in
		// some default. The gateway always sends it (identity.RegionHeader).
		return nil, awserr.ToConnect(awserr.New("AccessDeniedException", "The request carries no region."))
	}
	var msg *Req
	var procedure string
	if req != nil {
		msg, procedure = req.Msg, req.Spec().Procedure
	}
	if msg == nil {
		msg = new(Req)
	}
	resp, err := fn(ctx, id.Scope(), msg)
	if err != nil {
		return nil, toConnect(ctx, log, procedure, err)
	}
	return connect.NewResponse(resp), nil
}

// ToConnect returns err converted with awserr.ToConnect. An error that is not an AWS
// exception (*awserr.Error) is logged to log first at error level, since the client
// only sees ServerException for it; a nil log discards it.
func ToConnect(ctx context.Context, log *slog.Logger, err error) error {
	return toConnect(ctx, log, "", err)
}

// toConnect is ToConnect naming the procedure (when known) in the log line.
func toConnect(ctx context.Context, log *slog.Logger, procedure string, err error) error {
	var e *awserr.Error
	if log != nil && !errors.As(err, &e) {
		attrs := []any{"err", err}
		if procedure != "" {
			attrs = append(attrs, "procedure", procedure)
		}
		log.ErrorContext(ctx, "aws call failed", attrs...)
	}
	return awserr.ToConnect(err)
}

// Requires returns fn when met, a precondition of every action of one service (Secrets
// Manager and SSM need the scheduler's keyring), holds; otherwise an action that answers
// err without running fn. Pass the result to Handle, so that err leaves as fn's errors do.
func Requires[Req, Resp any](met bool, err error, fn func(ctx context.Context, account keys.Scope, msg *Req) (*Resp, error)) func(ctx context.Context, account keys.Scope, msg *Req) (*Resp, error) {
	if met {
		return fn
	}
	return func(context.Context, keys.Scope, *Req) (*Resp, error) { return nil, err }
}
