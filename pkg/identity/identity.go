// Package identity is the contract between the gateway and the scheduler: the headers the
// gateway sets on every internal call after it has authenticated the caller (SigV4 or an
// agent's instance credential), and that the scheduler's caller package reads. The
// scheduler believes them only from an authenticated gateway (mTLS or loopback; see
// docs/security.md).
package identity

// Header names the gateway sets on every call to the scheduler.
const (
	// AccountHeader carries the caller's 12-digit account id.
	AccountHeader = "Berth-Account"
	// RegionHeader carries the region of the request's SigV4 credential scope (e.g.
	// "eu-west-1"), which the gateway has checked against its allow-list and the
	// scheduler serves the request in: every resource lives in one (account, region).
	RegionHeader = "Berth-Region"
	// ContainerInstanceHeader carries the container instance ARN an agent credential is
	// scoped to; absent for account-wide credentials.
	ContainerInstanceHeader = "Berth-Container-Instance"
	// RequestIDHeader carries the gateway's request id, for logs.
	RequestIDHeader = "Berth-Request-Id"
	// EndpointHeader carries the base URL the caller reached the gateway at (scheme and
	// host), which DiscoverPollEndpoint answers; may be absent.
	EndpointHeader = "Berth-Endpoint"
	// PrincipalARNHeader carries the ARN of the authenticated principal (the account's
	// root, arn:aws:iam::{account}:root, for an account access key; an assumed role for
	// session credentials), and PrincipalIDHeader its unique id, as STS
	// GetCallerIdentity answers them (Arn and UserId).
	PrincipalARNHeader = "Berth-Principal-Arn"
	PrincipalIDHeader  = "Berth-Principal-Id"
)
