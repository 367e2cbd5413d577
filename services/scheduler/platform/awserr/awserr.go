// Package awserr defines the scheduler's domain errors, for every AWS service it serves:
// each carries the AWS exception type a client expects (ClusterNotFoundException,
// InvalidParameterException, ResourceNotFoundException, ...) and the message, in AWS's
// wording where AWS has a fixed one. Domain code returns them;
// ToConnect turns them into Connect errors with a berth.ecs.v1.Exception detail at the RPC
// boundary, and the gateway turns that detail back into an AWS JSON error.
package awserr

import (
	"context"

	"errors"
	"fmt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"connectrpc.com/connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// Error is an ECS exception: Type is the AWS error code, Message its message.
type Error struct {
	// Type is the AWS exception name, e.g. "ClusterNotFoundException".
	Type string
	// Message is the message returned to the client.
	Message string
}

// Error returns "Type: Message".
func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Is reports whether target is an *Error of the same Type, so errors.Is(err,
// awserr.ClusterNotFound) works whatever the message.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Type == e.Type && t.Message == ""
}

// New returns an Error of the given AWS type with a formatted message.
func New(typ, format string, args ...any) *Error {
	return &Error{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is; their empty Message matches any message of the type.
var (
	ClusterNotFound      = &Error{Type: "ClusterNotFoundException"}
	ServiceNotFound      = &Error{Type: "ServiceNotFoundException"}
	ServiceNotActive     = &Error{Type: "ServiceNotActiveException"}
	InvalidParameter     = &Error{Type: "InvalidParameterException"}
	Client               = &Error{Type: "ClientException"}
	ResourceNotFound     = &Error{Type: "ResourceNotFoundException"}
	ResourceInUse        = &Error{Type: "ResourceInUseException"}
	UnsupportedFeature   = &Error{Type: "UnsupportedFeatureException"}
	AccessDenied         = &Error{Type: "AccessDeniedException"}
	AttributeLimit       = &Error{Type: "AttributeLimitExceededException"}
	LimitExceeded        = &Error{Type: "LimitExceededException"}
	Server               = &Error{Type: "ServerException"}
	Throttling           = &Error{Type: "ThrottlingException"}
	TaskSetNotFound      = &Error{Type: "TaskSetNotFoundException"}
	ContainsInstances    = &Error{Type: "ClusterContainsContainerInstancesException"}
	ContainsServices     = &Error{Type: "ClusterContainsServicesException"}
	ContainsTasks        = &Error{Type: "ClusterContainsTasksException"}
	ServiceDeploymentNot = &Error{Type: "ServiceDeploymentNotFoundException"}
)

// InvalidParameterf returns an InvalidParameterException with a formatted message.
func InvalidParameterf(format string, args ...any) *Error {
	return New("InvalidParameterException", format, args...)
}

// Clientf returns a ClientException with a formatted message.
func Clientf(format string, args ...any) *Error { return New("ClientException", format, args...) }

// ClusterNotFoundError returns AWS's ClusterNotFoundException ("Cluster not found.").
func ClusterNotFoundError() *Error { return New("ClusterNotFoundException", "Cluster not found.") }

// ServiceNotFoundError returns AWS's ServiceNotFoundException ("Service not found.").
func ServiceNotFoundError() *Error { return New("ServiceNotFoundException", "Service not found.") }

// code maps an exception to the Connect code the scheduler answers with. The gateway uses
// the detail's type, not the code, for the AWS error; the code serves other Connect clients.
func code(typ string) connect.Code {
	switch typ {
	case "ServerException":
		return connect.CodeInternal
	case "ThrottlingException":
		return connect.CodeResourceExhausted
	case "AccessDeniedException":
		return connect.CodePermissionDenied
	case "ClusterNotFoundException", "ServiceNotFoundException", "ResourceNotFoundException",
		"TaskSetNotFoundException", "ServiceDeploymentNotFoundException":
		return connect.CodeNotFound
	case "ConflictException", "ResourceInUseException", "UpdateInProgressException":
		return connect.CodeAborted
	case "UnsupportedFeatureException":
		return connect.CodeUnimplemented
	case "ServiceUnavailableException":
		return connect.CodeUnavailable
	}
	return connect.CodeInvalidArgument
}

// ToConnect converts err for the RPC boundary. An *Error (anywhere in the chain) becomes a
// Connect error with an ecsv1.Exception detail; a *connect.Error passes through; anything
// else is an internal fault and becomes ServerException with a generic message, so no Go
// error string ever reaches a client.
func ToConnect(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return ce
		}
		e = &Error{Type: "ServerException", Message: "An internal error occurred."}
		if storeUnavailable(err) {
			e.Message = StoreUnavailableMessage
		}
	}
	ce := connect.NewError(code(e.Type), errors.New(e.Message))
	if detail, derr := connect.NewErrorDetail(&ecsv1.Exception{Type: e.Type, Message: e.Message}); derr == nil {
		ce.AddDetail(detail)
	}
	return ce
}

// StoreUnavailableMessage is the ServerException message of a call that failed because
// etcd had no quorum or did not answer within the scheduler's request deadline.
const StoreUnavailableMessage = "The cluster state store is unavailable (etcd has no quorum or did not answer in time); retry the request."

// storeUnavailable reports whether err is etcd's (or its deadline's) unavailability: a
// gRPC Unavailable or DeadlineExceeded status (etcdserver: no leader, …) or a context
// deadline.
func storeUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// FromConnect recovers the *Error carried by a Connect error's detail, if any.
func FromConnect(err error) (*Error, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil, false
	}
	for _, d := range ce.Details() {
		msg, derr := d.Value()
		if derr != nil {
			continue
		}
		if ex, ok := msg.(*ecsv1.Exception); ok {
			return &Error{Type: ex.GetType(), Message: ex.GetMessage()}, true
		}
	}
	return nil, false
}
