// Package awsapi holds what every AWS action the scheduler serves shares, whichever
// service it belongs to: Handle, the one way an action's Connect method runs (the
// caller's (account, region) scope in, its error converted and, when it is not an AWS
// exception, logged out), with Requires for a precondition of all of a service's
// actions; ToConnect, which logs an error that is not an AWS exception before converting
// it; Unsupported, the interceptor that answers the actions a handler lacks with the
// service's exception; Retry, the CAS retry loop of multi-record writes; and AWS
// timestamps as the JSON protocols write them (Epoch, FromEpoch).
package awsapi
