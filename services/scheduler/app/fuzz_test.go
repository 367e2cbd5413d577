package app

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/services/scheduler/etcdembed"
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
	cli := etcdembed.StartForTest(f)
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
