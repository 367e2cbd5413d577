// Package awsapi holds what every AWS action the scheduler serves shares, whichever
// service it belongs to: Handle, which runs an action for the caller's (account, region)
// scope and converts its error; ToConnect, which logs an error that is not an AWS
// exception before converting it; Retry, the CAS retry loop of multi-record writes; and
// AWS timestamps as the JSON protocols write them (Epoch, FromEpoch).
package awsapi
