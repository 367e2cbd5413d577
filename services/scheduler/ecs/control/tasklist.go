package control

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TaskKeys returns the record keys (keys.Task) of a cluster's tasks with desiredStatus
// desired (RUNNING or STOPPED) that the ListTasks index lists under dimension dim and
// value (keys.DimAll with "-" for all of them, keys.DimService with a service name, …),
// reading every page of the index: O(tasks listed), not O(cluster). It returns the
// store's error.
func TaskKeys(ctx context.Context, kv clientv3.KV, account keys.Scope, cluster, desired, dim, value string) ([]string, error) {
	var ks []string
	token := ""
	for {
		page, next, err := store.ListKeys(ctx, kv, keys.TaskList(account, cluster, desired, dim, value, ""), store.MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		for _, k := range page {
			if id, ok := keys.TaskListID(k); ok {
				ks = append(ks, keys.Task(account, cluster, id))
			}
		}
		if next == "" {
			return ks, nil
		}
		token = next
	}
}
