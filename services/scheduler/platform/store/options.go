package store

import clientv3 "go.etcd.io/etcd/client/v3"

// DefaultMaxAttempts is how many times Mutate tries before giving up on
// revision conflicts, unless MaxAttempts says otherwise.
const DefaultMaxAttempts = 16

// Option adjusts a write (Create, Update, Delete, Mutate, MutateTxn).
type Option func(*options)

type options struct {
	guards      []clientv3.Cmp
	maxAttempts int
}

func collect(opts []Option) options {
	o := options{maxAttempts: DefaultMaxAttempts}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// If adds compares that must all hold for the write to happen, in the same
// etcd txn; when one fails the write returns ErrPreconditionFailed. Use it
// with Fence to fence a leader's writes.
func If(cmps ...clientv3.Cmp) Option {
	return func(o *options) { o.guards = append(o.guards, cmps...) }
}

// MaxAttempts bounds Mutate's tries on revision conflicts (n >= 1); values
// below 1 mean 1.
func MaxAttempts(n int) Option {
	return func(o *options) { o.maxAttempts = max(n, 1) }
}

// Fence returns the compare that holds while the election key created at
// createRevision still exists, i.e. while the caller is still the leader that
// won it (concurrency.Election's Key() and Rev() after Campaign). Pass it to
// If or Txn.If.
func Fence(electionKey string, createRevision int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(electionKey), "=", createRevision)
}
