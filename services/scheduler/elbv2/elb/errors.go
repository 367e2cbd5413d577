package elb

import (
	"errors"
	"fmt"
)

// Error is an ELBv2 API error: Code is the query protocol's error code from the model
// (the exception shape's error.code, e.g. "TargetGroupNotFound" for
// TargetGroupNotFoundException, or "ValidationError"), Status its HTTP status.
type Error struct {
	// Code is the wire error code.
	Code string
	// Message is AWS's message text.
	Message string
	// Status is the HTTP status code (400 unless the model says otherwise).
	Status int
}

// Error returns "Code: Message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Error codes (elbv2-2015-12-01 exception shapes' error.code).
const (
	CodeValidation                  = "ValidationError"
	CodeDuplicateLoadBalancerName   = "DuplicateLoadBalancerName"
	CodeDuplicateTargetGroupName    = "DuplicateTargetGroupName"
	CodeDuplicateListener           = "DuplicateListener"
	CodeDuplicateTagKeys            = "DuplicateTagKeys"
	CodeLoadBalancerNotFound        = "LoadBalancerNotFound"
	CodeTargetGroupNotFound         = "TargetGroupNotFound"
	CodeListenerNotFound            = "ListenerNotFound"
	CodeRuleNotFound                = "RuleNotFound"
	CodeInvalidTarget               = "InvalidTarget"
	CodeInvalidConfigurationRequest = "InvalidConfigurationRequest"
	CodeInvalidLoadBalancerAction   = "InvalidLoadBalancerAction"
	CodeIncompatibleProtocols       = "IncompatibleProtocols"
	CodeUnsupportedProtocol         = "UnsupportedProtocol"
	CodePriorityInUse               = "PriorityInUse"
	CodeResourceInUse               = "ResourceInUse"
	CodeOperationNotPermitted       = "OperationNotPermitted"
	CodeTargetGroupAssociationLimit = "TargetGroupAssociationLimit"
	CodeTooManyTargets              = "TooManyTargets"
	CodeTooManyTags                 = "TooManyTags"
	CodeTooManyActions              = "TooManyActions"
	CodeTooManyTargetGroups         = "TooManyTargetGroups"
)

func errorf(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Status: 400}
}

// validation is AWS's ValidationError for a member that breaks the model's
// constraints.
func validation(format string, args ...any) error { return errorf(CodeValidation, format, args...) }

// CodeOf returns err's ELBv2 error code, or "" when it is not an *Error.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
