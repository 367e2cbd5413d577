package app

import (
	"context"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/berthhq/berth/services/scheduler/platform/caller"
)

// TracerName is the instrumentation scope of the scheduler's spans.
const TracerName = "github.com/berthhq/berth/services/scheduler"

// tracing starts a server span for every unary call, continuing the W3C trace context
// the gateway sends (traceparent), with the gateway's request id, the account and the
// region as attributes: a RunTask's span sits under the gateway's "ECS RunTask" span and
// above its etcd spans (etcdmetrics). Streams (agent sessions, the console's change
// feed) live for hours and get no span. The global tracer provider is a no-op unless
// the process installed one.
type tracing struct{}

// WrapUnary implements connect.Interceptor.
func (tracing) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(req.Header()))
		attrs := []attribute.KeyValue{attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.method", req.Spec().Procedure)}
		if id, ok := caller.From(ctx); ok {
			attrs = append(attrs, attribute.String("berth.request_id", id.RequestID),
				attribute.String("aws.account", id.Account), attribute.String("aws.region", id.Region))
		}
		ctx, span := otel.Tracer(TracerName).Start(ctx, req.Spec().Procedure, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, req)
		if err != nil {
			span.SetStatus(codes.Error, connect.CodeOf(err).String())
		}
		return res, err
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (tracing) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (tracing) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
