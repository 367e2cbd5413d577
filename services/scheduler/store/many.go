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
