package etcdembed

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// timeoutKV answers every call with err, as the in-process server answers a request
// whose context ended while it waited for the apply.
type timeoutKV struct {
	clientv3.KV
	err error
}

func (k timeoutKV) Put(context.Context, string, string, ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return nil, k.err
}

func (k timeoutKV) Txn(context.Context) clientv3.Txn { return timeoutTxn{k.err} }

type timeoutTxn struct{ err error }

func (t timeoutTxn) If(...clientv3.Cmp) clientv3.Txn        { return t }
func (t timeoutTxn) Then(...clientv3.Op) clientv3.Txn       { return t }
func (t timeoutTxn) Else(...clientv3.Op) clientv3.Txn       { return t }
func (t timeoutTxn) Commit() (*clientv3.TxnResponse, error) { return nil, t.err }

// TestInProcessContextErrors checks that the in-process client's wrappers answer an etcd
// timeout with the context's error once the context has ended (as clientv3 over gRPC
// does), and leave it, and every other error, alone while the context is live.
func TestInProcessContextErrors(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"timeout after the context ended", ended, rpctypes.ErrTimeout, context.Canceled},
		{"leader-fail timeout after the context ended", ended, rpctypes.ErrTimeoutDueToLeaderFail, context.Canceled},
		{"timeout of a live context (etcd's own)", live, rpctypes.ErrTimeout, rpctypes.ErrTimeout},
		{"another error after the context ended", ended, rpctypes.ErrTooManyOps, rpctypes.ErrTooManyOps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := ctxKV{timeoutKV{err: tc.err}}
			if _, err := kv.Put(tc.ctx, "/k", "v"); !errors.Is(err, tc.want) {
				t.Errorf("Put: %v, want %v", err, tc.want)
			}
			if _, err := kv.Txn(tc.ctx).If().Then().Else().Commit(); !errors.Is(err, tc.want) {
				t.Errorf("Txn: %v, want %v", err, tc.want)
			}
		})
	}
}
