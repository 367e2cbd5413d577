// Package task is the task domain below the control plane's packages: how a task record
// is built, for RunTask and StartTask as for a service (NewRecord, with its tags: Tags),
// its index keys and the transaction builders that write it
// (WriteTxn, PlaceTxn, StopTxn), its pending/running counters, and its state transitions
// as pure functions (ApplyStateChange), so they are table-tested without etcd.
//
// control, service, reaper and agentsession build on it; it imports none of them (nor
// app), only the lower packages (placement, and platform's keys, store, awsapi, awserr and arn), which a
// test checks.
package task
