package service

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// taskCounts are running and pending task counts.
type taskCounts struct{ running, pending int32 }

// serviceTasks reads a service's task records (both desiredStatus values) through the
// ListTasks index: the index keys, then the records in one store.GetMany. It costs
// O(tasks of the service kept), not O(cluster). A task deleted between the two reads is
// left out.
func serviceTasks(ctx context.Context, kv clientv3.KV, account keys.Scope, cluster, name string) ([]store.Item[*storev1.TaskRecord], error) {
	var ks []string
	for _, desired := range []string{"RUNNING", "STOPPED"} {
		page, err := control.TaskKeys(ctx, kv, account, cluster, desired, keys.DimService, name)
		if err != nil {
			return nil, fmt.Errorf("service: list tasks of %s: %w", name, err)
		}
		ks = append(ks, page...)
	}
	items, err := store.GetMany[*storev1.TaskRecord](ctx, kv, ks)
	if err != nil {
		return nil, fmt.Errorf("service: read tasks of %s: %w", name, err)
	}
	return slices.DeleteFunc(items, func(it store.Item[*storev1.TaskRecord]) bool { return it.Value == nil }), nil
}

// liveCounts counts a service's tasks by lastStatus, in total and per deployment, from
// the task records themselves (serviceTasks), so tasks being stopped still count while
// they run.
func liveCounts(ctx context.Context, kv clientv3.KV, account keys.Scope, cluster, name string) (taskCounts, map[string]taskCounts, error) {
	tasks, err := serviceTasks(ctx, kv, account, cluster, name)
	if err != nil {
		return taskCounts{}, nil, err
	}
	var all taskCounts
	by := map[string]taskCounts{}
	for _, it := range tasks {
		rec := it.Value
		p, run := task.Counts(rec.GetTask().GetLastStatus())
		dep := rec.GetDeploymentId()
		if dep == "" {
			dep = rec.GetTask().GetStartedBy()
		}
		c := by[dep]
		c.pending += p
		c.running += run
		by[dep] = c
		all.pending += p
		all.running += run
	}
	return all, by, nil
}

// applyCounts writes live counts into a described service, its deployments and its
// task sets.
func applyCounts(s *ecsv1.Service, all taskCounts, by map[string]taskCounts) {
	s.RunningCount, s.PendingCount = all.running, all.pending
	for _, d := range s.GetDeployments() {
		c := by[d.GetId()]
		d.RunningCount, d.PendingCount = c.running, c.pending
	}
	for _, set := range s.GetTaskSets() {
		c := by[set.GetId()]
		set.RunningCount, set.PendingCount = c.running, c.pending
	}
}
