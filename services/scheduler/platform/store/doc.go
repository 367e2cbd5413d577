// Package store keeps the scheduler's typed records in etcd: protobuf values
// under keys below Prefix ("/berth/v1/"), read with Get and List, written with
// compare-and-swap on ModRevision (Create, Update, Mutate, Delete, Txn), and
// followed with Watch. It owns key syntax, value encoding and the
// optimistic-concurrency rules; it does not know what the records mean.
//
// Records and revisions: every write returns the etcd revision it happened at,
// which is the record's new ModRevision. An update passes back the
// ModRevision it read; a concurrent writer makes it fail with ErrConflict
// and the caller re-reads (Mutate does that loop). Create-if-absent compares
// CreateRevision == 0 and fails with ErrExists.
//
// Secondary indexes are keys with empty values written in the same Txn as the
// record (Txn.PutIndex, Txn.Delete), listed with ListKeys; a list by index
// reads O(page) keys and values, never a scan of the records (etcd itself
// counts the index keys after the page in memory, see List).
//
// Fencing: every write takes extra etcd compares (the If option, Txn.If).
// The leader passes Fence(electionKey, electionRev) so that a deposed leader's
// writes fail with ErrPreconditionFailed instead of landing. A failed extra
// compare is never retried, unlike a revision conflict.
//
// Values are encoded with deterministic proto.Marshal, so an unchanged record
// encodes to the same bytes and Mutate can skip writing it.
//
// Every function takes the small etcd interfaces (clientv3.KV, and Client for
// Watch) rather than *clientv3.Client: metrics, tracing or namespacing wrap
// those interfaces without this package knowing.
package store
