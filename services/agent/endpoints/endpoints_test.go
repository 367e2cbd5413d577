package endpoints_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/endpoints"
)

type source struct{}

func (source) TaskMetadata(_ context.Context, arn string) (*endpoints.Task, bool) {
	return &endpoints.Task{TaskARN: arn, Family: "web", Revision: "1", KnownStatus: "RUNNING", LaunchType: "EC2",
		Containers: []*endpoints.Container{{DockerID: "d1", Name: "app", KnownStatus: "RUNNING"}, {DockerID: "d2", Name: "side"}}}, true
}

func (source) ContainerStats(_ context.Context, _, name string) (*endpoints.Stats, error) {
	if name == "side" {
		return nil, fmt.Errorf("not running")
	}
	return &endpoints.Stats{ID: "d1", MemoryStats: endpoints.MemoryStats{Usage: 42}}, nil
}

func assignment(arn, role string) *agentv1.Assignment {
	return &agentv1.Assignment{
		Task: &ecsv1.Task{TaskArn: proto.String(arn)},
		TaskDefinition: &ecsv1.TaskDefinition{TaskRoleArn: proto.String(role), ContainerDefinitions: []*ecsv1.ContainerDefinition{
			{Name: proto.String("app")}, {Name: proto.String("side")}}},
	}
}

func get(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		_ = json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}

func envOf(env []string, name string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// TestCredentialsAndMetadata: a task with a role gets a full credentials URI on the
// agent's address and a metadata URI per container; the credentials are refreshed at
// half their lifetime; another task's ids answer nothing; Release forgets the task.
func TestCredentialsAndMetadata(t *testing.T) {
	var calls atomic.Int32
	s, err := endpoints.New(endpoints.Config{Credentials: func(_ context.Context, taskARN, roleType string) (*agentv1.GetTaskCredentialsResponse, error) {
		n := calls.Add(1)
		return &agentv1.GetTaskCredentialsResponse{AccessKeyId: fmt.Sprintf("ASIA%d", n), SecretAccessKey: "s", SessionToken: "tok " + taskARN + " " + roleType,
			Expiration: timestamppb.New(time.Now().Add(2 * time.Second)), RoleArn: "arn:aws:iam::1:role/r"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetSource(source{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()

	env, err := s.Prepare(ctx, assignment("arn:task/a", "arn:aws:iam::1:role/r"), "host")
	if err != nil {
		t.Fatal(err)
	}
	credURI := envOf(env["app"], endpoints.EnvCredentialsFullURI)
	if !strings.HasPrefix(credURI, "http://"+s.Addr()+"/v2/credentials/") || envOf(env["side"], endpoints.EnvCredentialsFullURI) != credURI ||
		envOf(env["app"], endpoints.EnvCredentialsRelativeURI) != "" {
		t.Fatalf("env %v", env)
	}
	var creds map[string]string
	if st := get(t, credURI, &creds); st != 200 || creds["AccessKeyId"] != "ASIA1" || creds["Token"] != "tok arn:task/a TaskRole" ||
		creds["RoleArn"] != "arn:aws:iam::1:role/r" || creds["Expiration"] == "" {
		t.Fatalf("credentials: %d %v", st, creds)
	}
	// Refreshed once half the 2 s lifetime passed.
	deadline := time.Now().Add(5 * time.Second)
	for get(t, credURI, &creds); creds["AccessKeyId"] == "ASIA1"; get(t, credURI, &creds) {
		if time.Now().After(deadline) {
			t.Fatal("credentials not refreshed")
		}
		time.Sleep(100 * time.Millisecond)
	}

	meta := envOf(env["app"], endpoints.EnvMetadataV4)
	if meta == envOf(env["side"], endpoints.EnvMetadataV4) || !strings.HasPrefix(meta, "http://"+s.Addr()+"/v4/") {
		t.Fatalf("metadata URIs %q %q", meta, envOf(env["side"], endpoints.EnvMetadataV4))
	}
	var ctr endpoints.Container
	var task endpoints.Task
	var stats endpoints.Stats
	var taskStats map[string]*endpoints.Stats
	if get(t, meta, &ctr) != 200 || ctr.Name != "app" || get(t, meta+"/task", &task) != 200 || task.TaskARN != "arn:task/a" ||
		get(t, meta+"/stats", &stats) != 200 || stats.MemoryStats.Usage != 42 || get(t, meta+"/task/stats", &taskStats) != 200 ||
		len(taskStats) != 2 || taskStats["d1"] == nil || taskStats["d2"] != nil {
		t.Fatalf("metadata: %+v %+v %+v %v", ctr, task, stats, taskStats)
	}

	// A task without a role gets metadata but no credentials; its ids are its own.
	env2, err := s.Prepare(ctx, assignment("arn:task/b", ""), "host")
	if err != nil || envOf(env2["app"], endpoints.EnvCredentialsFullURI) != "" || envOf(env2["app"], endpoints.EnvMetadataV4) == meta {
		t.Fatalf("role-less task: %v %v", env2, err)
	}
	if get(t, "http://"+s.Addr()+"/v2/credentials/00000000000000000000000000000000", nil) != http.StatusBadRequest {
		t.Error("an unknown credentials id answered")
	}

	s.Release("arn:task/a")
	if get(t, credURI, nil) != http.StatusBadRequest || get(t, meta, nil) != http.StatusNotFound {
		t.Error("a released task's endpoints still answer")
	}
	n := calls.Load()
	time.Sleep(1500 * time.Millisecond)
	if calls.Load() != n {
		t.Error("credentials still refreshed after Release")
	}
}

// TestLinkLocal: with the host routing 169.254.170.2 to the agent, tasks outside the host
// network get the relative URI, as on ECS.
func TestLinkLocal(t *testing.T) {
	s, err := endpoints.New(endpoints.Config{LinkLocal: true, Credentials: func(context.Context, string, string) (*agentv1.GetTaskCredentialsResponse, error) {
		return &agentv1.GetTaskCredentialsResponse{Expiration: timestamppb.New(time.Now().Add(time.Hour))}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := s.Prepare(context.Background(), assignment("arn:task/a", "arn:aws:iam::1:role/r"), "awsvpc")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("arn:task/a")
	if rel := envOf(env["app"], endpoints.EnvCredentialsRelativeURI); !strings.HasPrefix(rel, "/v2/credentials/") ||
		envOf(env["app"], endpoints.EnvCredentialsFullURI) != "" || !strings.HasPrefix(envOf(env["app"], endpoints.EnvMetadataV4), "http://169.254.170.2/v4/") {
		t.Errorf("env %v", env["app"])
	}
}

// TestAPIRelay: with Config.API, every task (with a role or without) gets AWS_ENDPOINT_URL
// at the address it reaches the endpoints on (169.254.170.2 for bridge and awsvpc, the
// listener for host), and POST / is
// relayed to Berth's gateway with the caller's Host header (which its SigV4 signature
// covers), body and headers; the metadata routes are unchanged.
func TestAPIRelay(t *testing.T) {
	type seen struct{ host, auth, body, path string }
	got := make(chan seen, 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Host, r.Header.Get("Authorization"), string(b), r.URL.Path}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"clusterArns":[]}`))
	}))
	defer gw.Close()
	s, err := endpoints.New(endpoints.Config{LinkLocal: true, API: gw.URL, Credentials: func(context.Context, string, string) (*agentv1.GetTaskCredentialsResponse, error) {
		return &agentv1.GetTaskCredentialsResponse{Expiration: timestamppb.New(time.Now().Add(time.Hour))}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	env, err := s.Prepare(ctx, assignment("arn:task/a", "arn:aws:iam::1:role/r"), "bridge")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("arn:task/a")
	if v := envOf(env["app"], endpoints.EnvEndpointURL); v != "http://169.254.170.2" {
		t.Errorf("%s = %q, want http://169.254.170.2", endpoints.EnvEndpointURL, v)
	}
	noRole, err := s.Prepare(ctx, assignment("arn:task/b", ""), "bridge")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("arn:task/b")
	if v := envOf(noRole["app"], endpoints.EnvEndpointURL); v != "http://169.254.170.2" {
		t.Errorf("a task without a role got %s=%q, want http://169.254.170.2 too", endpoints.EnvEndpointURL, v)
	}
	host, err := s.Prepare(ctx, assignment("arn:task/c", ""), "host")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("arn:task/c")
	if v := envOf(host["app"], endpoints.EnvEndpointURL); v != "http://"+s.Addr() {
		t.Errorf("a host task got %s=%q, want the listener http://%s", endpoints.EnvEndpointURL, v, s.Addr())
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+"/", strings.NewReader(`{}`))
	req.Host = "169.254.170.2"
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
	req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.ListClusters")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"clusterArns":[]}` {
		t.Fatalf("relayed answer %d %s", resp.StatusCode, body)
	}
	if g := <-got; g.host != "169.254.170.2" || g.auth != "AWS4-HMAC-SHA256 Credential=x" || g.body != "{}" || g.path != "/" {
		t.Errorf("gateway saw %+v", g)
	}
	if code := get(t, "http://"+s.Addr()+"/v4/unknown", nil); code != http.StatusNotFound {
		t.Errorf("metadata route: %d", code)
	}
}
