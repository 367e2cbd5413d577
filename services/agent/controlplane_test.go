package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// controlPlane is an in-test AgentService: it records what agents send,
// acks state changes, and pushes assignments and stop orders down the
// current session. It is served over real h2c.
type controlPlane struct {
	t     testing.TB
	url   string
	close func() // stops serving and drops every connection

	mu            sync.Mutex
	changed       chan struct{}
	registrations []*agentv1.RegisterRequest
	hellos        []*agentv1.Hello
	heartbeats    []*agentv1.Heartbeat
	states        []*agentv1.TaskStateChange
	acks          []string
	instances     map[string]string // host id → instance ARN
	send          chan *agentv1.SessionResponse
	sessions      int
	noStateAck    bool
	logGroups     map[string]bool     // region|group
	logEvents     map[string][]string // region|group|stream → messages (nil: stream exists)
	credCalls     []string            // task ARNs GetTaskCredentials was asked for
	// taskSubnets, when set, are the awsvpc task subnets Register hands out, as the
	// scheduler does: the first overlapping none of the request's taken_task_subnets.
	taskSubnets []string
}

// GetTaskCredentials answers fixed test credentials valid for one hour, recording the call.
func (cp *controlPlane) GetTaskCredentials(_ context.Context, req *connect.Request[agentv1.GetTaskCredentialsRequest]) (*connect.Response[agentv1.GetTaskCredentialsResponse], error) {
	cp.mu.Lock()
	cp.credCalls = append(cp.credCalls, req.Msg.GetTaskArn())
	n := len(cp.credCalls)
	cp.mu.Unlock()
	return connect.NewResponse(&agentv1.GetTaskCredentialsResponse{
		AccessKeyId: fmt.Sprintf("ASIATEST%012d", n), SecretAccessKey: "secret", SessionToken: "token",
		Expiration: timestamppb.New(time.Now().Add(time.Hour)), RoleArn: "arn:aws:iam::000000000000:role/test",
	}), nil
}

func newControlPlane(t testing.TB) *controlPlane {
	return newControlPlaneAt(t, "127.0.0.1:0")
}

// newControlPlaneAt serves a control plane on addr.
func newControlPlaneAt(t testing.TB, addr string) *controlPlane {
	cp := &controlPlane{t: t, changed: make(chan struct{}), instances: map[string]string{}, logGroups: map[string]bool{}, logEvents: map[string][]string{}}
	mux := http.NewServeMux()
	mux.Handle(agentv1connect.NewAgentServiceHandler(cp))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &p}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	cp.close = func() { srv.Close() }
	t.Cleanup(cp.close)
	cp.url = "http://" + ln.Addr().String()
	return cp
}

func (cp *controlPlane) notifyLocked() {
	close(cp.changed)
	cp.changed = make(chan struct{})
}

func (cp *controlPlane) Register(_ context.Context, req *connect.Request[agentv1.RegisterRequest]) (*connect.Response[agentv1.RegisterResponse], error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.registrations = append(cp.registrations, req.Msg)
	arn, ok := cp.instances[req.Msg.GetHostId()]
	if !ok {
		arn = fmt.Sprintf("arn:aws:ecs:us-east-1:000000000000:container-instance/%s/%d", req.Msg.GetCluster(), len(cp.instances)+1)
		cp.instances[req.Msg.GetHostId()] = arn
	}
	cp.notifyLocked()
	subnet := ""
	for _, c := range cp.taskSubnets {
		_, a, _ := net.ParseCIDR(c)
		free := true
		for _, tk := range req.Msg.GetTakenTaskSubnets() {
			if _, b, err := net.ParseCIDR(tk); err == nil && (a.Contains(b.IP) || b.Contains(a.IP)) {
				free = false
			}
		}
		if free {
			subnet = c
			break
		}
	}
	return connect.NewResponse(&agentv1.RegisterResponse{
		ContainerInstance: &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(arn)},
		ClusterArn:        "arn:aws:ecs:us-east-1:000000000000:cluster/" + req.Msg.GetCluster(),
		TaskSubnet:        subnet,
	}), nil
}

func (cp *controlPlane) Session(ctx context.Context, stream *connect.BidiStream[agentv1.SessionRequest, agentv1.SessionResponse]) error {
	first, err := stream.Receive()
	if err != nil {
		return err
	}
	if first.GetHello() == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("hello first"))
	}
	send := make(chan *agentv1.SessionResponse, 64)
	cp.mu.Lock()
	cp.hellos = append(cp.hellos, first.GetHello())
	cp.send = send
	cp.sessions++
	cp.notifyLocked()
	cp.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	senderDone := make(chan struct{})
	defer func() {
		// The handler must not return while the sender still writes.
		cancel()
		<-senderDone
		cp.mu.Lock()
		if cp.send == send {
			cp.send = nil
		}
		cp.mu.Unlock()
	}()
	go func() {
		defer close(senderDone)
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-send:
				if err := stream.Send(m); err != nil {
					cancel()
					return
				}
			}
		}
	}()
	for {
		m, err := stream.Receive()
		if err != nil {
			return nil
		}
		cp.mu.Lock()
		switch msg := m.GetMessage().(type) {
		case *agentv1.SessionRequest_Heartbeat:
			cp.heartbeats = append(cp.heartbeats, msg.Heartbeat)
		case *agentv1.SessionRequest_TaskState:
			cp.states = append(cp.states, msg.TaskState)
			if !cp.noStateAck {
				send <- &agentv1.SessionResponse{Message: &agentv1.SessionResponse_StateAck{StateAck: &agentv1.StateAck{Seqs: []uint64{msg.TaskState.GetSeq()}}}}
			}
		case *agentv1.SessionRequest_Ack:
			cp.acks = append(cp.acks, msg.Ack.GetDeliveryIds()...)
		}
		cp.notifyLocked()
		cp.mu.Unlock()
	}
}

// waitFor polls cond (under the lock) on every change until it holds or
// timeout passes, failing the test then.
func (cp *controlPlane) waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		cp.mu.Lock()
		ok, ch := cond(), cp.changed
		cp.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			cp.mu.Lock()
			var b strings.Builder
			for _, s := range cp.states {
				fmt.Fprintf(&b, "\n  %s", s)
			}
			fmt.Fprintf(&b, "\n  (%d registrations, %d hellos, %d heartbeats, %d acks, %d sessions)", len(cp.registrations), len(cp.hellos), len(cp.heartbeats), len(cp.acks), cp.sessions)
			cp.mu.Unlock()
			if path := os.Getenv("BERTH_TEST_STACKS"); path != "" {
				buf := make([]byte, 8<<20)
				_ = os.WriteFile(path, buf[:runtime.Stack(buf, true)], 0o600)
			}
			t.Fatalf("timed out after %s waiting for %s; states:%s", timeout, what, b.String())
		}
	}
}

// push sends m down the current session, waiting for one to exist.
func (cp *controlPlane) push(t testing.TB, m *agentv1.SessionResponse) {
	t.Helper()
	cp.waitFor(t, 30*time.Second, "a session", func() bool { return cp.send != nil })
	cp.mu.Lock()
	s := cp.send
	cp.mu.Unlock()
	s <- m
}

func (cp *controlPlane) assign(t testing.TB, taskARN string, td *ecsv1.TaskDefinition) {
	t.Helper()
	cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: &agentv1.Assignment{
		DeliveryId:     "d-" + taskARN[strings.LastIndex(taskARN, "/")+1:],
		Task:           &ecsv1.Task{TaskArn: proto.String(taskARN), TaskDefinitionArn: td.TaskDefinitionArn},
		TaskDefinition: td,
	}}})
}

func (cp *controlPlane) stop(t testing.TB, taskARN, code string) {
	t.Helper()
	cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Stop{Stop: &agentv1.StopOrder{
		DeliveryId: "stop-" + taskARN, TaskArn: taskARN, StopCode: code, Reason: "stopped by test",
	}}})
}

// latest returns the last state reported for the task, or nil.
func (cp *controlPlane) latestLocked(taskARN string) *agentv1.TaskStateChange {
	for i := len(cp.states) - 1; i >= 0; i-- {
		if cp.states[i].GetTaskArn() == taskARN {
			return cp.states[i]
		}
	}
	return nil
}

// waitStatus waits until the task's reported status is status and returns
// that report.
func (cp *controlPlane) waitStatus(t testing.TB, taskARN, status string, timeout time.Duration) *agentv1.TaskStateChange {
	t.Helper()
	var got *agentv1.TaskStateChange
	cp.waitFor(t, timeout, taskARN+" "+status, func() bool {
		got = cp.latestLocked(taskARN)
		return got != nil && got.GetLastStatus() == status
	})
	return got
}

// statesOf returns every report of the task, in order.
func (cp *controlPlane) statesOf(taskARN string) []*agentv1.TaskStateChange {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []*agentv1.TaskStateChange
	for _, s := range cp.states {
		if s.GetTaskArn() == taskARN {
			out = append(out, s)
		}
	}
	return out
}

func (cp *controlPlane) ackCount(id string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	n := 0
	for _, a := range cp.acks {
		if a == id {
			n++
		}
	}
	return n
}

func containerOf(s *agentv1.TaskStateChange, name string) *agentv1.ContainerState {
	i := slices.IndexFunc(s.GetContainers(), func(c *agentv1.ContainerState) bool { return c.GetName() == name })
	if i < 0 {
		return nil
	}
	return s.GetContainers()[i]
}

// EnsureLogStream creates a stream as the scheduler's log store does: NOT_FOUND for a
// missing group without create_group.
func (cp *controlPlane) EnsureLogStream(_ context.Context, req *connect.Request[agentv1.EnsureLogStreamRequest]) (*connect.Response[agentv1.EnsureLogStreamResponse], error) {
	m := req.Msg
	cp.mu.Lock()
	defer cp.mu.Unlock()
	g := m.GetRegion() + "|" + m.GetLogGroup()
	if !cp.logGroups[g] {
		if !m.GetCreateGroup() {
			return nil, connect.NewError(connect.CodeNotFound, errors.New("ResourceNotFoundException: The specified log group does not exist."))
		}
		cp.logGroups[g] = true
	}
	k := g + "|" + m.GetLogStream()
	if _, ok := cp.logEvents[k]; !ok {
		cp.logEvents[k] = nil
	}
	return connect.NewResponse(&agentv1.EnsureLogStreamResponse{}), nil
}

// ShipLogs records a batch.
func (cp *controlPlane) ShipLogs(_ context.Context, req *connect.Request[agentv1.ShipLogsRequest]) (*connect.Response[agentv1.ShipLogsResponse], error) {
	m := req.Msg
	cp.mu.Lock()
	defer cp.mu.Unlock()
	k := m.GetRegion() + "|" + m.GetLogGroup() + "|" + m.GetLogStream()
	if _, ok := cp.logEvents[k]; !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("ResourceNotFoundException: The specified log stream does not exist."))
	}
	for _, e := range m.GetEvents() {
		cp.logEvents[k] = append(cp.logEvents[k], e.GetMessage())
	}
	cp.notifyLocked()
	return connect.NewResponse(&agentv1.ShipLogsResponse{TooNewStartIndex: -1, TooOldEndIndex: -1, ExpiredEndIndex: -1}), nil
}

// shipped returns the messages shipped to a stream.
func (cp *controlPlane) shipped(region, group, stream string) []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]string(nil), cp.logEvents[region+"|"+group+"|"+stream]...)
}
