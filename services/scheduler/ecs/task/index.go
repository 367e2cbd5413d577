package task

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/wrapperspb"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ID returns the id of a task record: the last part of its ARN (either ARN format).
func ID(rec *storev1.TaskRecord) string {
	a := rec.GetTask().GetTaskArn()
	return a[strings.LastIndexByte(a, '/')+1:]
}

// Family returns the family of the task's task definition ARN, or "" when that ARN does
// not parse.
func Family(rec *storev1.TaskRecord) string {
	a, err := arn.Parse(rec.GetTask().GetTaskDefinitionArn())
	if err != nil {
		return ""
	}
	return a.Name
}

// IndexKeys returns the index keys of a task in its current state (see keys.TaskList:
// by desiredStatus and all / instance / family / service / startedBy; a dimension the
// task has no value for has no key; ListTasks reads them, as AWS's ListTasks filters),
// and keys.InstanceRunning while its lastStatus is RUNNING on an instance (the
// instance's runningTasksCount counts them).
func IndexKeys(account keys.Scope, rec *storev1.TaskRecord) []string {
	c, id, desired := rec.GetClusterName(), ID(rec), rec.GetTask().GetDesiredStatus()
	ks := []string{keys.TaskList(account, c, desired, keys.DimAll, "-", id)}
	if v := rec.GetContainerInstanceId(); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimInstance, v, id))
		if _, running := Counts(rec.GetTask().GetLastStatus()); running == 1 {
			ks = append(ks, keys.InstanceRunning(account, c, v, id))
		}
	}
	if v := Family(rec); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimFamily, v, id))
	}
	if v := rec.GetServiceName(); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimService, v, id))
	}
	if v := rec.GetTask().GetStartedBy(); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimStartedBy, v, id))
	}
	return ks
}

// WriteTxn adds to txn the write of a task record and its index keys: a create when
// old is nil (with the id → cluster mapping when the task's ARN is in the short format,
// which does not name the cluster: the mapping is read only for such ARNs), else an
// update under old's ModRevision rev, deleting the index keys old had and rec has not.
// Counters are the caller's. Nothing fails here: the txn's Commit reports a create that
// finds the task (store.ErrExists) or an update that finds it changed (store.ErrConflict).
func WriteTxn(txn *store.Txn, account keys.Scope, old *storev1.TaskRecord, rev int64, rec *storev1.TaskRecord) {
	key := keys.Task(account, rec.GetClusterName(), ID(rec))
	newKeys := IndexKeys(account, rec)
	if old == nil {
		txn.Create(key, rec)
		if a, err := arn.Parse(rec.GetTask().GetTaskArn()); err != nil || a.Cluster == "" {
			txn.Put(keys.IDCluster(account, arn.Task, ID(rec)), wrapperspb.String(rec.GetClusterName()))
		}
	} else {
		txn.Update(key, rev, rec)
		for _, k := range IndexKeys(account, old) {
			if !slices.Contains(newKeys, k) {
				txn.Delete(k)
			}
		}
	}
	oldKeys := []string(nil)
	if old != nil {
		oldKeys = IndexKeys(account, old)
	}
	for _, k := range newKeys {
		if !slices.Contains(oldKeys, k) {
			txn.PutIndex(k)
		}
	}
}
