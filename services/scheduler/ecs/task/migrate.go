package task

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// MigrateCounts brings ECS state of layout 2 (builds that stored each instance's
// pendingTasksCount and runningTasksCount in its record) to keys.LayoutVersion: each
// instance record's active_tasks becomes the sum of the two, which are cleared, and each
// task whose lastStatus is RUNNING on an instance gets its keys.InstanceRunning key.
// Each instance record changes in its own transaction (under its ModRevision) and each
// index key is put only while its task is unchanged, so replicas of this build starting
// together, or a run cut short, are safe to run again. Then it records keys.LayoutVersion
// (keys.SetLayout), and later starts return at once. Run it after keys.MigrateLayout,
// before serving, with every replica of an earlier build stopped: those keep writing
// the counts into the records. It returns how many instance records and index keys it
// wrote. Errors: etcd's, or a record that does not decode.
func MigrateCounts(ctx context.Context, kv clientv3.KV) (int, error) {
	if v, _, err := store.Get[*wrapperspb.StringValue](ctx, kv, keys.Layout()); err == nil && v.GetValue() == keys.LayoutVersion {
		return 0, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	wrote := 0
	insts, err := store.ListAll[*storev1.ContainerInstanceRecord](ctx, kv, keys.AllInstances())
	if err != nil {
		return 0, fmt.Errorf("task: migrate counts: %w", err)
	}
	for _, it := range insts {
		if ci := it.Value.GetContainerInstance(); ci.GetPendingTasksCount() == 0 && ci.GetRunningTasksCount() == 0 {
			continue
		}
		_, _, err := store.Mutate(ctx, kv, it.Key, func(r *storev1.ContainerInstanceRecord) error {
			ci := r.GetContainerInstance()
			if ci.GetPendingTasksCount() == 0 && ci.GetRunningTasksCount() == 0 {
				return store.ErrNoChange
			}
			r.ActiveTasks += ci.GetPendingTasksCount() + ci.GetRunningTasksCount()
			ci.PendingTasksCount, ci.RunningTasksCount = 0, 0
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return wrote, fmt.Errorf("task: migrate counts of %s: %w", it.Key, err)
		}
		wrote++
	}
	prefix := keys.AllTasks()
	token := ""
	for {
		items, next, err := store.List[*storev1.TaskRecord](ctx, kv, prefix, store.MaxListLimit, token)
		if err != nil {
			return wrote, fmt.Errorf("task: migrate counts: %w", err)
		}
		for _, it := range items {
			rec := it.Value
			if _, running := Counts(rec.GetTask().GetLastStatus()); running == 0 || rec.GetContainerInstanceId() == "" {
				continue
			}
			// tasks/{account}/{region}/{cluster}/{id}
			parts := strings.Split(strings.TrimPrefix(it.Key, prefix), "/")
			if len(parts) != 4 {
				continue
			}
			// Only while the task is as read: a replica that migrated first may have
			// recorded it STOPPED since (deleting its key), and a key put back then
			// would count it as running for good.
			k := keys.InstanceRunning(keys.Scope{Account: parts[0], Region: parts[1]}, rec.GetClusterName(), rec.GetContainerInstanceId(), ID(rec))
			tr, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(it.Key), "=", it.ModRevision)).
				Then(clientv3.OpPut(k, "")).Commit()
			if err != nil {
				return wrote, fmt.Errorf("task: migrate counts: %w", err)
			}
			if tr.Succeeded {
				wrote++
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	return wrote, keys.SetLayout(ctx, kv, keys.LayoutVersion)
}
