package task

import (
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestCounts: PROVISIONING, PENDING and ACTIVATING count as pending, RUNNING as running,
// every other status (and a task that does not exist, "") as neither.
func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		status           string
		pending, running int32
	}{
		{"", 0, 0}, {"PROVISIONING", 1, 0}, {"PENDING", 1, 0}, {"ACTIVATING", 1, 0}, {"RUNNING", 0, 1},
		{"DEACTIVATING", 0, 0}, {"STOPPING", 0, 0}, {"DEPROVISIONING", 0, 0}, {"STOPPED", 0, 0}, {"BOGUS", 0, 0},
	} {
		if p, r := Counts(tc.status); p != tc.pending || r != tc.running {
			t.Errorf("Counts(%q) = (%d, %d), want (%d, %d)", tc.status, p, r, tc.pending, tc.running)
		}
	}
}

// TestApplyInstanceDelta: an instance's counters follow a task from one status to
// another, and never go below zero (a count that missed a task stays at 0).
func TestApplyInstanceDelta(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		pending, running     int32 // before
		old, new             string
		wantPending, wantRun int32
	}{
		{"placed", 0, 0, "", "PENDING", 1, 0},
		{"started", 2, 1, "PENDING", "RUNNING", 1, 2},
		{"stopped running", 0, 3, "RUNNING", "STOPPED", 0, 2},
		{"stopped pending", 1, 0, "ACTIVATING", "STOPPED", 0, 0},
		{"pending to pending", 1, 0, "PROVISIONING", "PENDING", 1, 0},
		{"never below zero", 0, 0, "RUNNING", "STOPPED", 0, 0},
		{"stopped to stopped", 4, 5, "STOPPED", "STOPPED", 4, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ci := &ecsv1.ContainerInstance{PendingTasksCount: tc.pending, RunningTasksCount: tc.running}
			ApplyInstanceDelta(ci, tc.old, tc.new)
			if ci.GetPendingTasksCount() != tc.wantPending || ci.GetRunningTasksCount() != tc.wantRun {
				t.Errorf("instance counts = (%d, %d), want (%d, %d)", ci.GetPendingTasksCount(), ci.GetRunningTasksCount(), tc.wantPending, tc.wantRun)
			}
		})
	}
}
