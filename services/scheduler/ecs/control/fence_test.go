package control_test

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// A leader's writes through control (Server.Fenced with its term's KV): SetAgentConnected
// and ApplyTaskStateChange (the reaper's), and a placement's commit, succeed while it
// leads and fail, writing nothing, once it is deposed.
func TestDeposedLeaderWritesThroughControlFail(t *testing.T) {
	srv, cli, ctx := placingServer(t, true)
	reg, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{Cluster: "c", HostId: "h0", RuntimeReady: true, Resources: control.Resources(1024, 1024, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	inst := reg.GetContainerInstance().GetContainerInstanceArn()
	if _, err := srv.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family:               proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 128, Memory: proto.Int32(128)}},
	})); err != nil {
		t.Fatal(err)
	}
	elect := keys.Election("scheduler") + "fence-test"
	put, err := cli.Put(ctx, elect, "me")
	if err != nil {
		t.Fatal(err)
	}
	lead := srv.Fenced(leader.Term{Key: elect, Rev: put.Header.Revision}.KV(cli))

	// Leading: the writes go through.
	if err := lead.SetAgentConnected(ctx, testScope, inst, true); err != nil {
		t.Fatalf("SetAgentConnected while leading: %v", err)
	}
	run, err := lead.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(2)}))
	if err != nil || len(run.Msg.GetTasks()) != 2 {
		t.Fatalf("RunTask while leading: %v %v", run, err)
	}
	taskARN := run.Msg.GetTasks()[0].GetTaskArn()
	running := &agentv1.TaskStateChange{TaskArn: taskARN, LastStatus: "RUNNING", Containers: []*agentv1.ContainerState{{Name: "app", LastStatus: "RUNNING"}}}
	if err := lead.ApplyTaskStateChange(ctx, testScope, inst, running); err != nil {
		t.Fatalf("ApplyTaskStateChange while leading: %v", err)
	}

	// Deposed.
	if _, err := cli.Delete(ctx, elect); err != nil {
		t.Fatal(err)
	}
	deposed := func(what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s by a deposed leader: %v, want a fenced write", what, err)
		}
	}
	deposed("SetAgentConnected", lead.SetAgentConnected(ctx, testScope, inst, false))
	stop := &agentv1.TaskStateChange{TaskArn: taskARN, LastStatus: "STOPPED", StopCode: "TerminationNotice", StoppedReason: "lost",
		Containers: []*agentv1.ContainerState{{Name: "app", LastStatus: "STOPPED", ExitCode: proto.Int32(137)}}}
	deposed("ApplyTaskStateChange", lead.ApplyTaskStateChange(ctx, testScope, inst, stop))
	_, err = lead.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web")}))
	if err == nil {
		t.Errorf("RunTask (group commit) by a deposed leader succeeded")
	}
	_, err = lead.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), ClientToken: proto.String("tok")}))
	if err == nil {
		t.Errorf("RunTask (own txn) by a deposed leader succeeded")
	}

	// Nothing the deposed leader tried is stored.
	d, err := srv.DescribeContainerInstances(ctx, connect.NewRequest(&ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("c"), ContainerInstances: []string{inst}}))
	if err != nil {
		t.Fatal(err)
	}
	if ci := d.Msg.GetContainerInstances()[0]; !ci.GetAgentConnected() || ci.GetRunningTasksCount() != 1 || ci.GetPendingTasksCount() != 1 {
		t.Errorf("instance after the deposed writes: connected %v running %d pending %d, want true 1 1",
			ci.GetAgentConnected(), ci.GetRunningTasksCount(), ci.GetPendingTasksCount())
	}
	dt, err := srv.DescribeTasks(ctx, connect.NewRequest(&ecsv1.DescribeTasksRequest{Cluster: proto.String("c"), Tasks: []string{taskARN}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := dt.Msg.GetTasks()[0].GetLastStatus(); got != "RUNNING" {
		t.Errorf("task after the deposed stop: %s, want RUNNING", got)
	}
	lt, err := srv.ListTasks(ctx, connect.NewRequest(&ecsv1.ListTasksRequest{Cluster: proto.String("c")}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lt.Msg.GetTaskArns()); n != 2 {
		t.Errorf("%d tasks stored, want the 2 placed while leading", n)
	}
}
