package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

// TestHealthAndMetrics runs one replica until it leads, then checks the health service
// (the leader name turns SERVING), gRPC reflection, and /metrics.
func TestHealthAndMetrics(t *testing.T) {
	cli := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	a, err := app.New(app.Config{Etcd: cli, Registry: reg, LeaderTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Handler())
	srv.EnableHTTP2 = true
	srv.Start()
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	defer func() { cancel(); <-done }()

	health := grpchealth.NewClient(srv.Client(), srv.URL)
	for _, svc := range []string{"", ecsv1connect.EcsServiceName} {
		res, err := health.Check(t.Context(), &grpchealth.CheckRequest{Service: svc})
		if err != nil || res.Status != grpchealth.StatusServing {
			t.Fatalf("health %q = %v, %v; want SERVING", svc, res, err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := health.Check(t.Context(), &grpchealth.CheckRequest{Service: app.LeaderServiceName})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == grpchealth.StatusServing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader health still %v", res.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := health.Check(t.Context(), &grpchealth.CheckRequest{Service: "no.such.Service"}); err == nil {
		t.Error("unknown service: want NotFound")
	}

	// The etcd histogram has a series only once a request went through the
	// instrumented client; the scheduler's own loops may not have made one yet.
	req := connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("metrics")})
	req.Header().Set(identity.AccountHeader, "123456789012")
	req.Header().Set(identity.RegionHeader, "us-east-1")
	if _, err := ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL).CreateCluster(t.Context(), req); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"berth_scheduler_leader 1",
		"berth_scheduler_agent_sessions 0",
		`berth_scheduler_tasks{status="RUNNING"} 0`,
		"berth_scheduler_etcd_request_duration_seconds_bucket",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestReflection lists the services through gRPC reflection with grpc-go's own client
// over h2c, as grpcurl and buf curl do.
func TestReflection(t *testing.T) {
	cli := etcdtest.Start(t)
	a, err := app.New(app.Config{Etcd: cli})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Handler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true) // gRPC reflection needs HTTP/2
	srv.Start()
	defer srv.Close()

	conn, err := grpc.NewClient(srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{ecsv1connect.EcsServiceName, grpchealth.HealthV1ServiceName} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, want %s among them", names, want)
		}
	}

	// The etcd histogram has a series only once a request went through the
	// instrumented client; the scheduler's own loops may not have made one yet.
	req := connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("metrics")})
	req.Header().Set(identity.AccountHeader, "123456789012")
	req.Header().Set(identity.RegionHeader, "us-east-1")
	if _, err := ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL).CreateCluster(t.Context(), req); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics without a registry: %d, want 404", resp.StatusCode)
	}
}
