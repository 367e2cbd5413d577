package task

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
)

// stateRec returns a task record in lastStatus with two containers, app and side, in
// the same status and one PRECREATED ENI attachment, as RunTask and the agent leave it.
func stateRec(lastStatus string) *storev1.TaskRecord {
	ctr := func(name string) *ecsv1.Container {
		return &ecsv1.Container{Name: proto.String(name), LastStatus: proto.String(lastStatus)}
	}
	return &storev1.TaskRecord{ClusterName: "c", Task: &ecsv1.Task{
		TaskArn:       proto.String("arn:aws:ecs:us-east-1:000000000000:task/c/0123"),
		LastStatus:    proto.String(lastStatus),
		DesiredStatus: proto.String(DesiredRunning),
		Version:       1,
		Containers:    []*ecsv1.Container{ctr("app"), ctr("side")},
		Attachments: []*ecsv1.Attachment{{Id: proto.String("eni-1"), Type: proto.String("ElasticNetworkInterface"),
			Status: proto.String("PRECREATED")}},
	}}
}

// TestApplyStateChange: lastStatus only moves forward (an older report, or any report
// once STOPPED, changes nothing); RUNNING sets startedAt (the report's, else now) and
// connectivity; STOPPED sets desiredStatus, the stop timestamps and the report's stopCode
// and stoppedReason unless the task has them (a user's stop wins); containers' fields
// are merged by name, their status forward only; attachments merge by id, forward only.
func TestApplyStateChange(t *testing.T) {
	now := time.Unix(1_700_000_000, 250_000_000)
	at := awsapi.Epoch(now)
	reported := time.Unix(1_600_000_000, 0)
	for _, tc := range []struct {
		name     string
		rec      *storev1.TaskRecord
		ch       *agentv1.TaskStateChange
		old, new string
		changed  bool
		check    func(t *testing.T, task *ecsv1.Task)
	}{
		{
			name: "running sets startedAt and connectivity", rec: stateRec("PENDING"),
			ch:  &agentv1.TaskStateChange{LastStatus: "RUNNING", HealthStatus: "HEALTHY"},
			old: "PENDING", new: "RUNNING", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				if task.GetLastStatus() != "RUNNING" || task.GetStartedAt() != at || task.GetConnectivity() != "CONNECTED" ||
					task.GetConnectivityAt() != at || task.GetHealthStatus() != "HEALTHY" || task.GetVersion() != 2 {
					t.Errorf("task = %v", task)
				}
				if task.StoppingAt != nil || task.StoppedAt != nil || task.GetDesiredStatus() != DesiredRunning {
					t.Errorf("running task has stop fields: %v", task)
				}
			},
		},
		{
			name: "reported timestamps win over now", rec: stateRec("PENDING"),
			ch: &agentv1.TaskStateChange{LastStatus: "RUNNING", StartedAt: timestamppb.New(reported),
				PullStartedAt: timestamppb.New(reported), PullStoppedAt: timestamppb.New(reported)},
			old: "PENDING", new: "RUNNING", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				r := awsapi.Epoch(reported)
				if task.GetStartedAt() != r || task.GetPullStartedAt() != r || task.GetPullStoppedAt() != r || task.GetConnectivityAt() != r {
					t.Errorf("task = %v", task)
				}
			},
		},
		{
			name: "older report ignored", rec: stateRec("RUNNING"),
			ch:  &agentv1.TaskStateChange{LastStatus: "PENDING", Containers: []*agentv1.ContainerState{{Name: "app", ExitCode: proto.Int32(1)}}},
			old: "RUNNING", new: "RUNNING",
		},
		{
			name: "stopped task ignores reports", rec: stateRec("STOPPED"),
			ch:  &agentv1.TaskStateChange{LastStatus: "STOPPED", StopCode: "EssentialContainerExited"},
			old: "STOPPED", new: "STOPPED",
		},
		{
			name: "stopping sets stoppingAt only", rec: stateRec("RUNNING"),
			ch:  &agentv1.TaskStateChange{LastStatus: "STOPPING"},
			old: "RUNNING", new: "STOPPING", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				if task.GetStoppingAt() != at || task.StoppedAt != nil || task.ExecutionStoppedAt != nil || task.GetDesiredStatus() != DesiredRunning {
					t.Errorf("task = %v", task)
				}
			},
		},
		{
			name: "stopped takes the report's stop code", rec: stateRec("RUNNING"),
			ch:  &agentv1.TaskStateChange{LastStatus: "STOPPED", StopCode: "EssentialContainerExited", StoppedReason: "Essential container in task exited"},
			old: "RUNNING", new: "STOPPED", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				if task.GetDesiredStatus() != DesiredStopped || task.GetStopCode() != "EssentialContainerExited" ||
					task.GetStoppedReason() != "Essential container in task exited" {
					t.Errorf("task = %v", task)
				}
				if task.GetStoppingAt() != at || task.GetExecutionStoppedAt() != at || task.GetStoppedAt() != at {
					t.Errorf("stop timestamps = %v %v %v, want %v", task.GetStoppingAt(), task.GetExecutionStoppedAt(), task.GetStoppedAt(), at)
				}
			},
		},
		{
			name: "stopped keeps a user's stop code and reason",
			rec: func() *storev1.TaskRecord {
				r := stateRec("RUNNING")
				r.Task.DesiredStatus = proto.String(DesiredStopped)
				r.Task.StopCode, r.Task.StoppedReason = proto.String("UserInitiated"), proto.String("Task stopped by user")
				r.Task.StoppingAt = proto.Float64(1)
				return r
			}(),
			ch:  &agentv1.TaskStateChange{LastStatus: "STOPPED", StopCode: "EssentialContainerExited", StoppedReason: "exited"},
			old: "RUNNING", new: "STOPPED", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				if task.GetStopCode() != "UserInitiated" || task.GetStoppedReason() != "Task stopped by user" || task.GetStoppingAt() != 1 {
					t.Errorf("task = %v", task)
				}
			},
		},
		{
			name: "container fields merged by name", rec: stateRec("PENDING"),
			ch: &agentv1.TaskStateChange{LastStatus: "RUNNING", Containers: []*agentv1.ContainerState{{
				Name: "app", LastStatus: "RUNNING", ExitCode: proto.Int32(3), Reason: "r", RuntimeId: "cid", HealthStatus: "HEALTHY",
				ImageDigest: "sha256:ab", NetworkBindings: []*ecsv1.NetworkBinding{{HostPort: proto.Int32(8080)}},
				NetworkInterfaces: []*ecsv1.NetworkInterface{{PrivateIpv4Address: proto.String("10.0.0.2")}},
			}, {Name: "nope", LastStatus: "RUNNING"}}},
			old: "PENDING", new: "RUNNING", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				app, side := task.GetContainers()[0], task.GetContainers()[1]
				if app.GetLastStatus() != "RUNNING" || app.GetExitCode() != 3 || app.GetReason() != "r" || app.GetRuntimeId() != "cid" ||
					app.GetHealthStatus() != "HEALTHY" || app.GetImageDigest() != "sha256:ab" ||
					len(app.GetNetworkBindings()) != 1 || app.GetNetworkBindings()[0].GetHostPort() != 8080 ||
					len(app.GetNetworkInterfaces()) != 1 || app.GetNetworkInterfaces()[0].GetPrivateIpv4Address() != "10.0.0.2" {
					t.Errorf("app = %v", app)
				}
				if !proto.Equal(side, stateRec("PENDING").GetTask().GetContainers()[1]) {
					t.Errorf("side changed: %v", side)
				}
			},
		},
		{
			name: "container status only forward",
			rec: func() *storev1.TaskRecord {
				r := stateRec("RUNNING")
				r.Task.Containers[0].LastStatus = proto.String("STOPPED")
				return r
			}(),
			ch:  &agentv1.TaskStateChange{LastStatus: "RUNNING", Containers: []*agentv1.ContainerState{{Name: "app", LastStatus: "RUNNING", ExitCode: proto.Int32(0)}}},
			old: "RUNNING", new: "RUNNING", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				if app := task.GetContainers()[0]; app.GetLastStatus() != "STOPPED" || app.ExitCode == nil {
					t.Errorf("app = %v", app)
				}
			},
		},
		{
			name: "attachments merge by id, forward only", rec: stateRec("PENDING"),
			ch: &agentv1.TaskStateChange{LastStatus: "RUNNING", Attachments: []*ecsv1.Attachment{
				{Id: proto.String("eni-1"), Type: proto.String("ElasticNetworkInterface"), Status: proto.String("ATTACHED"),
					Details: []*ecsv1.KeyValuePair{{Name: proto.String("privateIPv4Address"), Value: proto.String("10.240.0.2")}}},
				{Id: proto.String("eni-1"), Status: proto.String("PRECREATED")}, // never backward
				{Id: proto.String("eni-2"), Status: proto.String("ATTACHING")},  // new: added
			}},
			old: "PENDING", new: "RUNNING", changed: true,
			check: func(t *testing.T, task *ecsv1.Task) {
				got := task.GetAttachments()
				if len(got) != 2 || got[0].GetStatus() != "ATTACHED" || got[0].GetDetails()[0].GetValue() != "10.240.0.2" ||
					got[1].GetId() != "eni-2" || got[1].GetStatus() != "ATTACHING" {
					t.Errorf("attachments = %v", got)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := proto.Clone(tc.rec)
			old, new, changed := ApplyStateChange(tc.rec, tc.ch, now)
			if old != tc.old || new != tc.new || changed != tc.changed {
				t.Fatalf("ApplyStateChange = (%q, %q, %v), want (%q, %q, %v)", old, new, changed, tc.old, tc.new, tc.changed)
			}
			if !changed && !proto.Equal(tc.rec, before) {
				t.Errorf("unchanged report changed the record: %v", tc.rec)
			}
			if tc.check != nil {
				tc.check(t, tc.rec.GetTask())
			}
		})
	}
}

// TestStatusRank: the lifecycle's statuses in order; unknown ones are not valid.
func TestStatusRank(t *testing.T) {
	order := []string{"PROVISIONING", "PENDING", "ACTIVATING", "RUNNING", "DEACTIVATING", "STOPPING", "DEPROVISIONING", "STOPPED"}
	for i, s := range order {
		if StatusRank(s) != i || !ValidStatus(s) {
			t.Errorf("StatusRank(%s) = %d, ValidStatus %v; want %d, true", s, StatusRank(s), ValidStatus(s), i)
		}
	}
	for _, s := range []string{"", "running", "DELETED"} {
		if ValidStatus(s) {
			t.Errorf("ValidStatus(%q) = true", s)
		}
	}
}
