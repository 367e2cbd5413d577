package task

import (
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
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

// TestApplyInstanceDelta: an instance's active tasks follow a task from one status to
// another; PENDING to RUNNING leaves them as they are (the record is not written for it),
// and they never go below zero (a count that missed a task stays at 0).
func TestApplyInstanceDelta(t *testing.T) {
	for _, tc := range []struct {
		name       string
		active     int32 // before
		old, new   string
		wantActive int32
	}{
		{"placed", 0, "", "PENDING", 1},
		{"started", 3, "PENDING", "RUNNING", 3},
		{"stopped running", 3, "RUNNING", "STOPPED", 2},
		{"stopped pending", 1, "ACTIVATING", "STOPPED", 0},
		{"running to stopping", 2, "RUNNING", "DEACTIVATING", 1},
		{"pending to pending", 1, "PROVISIONING", "PENDING", 1},
		{"never below zero", 0, "RUNNING", "STOPPED", 0},
		{"stopped to stopped", 9, "STOPPED", "STOPPED", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &storev1.ContainerInstanceRecord{ContainerInstance: &ecsv1.ContainerInstance{}, ActiveTasks: tc.active}
			ApplyInstanceDelta(rec, tc.old, tc.new)
			if rec.GetActiveTasks() != tc.wantActive {
				t.Errorf("active tasks = %d, want %d", rec.GetActiveTasks(), tc.wantActive)
			}
			if ci := rec.GetContainerInstance(); ci.GetPendingTasksCount() != 0 || ci.GetRunningTasksCount() != 0 {
				t.Errorf("stored counts (%d, %d), want none", ci.GetPendingTasksCount(), ci.GetRunningTasksCount())
			}
		})
	}
}
