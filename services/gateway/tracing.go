package gateway

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the gateway's spans.
const TracerName = "github.com/berthhq/berth/services/gateway"

// RequestIDAttribute is the span attribute carrying the gateway's request id (the
// x-amzn-RequestId of the answer, and the Berth-Request-Id the scheduler logs), on the
// gateway's and the scheduler's spans of one request.
const RequestIDAttribute = "berth.request_id"

// startAPISpan starts the server span of one AWS API request (named "AWS" until the action
// is known), continuing a W3C trace context the client sent. The global tracer provider
// is a no-op unless the process installed one (OTEL_EXPORTER_OTLP_ENDPOINT in cmd/berth).
func startAPISpan(r *http.Request, requestID string) (context.Context, trace.Span) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return otel.Tracer(TracerName).Start(ctx, "AWS", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(RequestIDAttribute, requestID)))
}

// endAPISpan names the span after the service and action ("ECS RunTask", "logs
// PutLogEvents") and records the outcome.
func endAPISpan(span trace.Span, x *exchange, status int) {
	// ECS actions are named bare ("RunTask"); another service's carry its signing name
	// ("logs:PutLogEvents").
	service, method := "ECS", x.action
	if sn, op, ok := strings.Cut(x.action, ":"); ok {
		service, method = sn, op
	}
	if x.action != "" {
		span.SetName(service + " " + method)
	}
	span.SetAttributes(
		attribute.String("rpc.system", "aws-api"),
		attribute.String("rpc.service", service),
		attribute.String("rpc.method", method),
		attribute.String("aws.account", x.account),
		attribute.Int("http.response.status_code", status),
	)
	if x.errType != "" {
		span.SetAttributes(attribute.String("aws.error_type", x.errType))
		span.SetStatus(codes.Error, x.errType)
	}
	span.End()
}

// injectTrace puts the span context of ctx into h (traceparent), for the scheduler.
func injectTrace(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}
