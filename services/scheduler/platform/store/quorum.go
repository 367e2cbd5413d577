package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultRequestTimeout bounds one etcd request made through RequireQuorum when the
// caller's context has no earlier deadline.
const DefaultRequestTimeout = 4 * time.Second

// RequireQuorum returns kv with every request made fail fast when etcd has no quorum:
// each carries clientv3.WithRequireLeader (a member without a leader answers
// ErrNoLeader at once instead of waiting for one) and a deadline of timeout
// (DefaultRequestTimeout when zero or less) unless the caller's is earlier. The scheduler
// then answers ServerException within seconds of losing quorum, and serves again as soon
// as a leader is back, with nothing to reset.
func RequireQuorum(kv clientv3.KV, timeout time.Duration) clientv3.KV {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	return &quorumKV{KV: kv, timeout: timeout}
}

type quorumKV struct {
	clientv3.KV
	timeout time.Duration
}

func (q *quorumKV) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), q.timeout)
}

func (q *quorumKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	return q.KV.Get(ctx, key, opts...)
}

func (q *quorumKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	return q.KV.Put(ctx, key, val, opts...)
}

func (q *quorumKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	return q.KV.Delete(ctx, key, opts...)
}

func (q *quorumKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	return q.KV.Do(ctx, op)
}

func (q *quorumKV) Txn(ctx context.Context) clientv3.Txn {
	ctx, cancel := q.ctx(ctx)
	return &quorumTxn{Txn: q.KV.Txn(ctx), cancel: cancel}
}

// quorumTxn releases its deadline's timer when committed.
type quorumTxn struct {
	clientv3.Txn
	cancel context.CancelFunc
}

func (t *quorumTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *quorumTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *quorumTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *quorumTxn) Commit() (*clientv3.TxnResponse, error) {
	defer t.cancel()
	return t.Txn.Commit()
}
