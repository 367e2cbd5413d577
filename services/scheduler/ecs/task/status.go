package task

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
)

// A task's desiredStatus values (AWS's Task.desiredStatus: RUNNING or STOPPED).
const (
	DesiredRunning = "RUNNING"
	DesiredStopped = "STOPPED"
)

// statusRank orders task statuses; status only moves forward.
var statusRank = map[string]int{
	"PROVISIONING": 0, "PENDING": 1, "ACTIVATING": 2, "RUNNING": 3,
	"DEACTIVATING": 4, "STOPPING": 5, "DEPROVISIONING": 6, "STOPPED": 7,
}

// StatusRank returns the place of a task or container lastStatus in ECS's lifecycle
// (PROVISIONING 0, PENDING 1, ACTIVATING 2, RUNNING 3, DEACTIVATING 4, STOPPING 5,
// DEPROVISIONING 6, STOPPED 7; AWS's "Task lifecycle"): a status only moves to one of
// equal or higher rank. An unknown status ranks 0 (ValidStatus tells them apart).
func StatusRank(status string) int { return statusRank[status] }

// ValidStatus reports whether status is one of the task lifecycle's lastStatus values
// (StatusRank's).
func ValidStatus(status string) bool {
	_, ok := statusRank[status]
	return ok
}

// Advances reports whether a report of status reported moves a task in lastStatus on:
// lastStatus only moves forward (a report of the same status still carries container,
// health and attachment updates), and a STOPPED task stays as it is.
func Advances(lastStatus, reported string) bool {
	return lastStatus != "STOPPED" && statusRank[reported] >= statusRank[lastStatus]
}

// ApplyStateChange applies a task state change reported by an agent to rec, as of now
// (the default for timestamps the report does not carry). lastStatus moves only forward:
// a report older than rec's status, or any report once rec is STOPPED, changes nothing
// and returns changed false. Otherwise it sets lastStatus, merges the containers'
// lastStatus (forward only), exitCode, reason, runtimeId, health, image digest and
// network bindings and interfaces, merges the attachments (mergeAttachments), sets
// pullStartedAt/pullStoppedAt when reported, startedAt (now by default) and connectivity
// CONNECTED on RUNNING, healthStatus when reported, stoppingAt from STOPPING on, and on
// STOPPED executionStoppedAt, stoppedAt, desiredStatus STOPPED and the report's stopCode
// and stoppedReason unless the task has them already (a user's stop wins); a timestamp
// already set is kept. It increments the task's version and returns the statuses before
// and after (both rec's when nothing changed). ch's status is the caller's to validate (ValidStatus).
func ApplyStateChange(rec *storev1.TaskRecord, ch *agentv1.TaskStateChange, now time.Time) (oldStatus, newStatus string, changed bool) {
	t := rec.GetTask()
	oldStatus, newStatus = t.GetLastStatus(), ch.GetLastStatus()
	if !Advances(oldStatus, newStatus) {
		return oldStatus, oldStatus, false
	}
	t.LastStatus = proto.String(newStatus)
	applyContainerStates(t, ch.GetContainers())
	mergeAttachments(t, ch.GetAttachments())
	setTime := func(dst **float64, ts *timestamppb.Timestamp, def bool) {
		if *dst != nil {
			return
		}
		if ts != nil {
			*dst = proto.Float64(awsapi.Epoch(ts.AsTime()))
		} else if def {
			*dst = proto.Float64(awsapi.Epoch(now))
		}
	}
	setTime(&t.PullStartedAt, ch.GetPullStartedAt(), false)
	setTime(&t.PullStoppedAt, ch.GetPullStoppedAt(), false)
	setTime(&t.StartedAt, ch.GetStartedAt(), newStatus == "RUNNING")
	if newStatus == "RUNNING" && t.Connectivity == nil {
		t.Connectivity = proto.String("CONNECTED")
		t.ConnectivityAt = t.StartedAt
	}
	if h := ch.GetHealthStatus(); h != "" {
		t.HealthStatus = proto.String(h)
	}
	stopped := newStatus == "STOPPED"
	setTime(&t.StoppingAt, ch.GetStoppingAt(), statusRank[newStatus] >= statusRank["STOPPING"])
	setTime(&t.ExecutionStoppedAt, ch.GetExecutionStoppedAt(), stopped)
	setTime(&t.StoppedAt, ch.GetStoppedAt(), stopped)
	if stopped {
		t.DesiredStatus = proto.String(DesiredStopped)
		if t.StopCode == nil && ch.GetStopCode() != "" {
			t.StopCode = proto.String(ch.GetStopCode())
		}
		if t.StoppedReason == nil && ch.GetStoppedReason() != "" {
			t.StoppedReason = proto.String(ch.GetStoppedReason())
		}
	}
	t.Version++
	return oldStatus, newStatus, true
}

// applyContainerStates copies the agent's container states onto the task's containers.
func applyContainerStates(t *ecsv1.Task, states []*agentv1.ContainerState) {
	for _, st := range states {
		for _, c := range t.GetContainers() {
			if c.GetName() != st.GetName() {
				continue
			}
			if st.GetLastStatus() != "" && statusRank[st.GetLastStatus()] >= statusRank[c.GetLastStatus()] {
				c.LastStatus = proto.String(st.GetLastStatus())
			}
			if st.ExitCode != nil {
				c.ExitCode = proto.Int32(st.GetExitCode())
			}
			if st.GetReason() != "" {
				c.Reason = proto.String(st.GetReason())
			}
			if st.GetRuntimeId() != "" {
				c.RuntimeId = proto.String(st.GetRuntimeId())
			}
			if st.GetHealthStatus() != "" {
				c.HealthStatus = proto.String(st.GetHealthStatus())
			}
			if st.GetImageDigest() != "" {
				c.ImageDigest = proto.String(st.GetImageDigest())
			}
			if len(st.GetNetworkBindings()) > 0 {
				c.NetworkBindings = st.GetNetworkBindings()
			}
			if len(st.GetNetworkInterfaces()) > 0 {
				c.NetworkInterfaces = st.GetNetworkInterfaces()
			}
		}
	}
}

// mergeAttachments applies the attachments an agent reported to the task's: the same id
// is replaced (its status only moves forward: PRECREATED, ATTACHED, DELETED), a new one
// is added.
func mergeAttachments(t *ecsv1.Task, reported []*ecsv1.Attachment) {
	rank := map[string]int{"PRECREATED": 0, "ATTACHING": 1, "ATTACHED": 2, "DETACHING": 3, "DELETED": 4}
	for _, r := range reported {
		found := false
		for i, a := range t.GetAttachments() {
			if a.GetId() != r.GetId() {
				continue
			}
			found = true
			if rank[r.GetStatus()] >= rank[a.GetStatus()] {
				t.Attachments[i] = r
			}
		}
		if !found {
			t.Attachments = append(t.Attachments, r)
		}
	}
}
