package control

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// agent returns a copy of e acting with the credential of one container instance.
func (e *env) agent(ciARN string) *env {
	id := caller.Identity{Account: e.acc, Region: e.sc.Region, ContainerInstanceARN: ciARN, Endpoint: "http://gw.example:4566"}
	return &env{t: e.t, s: e.s, acc: e.acc, sc: e.sc, ctx: caller.With(context.Background(), id)}
}

// TestAgentFacingActions: the public agent actions move a task through the same path as
// Berth's agent session — status forward only, the counters and the instance's
// reservation in step — and an instance credential reports only its own tasks.
func TestAgentFacingActions(t *testing.T) {
	e := newEnv(t)
	e.createCluster("ag")
	h1 := e.registerHost("ag", "h1", 1024, 1024)
	h2 := e.registerHost("ag", "h2", 1024, 1024)
	td := e.simpleTaskDef("ag", 256, 256)
	st := must(e, e.s.StartTask, &ecsv1.StartTaskRequest{Cluster: proto.String("ag"), TaskDefinition: td.TaskDefinitionArn, ContainerInstances: []string{h1.GetContainerInstanceArn()}})
	task := st.GetTasks()[0].GetTaskArn()
	a1, a2 := e.agent(h1.GetContainerInstanceArn()), e.agent(h2.GetContainerInstanceArn())

	// Another instance's credential cannot report it.
	_, err := call(a2, a2.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("ag"), Task: proto.String(task), Status: proto.String("RUNNING")})
	wantErr(t, err, "AccessDeniedException")
	_, err = call(a1, a1.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("ag"), Task: proto.String(task), Status: proto.String("DANCING")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(a1, a1.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("ag"), Task: proto.String("0123456789abcdef0123456789abcdef"), Status: proto.String("RUNNING")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(a1, a1.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("nope"), Task: proto.String(task), Status: proto.String("RUNNING")})
	wantErr(t, err, "ClusterNotFoundException")

	ack := must(a1, a1.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{
		Cluster: proto.String("ag"), Task: proto.String(task), Status: proto.String("RUNNING"), PullStartedAt: proto.Float64(1767225600),
		Containers: []*ecsv1.ContainerStateChange{{ContainerName: proto.String("app"), Status: proto.String("RUNNING"), RuntimeId: proto.String("rt-1")}},
	})
	if ack.GetAcknowledgment() != "ACK" {
		t.Fatalf("acknowledgment %q", ack.GetAcknowledgment())
	}
	got := e.describeTask("ag", task)
	if got.GetLastStatus() != "RUNNING" || got.GetContainers()[0].GetRuntimeId() != "rt-1" || got.GetPullStartedAt() != 1767225600 || got.GetStartedAt() == 0 {
		t.Fatalf("after RUNNING: %v", got)
	}
	if c := e.describeCluster("ag"); c.GetRunningTasksCount() != 1 || c.GetPendingTasksCount() != 0 {
		t.Fatalf("cluster counters running %d pending %d", c.GetRunningTasksCount(), c.GetPendingTasksCount())
	}
	// An older status is ignored, as the session ignores it.
	must(a1, a1.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("ag"), Task: proto.String(task), Status: proto.String("PENDING")})
	if s := e.describeTask("ag", task).GetLastStatus(); s != "RUNNING" {
		t.Fatalf("went back to %s", s)
	}

	// One container's change.
	_, err = call(a1, a1.s.SubmitContainerStateChange, &ecsv1.SubmitContainerStateChangeRequest{Cluster: proto.String("ag"), Task: proto.String(task), ContainerName: proto.String("nope"), Status: proto.String("STOPPED")})
	wantErr(t, err, "InvalidParameterException")
	must(a1, a1.s.SubmitContainerStateChange, &ecsv1.SubmitContainerStateChangeRequest{
		Cluster: proto.String("ag"), Task: proto.String(task), ContainerName: proto.String("app"), Status: proto.String("STOPPED"), ExitCode: proto.Int32(3), Reason: proto.String("exited"),
	})
	c := e.describeTask("ag", task).GetContainers()[0]
	if c.GetLastStatus() != "STOPPED" || c.GetExitCode() != 3 || c.GetReason() != "exited" {
		t.Fatalf("container %v", c)
	}

	// Attachments: set by ARN on the task holding it; an unknown one is refused.
	key := keys.Task(e.sc, "ag", taskIDOf(task))
	rec, rev, gerr := store.Get[*storev1.TaskRecord](context.Background(), sharedEtcd, key)
	if gerr != nil {
		t.Fatal(gerr)
	}
	rec.GetTask().Attachments = []*ecsv1.Attachment{{Id: proto.String("att-1"), Type: proto.String("ElasticNetworkInterface"), Status: proto.String("PRECREATED")}}
	if _, err := store.Update(context.Background(), sharedEtcd, key, rev, rec); err != nil {
		t.Fatal(err)
	}
	attARN := "arn:aws:ecs:" + e.sc.Region + ":" + e.acc + ":attachment/att-1"
	_, err = call(a2, a2.s.SubmitAttachmentStateChanges, &ecsv1.SubmitAttachmentStateChangesRequest{Cluster: proto.String("ag"),
		Attachments: []*ecsv1.AttachmentStateChange{{AttachmentArn: proto.String(attARN), Status: proto.String("ATTACHED")}}})
	wantErr(t, err, "InvalidParameterException") // not on h2
	must(a1, a1.s.SubmitAttachmentStateChanges, &ecsv1.SubmitAttachmentStateChangesRequest{Cluster: proto.String("ag"),
		Attachments: []*ecsv1.AttachmentStateChange{{AttachmentArn: proto.String(attARN), Status: proto.String("ATTACHED")}}})
	if s := e.describeTask("ag", task).GetAttachments()[0].GetStatus(); s != "ATTACHED" {
		t.Fatalf("attachment %s", s)
	}

	// STOPPED: stop code, reason, reservation released, counters.
	must(a1, a1.s.SubmitTaskStateChange, &ecsv1.SubmitTaskStateChangeRequest{Cluster: proto.String("ag"), Task: proto.String(task), Status: proto.String("STOPPED"), Reason: proto.String("Essential container in task exited")})
	got = e.describeTask("ag", task)
	if got.GetLastStatus() != "STOPPED" || got.GetDesiredStatus() != "STOPPED" || got.GetStopCode() != "EssentialContainerExited" || got.GetStoppedReason() != "Essential container in task exited" {
		t.Fatalf("after STOPPED: %v", got)
	}
	if c := e.describeCluster("ag"); c.GetRunningTasksCount() != 0 {
		t.Fatalf("cluster running %d", c.GetRunningTasksCount())
	}
	for _, r := range e.describeInstance("ag", h1.GetContainerInstanceArn()).GetRemainingResources() {
		if r.GetName() == "CPU" && r.GetIntegerValue() != 1024 {
			t.Fatalf("CPU remaining %d after the task stopped", r.GetIntegerValue())
		}
	}

	// DiscoverPollEndpoint: the gateway the caller came through.
	ep := must(a1, a1.s.DiscoverPollEndpoint, &ecsv1.DiscoverPollEndpointRequest{Cluster: proto.String("ag"), ContainerInstance: h1.ContainerInstanceArn})
	if ep.GetEndpoint() != "http://gw.example:4566/" || ep.GetTelemetryEndpoint() != ep.GetEndpoint() || ep.ServiceConnectEndpoint != nil {
		t.Fatalf("endpoint %v", ep)
	}
	_, err = call(a1, a1.s.DiscoverPollEndpoint, &ecsv1.DiscoverPollEndpointRequest{ContainerInstance: h2.ContainerInstanceArn})
	wantErr(t, err, "AccessDeniedException")
	_, err = call(a1, a1.s.DiscoverPollEndpoint, &ecsv1.DiscoverPollEndpointRequest{Cluster: proto.String("nope")})
	wantErr(t, err, "ClientException")

	// UpdateContainerAgent: Berth's agent carries no ECS version to update from.
	_, err = call(e, e.s.UpdateContainerAgent, &ecsv1.UpdateContainerAgentRequest{Cluster: proto.String("ag"), ContainerInstance: h1.ContainerInstanceArn})
	wantErr(t, err, "MissingVersionException")
	_, err = call(e, e.s.UpdateContainerAgent, &ecsv1.UpdateContainerAgentRequest{Cluster: proto.String("ag"), ContainerInstance: proto.String("0123456789abcdef0123456789abcdef")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.UpdateContainerAgent, &ecsv1.UpdateContainerAgentRequest{Cluster: proto.String("nope"), ContainerInstance: h1.ContainerInstanceArn})
	wantErr(t, err, "ClusterNotFoundException")
}

func taskIDOf(taskARN string) string { return taskARN[len(taskARN)-32:] }
