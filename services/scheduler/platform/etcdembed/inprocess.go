package etcdembed

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A request whose context ends while etcd applies it fails differently in process: over
// gRPC the client sees its own context end (context.Canceled, DeadlineExceeded), while
// the in-process server, which waits for the apply under that context, answers with its
// timeout errors. Callers tell a caller's cancellation from an etcd that cannot commit by
// the context error (awserr's "store unavailable", the leader loop's exit), so the
// in-process client answers as the gRPC one does: these wrappers return ctx.Err() for an
// etcd timeout once ctx has ended (etcd's cancellation, codes.Canceled, already comes back
// from clientv3 as ctx.Err()).

// ctxErr returns ctx.Err() when ctx has ended and err is etcd's answer to that (a timeout
// of the proposal or read it waited on), else err.
func ctxErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	for _, e := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex} {
		if errors.Is(err, e) {
			return ctx.Err()
		}
	}
	return err
}

// ctxKV is a KV whose errors go through ctxErr, with a GetStream.
type ctxKV struct{ clientv3.KV }

func (k ctxKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	r, err := k.KV.Put(ctx, key, val, opts...)
	return r, ctxErr(ctx, err)
}

func (k ctxKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	r, err := k.KV.Get(ctx, key, opts...)
	return r, ctxErr(ctx, err)
}

func (k ctxKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	r, err := k.KV.Delete(ctx, key, opts...)
	return r, ctxErr(ctx, err)
}

func (k ctxKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	r, err := k.KV.Compact(ctx, rev, opts...)
	return r, ctxErr(ctx, err)
}

func (k ctxKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	r, err := k.KV.Do(ctx, op)
	return r, ctxErr(ctx, err)
}

// GetStream answers with one chunk, the whole range read by one Get: etcd's in-process
// KV adapter has no RangeStream (it answers Unimplemented, which store would count as an
// error each time before reading in pages), and in process there is no gRPC message
// limit to chunk under; the Get walks the index once, as the stream does.
func (k ctxKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	r, err := k.KV.Get(ctx, key, opts...)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	ch := make(chan clientv3.RangeStreamResponse, 1)
	ch <- clientv3.RangeStreamResponse{RangeResponse: (*pb.RangeResponse)(r)}
	close(ch)
	return ch, nil
}

func (k ctxKV) Txn(ctx context.Context) clientv3.Txn { return &ctxTxn{Txn: k.KV.Txn(ctx), ctx: ctx} }

// ctxTxn is a Txn whose Commit error goes through ctxErr.
type ctxTxn struct {
	clientv3.Txn
	ctx context.Context //nolint:containedctx // the txn's, as clientv3's own Txn keeps it
}

func (t *ctxTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *ctxTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *ctxTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *ctxTxn) Commit() (*clientv3.TxnResponse, error) {
	r, err := t.Txn.Commit()
	return r, ctxErr(t.ctx, err)
}

// ctxLease is a Lease whose Grant and Revoke (the lease calls that go through raft)
// errors go through ctxErr.
type ctxLease struct{ clientv3.Lease }

func (l ctxLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	r, err := l.Lease.Grant(ctx, ttl)
	return r, ctxErr(ctx, err)
}

func (l ctxLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	r, err := l.Lease.Revoke(ctx, id)
	return r, ctxErr(ctx, err)
}
