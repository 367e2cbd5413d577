package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Page sizes for List and ListKeys.
const (
	// DefaultListLimit is the page size when the limit given is 0 or less.
	DefaultListLimit = 100
	// MaxListLimit caps the page size; larger limits are lowered to it.
	MaxListLimit = 1000
)

// List returns up to limit records whose keys start with prefix, in key
// order, after the position given by continueToken ("" for the first page),
// and the token for the next page ("" when there is none). A page reads,
// sends and decodes at most limit+1 records, however many the prefix holds;
// etcd (3.7 and before) still walks its in-memory index over the keys after
// the page to count them, tens of nanoseconds a key. Pages are read at
// different revisions: a key present throughout is returned exactly once; a
// key written between pages shows up only if it sorts after the page already
// returned.
//
// prefix must be Prefix or a KeyPrefix (ending in '/'), else ErrInvalidKey.
// A token that was not returned by a list of the same prefix returns
// ErrInvalidToken. A value that does not decode as T fails the page.
func List[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string, limit int, continueToken string) ([]Item[T], string, error) {
	kvs, next, _, err := listPage(ctx, kv, prefix, limit, continueToken, false, 0)
	if err != nil {
		return nil, "", err
	}
	items := make([]Item[T], 0, len(kvs))
	for _, kv := range kvs {
		it, err := decodeItem[T](kv)
		if err != nil {
			return nil, "", err
		}
		items = append(items, it)
	}
	return items, next, nil
}

// ListKeys is List for keys only, such as secondary index entries; values are
// not read. It returns full keys in key order and the next page's token.
func ListKeys(ctx context.Context, kv clientv3.KV, prefix string, limit int, continueToken string) ([]string, string, error) {
	kvs, next, _, err := listPage(ctx, kv, prefix, limit, continueToken, true, 0)
	if err != nil {
		return nil, "", err
	}
	keys := make([]string, len(kvs))
	for i, kv := range kvs {
		keys[i] = string(kv.Key)
	}
	return keys, next, nil
}

// listPage reads one page: keys in (token's key, end of prefix), at most
// limit of them, at revision rev (0 for the current one). It asks etcd for
// limit+1 keys to learn whether another page exists without counting. It
// returns the page, the next token and the revision read.
func listPage(ctx context.Context, kv clientv3.KV, prefix string, limit int, token string, keysOnly bool, rev int64) ([]*mvccpb.KeyValue, string, int64, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, "", 0, err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	start := prefix
	if token != "" {
		last, err := decodeToken(prefix, token)
		if err != nil {
			return nil, "", 0, err
		}
		start = last + "\x00" // the smallest key after last
	}
	opts := []clientv3.OpOption{
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)),
		clientv3.WithLimit(int64(limit) + 1),
	}
	if keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := kv.Get(ctx, start, opts...)
	if err != nil {
		return nil, "", 0, fmt.Errorf("store: list %s: %w", prefix, err)
	}
	kvs, next := resp.Kvs, ""
	if len(kvs) > limit {
		kvs = kvs[:limit]
		next = encodeToken(string(kvs[limit-1].Key))
	}
	return kvs, next, resp.Header.Revision, nil
}

// TokenAfter returns the continue token with which List and ListKeys resume right after
// key (a key under the prefix they list): for callers that filter what they list and end
// a page at the last entry they kept rather than at the last one read.
func TokenAfter(key string) string { return encodeToken(key) }

// A continue token is the last key returned, base64url-encoded. It carries
// no secret: a forged token can only move the start within the prefix, which
// decodeToken enforces.
func encodeToken(lastKey string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastKey))
}

func decodeToken(prefix, token string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", fmt.Errorf("store: list %s: %w", prefix, ErrInvalidToken)
	}
	last := string(b)
	if len(last) <= len(prefix) || !strings.HasPrefix(last, prefix) {
		return "", fmt.Errorf("store: list %s: token outside the prefix: %w", prefix, ErrInvalidToken)
	}
	return last, nil
}

// ListAll returns every record whose key starts with prefix, in key order, reading
// List's pages of MaxListLimit one after another (so at different revisions, with List's
// guarantees between pages). Errors are List's.
func ListAll[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string) ([]Item[T], error) {
	var out []Item[T]
	token := ""
	for {
		items, next, err := List[T](ctx, kv, prefix, MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}
