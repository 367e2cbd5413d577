package app

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
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
		if err == nil && !l.log.Enabled(ctx, slog.LevelDebug) {
			return res, nil // successful calls are logged at debug only: build no line
		}
		id, _ := caller.From(ctx)
		attrs := []any{
			"request_id", id.RequestID, "account", id.Account, "procedure", req.Spec().Procedure,
			"latency", time.Since(start),
		}
		if err == nil {
			attrs = append(attrs, taskAttrs(req, res)...)
		} else {
			attrs = append(attrs, taskAttrs(req, nil)...)
		}
		if err == nil {
			l.log.DebugContext(ctx, "rpc", attrs...)
			return res, nil
		}
		if e, ok := awserr.FromConnect(err); ok && e.Type != "ServerException" {
			l.log.InfoContext(ctx, "rpc", append(attrs, "error", e.Type)...)
		} else {
			l.log.WarnContext(ctx, "rpc failed", append(attrs, "error", err.Error())...)
		}
		return res, err
	}
}

// maxLoggedTasks bounds the task ids one rpc line lists.
const maxLoggedTasks = 10

// taskAttrs returns the cluster and task ids a call is about, so every line about a task
// names both: "cluster" from the request's cluster (ECS's "default" when omitted) and
// "task" (one) or "tasks" (several, at most maxLoggedTasks) from the request's task and
// tasks, or for RunTask and StartTask the tasks of the answer. Calls about no task
// return nothing.
func taskAttrs(req connect.AnyRequest, res connect.AnyResponse) []any {
	in := req.Any()
	var ids []string
	if m, ok := in.(interface{ GetTask() string }); ok && m.GetTask() != "" {
		ids = append(ids, lastPart(m.GetTask()))
	}
	if m, ok := in.(interface{ GetTasks() []string }); ok {
		for _, t := range m.GetTasks() {
			if len(ids) > maxLoggedTasks {
				break
			}
			ids = append(ids, lastPart(t))
		}
	}
	if res != nil {
		if m, ok := res.Any().(interface{ GetTasks() []*ecsv1.Task }); ok {
			for _, t := range m.GetTasks() {
				if len(ids) > maxLoggedTasks {
					break
				}
				ids = append(ids, lastPart(t.GetTaskArn()))
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	cluster := "default"
	if m, ok := in.(interface{ GetCluster() string }); ok && m.GetCluster() != "" {
		cluster = lastPart(m.GetCluster())
	}
	if len(ids) == 1 {
		return []any{"cluster", cluster, "task", ids[0]}
	}
	if len(ids) > maxLoggedTasks {
		ids = ids[:maxLoggedTasks]
	}
	return []any{"cluster", cluster, "tasks", ids}
}

// lastPart returns what follows an ARN's last '/': a task id or a cluster name.
func lastPart(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func (rpcLog) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (rpcLog) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
