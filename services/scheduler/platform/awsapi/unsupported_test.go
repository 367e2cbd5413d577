package awsapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// partialECS implements two ECS actions: one fails with an exception of its own (of the
// type Unsupported answers), one succeeds; the rest are the generated Unimplemented ones.
type partialECS struct {
	ecsv1connect.UnimplementedEcsServiceHandler
}

func (partialECS) ListClusters(context.Context, *connect.Request[ecsv1.ListClustersRequest]) (*connect.Response[ecsv1.ListClustersResponse], error) {
	return nil, awserr.ToConnect(awserr.New("UnsupportedFeatureException", "own message"))
}

func (partialECS) DescribeClusters(context.Context, *connect.Request[ecsv1.DescribeClustersRequest]) (*connect.Response[ecsv1.DescribeClustersResponse], error) {
	return connect.NewResponse(&ecsv1.DescribeClustersResponse{}), nil
}

// TestUnsupported serves a partial ECS handler with the interceptor and calls it through
// a Connect client: an action the handler lacks answers the exception Answer returns for
// it; a handler's own exception, a success, and another service's bare
// CodeUnimplemented pass through.
func TestUnsupported(t *testing.T) {
	answer := func(action string) *awserr.Error {
		return awserr.New("UnsupportedFeatureException", "no %s here", action)
	}
	call := func(service string) ecsv1connect.EcsServiceClient {
		mux := http.NewServeMux()
		mux.Handle(ecsv1connect.NewEcsServiceHandler(partialECS{},
			connect.WithInterceptors(Unsupported{Service: service, Answer: answer})))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL)
	}
	ctx := context.Background()
	ecs := call(ecsv1connect.EcsServiceName)

	_, err := ecs.CreateDaemon(ctx, connect.NewRequest(&ecsv1.CreateDaemonRequest{}))
	if e, ok := awserr.FromConnect(err); !ok || e.Type != "UnsupportedFeatureException" || e.Message != "no CreateDaemon here" {
		t.Errorf("unimplemented action: %v, want Answer's exception", err)
	}
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("unimplemented action: code %v, want %v", connect.CodeOf(err), connect.CodeUnimplemented)
	}
	_, err = ecs.ListClusters(ctx, connect.NewRequest(&ecsv1.ListClustersRequest{}))
	if e, ok := awserr.FromConnect(err); !ok || e.Message != "own message" {
		t.Errorf("handler's own exception: %v, want it unchanged", err)
	}
	if _, err := ecs.DescribeClusters(ctx, connect.NewRequest(&ecsv1.DescribeClustersRequest{})); err != nil {
		t.Errorf("implemented action: %v", err)
	}

	other := call("berth.sts.v1.StsService")
	_, err = other.CreateDaemon(ctx, connect.NewRequest(&ecsv1.CreateDaemonRequest{}))
	if _, ok := awserr.FromConnect(err); ok || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("another service's procedure: %v, want the bare CodeUnimplemented", err)
	}
}
