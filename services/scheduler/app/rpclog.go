package app

import (
	"context"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/berthhq/berth/services/scheduler/caller"
	"github.com/berthhq/berth/services/scheduler/ecserr"
)

// rpcLog logs every unary call the replica serves, with the gateway's request id and the
// caller's account, so one request can be followed from the gateway's access log into the
// scheduler's. It must run inside caller.Interceptor, which puts the identity in ctx.
// Streams (agent sessions) log their own lifecycle in agentsession.
type rpcLog struct{ log *slog.Logger }

func (l rpcLog) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		id, _ := caller.From(ctx)
		attrs := []any{
			"request_id", id.RequestID, "account", id.Account, "procedure", req.Spec().Procedure,
			"latency", time.Since(start),
		}
		if err == nil {
			l.log.DebugContext(ctx, "rpc", attrs...)
			return res, nil
		}
		if e, ok := ecserr.FromConnect(err); ok && e.Type != "ServerException" {
			l.log.InfoContext(ctx, "rpc", append(attrs, "error", e.Type)...)
		} else {
			l.log.WarnContext(ctx, "rpc failed", append(attrs, "error", err.Error())...)
		}
		return res, err
	}
}

func (rpcLog) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (rpcLog) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
