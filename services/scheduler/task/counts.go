package task

import ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"

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

// CountDelta returns the change in (pending, running) when a task's lastStatus moves
// from old to new ("" for a task that did not exist).
func CountDelta(old, new string) (pending, running int32) {
	op, or := Counts(old)
	np, nr := Counts(new)
	return np - op, nr - or
}

// ApplyInstanceDelta adjusts a container instance's pendingTasksCount and
// runningTasksCount for a task moving from lastStatus old to new ("" for a task that did
// not exist); a counter never goes below zero. A cluster's counts are the sums of its
// instances' (control's DescribeClusters).
func ApplyInstanceDelta(ci *ecsv1.ContainerInstance, old, new string) {
	dp, dr := CountDelta(old, new)
	ci.PendingTasksCount = max(ci.PendingTasksCount+dp, 0)
	ci.RunningTasksCount = max(ci.RunningTasksCount+dr, 0)
}
