package awsapi

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// Unsupported is a connect.Interceptor for the handler of one AWS service that embeds its
// generated Unimplemented…Handler: a call of that service answered with CodeUnimplemented
// and no AWS exception (an action the handler does not implement) answers the exception
// Answer returns for the action instead. Errors that carry an exception already, other
// services' calls and clients pass through. Put it last among a handler's interceptors
// so that the others (logging) see the exception.
type Unsupported struct {
	// Service is the service's full name (ecsv1connect.EcsServiceName).
	Service string
	// Answer returns the exception for an action the handler lacks; action is the
	// method's name ("CreateDaemon").
	Answer func(action string) *awserr.Error
}

var _ connect.Interceptor = Unsupported{}

// answer returns err, or the exception for the action of procedure when err is the
// bare CodeUnimplemented of an action of u.Service.
func (u Unsupported) answer(procedure string, err error) error {
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		return err
	}
	if _, ok := awserr.FromConnect(err); ok {
		return err
	}
	action, ok := strings.CutPrefix(procedure, "/"+u.Service+"/")
	if !ok {
		return err
	}
	return awserr.ToConnect(u.Answer(action))
}

// WrapUnary implements connect.Interceptor.
func (u Unsupported) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil && !req.Spec().IsClient {
			err = u.answer(req.Spec().Procedure, err)
		}
		return res, err
	}
}

// WrapStreamingClient implements connect.Interceptor; clients pass through.
func (Unsupported) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (u Unsupported) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := next(ctx, conn); err != nil {
			return u.answer(conn.Spec().Procedure, err)
		}
		return nil
	}
}
