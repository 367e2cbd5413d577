package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// FencedKV returns kv with every write fenced by a leadership term, in the wrapping style
// of etcd's namespace.KV: Put, Delete, Do of a write and every Txn carry the compare
// Fence(electionKey, createRevision) in the same etcd transaction, so a deposed leader's
// write fails whichever path it takes (its own Txn, store's helpers, another package it
// hands the KV to). Reads pass through unchanged. A write whose fence fails returns an
// error wrapping both ErrFenced and ErrPreconditionFailed, and writes nothing; a Txn whose
// own compares fail while the fence holds answers Succeeded false as usual. Do of a
// nested txn op is refused (nothing in Berth issues one).
func FencedKV(kv clientv3.KV, electionKey string, createRevision int64) clientv3.KV {
	return &fencedKV{KV: kv, key: electionKey, rev: createRevision}
}

// FencedClient is FencedKV for a Client: writes fenced, watches unchanged.
func FencedClient(c Client, electionKey string, createRevision int64) Client {
	return struct {
		clientv3.KV
		clientv3.Watcher
	}{FencedKV(c, electionKey, createRevision), c}
}

type fencedKV struct {
	clientv3.KV // Get and Compact pass through
	key         string
	rev         int64
}

// errFenced is what a write that lost its fence returns.
var errFenced = fmt.Errorf("store: %w: %w", ErrPreconditionFailed, ErrFenced)

func (f *fencedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	r, err := f.Do(ctx, clientv3.OpPut(key, val, opts...))
	if err != nil {
		return nil, err
	}
	return r.Put(), nil
}

func (f *fencedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	r, err := f.Do(ctx, clientv3.OpDelete(key, opts...))
	if err != nil {
		return nil, err
	}
	return r.Del(), nil
}

func (f *fencedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	switch {
	case op.IsGet():
		return f.KV.Do(ctx, op)
	case op.IsTxn():
		return clientv3.OpResponse{}, errors.New("store: fenced KV: a nested txn op is not supported; use Txn")
	}
	resp, err := f.Txn(ctx).Then(op).Commit()
	if err != nil {
		return clientv3.OpResponse{}, err
	}
	r := resp.Responses[0]
	if op.IsPut() {
		return (*clientv3.PutResponse)(r.GetResponsePut()).OpResponse(), nil
	}
	return (*clientv3.DeleteResponse)(r.GetResponseDeleteRange()).OpResponse(), nil
}

func (f *fencedKV) Txn(ctx context.Context) clientv3.Txn {
	return &fencedTxn{f: f, ctx: ctx}
}

// fencedTxn collects the caller's If/Then/Else (etcd's Txn takes each once) and adds the
// fence and a read of the election key, which tells a lost fence from a failed compare of
// the caller's, at Commit.
type fencedTxn struct {
	f                 *fencedKV
	ctx               context.Context //nolint:containedctx // the Txn's, as clientv3.Txn keeps it
	cmps              []clientv3.Cmp
	thens, elses      []clientv3.Op
	cif, cthen, celse bool
}

func (t *fencedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	if t.cif || t.cthen || t.celse {
		panic("store: fenced txn: If after If, Then or Else") // as clientv3's txn
	}
	t.cif = true
	t.cmps = cs
	return t
}

func (t *fencedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	if t.cthen || t.celse {
		panic("store: fenced txn: Then after Then or Else")
	}
	t.cthen = true
	t.thens = ops
	return t
}

func (t *fencedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	if t.celse {
		panic("store: fenced txn: Else after Else")
	}
	t.celse = true
	t.elses = ops
	return t
}

func (t *fencedTxn) Commit() (*clientv3.TxnResponse, error) {
	cmps := append(slices.Clone(t.cmps), Fence(t.f.key, t.f.rev))
	elses := append(slices.Clone(t.elses), clientv3.OpGet(t.f.key, clientv3.WithKeysOnly()))
	resp, err := t.f.KV.Txn(t.ctx).If(cmps...).Then(t.thens...).Else(elses...).Commit()
	if err != nil || resp.Succeeded {
		return resp, err
	}
	last := resp.Responses[len(resp.Responses)-1]
	resp.Responses = resp.Responses[:len(resp.Responses)-1]
	if kvs := last.GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].CreateRevision != t.f.rev {
		return nil, errFenced
	}
	return resp, nil
}
