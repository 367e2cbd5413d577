package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Get reads the record at key and returns it with its ModRevision. The read
// is linearizable. It returns ErrNotFound when the key holds nothing,
// ErrInvalidKey for a malformed key, and an error when the value does not
// decode as T. T is a message pointer type such as *ecsv1.Task.
func Get[T proto.Message](ctx context.Context, kv clientv3.KV, key string) (T, int64, error) {
	var zero T
	cur, err := getRaw(ctx, kv, key)
	if err != nil {
		return zero, 0, err
	}
	if cur == nil {
		return zero, 0, fmt.Errorf("store: get %s: %w", key, ErrNotFound)
	}
	msg, err := decode[T](cur)
	if err != nil {
		return zero, 0, err
	}
	return msg, cur.ModRevision, nil
}

// getRaw returns the key's KeyValue, or nil when absent.
func getRaw(ctx context.Context, kv clientv3.KV, key string) (*mvccpb.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	resp, err := kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

// Create writes msg at key if the key is absent and returns the record's
// ModRevision. It returns ErrExists when the key is present and
// ErrPreconditionFailed when an If compare fails.
func Create(ctx context.Context, kv clientv3.KV, key string, msg proto.Message, opts ...Option) (int64, error) {
	o := collect(opts)
	return NewTxn(kv).If(o.guards...).Create(key, msg).Commit(ctx)
}

// Update writes msg at key if the key's ModRevision is still modRevision and
// returns the new ModRevision. It returns ErrConflict when the record changed
// since, ErrNotFound when it is gone, and ErrPreconditionFailed when an If
// compare fails.
func Update(ctx context.Context, kv clientv3.KV, key string, modRevision int64, msg proto.Message, opts ...Option) (int64, error) {
	o := collect(opts)
	return NewTxn(kv).If(o.guards...).Update(key, modRevision, msg).Commit(ctx)
}

// Delete removes the record at key and returns the revision of the delete.
// With modRevision > 0 it deletes only if the record is unchanged
// (ErrConflict otherwise); with 0 it deletes whatever is there. It returns
// ErrNotFound when there is nothing to delete and ErrPreconditionFailed when
// an If compare fails. Delete index keys with a Txn instead.
func Delete(ctx context.Context, kv clientv3.KV, key string, modRevision int64, opts ...Option) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	o := collect(opts)
	if modRevision > 0 {
		return NewTxn(kv).If(o.guards...).IfModRevision(key, modRevision).Delete(key).Commit(ctx)
	}
	// Unconditional on the record: the count of deleted keys says whether it
	// was there.
	resp, err := kv.Txn(ctx).If(o.guards...).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("store: delete %s: %w", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("store: delete %s: %w", key, ErrPreconditionFailed)
	}
	if resp.Responses[0].GetResponseDeleteRange().GetDeleted() == 0 {
		return 0, fmt.Errorf("store: delete %s: %w", key, ErrNotFound)
	}
	return resp.Header.Revision, nil
}

// Mutate reads the record at key, applies fn to it and writes it back if its
// ModRevision has not changed, retrying on conflict (up to MaxAttempts, with
// a short jittered backoff) with the record re-read. It returns the record as
// written and its ModRevision.
//
// fn may run several times and must only change the message it is given. If
// fn returns ErrNoChange, or leaves the record byte-for-byte unchanged,
// nothing is written and Mutate returns the stored record. Any other error
// from fn is returned as is, with nothing written. Mutate returns ErrNotFound
// when the key holds nothing (also when it is deleted between tries),
// ErrConflict after the last attempt, and ErrPreconditionFailed at once when
// an If compare fails.
func Mutate[T proto.Message](ctx context.Context, kv clientv3.KV, key string, fn func(T) error, opts ...Option) (T, int64, error) {
	return MutateTxn(ctx, kv, key, func(msg T, _ *Txn) error { return fn(msg) }, opts...)
}

// MutateTxn is Mutate where fn also gets the Txn that will write the record,
// to add index writes and compares that must commit with it (for example
// Delete(oldIndexKey).PutIndex(newIndexKey)). Each attempt gets a fresh Txn;
// fn must not Commit it. If fn leaves the record unchanged but adds writes,
// those are committed under the record's revision compare and the record
// itself is not rewritten.
func MutateTxn[T proto.Message](ctx context.Context, kv clientv3.KV, key string, fn func(T, *Txn) error, opts ...Option) (T, int64, error) {
	var zero T
	o := collect(opts)
	cur, err := getRaw(ctx, kv, key)
	if err != nil {
		return zero, 0, err
	}
	for attempt := 1; ; attempt++ {
		if cur == nil {
			return zero, 0, fmt.Errorf("store: mutate %s: %w", key, ErrNotFound)
		}
		msg, err := decode[T](cur)
		if err != nil {
			return zero, 0, err
		}
		txn := NewTxn(kv).If(o.guards...)
		if err := fn(msg, txn); err != nil {
			if errors.Is(err, ErrNoChange) {
				stored, err := decode[T](cur)
				return stored, cur.ModRevision, err
			}
			return zero, 0, err
		}
		data, err := marshal(msg)
		if err != nil {
			return zero, 0, fmt.Errorf("store: mutate %s: %w", key, err)
		}
		unchanged := bytes.Equal(data, cur.Value)
		if unchanged && len(txn.ops) == 0 && len(txn.checks) == 0 {
			return msg, cur.ModRevision, nil
		}
		txn.IfModRevision(key, cur.ModRevision)
		if !unchanged {
			txn.putRaw(key, data)
		}
		rev, current, err := txn.commit(ctx)
		switch {
		case err == nil:
			if unchanged {
				rev = cur.ModRevision
			}
			return msg, rev, nil
		case !errors.Is(err, ErrConflict):
			return zero, 0, err
		case attempt >= o.maxAttempts:
			return zero, 0, fmt.Errorf("store: mutate %s: gave up after %d attempts: %w", key, attempt, err)
		}
		// The failed txn read the record's current state atomically; use it
		// instead of another Get.
		cur = current[key]
		if err := Sleep(ctx, Backoff(attempt)); err != nil {
			return zero, 0, fmt.Errorf("store: mutate %s: %w", key, err)
		}
	}
}

// Backoff returns a jittered wait before retry number attempt (1-based) of a CAS loop:
// between half and all of 1ms doubled per attempt, capped at 64ms.
func Backoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt-1, 6)
	return d/2 + rand.N(d/2+1)
}

// Sleep waits d, or returns ctx's error as soon as ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
