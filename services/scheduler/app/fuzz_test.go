package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

// fuzzProcedures are the AdminService and AgentService calls the fuzzer feeds, with the
// content types a Connect client may send (unary JSON and binary; the Session stream's
// enveloped binary).
var fuzzProcedures = []struct{ path, contentType string }{
	{adminv1connect.AdminServiceCreateAccountProcedure, "application/json"},
	{adminv1connect.AdminServiceCreateAccessKeyProcedure, "application/proto"},
	{adminv1connect.AdminServiceCreateAccessKeyProcedure, "application/json"},
	{adminv1connect.AdminServiceDeleteAccountProcedure, "application/proto"},
	{adminv1connect.AdminServiceListAccessKeysProcedure, "application/json"},
	{adminv1connect.AdminServiceDeleteAccessKeyProcedure, "application/proto"},
	{adminv1connect.AdminServiceResolveAccessKeyProcedure, "application/proto"},
	{agentv1connect.AgentServiceRegisterProcedure, "application/proto"},
	{agentv1connect.AgentServiceRegisterProcedure, "application/json"},
	{agentv1connect.AgentServiceSessionProcedure, "application/connect+proto"},
}

// FuzzAdminAndAgentInput sends arbitrary bodies to the replica's admin and agent
// procedures, authenticated (admin token, an instance-scoped identity), and checks that
// no input panics a handler and every call gets an answer.
func FuzzAdminAndAgentInput(f *testing.F) {
	cli := etcdtest.Start(f)
	a, err := New(Config{Etcd: cli, HeartbeatTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := a.Bootstrap(context.Background(), "fuzz-token"); err != nil {
		f.Fatal(err)
	}
	var mu sync.Mutex
	var panicked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				mu.Lock()
				panicked = append(panicked, fmt.Sprintf("%s: %v", r.URL.Path, p))
				mu.Unlock()
				w.WriteHeader(599)
			}
		}()
		a.Handler().ServeHTTP(w, r)
	}))
	f.Cleanup(srv.Close)
	for i := range fuzzProcedures {
		f.Add(uint8(i), []byte(`{}`))
		f.Add(uint8(i), []byte(`{"accountId":"123456789012","containerInstanceArn":"arn:aws:ecs:us-east-1:123456789012:container-instance/c/x"}`))
		f.Add(uint8(i), []byte{0x0a, 0x0c, '1', '2', '3', '4', '5', '6', '7', '8', '9', '0', '1', '2'})
		f.Add(uint8(i), []byte{0, 0, 0, 0, 3, 0x0a, 0x01, 0xff})
		f.Add(uint8(i), []byte{0xff, 0xff, 0xff, 0xff, 0xff})
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		p := fuzzProcedures[int(which)%len(fuzzProcedures)]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+p.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", p.contentType)
		req.Header.Set("Authorization", "Bearer fuzz-token")
		req.Header.Set("Berth-Account", "123456789012")
		req.Header.Set("Berth-Region", "us-east-1")
		req.Header.Set("Berth-Container-Instance", "arn:aws:ecs:us-east-1:123456789012:container-instance/c/x")
		res, err := srv.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		if len(panicked) > 0 {
			t.Fatalf("handler panicked on %x: %v", body, panicked)
		}
	})
}

// FuzzAgentSession opens real agent sessions (AgentService.Session over HTTP/2, as an
// agent's stream arrives through the gateway) for a registered instance and feeds them
// arbitrary messages after the Hello: each input is cut into enveloped SessionRequest
// payloads (a length byte, then that many bytes), which the replica decodes and handles
// (heartbeats, task state reports, acks, a second Hello). No input may panic the replica
// or leave the stream without an answer.
func FuzzAgentSession(f *testing.F) {
	cli := etcdtest.Start(f)
	a, err := New(Config{Etcd: cli, HeartbeatTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	go func() { _ = a.Run(ctx) }()
	var mu sync.Mutex
	var panicked []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				mu.Lock()
				panicked = append(panicked, fmt.Sprintf("%s: %v", r.URL.Path, p))
				mu.Unlock()
			}
		}()
		a.Handler().ServeHTTP(w, r)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	f.Cleanup(srv.Close)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 10 * time.Second}
	const account, region = "123456789012", "us-east-1"
	identity := func(h http.Header) {
		h.Set("Berth-Account", account)
		h.Set("Berth-Region", region)
	}
	// One registered instance (an account-wide credential registers it, as the compose
	// agents' key does); the sessions then act as its agent.
	if _, err := a.Admin().CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: account})); err != nil {
		f.Fatal(err)
	}
	agent := agentv1connect.NewAgentServiceClient(hc, srv.URL)
	reg := connect.NewRequest(&agentv1.RegisterRequest{Cluster: "default", HostId: "fuzz-host", RuntimeReady: true,
		Resources: []*ecsv1.Resource{{Name: proto.String("CPU"), Type: proto.String("INTEGER"), IntegerValue: 1024},
			{Name: proto.String("MEMORY"), Type: proto.String("INTEGER"), IntegerValue: 1024}}})
	identity(reg.Header())
	res, err := agent.Register(ctx, reg)
	if err != nil {
		f.Fatal(err)
	}
	instance := res.Msg.GetContainerInstance().GetContainerInstanceArn()
	hello, _ := proto.Marshal(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: instance}}})
	seed := func(msgs ...*agentv1.SessionRequest) []byte {
		var b []byte
		for _, m := range msgs {
			p, _ := proto.Marshal(m)
			b = append(append(b, byte(len(p))), p...)
		}
		return b
	}
	taskARN := "arn:aws:ecs:us-east-1:" + account + ":task/default/0123456789abcdef0123456789abcdef"
	f.Add(seed(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{RuntimeReady: true, Cpu: 1024, Memory: 1024}}}))
	f.Add(seed(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: &agentv1.TaskStateChange{TaskArn: taskARN, LastStatus: "RUNNING", Seq: 1}}}))
	f.Add(seed(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{"x", ""}}}}))
	f.Add(seed(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: "arn:aws:ecs:us-east-1:" + account + ":container-instance/default/other"}}}))
	f.Add([]byte{3, 0x12, 0x01, 0xff, 200, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		body := envelope(nil, hello)
		for len(data) > 0 {
			n := int(data[0])
			data = data[1:]
			n = min(n, len(data))
			body = envelope(body, data[:n])
			data = data[n:]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+agentv1connect.AgentServiceSessionProcedure, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/connect+proto")
		identity(req.Header)
		req.Header.Set("Berth-Container-Instance", instance)
		if res, err := hc.Do(req); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			// Every stream ends with Connect's end-of-stream envelope (flag 2), an error
			// in it or not.
			if res.StatusCode != http.StatusOK || !bytes.Contains(b, []byte{2, 0, 0, 0}) {
				t.Fatalf("session answered %d %q", res.StatusCode, b)
			}
		} else if ctx.Err() != nil {
			t.Fatalf("the session did not answer within 10 s: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(panicked) > 0 {
			t.Fatalf("handler panicked: %v", panicked)
		}
	})
}

// envelope appends one Connect stream envelope (flags 0, big-endian length) holding p.
func envelope(b, p []byte) []byte {
	b = append(b, 0, byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p)))
	return append(b, p...)
}
