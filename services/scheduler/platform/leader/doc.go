// Package leader elects one scheduler replica to run the leader-only loops (placement of
// service tasks, reconciliation, the reaper, garbage collection), with etcd's
// concurrency.Session and concurrency.Election. Leadership is tied to the session's
// lease: when the session ends (lease expired, revoked, etcd unreachable past the TTL)
// the leader's context is cancelled at once, and every leader write carries Term.Fence, a
// compare on the election key's revision, so a deposed leader's late writes fail with
// store.ErrPreconditionFailed instead of landing.
package leader
