package agentsession

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"google.golang.org/protobuf/proto"
)

var _ Control = (*control.Server)(nil)

// The end-to-end slice over real control: Register, Session, RunTask → assignment →
// ack → RUNNING → StopTask → stop order → STOPPED.
func TestEndToEndWithControl(t *testing.T) {
	cli := etcdtest.Start(t)
	p := placement.NewPlacer(cli, nil)
	defer p.Close()
	ctl := control.New(control.Config{KV: cli, Placer: p})
	srv := New(Config{Etcd: cli, Control: ctl})
	mux := http.NewServeMux()
	mux.Handle(agentv1connect.NewAgentServiceHandler(srv, connect.WithInterceptors(caller.Interceptor{})))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	defer hs.Close()
	defer srv.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	client := agentv1connect.NewAgentServiceClient(&http.Client{Transport: tr}, hs.URL)

	ctx := caller.With(context.Background(), caller.Identity{Account: acct, Region: testRegion})
	if _, err := ctl.CreateCluster(ctx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("e2e")})); err != nil {
		t.Fatal(err)
	}
	reg := connect.NewRequest(&agentv1.RegisterRequest{Cluster: "e2e", HostId: "host-a", RuntimeReady: true, Resources: control.Resources(2048, 2048, nil, nil)})
	reg.Header().Set(identity.AccountHeader, acct)
	reg.Header().Set(identity.RegionHeader, "us-east-1")
	rr, err := client.Register(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	ciARN := rr.Msg.GetContainerInstance().GetContainerInstanceArn()

	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := client.Session(sctx)
	st.RequestHeader().Set(identity.AccountHeader, acct)
	st.RequestHeader().Set(identity.RegionHeader, "us-east-1")
	if err := st.Send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: ciARN}}}); err != nil {
		t.Fatal(err)
	}
	in := make(chan *agentv1.SessionResponse, 16)
	go func() {
		for {
			m, err := st.Receive()
			if err != nil {
				close(in)
				return
			}
			in <- m
		}
	}()
	next := func() *agentv1.SessionResponse {
		t.Helper()
		select {
		case m := <-in:
			if m == nil {
				t.Fatal("session ended")
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("timeout")
		}
		return nil
	}
	if next().GetExpectedTasks() == nil {
		t.Fatal("no expected tasks")
	}
	if _, err := ctl.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family:               proto.String("app"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 128, Memory: proto.Int32(128)}},
	})); err != nil {
		t.Fatal(err)
	}
	run, err := ctl.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("e2e"), TaskDefinition: proto.String("app")}))
	if err != nil || len(run.Msg.GetTasks()) != 1 {
		t.Fatalf("RunTask: %v %v", run, err)
	}
	taskARN := run.Msg.GetTasks()[0].GetTaskArn()
	as := next().GetAssignment()
	if as.GetTask().GetTaskArn() != taskARN || as.GetTaskDefinition().GetFamily() != "app" {
		t.Fatalf("assignment %v", as)
	}
	send := func(m *agentv1.SessionRequest) {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{as.GetDeliveryId()}}}})
	send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: &agentv1.TaskStateChange{Seq: 1, TaskArn: taskARN, LastStatus: "RUNNING"}}})
	if a := next().GetStateAck(); a.GetSeqs()[0] != 1 {
		t.Fatalf("state ack %v", a)
	}
	desc := func() *ecsv1.Task {
		d, err := ctl.DescribeTasks(ctx, connect.NewRequest(&ecsv1.DescribeTasksRequest{Cluster: proto.String("e2e"), Tasks: []string{taskARN}}))
		if err != nil || len(d.Msg.GetTasks()) != 1 {
			t.Fatalf("describe: %v %v", d, err)
		}
		return d.Msg.GetTasks()[0]
	}
	if s := desc().GetLastStatus(); s != "RUNNING" {
		t.Fatalf("status %s", s)
	}
	if _, err := ctl.StopTask(ctx, connect.NewRequest(&ecsv1.StopTaskRequest{Cluster: proto.String("e2e"), Task: proto.String(taskARN)})); err != nil {
		t.Fatal(err)
	}
	stop := next().GetStop()
	if stop.GetTaskArn() != taskARN {
		t.Fatalf("stop %v", stop)
	}
	send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{stop.GetDeliveryId()}}}})
	send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: &agentv1.TaskStateChange{Seq: 2, TaskArn: taskARN, LastStatus: "STOPPED", StopCode: "UserInitiated"}}})
	if a := next().GetStateAck(); a.GetSeqs()[0] != 2 {
		t.Fatalf("state ack %v", a)
	}
	if got := desc(); got.GetLastStatus() != "STOPPED" || got.GetStopCode() != "UserInitiated" {
		t.Fatalf("task %v", got)
	}

	// The runtime goes away: a zero-capacity heartbeat drains the instance involuntarily
	// (no placement), and capacity coming back restores it.
	status := func() (string, bool) {
		d, err := ctl.DescribeContainerInstances(ctx, connect.NewRequest(&ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("e2e"), ContainerInstances: []string{ciARN}}))
		if err != nil || len(d.Msg.GetContainerInstances()) != 1 {
			t.Fatalf("describe instance: %v %v", d, err)
		}
		ci := d.Msg.GetContainerInstances()[0]
		return ci.GetStatus(), ci.GetAgentConnected()
	}
	waitStatus := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if s, _ := status(); s == want {
				return
			}
			if time.Now().After(deadline) {
				s, c := status()
				t.Fatalf("instance status %s (connected %v), want %s", s, c, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{RuntimeReady: false}}})
	waitStatus("DRAINING")
	run, err = ctl.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("e2e"), TaskDefinition: proto.String("app")}))
	if err != nil || len(run.Msg.GetTasks()) != 0 {
		t.Fatalf("RunTask on a drained instance: %v %v", run, err)
	}
	send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{RuntimeReady: true, Cpu: 2048, Memory: 2048}}})
	waitStatus("ACTIVE")
	// Placement reads a watched cache of the instances, which may lag the record just
	// read by a moment: a DRAINING failure is retried until the cache has the change.
	deadline := time.Now().Add(5 * time.Second)
	for {
		run, err = ctl.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("e2e"), TaskDefinition: proto.String("app")}))
		if err == nil && len(run.Msg.GetTasks()) == 0 && len(run.Msg.GetFailures()) == 1 &&
			run.Msg.GetFailures()[0].GetReason() == "DRAINING" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil || len(run.Msg.GetTasks()) != 1 {
		t.Fatalf("RunTask after capacity returned: %v %v", run, err)
	}
}

// testRegion is the region the tests call in.
const testRegion = "us-east-1"
