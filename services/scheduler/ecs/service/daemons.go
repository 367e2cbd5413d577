package service

import (
	"context"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// This file is what the managed daemons (ecs/daemon) reuse of the service machinery: a
// daemon is reconciled as a DAEMON-strategy service that is never stored at the service
// keys. The daemon package keeps the ServiceRecord in its own DaemonRecord, decides it
// with Compute and carries out the tasks' part of the plan with Execute.

// StartDeployment makes a new PRIMARY deployment id running task definition tdARN on
// rec, as UpdateService does: the former PRIMARY deployment becomes ACTIVE (its tasks are
// replaced under the deployment configuration's bounds).
func StartDeployment(rec *storev1.ServiceRecord, account keys.Scope, id, tdARN string, now time.Time) {
	startDeploymentID(rec, account, id, tdARN, false, now)
}

// Execute carries out the tasks' part of a plan Compute made for a service that is not
// stored at the service keys (a managed daemon's): it stops plan.Stop's tasks as Apply
// does and places plan.Launch's tasks, one on each of its Instances, through the Placer
// with task.PlaceTxn and the fence; td is the task definition of the launch. providerOf
// names each instance's capacity provider: its tasks are placed in that provider's pool
// and show it as capacityProviderName. It returns the ids of the tasks placed and how
// many could not be placed; the caller writes its own record.
func (r *Reconciler) Execute(ctx context.Context, plan Plan, td *storev1.TaskDefinitionRecord, providerOf map[string]string) ([]string, int, error) {
	for _, st := range plan.Stop {
		if err := r.stopTask(ctx, plan.Account, st.Task, st.Reason); err != nil {
			return nil, 0, err
		}
	}
	l := plan.Launch
	if l.Count <= 0 || len(l.Instances) == 0 || td == nil {
		return nil, 0, nil
	}
	groups, order := map[string][]string{}, []string{}
	for _, id := range l.Instances {
		p := providerOf[id]
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		groups[p] = append(groups[p], id)
	}
	var placed []string
	unplaced := 0
	for _, p := range order {
		got, count, _, err := r.launch(ctx, plan.Account, plan.Record, td, l, len(groups[p]), groups[p], p)
		if err != nil {
			return placed, unplaced, err
		}
		placed = append(placed, got...)
		unplaced += count - len(got)
	}
	return placed, unplaced, nil
}
