package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestRecoverOptionAnswersServerException serves a handler that panics with the
// replica's recover option over real HTTP: the client gets ServerException with the
// exception detail the gateway reads, the log names the procedure, and the next call is
// served.
func TestRecoverOptionAnswersServerException(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	const procedure = "/berth.test.v1.Test/Panic"
	calls := 0
	h := connect.NewUnaryHandler(procedure, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		calls++
		if calls == 1 {
			var m map[string]int
			m["boom"]++ // a nil-map write: the kind of bug client input can trip
		}
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, recoverOption(log))
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+procedure)

	_, err := client.CallUnary(t.Context(), connect.NewRequest(&emptypb.Empty{}))
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a Connect error", err)
	}
	if ce.Code() != connect.CodeInternal || ce.Message() != "An internal error occurred." {
		t.Errorf("error = %s %q, want internal \"An internal error occurred.\"", ce.Code(), ce.Message())
	}
	var found bool
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ex, ok := v.(*ecsv1.Exception); ok && ex.GetType() == "ServerException" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("details %v carry no ServerException", ce.Details())
	}
	if !strings.Contains(logs.String(), "handler panicked") || !strings.Contains(logs.String(), procedure) {
		t.Errorf("log %q does not name the panic and its procedure", logs.String())
	}
	if _, err := client.CallUnary(t.Context(), connect.NewRequest(&emptypb.Empty{})); err != nil {
		t.Errorf("the call after the panic: %v", err)
	}
}
