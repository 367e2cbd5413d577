package control

import (
	"context"
	"encoding/base64"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/services/scheduler/ecserr"
	"github.com/berthhq/berth/services/scheduler/store"
)

// maxResults validates an ECS maxResults (1–100) and returns the page size, 100 when
// absent, as the List* actions document.
func maxResults(v *int32) (int, error) {
	if v == nil {
		return 100, nil
	}
	if *v < 1 || *v > 100 {
		return 0, ecserr.InvalidParameterf("maxResults must be between 1 and 100.")
	}
	return int(*v), nil
}

// pageKeys lists up to limit keys that start with within (any string below store.Prefix,
// not necessarily ending in '/'), in key order or in reverse, after the position in token.
// It returns the keys and the token of the next page ("" at the end). A page costs
// O(limit): etcd is asked for limit+1 keys, values not read.
func pageKeys(ctx context.Context, kv clientv3.KV, within string, limit int, token string, desc bool) ([]string, string, error) {
	start, end := within, clientv3.GetPrefixRangeEnd(within)
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		last := string(b)
		if err != nil || len(last) <= len(within) || !strings.HasPrefix(last, within) {
			return nil, "", ecserr.InvalidParameterf("Invalid nextToken.")
		}
		if desc {
			end = last
		} else {
			start = last + "\x00"
		}
	}
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(limit) + 1), clientv3.WithKeysOnly()}
	if desc {
		opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	}
	resp, err := kv.Get(ctx, start, opts...)
	if err != nil {
		return nil, "", err
	}
	kvs := resp.Kvs
	next := ""
	if len(kvs) > limit {
		kvs = kvs[:limit]
		next = base64.RawURLEncoding.EncodeToString(kvs[limit-1].Key)
	}
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = string(kv.Key)
	}
	return out, next, nil
}

// lastPart returns the key's last '/'-separated part.
func lastPart(key string) string {
	return key[strings.LastIndexByte(key, '/')+1:]
}

// getMany reads the records at keys in one etcd transaction (one round trip; at most
// 100 keys, below etcd's default limit of 128 operations per transaction). Missing keys
// have nil entries.
func getMany[T proto.Message](ctx context.Context, kv clientv3.KV, keys []string) ([]T, []int64, error) {
	out := make([]T, len(keys))
	revs := make([]int64, len(keys))
	for lo := 0; lo < len(keys); lo += 100 {
		hi := min(lo+100, len(keys))
		ops := make([]clientv3.Op, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			ops = append(ops, clientv3.OpGet(k))
		}
		resp, err := kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, nil, err
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				continue
			}
			var zero T
			msg := zero.ProtoReflect().New().Interface().(T)
			if err := proto.Unmarshal(kvs[0].Value, msg); err != nil {
				return nil, nil, err
			}
			out[lo+i], revs[lo+i] = msg, kvs[0].ModRevision
		}
	}
	return out, revs, nil
}

// get is store.Get returning a nil record (and no error) when the key is absent.
func get[T proto.Message](ctx context.Context, kv clientv3.KV, key string) (T, int64, error) {
	v, rev, err := store.Get[T](ctx, kv, key)
	if err != nil {
		var zero T
		if isNotFound(err) {
			return zero, 0, nil
		}
		return zero, 0, err
	}
	return v, rev, nil
}
