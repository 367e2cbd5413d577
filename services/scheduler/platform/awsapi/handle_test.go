package awsapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

func TestHandle(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ok := func(_ context.Context, scope keys.Scope, m *ecsv1.ListClustersRequest) (*ecsv1.ListClustersResponse, error) {
		if m == nil {
			t.Fatal("fn got a nil message")
		}
		return &ecsv1.ListClustersResponse{ClusterArns: []string{scope.Account + "/" + scope.Region}}, nil
	}
	who := caller.With(context.Background(), caller.Identity{Account: "123456789012", Region: "eu-west-1"})

	resp, err := Handle(who, log, nil, ok)
	if err != nil || resp.Msg.GetClusterArns()[0] != "123456789012/eu-west-1" {
		t.Fatalf("Handle = %v, %v; want the caller's scope and a message for a nil request", resp, err)
	}
	for name, ctx := range map[string]context.Context{
		"no caller": context.Background(),
		"no region": caller.With(context.Background(), caller.Identity{Account: "123456789012"}),
	} {
		if _, err := Handle(ctx, log, connect.NewRequest(&ecsv1.ListClustersRequest{}), ok); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s: Handle = %v, want AccessDeniedException (%v)", name, err, connect.CodePermissionDenied)
		}
	}

	domain := func(context.Context, keys.Scope, *ecsv1.ListClustersRequest) (*ecsv1.ListClustersResponse, error) {
		return nil, awserr.ClusterNotFoundError()
	}
	if _, err := Handle(who, log, nil, domain); err == nil || logs.Len() != 0 {
		t.Fatalf("domain error: %v, logged %q; want it returned and not logged", err, logs.String())
	}
	fault := func(context.Context, keys.Scope, *ecsv1.ListClustersRequest) (*ecsv1.ListClustersResponse, error) {
		return nil, errors.New("disk on fire")
	}
	if _, err := Handle(who, log, nil, fault); err == nil || !strings.Contains(logs.String(), "disk on fire") {
		t.Fatalf("internal error: %v, logged %q; want it returned and logged", err, logs.String())
	}
	if e, ok := awserr.FromConnect(func() error { _, err := Handle(who, nil, nil, fault); return err }()); !ok || e.Type != "ServerException" {
		t.Fatalf("internal error without a logger: %v, want ServerException", e)
	}
}

func TestRequires(t *testing.T) {
	who := caller.With(context.Background(), caller.Identity{Account: "123456789012", Region: "eu-west-1"})
	ran := false
	fn := func(context.Context, keys.Scope, *ecsv1.ListClustersRequest) (*ecsv1.ListClustersResponse, error) {
		ran = true
		return &ecsv1.ListClustersResponse{}, nil
	}
	off := awserr.New("InternalServiceError", "no key")
	_, err := Handle(who, nil, nil, Requires(false, off, fn))
	if e, ok := awserr.FromConnect(err); !ok || e.Type != "InternalServiceError" || e.Message != "no key" || ran {
		t.Fatalf("failed precondition: %v (ran %v), want its exception and fn not run", err, ran)
	}
	if _, err := Handle(who, nil, nil, Requires(true, off, fn)); err != nil || !ran {
		t.Fatalf("met precondition: %v (ran %v), want fn's answer", err, ran)
	}
}
