package store

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Txn collects compares and writes over several keys and commits them in one
// etcd transaction: all writes happen or none do. Build it with NewTxn and the
// chaining methods, then Commit once. Errors from building (a bad key, a
// message that does not encode, a key written twice) are kept and returned
// by Commit. etcd caps a txn at 128 compares and 128 writes by default
// (--max-txn-ops); a larger one fails at Commit.
//
// A typical write of a record and its index keys:
//
//	rev, err := store.NewTxn(kv).
//		If(store.Fence(leaderKey, leaderRev)).
//		Update(taskKey, taskRev, task).
//		Delete(oldIndexKey).
//		PutIndex(newIndexKey).
//		Commit(ctx)
type Txn struct {
	kv     clientv3.KV
	guards []clientv3.Cmp
	checks []check
	ops    []clientv3.Op
	writes map[string]int // key → its op's index in ops
	err    error
}

// check is a compare on a record: its value when value is set (Recheck), else its
// revision, where rev 0 means "absent".
type check struct {
	key   string
	rev   int64
	value []byte
}

// NewTxn starts an empty transaction on kv.
func NewTxn(kv clientv3.KV) *Txn {
	return &Txn{kv: kv, writes: map[string]int{}}
}

// If adds compares that must all hold, such as Fence. When one fails, Commit
// returns ErrPreconditionFailed (if every revision compare held).
func (t *Txn) If(cmps ...clientv3.Cmp) *Txn {
	t.guards = append(t.guards, cmps...)
	return t
}

// IfAbsent requires key to hold nothing (CreateRevision == 0); otherwise
// Commit returns ErrExists.
func (t *Txn) IfAbsent(key string) *Txn {
	if t.keyOK(key) {
		t.checks = append(t.checks, check{key: key})
	}
	return t
}

// IfModRevision requires key's ModRevision to be rev (> 0); otherwise Commit
// returns ErrConflict, or ErrNotFound if the key is gone.
func (t *Txn) IfModRevision(key string, rev int64) *Txn {
	if rev <= 0 {
		t.fail(fmt.Errorf("store: txn: revision %d for %s must be positive", rev, key))
		return t
	}
	if t.keyOK(key) {
		t.checks = append(t.checks, check{key: key, rev: rev})
	}
	return t
}

// Create writes msg at key if the key is absent (IfAbsent plus Put).
func (t *Txn) Create(key string, msg proto.Message) *Txn {
	return t.IfAbsent(key).Put(key, msg)
}

// Update writes msg at key if its ModRevision is still modRevision
// (IfModRevision plus Put).
func (t *Txn) Update(key string, modRevision int64, msg proto.Message) *Txn {
	return t.IfModRevision(key, modRevision).Put(key, msg)
}

// Put writes msg at key whatever is there. Prefer Create or Update for
// records others may write.
func (t *Txn) Put(key string, msg proto.Message) *Txn {
	data, err := marshal(msg)
	if err != nil {
		t.fail(fmt.Errorf("store: txn: put %s: %w", key, err))
		return t
	}
	return t.putRaw(key, data)
}

// PutIndex writes key with an empty value: a secondary index entry, read
// back with ListKeys.
func (t *Txn) PutIndex(key string) *Txn {
	return t.putRaw(key, nil)
}

// Delete removes key if present; a missing key is not an error. Combine with
// IfModRevision to delete only an unchanged record.
func (t *Txn) Delete(key string) *Txn {
	if t.keyOK(key) && t.claim(key) {
		t.ops = append(t.ops, clientv3.OpDelete(key))
	}
	return t
}

// putRaw adds the put of data at key. data is the txn's from here on: the caller never
// changes it again (it is a fresh encoding or nil).
func (t *Txn) putRaw(key string, data []byte) *Txn {
	if t.keyOK(key) && t.claim(key) {
		// OpPut copies its value into the op; viewing data as a string saves the copy
		// string(data) would make first (one per record written).
		t.ops = append(t.ops, clientv3.OpPut(key, unsafe.String(unsafe.SliceData(data), len(data))))
	}
	return t
}

// claim records that key is written by the op about to be appended; etcd rejects a txn
// that writes a key twice, so catch it here with a clearer message.
func (t *Txn) claim(key string) bool {
	if _, ok := t.writes[key]; ok {
		t.fail(fmt.Errorf("store: txn: %s written twice: %w", key, ErrInvalidKey))
		return false
	}
	t.writes[key] = len(t.ops)
	return true
}

// Written returns the bytes t puts at key (as encoded by Put, Create or Update; empty
// for PutIndex) and true, or nil and false when t does not put key (it deletes it, or
// does not write it).
func (t *Txn) Written(key string) ([]byte, bool) {
	i, ok := t.writes[key]
	if !ok || !t.ops[i].IsPut() {
		return nil, false
	}
	return t.ops[i].ValueBytes(), true
}

// Recheck replaces the compare an earlier IfModRevision or Update put on key: with
// ModRevision == rev when value is nil (rev > 0), else with Value == value, which holds
// for a record whose revision is not known yet, such as one a txn still in flight
// writes (placement.Placer chains its group commits so). A failed value compare makes
// Commit return ErrConflict, or ErrNotFound when the key is gone. It records an error for
// Commit when t has no revision compare on key, or when rev is not positive.
func (t *Txn) Recheck(key string, rev int64, value []byte) *Txn {
	if value == nil && rev <= 0 {
		t.fail(fmt.Errorf("store: txn: revision %d for %s must be positive", rev, key))
		return t
	}
	for i := range t.checks {
		if c := &t.checks[i]; c.key == key && (c.rev != 0 || c.value != nil) {
			c.rev, c.value = rev, value
			return t
		}
	}
	t.fail(fmt.Errorf("store: txn: recheck %s: the txn has no revision compare on it: %w", key, ErrInvalidKey))
	return t
}

func (t *Txn) keyOK(key string) bool {
	if err := checkKey(key); err != nil {
		t.fail(fmt.Errorf("store: txn: %w", err))
		return false
	}
	return true
}

func (t *Txn) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// Commit runs the transaction and returns the revision it committed at,
// which is the new ModRevision of every key it wrote. When a compare fails
// nothing is written and the error wraps ErrExists (an IfAbsent key exists),
// ErrNotFound (an IfModRevision key is gone), ErrConflict (an IfModRevision
// key changed) or ErrPreconditionFailed (only an If compare failed), checked
// in the order the compares were added. etcd errors are wrapped as they are.
func (t *Txn) Commit(ctx context.Context) (int64, error) {
	rev, _, err := t.commit(ctx)
	return rev, err
}

// commit is Commit that, when a compare fails, also returns the current
// state of every key with a revision compare (absent keys missing from the
// map), read atomically with the failed compare.
func (t *Txn) commit(ctx context.Context) (int64, map[string]*mvccpb.KeyValue, error) {
	if t.err != nil {
		return 0, nil, t.err
	}
	cmps := t.compares()
	var elseOps []clientv3.Op
	seen := map[string]bool{}
	for _, c := range t.checks {
		if !seen[c.key] {
			seen[c.key] = true
			elseOps = append(elseOps, clientv3.OpGet(c.key))
		}
	}

	resp, err := t.kv.Txn(ctx).If(cmps...).Then(t.ops...).Else(elseOps...).Commit()
	if err != nil {
		return 0, nil, fmt.Errorf("store: txn: %w", err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil, nil
	}
	current := make(map[string]*mvccpb.KeyValue, len(elseOps))
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			current[string(kv.Key)] = kv
		}
	}
	for _, c := range t.checks {
		kv := current[c.key]
		switch {
		case c.value != nil && kv == nil:
			return 0, current, fmt.Errorf("store: txn: %s: %w", c.key, ErrNotFound)
		case c.value != nil && string(kv.Value) != string(c.value):
			return 0, current, fmt.Errorf("store: txn: %s at revision %d does not hold the value expected: %w", c.key, kv.ModRevision, ErrConflict)
		case c.value != nil:
		case c.rev == 0 && kv != nil:
			return 0, current, fmt.Errorf("store: txn: %s: %w", c.key, ErrExists)
		case c.rev != 0 && kv == nil:
			return 0, current, fmt.Errorf("store: txn: %s: %w", c.key, ErrNotFound)
		case c.rev != 0 && kv.ModRevision != c.rev:
			return 0, current, fmt.Errorf("store: txn: %s at revision %d, expected %d: %w", c.key, kv.ModRevision, c.rev, ErrConflict)
		}
	}
	if len(t.guards) == 0 {
		// Unreachable: etcd said a compare failed but every one holds.
		return 0, current, errors.New("store: txn: compare failed but none of them fails on re-read")
	}
	return 0, current, fmt.Errorf("store: txn: %w", ErrPreconditionFailed)
}

// compares returns the txn's etcd compares: its checks (by value: Value; absent:
// CreateRevision 0; else ModRevision), then its If guards.
func (t *Txn) compares() []clientv3.Cmp {
	cmps := make([]clientv3.Cmp, 0, len(t.checks)+len(t.guards))
	for _, c := range t.checks {
		if c.value != nil {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(c.key), "=", string(c.value)))
		} else if c.rev == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev))
		}
	}
	return append(cmps, t.guards...)
}

// Size returns how many of etcd's --max-txn-ops the txn uses: the larger of its writes
// and its compares (etcd bounds each separately; a failed compare's reads are at most
// its compares).
func (t *Txn) Size() int {
	return max(len(t.ops), len(t.checks)+len(t.guards))
}

// Err returns the first error building the txn met (what Commit would return before
// sending anything), or nil.
func (t *Txn) Err() error { return t.err }

// Merge adds o's compares and writes to t, so that both commit in one etcd txn; o must
// be on the same KV and is not to be committed itself. It fails, changing nothing, with
// o's building error, or wrapping ErrInvalidKey when o writes a key t writes.
func (t *Txn) Merge(o *Txn) error {
	if o.err != nil {
		return o.err
	}
	for k := range o.writes {
		if _, ok := t.writes[k]; ok {
			return fmt.Errorf("store: txn: %s written twice: %w", k, ErrInvalidKey)
		}
	}
	for k, i := range o.writes {
		t.writes[k] = len(t.ops) + i
	}
	t.guards = append(t.guards, o.guards...)
	t.checks = append(t.checks, o.checks...)
	t.ops = append(t.ops, o.ops...)
	return nil
}

// CommitEach commits txns (all on kv) in one etcd transaction, each as a nested
// transaction with its own compares, so each is written or not on its own, as if it had
// been committed alone: a group commit of independent writes (one raft entry, one round
// trip). It returns the revision and one error per txn: nil when it was written,
// wrapping ErrConflict when one of its compares failed (which one is not read: commit it
// alone to learn). It fails for them all, writing nothing, when a txn holds a building
// error, two txns write one key (etcd refuses a txn that does), or etcd fails. The
// nested txns count against etcd's --max-txn-ops: len(txns) at the top, and each
// nested one's Size against what is left.
func CommitEach(ctx context.Context, kv clientv3.KV, txns []*Txn) (int64, []error, error) {
	written := map[string]bool{}
	ops := make([]clientv3.Op, 0, len(txns))
	for _, t := range txns {
		if t.err != nil {
			return 0, nil, t.err
		}
		for k := range t.writes {
			if written[k] {
				return 0, nil, fmt.Errorf("store: txn: %s written twice: %w", k, ErrInvalidKey)
			}
			written[k] = true
		}
		ops = append(ops, clientv3.OpTxn(t.compares(), t.ops, nil))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, nil, fmt.Errorf("store: txn of %d: %w", len(txns), err)
	}
	if !resp.Succeeded {
		// Only compares kv adds (none of ours is at the top) can fail the whole.
		return 0, nil, fmt.Errorf("store: txn of %d: %w", len(txns), ErrPreconditionFailed)
	}
	errs := make([]error, len(txns))
	for i, r := range resp.Responses {
		if !r.GetResponseTxn().GetSucceeded() {
			errs[i] = fmt.Errorf("store: txn %d of %d: %w", i+1, len(txns), ErrConflict)
		}
	}
	return resp.Header.Revision, errs, nil
}
