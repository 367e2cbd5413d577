package agentsession

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

const (
	acct    = "000000000000"
	cluster = "c1"
	instID  = "i1"
	instARN = "arn:aws:ecs:us-east-1:" + acct + ":container-instance/" + cluster + "/" + instID
)

// testScope is acct in testRegion, where the tests run.
var testScope = keys.Scope{Account: acct, Region: testRegion}

func taskARN(id string) string {
	return "arn:aws:ecs:us-east-1:" + acct + ":task/" + cluster + "/" + id
}

// fakeControl records what the session server asks of the domain.
type fakeControl struct {
	mu        sync.Mutex
	changes   []*agentv1.TaskStateChange
	connected map[string]bool
	failApply error
}

func (f *fakeControl) RegisterInstance(_ context.Context, account keys.Scope, req *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error) {
	return &agentv1.RegisterResponse{ContainerInstance: &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(instARN)}}, nil
}

func (f *fakeControl) ApplyTaskStateChange(_ context.Context, account keys.Scope, instanceARN string, ch *agentv1.TaskStateChange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failApply != nil {
		return f.failApply
	}
	f.changes = append(f.changes, ch)
	return nil
}

func (f *fakeControl) SetAgentConnected(_ context.Context, account keys.Scope, instanceARN string, connected bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connected == nil {
		f.connected = map[string]bool{}
	}
	f.connected[instanceARN] = connected
	return nil
}

type harness struct {
	cli  *clientv3.Client
	ctl  *fakeControl
	srv  *Server
	url  string
	http *http.Client
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	cli := etcdtest.Start(t)
	ctl := &fakeControl{}
	cfg.Etcd, cfg.Control = cli, ctl
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv := New(cfg)
	mux := http.NewServeMux()
	mux.Handle(agentv1connect.NewAgentServiceHandler(srv, connect.WithInterceptors(caller.Interceptor{})))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(func() { srv.Close(); hs.Close() })
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	h := &harness{cli: cli, ctl: ctl, srv: srv, url: hs.URL, http: &http.Client{Transport: tr}}
	ci := &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(instARN), Status: proto.String("ACTIVE")}
	if _, err := store.Create(context.Background(), cli, keys.Instance(testScope, cluster, instID), &storev1.ContainerInstanceRecord{ContainerInstance: ci, ClusterName: cluster}); err != nil {
		t.Fatal(err)
	}
	return h
}

// agent is a scripted fake agent on one session.
type agent struct {
	t      *testing.T
	stream *connect.BidiStreamForClient[agentv1.SessionRequest, agentv1.SessionResponse]
	in     chan *agentv1.SessionResponse
	done   chan error
	cancel context.CancelFunc
}

func (h *harness) connect(t *testing.T, scope string) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := agentv1connect.NewAgentServiceClient(h.http, h.url)
	st := c.Session(ctx)
	st.RequestHeader().Set(identity.AccountHeader, acct)
	st.RequestHeader().Set(identity.RegionHeader, "us-east-1")
	if scope != "" {
		st.RequestHeader().Set(identity.ContainerInstanceHeader, scope)
	}
	a := &agent{t: t, stream: st, in: make(chan *agentv1.SessionResponse, 64), done: make(chan error, 1), cancel: cancel}
	if err := st.Send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: instARN}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := st.Receive()
			if err != nil {
				a.done <- err
				close(a.in)
				return
			}
			a.in <- m
		}
	}()
	t.Cleanup(a.close)
	return a
}

// close disconnects the agent: it closes its side of the stream and abandons the call.
func (a *agent) close() {
	_ = a.stream.CloseRequest()
	a.cancel()
}

func (a *agent) next() *agentv1.SessionResponse {
	a.t.Helper()
	select {
	case m, ok := <-a.in:
		if !ok {
			a.t.Fatalf("session ended: %v", <-a.done)
		}
		return m
	case <-time.After(10 * time.Second):
		a.t.Fatal("timed out waiting for a session message")
	}
	return nil
}

func (a *agent) send(m *agentv1.SessionRequest) {
	a.t.Helper()
	if err := a.stream.Send(m); err != nil {
		a.t.Fatal(err)
	}
}

func putInbox(t *testing.T, cli *clientv3.Client, taskID string, e *storev1.InboxEntry) {
	t.Helper()
	if _, err := cli.Put(context.Background(), keys.Inbox(testScope, instID, taskID), mustMarshal(t, e)); err != nil {
		t.Fatal(err)
	}
}

func mustMarshal(t *testing.T, m proto.Message) string {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func assignment(taskID string) *storev1.InboxEntry {
	return &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{
		Task: &ecsv1.Task{TaskArn: proto.String(taskARN(taskID))},
	}}}
}

func waitGone(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := cli.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s still present", key)
}

func exists(t *testing.T, cli *clientv3.Client, key string) bool {
	r, err := cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return len(r.Kvs) > 0
}

func TestInboxRedeliveredAfterDisconnectAndRunOnce(t *testing.T) {
	h := newHarness(t, Config{})
	// The task is expected on the instance (desired RUNNING index) and assigned in the
	// inbox.
	ctx := context.Background()
	if _, err := store.Create(ctx, h.cli, keys.Task(testScope, cluster, "t1"), &storev1.TaskRecord{Task: &ecsv1.Task{TaskArn: proto.String(taskARN("t1")), LastStatus: proto.String("PENDING")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.NewTxn(h.cli).PutIndex(keys.TaskList(testScope, cluster, "RUNNING", keys.DimInstance, instID, "t1")).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	putInbox(t, h.cli, "t1", assignment("t1"))

	runs := map[string]int{}   // the fake agent's runtime: task → times started
	taken := map[string]bool{} // the fake agent's durable dedup set of delivery ids
	take := func(a *agentv1.Assignment) {
		if !taken[a.GetDeliveryId()] {
			taken[a.GetDeliveryId()] = true
			runs[a.GetTask().GetTaskArn()]++
		}
	}

	// Session 1: expected tasks, then the assignment; the agent takes it but disconnects
	// before acking.
	a1 := h.connect(t, "")
	if et := a1.next().GetExpectedTasks(); et == nil || len(et.TaskArns) != 1 || et.TaskArns[0] != taskARN("t1") {
		t.Fatalf("expected tasks %v", et)
	}
	as := a1.next().GetAssignment()
	if as == nil || as.GetDeliveryId() != "t1" {
		t.Fatalf("assignment %v", as)
	}
	take(as)
	h.ctl.mu.Lock()
	if !h.ctl.connected[instARN] {
		t.Fatal("agentConnected not set on hello")
	}
	h.ctl.mu.Unlock()
	if !exists(t, h.cli, keys.Presence(testScope, cluster, instID)) {
		t.Fatal("no presence key")
	}
	a1.close()
	waitGone(t, h.cli, keys.Presence(testScope, cluster, instID))
	if !exists(t, h.cli, keys.Inbox(testScope, instID, "t1")) {
		t.Fatal("unacked assignment deleted")
	}

	// Session 2: the assignment comes again; the agent dedups, acks, and the entry goes.
	a2 := h.connect(t, "")
	a2.next() // expected tasks
	as = a2.next().GetAssignment()
	if as == nil || as.GetDeliveryId() != "t1" {
		t.Fatalf("redelivery %v", as)
	}
	take(as)
	a2.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{"t1"}}}})
	waitGone(t, h.cli, keys.Inbox(testScope, instID, "t1"))
	if runs[taskARN("t1")] != 1 {
		t.Fatalf("task started %d times", runs[taskARN("t1")])
	}

	// A stop order travels the same way; acking it keeps the entry until STOPPED.
	putInbox(t, h.cli, "t1", &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Stop{Stop: &agentv1.StopOrder{TaskArn: taskARN("t1"), StopCode: "UserInitiated"}}})
	stop := a2.next().GetStop()
	if stop == nil || stop.GetDeliveryId() != "t1"+StopDeliverySuffix {
		t.Fatalf("stop order %v", stop)
	}
	a2.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{stop.GetDeliveryId()}}}})
	a2.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{RuntimeReady: true}}})
	time.Sleep(200 * time.Millisecond)
	if !exists(t, h.cli, keys.Inbox(testScope, instID, "t1")) {
		t.Fatal("acked stop order deleted before STOPPED")
	}
	a2.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: &agentv1.TaskStateChange{Seq: 7, TaskArn: taskARN("t1"), LastStatus: "STOPPED"}}})
	if ack := a2.next().GetStateAck(); ack == nil || len(ack.Seqs) != 1 || ack.Seqs[0] != 7 {
		t.Fatalf("state ack %v", ack)
	}
	waitGone(t, h.cli, keys.Inbox(testScope, instID, "t1"))
	h.ctl.mu.Lock()
	if len(h.ctl.changes) != 1 || h.ctl.changes[0].GetLastStatus() != "STOPPED" {
		t.Fatalf("changes %v", h.ctl.changes)
	}
	h.ctl.mu.Unlock()
}

func TestStateChangeNotAckedOnTransientError(t *testing.T) {
	h := newHarness(t, Config{})
	h.ctl.failApply = errors.New("etcd unavailable")
	a := h.connect(t, "")
	a.next() // expected tasks
	a.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: &agentv1.TaskStateChange{Seq: 1, TaskArn: taskARN("x"), LastStatus: "RUNNING"}}})
	select {
	case m, ok := <-a.in:
		if ok {
			t.Fatalf("got %v, want the session to end unacked", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
}

func TestSessionScopeAndHello(t *testing.T) {
	h := newHarness(t, Config{})
	// A credential scoped to another instance cannot open this instance's session.
	a := h.connect(t, "arn:aws:ecs:us-east-1:"+acct+":container-instance/"+cluster+"/other")
	select {
	case _, ok := <-a.in:
		if ok {
			t.Fatal("scoped credential got a message")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error")
	}
	if err := <-a.done; connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("err %v", err)
	}
	// Its own scope works.
	b := h.connect(t, instARN)
	if b.next().GetExpectedTasks() == nil {
		t.Fatal("no expected tasks")
	}
}

func TestHeartbeatTimeoutDropsSession(t *testing.T) {
	h := newHarness(t, Config{HeartbeatTimeout: 300 * time.Millisecond})
	a := h.connect(t, "")
	a.next()
	// Heartbeats keep it alive...
	for range 5 {
		a.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}})
		time.Sleep(100 * time.Millisecond)
	}
	if h.srv.Sessions() != 1 {
		t.Fatalf("sessions %d", h.srv.Sessions())
	}
	// ...silence ends it and removes the presence key.
	select {
	case <-a.done:
	case <-time.After(5 * time.Second):
		t.Fatal("silent session not dropped")
	}
	waitGone(t, h.cli, keys.Presence(testScope, cluster, instID))
}

func TestRegisterScope(t *testing.T) {
	h := newHarness(t, Config{})
	c := agentv1connect.NewAgentServiceClient(h.http, h.url)
	req := connect.NewRequest(&agentv1.RegisterRequest{Cluster: cluster, HostId: "host-1"})
	req.Header().Set(identity.AccountHeader, acct)
	req.Header().Set(identity.RegionHeader, "us-east-1")
	resp, err := c.Register(context.Background(), req)
	if err != nil || resp.Msg.GetContainerInstance().GetContainerInstanceArn() != instARN {
		t.Fatalf("register: %v %v", resp, err)
	}
	// A scoped credential for a host that maps to no instance is refused.
	req = connect.NewRequest(&agentv1.RegisterRequest{Cluster: cluster, HostId: "host-2"})
	req.Header().Set(identity.AccountHeader, acct)
	req.Header().Set(identity.RegionHeader, "us-east-1")
	req.Header().Set(identity.ContainerInstanceHeader, instARN)
	if _, err := c.Register(context.Background(), req); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("scoped register of an unknown host: %v", err)
	}
}

// When the replica's presence lease is lost (revoked here; in life, etcd unreachable past
// the TTL), the presence keys of live sessions are written again on a new lease.
func TestPresenceSurvivesLeaseLoss(t *testing.T) {
	h := newHarness(t, Config{})
	a := h.connect(t, "")
	a.next() // expected tasks
	key := keys.Presence(testScope, cluster, instID)
	r, err := h.cli.Get(context.Background(), key)
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("presence %v %v", r, err)
	}
	lease := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := h.cli.Revoke(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := h.cli.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) == 1 && clientv3.LeaseID(r.Kvs[0].Lease) != lease {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("presence not restored on a new lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The session itself lived on.
	a.send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}})
	if h.srv.Sessions() != 1 {
		t.Fatalf("sessions %d", h.srv.Sessions())
	}
}
