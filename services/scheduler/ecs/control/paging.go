package control

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// maxResults validates an ECS maxResults (1–100) and returns the page size, 100 when
// absent, as the List* actions document.
func maxResults(v *int32) (int, error) {
	if v == nil {
		return 100, nil
	}
	if *v < 1 || *v > 100 {
		return 0, awserr.InvalidParameterf("maxResults must be between 1 and 100.")
	}
	return int(*v), nil
}

// pageKeys lists up to limit keys that start with within (any string below store.Prefix,
// not necessarily ending in '/'), in key order or in reverse, after the position in token.
// It returns the keys and the token of the next page ("" at the end). etcd is asked for
// limit+1 keys, values not read; note that etcd still visits (in memory) the keys after
// the page to count them, so use pageIDKeys for long id-keyed indexes.
func pageKeys(ctx context.Context, kv clientv3.KV, within string, limit int, token string, desc bool) ([]string, string, error) {
	return pageKeysOpt(ctx, kv, within, limit, token, desc, false)
}

// pageIDKeys is pageKeys for keys that end in 32-hex-digit ids (task and instance ids),
// read with firstKeys so a page costs O(limit) however many keys follow it.
func pageIDKeys(ctx context.Context, kv clientv3.KV, within string, limit int, token string) ([]string, string, error) {
	return pageKeysOpt(ctx, kv, within, limit, token, false, true)
}

func pageKeysOpt(ctx context.Context, kv clientv3.KV, within string, limit int, token string, desc, ids bool) ([]string, string, error) {
	start, end := within, clientv3.GetPrefixRangeEnd(within)
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		last := string(b)
		if err != nil || len(last) <= len(within) || !strings.HasPrefix(last, within) {
			return nil, "", awserr.InvalidParameterf("Invalid nextToken.")
		}
		if desc {
			end = last
		} else {
			start = last + "\x00"
		}
	}
	var kvs []*mvccpb.KeyValue
	if desc {
		resp, err := kv.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)+1), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		if err != nil {
			return nil, "", err
		}
		kvs = resp.Kvs
	} else if ids {
		var err error
		if kvs, err = firstKeys(ctx, kv, within, start, end, limit+1); err != nil {
			return nil, "", err
		}
	} else {
		resp, err := kv.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)+1), clientv3.WithKeysOnly())
		if err != nil {
			return nil, "", err
		}
		kvs = resp.Kvs
	}
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

// idSpace is the number of 32-hex-digit ids (2^128).
var idSpace = new(big.Int).Lsh(big.NewInt(1), 128)

// firstKeys returns the first n keys (keys only) of [start, end), where every key is
// within followed by an id.
//
// An etcd range with a limit still visits every key of the range to report the total
// count, so a plain limited range costs O(keys after start), not O(n). Task and instance
// ids are 32 random hex digits, so firstKeys reads contiguous windows of the id space
// instead: a small first window (1/256 of the space) measures the density, the next one
// is sized to hold about twice the keys still needed, and windows grow until n keys are
// read or the range ends. The windows tile [start, end) with no gap, so no key is ever
// skipped whatever the ids look like; only the cost depends on ids being uniform: about
// two or three round trips of O(n) each (two when the index is sparse). Keys whose id is not 32 hex digits make it fall back to
// one limited range.
func firstKeys(ctx context.Context, kv clientv3.KV, within, start, end string, n int) ([]*mvccpb.KeyValue, error) {
	lo := new(big.Int)
	if start != within {
		id := strings.TrimSuffix(start[len(within):], "\x00")
		if _, ok := lo.SetString(id, 16); !ok || len(id) != 32 {
			resp, err := kv.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(n)), clientv3.WithKeysOnly())
			if err != nil {
				return nil, err
			}
			return resp.Kvs, nil
		}
		lo.Add(lo, big.NewInt(1))
	}
	w := new(big.Int).Rsh(idSpace, 8)
	var out []*mvccpb.KeyValue
	from := start
	for {
		hi := new(big.Int).Add(lo, w)
		to := end
		last := hi.Cmp(idSpace) >= 0
		if !last {
			to = within + fmt.Sprintf("%032x", hi)
		}
		resp, err := kv.Get(ctx, from, clientv3.WithRange(to), clientv3.WithLimit(int64(n-len(out))), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Kvs...)
		if len(out) >= n || last {
			return out, nil
		}
		// Size the next window from the density seen: need/density, doubled; at least
		// twice, at most 64 times the last window; 256 times when it was empty.
		need := int64(n - len(out))
		next := new(big.Int).Lsh(w, 8)
		if resp.Count > 0 {
			est := new(big.Int).Div(new(big.Int).Mul(w, big.NewInt(2*need)), big.NewInt(resp.Count))
			next = est
			if two := new(big.Int).Lsh(w, 1); next.Cmp(two) < 0 {
				next = two
			}
			if most := new(big.Int).Lsh(w, 6); next.Cmp(most) > 0 {
				next = most
			}
		}
		lo, w, from = hi, next, to
	}
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
		if err := decodeGets(resp.Responses, out[lo:hi], revs[lo:hi]); err != nil {
			return nil, nil, err
		}
	}
	return out, revs, nil
}

// decodeGets decodes the Get responses rs of a transaction into out (and their mod
// revisions into revs, when not nil), leaving the entries of absent keys nil.
func decodeGets[T proto.Message](rs []*etcdserverpb.ResponseOp, out []T, revs []int64) error {
	for i, r := range rs {
		kvs := r.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		var zero T
		msg := zero.ProtoReflect().New().Interface().(T)
		if err := proto.Unmarshal(kvs[0].Value, msg); err != nil {
			return err
		}
		out[i] = msg
		if revs != nil {
			revs[i] = kvs[0].ModRevision
		}
	}
	return nil
}

// countAndGetMany reads whether key exists and the records at ks (at most
// maxTxnOps-1 of them) in one transaction, so at one revision and in one round trip: a
// nil entry for an absent key, as getMany.
func countAndGetMany[T proto.Message](ctx context.Context, kv clientv3.KV, key string, ks []string) (bool, []T, error) {
	ops := make([]clientv3.Op, 0, len(ks)+1)
	ops = append(ops, clientv3.OpGet(key, clientv3.WithCountOnly()))
	for _, k := range ks {
		ops = append(ops, clientv3.OpGet(k))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, nil, err
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return false, nil, nil
	}
	out := make([]T, len(ks))
	if err := decodeGets(resp.Responses[1:], out, nil); err != nil {
		return false, nil, err
	}
	return true, out, nil
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
