package control

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// runReads holds what RunTask reads before it places: the cluster record, the task
// definition its reference names and the account's settings, read by readForRun in one
// etcd txn (one round trip, one revision) instead of a Get each. Under a RunTask burst
// those Gets were a twentieth of the scheduler's CPU (client, etcd's gRPC server and
// its linearizable reads, three times a call). Each record is decoded where RunTask
// used to read it, so its errors come in the order they always did.
type runReads struct {
	cluster  *mvccpb.KeyValue // nil when absent
	settings *mvccpb.KeyValue // nil when absent
	// tdRef is the task definition reference; td is the revision it names (nil when
	// absent, or when tdOK is false: the reference cannot name one).
	tdRef string
	td    *mvccpb.KeyValue
	tdOK  bool
}

// readForRun reads, linearizably, the cluster named name (resolved by ClusterName), the
// task definition tdRef names (LookupTaskDefinition's resolution) and account's
// settings. A family without a revision names its latest ACTIVE revision, whose key
// the txn reads first: that revision is then read in a second round trip. It returns
// etcd's error as is.
func readForRun(ctx context.Context, kv clientv3.KV, account keys.Scope, name, tdRef string) (runReads, error) {
	rr := runReads{tdRef: tdRef}
	family, rev, ok := "", 0, false
	if tdRef != "" {
		family, rev, ok = parseTaskDefRef(account, tdRef)
	}
	rr.tdOK = ok
	ops := []clientv3.Op{clientv3.OpGet(keys.Cluster(account, name)), clientv3.OpGet(keys.Settings(account))}
	switch {
	case ok && rev == 0:
		ops = append(ops, latestActiveOp(account, family))
	case ok:
		ops = append(ops, clientv3.OpGet(keys.TaskDefinition(account, family, rev)))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return runReads{}, err
	}
	first := func(i int) *mvccpb.KeyValue {
		if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return kvs[0]
		}
		return nil
	}
	rr.cluster, rr.settings = first(0), first(1)
	switch {
	case ok && rev == 0:
		n := latestActiveRevision(resp.Responses[2].GetResponseRange().GetKvs())
		if n == 0 {
			rr.tdOK = false // no ACTIVE revision: nothing to read
			break
		}
		r, err := kv.Get(ctx, keys.TaskDefinition(account, family, n))
		if err != nil {
			return runReads{}, err
		}
		if len(r.Kvs) > 0 {
			rr.td = r.Kvs[0]
		}
	case ok:
		rr.td = first(2)
	}
	return rr, nil
}

// decodeKV is store.Decode for a key that may be absent (nil kv: T's nil).
func decodeKV[T proto.Message](kv *mvccpb.KeyValue) (T, error) {
	if kv == nil {
		var zero T
		return zero, nil
	}
	return store.Decode[T](kv)
}

// activeCluster is ActiveCluster on the records read: the cluster, which must be ACTIVE
// (ClusterNotFoundException otherwise).
func (rr runReads) activeCluster() (*storev1.ClusterRecord, error) {
	rec, err := decodeKV[*storev1.ClusterRecord](rr.cluster)
	if err != nil {
		return nil, err
	}
	if err := checkActiveCluster(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// runnable is RunnableTaskDefinition on the records read: the definition and its tags,
// with its errors.
func (rr runReads) runnable() (*ecsv1.TaskDefinition, []*ecsv1.Tag, error) {
	if rr.tdRef == "" {
		return nil, nil, awserr.InvalidParameterf("taskDefinition is required.")
	}
	var rec *storev1.TaskDefinitionRecord
	if rr.tdOK {
		var err error
		if rec, err = decodeKV[*storev1.TaskDefinitionRecord](rr.td); err != nil {
			return nil, nil, err
		}
	}
	if err := checkRunnable(rec); err != nil {
		return nil, nil, err
	}
	return rec.GetTaskDefinition(), rec.GetTags(), nil
}

// longARN is LongARNFormat on the settings read.
func (rr runReads) longARN(setting string) (bool, error) {
	rec, err := decodeKV[*ecsv1.ListAccountSettingsResponse](rr.settings)
	if err != nil {
		return false, err
	}
	return longARNIn(rec, setting), nil
}
