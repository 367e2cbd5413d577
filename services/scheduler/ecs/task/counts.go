package task

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Counts returns how a task with this lastStatus counts in an instance's (and so its
// cluster's) pendingTasksCount (PROVISIONING, PENDING, ACTIVATING) and runningTasksCount
// (RUNNING): (1, 0), (0, 1), or (0, 0) for any other status.
func Counts(lastStatus string) (pending, running int32) {
	switch lastStatus {
	case "PROVISIONING", "PENDING", "ACTIVATING":
		return 1, 0
	case "RUNNING":
		return 0, 1
	}
	return 0, 0
}

// ActiveDelta returns the change in an instance's active tasks (pending plus running,
// see Counts) when a task's lastStatus moves from old to new ("" for a task that did not
// exist): 1, -1 or 0. PENDING to RUNNING is 0: the instance record is not written for it.
func ActiveDelta(old, new string) int32 {
	op, or := Counts(old)
	np, nr := Counts(new)
	return np + nr - op - or
}

// ApplyInstanceDelta adjusts an instance record's active_tasks for a task moving from
// lastStatus old to new ("" for a task that did not exist); it never goes below zero.
// The split into pending and running is not stored: a RUNNING task has its
// keys.InstanceRunning key instead (IndexKeys), and FillCounts derives both.
func ApplyInstanceDelta(rec *storev1.ContainerInstanceRecord, old, new string) {
	rec.ActiveTasks = max(rec.ActiveTasks+ActiveDelta(old, new), 0)
}

// FillCounts sets the pendingTasksCount and runningTasksCount of each instance record's
// container_instance (nil records are skipped), as DescribeContainerInstances shows them: running is the count of
// the instance's keys.InstanceRunning keys, pending active_tasks minus running (never
// below zero). It reads the counts in one transaction of count-only ranges per 100
// records, after the records themselves were read: a task that stopped in between can
// show as pending until the next read. It changes nothing in etcd. Errors: etcd's.
func FillCounts(ctx context.Context, kv clientv3.KV, account keys.Scope, recs ...*storev1.ContainerInstanceRecord) error {
	recs = slices.DeleteFunc(slices.Clone(recs), func(r *storev1.ContainerInstanceRecord) bool { return r == nil })
	for lo := 0; lo < len(recs); lo += 100 {
		chunk := recs[lo:min(lo+100, len(recs))]
		ops := make([]clientv3.Op, len(chunk))
		for i, r := range chunk {
			prefix := keys.InstanceRunning(account, r.GetClusterName(), instanceIDOf(r), "")
			ops[i] = clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		}
		resp, err := kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("task: count running tasks: %w", err)
		}
		for i, r := range chunk {
			running := int32(resp.Responses[i].GetResponseRange().GetCount())
			ci := r.GetContainerInstance()
			if ci == nil {
				continue
			}
			ci.RunningTasksCount = running
			ci.PendingTasksCount = max(r.GetActiveTasks()-running, 0)
		}
	}
	return nil
}

// instanceIDOf returns the id of an instance record: the last part of its ARN.
func instanceIDOf(r *storev1.ContainerInstanceRecord) string {
	a := r.GetContainerInstance().GetContainerInstanceArn()
	return a[strings.LastIndexByte(a, '/')+1:]
}
