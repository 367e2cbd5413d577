package elb

// Target health states (ELBv2 TargetHealthStateEnum).
const (
	StateInitial     = "initial"
	StateHealthy     = "healthy"
	StateUnhealthy   = "unhealthy"
	StateUnused      = "unused"
	StateDraining    = "draining"
	StateUnavailable = "unavailable"
)

// Target health reasons (ELBv2 TargetHealthReasonEnum) that Berth reports.
const (
	ReasonRegistrationInProgress   = "Elb.RegistrationInProgress"
	ReasonInitialHealthChecking    = "Elb.InitialHealthChecking"
	ReasonResponseCodeMismatch     = "Target.ResponseCodeMismatch"
	ReasonTimeout                  = "Target.Timeout"
	ReasonFailedHealthChecks       = "Target.FailedHealthChecks"
	ReasonNotRegistered            = "Target.NotRegistered"
	ReasonNotInUse                 = "Target.NotInUse"
	ReasonDeregistrationInProgress = "Target.DeregistrationInProgress"
	ReasonHealthCheckDisabled      = "Target.HealthCheckDisabled"
)

// Descriptions AWS gives with each reason (DescribeTargetHealth's Description).
var reasonText = map[string]string{
	ReasonRegistrationInProgress:   "Target registration is in progress",
	ReasonInitialHealthChecking:    "Initial health checks in progress",
	ReasonTimeout:                  "Request timed out",
	ReasonFailedHealthChecks:       "Health checks failed",
	ReasonNotRegistered:            "Target is not registered to the target group",
	ReasonNotInUse:                 "Target group is not configured to receive traffic from the load balancer",
	ReasonDeregistrationInProgress: "Target deregistration is in progress",
	ReasonHealthCheckDisabled:      "Health checks are disabled",
}

// Describe returns AWS's description of a reason ("" for an unknown one or none).
func Describe(reason string) string { return reasonText[reason] }
