package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// GetManyChunk is how many keys GetMany reads per etcd transaction: etcd's default
// --max-txn-ops (128) caps the operations of one txn.
const GetManyChunk = 128

// GetMany reads the records at keys and returns one Item per key, in the order given:
// an absent key's Item has the Key, a nil Value and ModRevision 0. Keys are read GetManyChunk
// at a time, one txn of gets each; every chunk after the first is read at the first
// one's revision, so the result is one consistent snapshot however many keys it spans
// (etcd's ErrCompacted if that revision is compacted away meanwhile). A malformed key
// returns ErrInvalidKey before anything is read; a value that does not decode as T
// fails the call. T is a message pointer type such as *storev1.TaskRecord.
func GetMany[T proto.Message](ctx context.Context, kv clientv3.KV, keys []string) ([]Item[T], error) {
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	out := make([]Item[T], 0, len(keys))
	var rev int64
	for i := 0; i < len(keys); i += GetManyChunk {
		chunk := keys[i:min(i+GetManyChunk, len(keys))]
		ops := make([]clientv3.Op, len(chunk))
		for j, k := range chunk {
			if rev > 0 {
				ops[j] = clientv3.OpGet(k, clientv3.WithRev(rev))
			} else {
				ops[j] = clientv3.OpGet(k)
			}
		}
		resp, err := kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("store: get %d keys: %w", len(chunk), err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for j, r := range resp.Responses {
			kvs := r.GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				out = append(out, Item[T]{Key: chunk[j]})
				continue
			}
			it, err := decodeItem[T](kvs[0])
			if err != nil {
				return nil, err
			}
			out = append(out, it)
		}
	}
	return out, nil
}

// KeyRevision is a key and the revision of its last write.
type KeyRevision struct {
	// Key is the full key.
	Key string
	// ModRevision is the revision of the last write to the key.
	ModRevision int64
}

// ListRevisions is ListKeys with each key's ModRevision: one page of up to limit keys
// under prefix after continueToken, values not read, and the next page's token ("" when
// there is none). A caller that remembers revisions learns from it which records changed
// without reading them. Errors as List.
func ListRevisions(ctx context.Context, kv clientv3.KV, prefix string, limit int, continueToken string) ([]KeyRevision, string, error) {
	kvs, next, _, err := listPage(ctx, kv, prefix, limit, continueToken, true, 0)
	if err != nil {
		return nil, "", err
	}
	out := make([]KeyRevision, len(kvs))
	for i, kv := range kvs {
		out[i] = KeyRevision{Key: string(kv.Key), ModRevision: kv.ModRevision}
	}
	return out, next, nil
}

// deleteManyChunk is how many keys DeleteMany deletes per etcd txn: etcd allows a
// nested txn only the operations its parent leaves of --max-txn-ops (128 by default),
// and each key's nested txn has one.
const deleteManyChunk = 100

// DeleteMany deletes each key whose ModRevision is still the one given (whatever is
// there when it is 0), deleteManyChunk keys per etcd txn. Each key is a nested txn of its
// own (its compare, its delete), so a key that changed or is gone keeps none of the
// others from going, and each outcome is what Delete's would have been; many deletes
// cost one raft entry instead of one each. It returns one error per key, in order: nil
// (deleted), ErrConflict (changed since that revision) or ErrNotFound (nothing there).
// The second result fails the call: ErrInvalidKey for a malformed or repeated key
// (before anything is deleted), or an etcd error (chunks before it were committed).
func DeleteMany(ctx context.Context, kv clientv3.KV, items []KeyRevision) ([]error, error) {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if err := checkKey(it.Key); err != nil {
			return nil, err
		}
		if seen[it.Key] {
			return nil, fmt.Errorf("store: delete %s twice: %w", it.Key, ErrInvalidKey)
		}
		seen[it.Key] = true
	}
	out := make([]error, 0, len(items))
	for i := 0; i < len(items); i += deleteManyChunk {
		chunk := items[i:min(i+deleteManyChunk, len(items))]
		ops := make([]clientv3.Op, len(chunk))
		for j, it := range chunk {
			var cmps []clientv3.Cmp
			if it.ModRevision > 0 {
				cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(it.Key), "=", it.ModRevision)}
			}
			// Else: a count says whether the key is gone or changed.
			ops[j] = clientv3.OpTxn(cmps, []clientv3.Op{clientv3.OpDelete(it.Key)}, []clientv3.Op{clientv3.OpGet(it.Key, clientv3.WithCountOnly())})
		}
		resp, err := kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("store: delete %d keys: %w", len(chunk), err)
		}
		for j, r := range resp.Responses {
			t := r.GetResponseTxn()
			switch {
			case t.GetSucceeded() && t.GetResponses()[0].GetResponseDeleteRange().GetDeleted() > 0:
				out = append(out, nil)
			case t.GetSucceeded():
				out = append(out, fmt.Errorf("store: delete %s: %w", chunk[j].Key, ErrNotFound))
			case t.GetResponses()[0].GetResponseRange().GetCount() == 0:
				out = append(out, fmt.Errorf("store: delete %s: %w", chunk[j].Key, ErrNotFound))
			default:
				out = append(out, fmt.Errorf("store: delete %s at revision %d: %w", chunk[j].Key, chunk[j].ModRevision, ErrConflict))
			}
		}
	}
	return out, nil
}
