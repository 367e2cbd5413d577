package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRPCLogCarriesRequestIdentity: a failed ECS call is logged with the gateway's request
// id, the caller's account and the ECS error type, so a request can be followed from the
// gateway's access log into the scheduler's.
func TestRPCLogCarriesRequestIdentity(t *testing.T) {
	var logs syncBuffer
	a, err := New(Config{Etcd: etcdtest.Start(t), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	client := ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL)
	req := connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("bad name!")})
	req.Header().Set(identity.AccountHeader, "123456789012")
	req.Header().Set(identity.RegionHeader, "us-east-1")
	req.Header().Set(identity.RequestIDHeader, "req-42")
	if _, err := client.CreateCluster(context.Background(), req); err == nil {
		t.Fatal("CreateCluster with an invalid name succeeded")
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "rpc" {
			continue
		}
		if rec["request_id"] != "req-42" || rec["account"] != "123456789012" || rec["error"] != "InvalidParameterException" ||
			!strings.HasSuffix(rec["procedure"].(string), "/CreateCluster") {
			t.Fatalf("rpc log line %s", line)
		}
		return
	}
	t.Fatalf("no rpc log line in:\n%s", logs.String())
}

// TestRPCLogNamesClusterAndTask: a call about a task logs its cluster and task id (here
// StopTask of an unknown task, refused, in a named cluster).
func TestRPCLogNamesClusterAndTask(t *testing.T) {
	var logs syncBuffer
	a, err := New(Config{Etcd: etcdtest.Start(t), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	client := ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL)
	req := connect.NewRequest(&ecsv1.StopTaskRequest{Cluster: proto.String("arn:aws:ecs:us-east-1:123456789012:cluster/prod"),
		Task: proto.String("arn:aws:ecs:us-east-1:123456789012:task/prod/0123456789abcdef0123456789abcdef")})
	req.Header().Set(identity.AccountHeader, "123456789012")
	req.Header().Set(identity.RegionHeader, "us-east-1")
	if _, err := client.StopTask(context.Background(), req); err == nil {
		t.Fatal("StopTask of an unknown task in an unknown cluster succeeded")
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "rpc" {
			continue
		}
		if rec["cluster"] != "prod" || rec["task"] != "0123456789abcdef0123456789abcdef" {
			t.Fatalf("rpc log line %s", line)
		}
		return
	}
	t.Fatalf("no rpc log line in:\n%s", logs.String())
}
