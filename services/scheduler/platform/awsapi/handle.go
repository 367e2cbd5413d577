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

// Handle runs an ECS action: fn gets the caller's (account, region) scope (from
// caller.From; a call without an account or region is refused with
// AccessDeniedException) and the request message (never nil, also for a nil request).
// It returns fn's response wrapped for Connect, or fn's error converted with ToConnect.
func Handle[Req, Resp any](ctx context.Context, log *slog.Logger, req *connect.Request[Req], fn func(ctx context.Context, account keys.Scope, msg *Req) (*Resp, error)) (*connect.Response[Resp], error) {
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
	if req != nil {
		msg = req.Msg
	}
	if msg == nil {
		msg = new(Req)
	}
	resp, err := fn(ctx, id.Scope(), msg)
	if err != nil {
		return nil, ToConnect(ctx, log, err)
	}
	return connect.NewResponse(resp), nil
}

// ToConnect returns err converted with awserr.ToConnect. An error that is not an ECS
// exception (*awserr.Error) is logged to log first at error level, since the client
// only sees ServerException for it.
func ToConnect(ctx context.Context, log *slog.Logger, err error) error {
	var e *awserr.Error
	if !errors.As(err, &e) {
		log.ErrorContext(ctx, "ecs call failed", "err", err)
	}
	return awserr.ToConnect(err)
}
