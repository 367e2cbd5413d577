package gateway_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/gen/berth/sts/v1/stsv1connect"
	"github.com/berthhq/berth/services/gateway"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Keys the stub admin service knows.
const (
	devKey       = "test"
	devSecret    = "test"
	devAccount   = "000000000000"
	otherKey     = "AKIAOTHER"
	otherSecret  = "other-secret"
	otherAccount = "111111111111"
	agentKey     = "AKIAAGENT"
	agentSecret  = "agent-secret"
	instanceARN  = "arn:aws:ecs:us-east-1:000000000000:container-instance/default/abc"
	region       = "us-east-1"
)

// stubECS is a small EcsService served over real HTTP: enough to see that requests arrive
// decoded with the caller's identity and that responses and errors come back as AWS's.
type stubECS struct {
	ecsv1connect.UnimplementedEcsServiceHandler
	mu      sync.Mutex
	headers []http.Header
}

func (s *stubECS) record(h http.Header) {
	s.mu.Lock()
	s.headers = append(s.headers, h.Clone())
	s.mu.Unlock()
}

// calls returns how many calls reached the stub.
func (s *stubECS) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.headers)
}

func (s *stubECS) lastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) == 0 {
		return nil
	}
	return s.headers[len(s.headers)-1]
}

func exception(code connect.Code, typ, msg string) error {
	ce := connect.NewError(code, errors.New(msg))
	d, _ := connect.NewErrorDetail(&ecsv1.Exception{Type: typ, Message: msg})
	ce.AddDetail(d)
	return ce
}

func (s *stubECS) ListClusters(_ context.Context, r *connect.Request[ecsv1.ListClustersRequest]) (*connect.Response[ecsv1.ListClustersResponse], error) {
	s.record(r.Header())
	acct := r.Header().Get(identity.AccountHeader)
	return connect.NewResponse(&ecsv1.ListClustersResponse{
		ClusterArns: []string{"arn:aws:ecs:us-east-1:" + acct + ":cluster/default"},
	}), nil
}

func (s *stubECS) CreateCluster(_ context.Context, r *connect.Request[ecsv1.CreateClusterRequest]) (*connect.Response[ecsv1.CreateClusterResponse], error) {
	s.record(r.Header())
	name := r.Msg.GetClusterName()
	if name == "" {
		name = "default"
	}
	return connect.NewResponse(&ecsv1.CreateClusterResponse{Cluster: &ecsv1.Cluster{
		ClusterName:       proto.String(name),
		ClusterArn:        proto.String("arn:aws:ecs:us-east-1:" + r.Header().Get(identity.AccountHeader) + ":cluster/" + name),
		Status:            proto.String("ACTIVE"),
		RunningTasksCount: 2,
		Tags:              r.Msg.GetTags(),
		Statistics:        []*ecsv1.KeyValuePair{},
	}}), nil
}

func (s *stubECS) DescribeClusters(_ context.Context, r *connect.Request[ecsv1.DescribeClustersRequest]) (*connect.Response[ecsv1.DescribeClustersResponse], error) {
	s.record(r.Header())
	for _, c := range r.Msg.GetClusters() {
		if c == "missing" {
			return nil, exception(connect.CodeNotFound, "ClusterNotFoundException", "Cluster not found.")
		}
	}
	return connect.NewResponse(&ecsv1.DescribeClustersResponse{}), nil
}

func (s *stubECS) DescribeContainerInstances(_ context.Context, r *connect.Request[ecsv1.DescribeContainerInstancesRequest]) (*connect.Response[ecsv1.DescribeContainerInstancesResponse], error) {
	s.record(r.Header())
	return connect.NewResponse(&ecsv1.DescribeContainerInstancesResponse{
		ContainerInstances: []*ecsv1.ContainerInstance{{
			ContainerInstanceArn: proto.String(instanceARN),
			AgentConnected:       true,
			RegisteredAt:         proto.Float64(1700000000.5),
			Version:              9007199254740993,
			RegisteredResources: []*ecsv1.Resource{
				{Name: proto.String("CPU"), Type: proto.String("INTEGER"), IntegerValue: 2048},
				{Name: proto.String("PORTS"), Type: proto.String("STRINGSET"), StringSetValue: []string{"22"}},
			},
		}},
	}), nil
}

func (s *stubECS) DeleteCluster(_ context.Context, r *connect.Request[ecsv1.DeleteClusterRequest]) (*connect.Response[ecsv1.DeleteClusterResponse], error) {
	s.record(r.Header())
	return nil, errors.New("etcd: /berth/v1/clusters/secret-internal-detail")
}

func (s *stubECS) SubmitTaskStateChange(_ context.Context, r *connect.Request[ecsv1.SubmitTaskStateChangeRequest]) (*connect.Response[ecsv1.SubmitTaskStateChangeResponse], error) {
	s.record(r.Header())
	return connect.NewResponse(&ecsv1.SubmitTaskStateChangeResponse{Acknowledgment: proto.String("ACK")}), nil
}

// stubAdmin resolves the test keys and counts resets.
// A task role's session credentials (package taskcreds issues them in the scheduler).
const sessionKey, sessionSecret, sessionToken = "ASIASESSIONKEY", "session-secret", "session-token"

var sessionTokenSum = sha256.Sum256([]byte(sessionToken))

// expiringKey is a session credential (secret sessionSecret, token sessionToken) whose
// Expiration is expiringAt.
const expiringKey = "ASIAEXPIRINGKEY"

var expiringAt = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type stubAdmin struct {
	adminv1connect.UnimplementedAdminServiceHandler
	resolves atomic.Int64
	resets   atomic.Int64
}

func (a *stubAdmin) ResolveAccessKey(_ context.Context, r *connect.Request[adminv1.ResolveAccessKeyRequest]) (*connect.Response[adminv1.ResolveAccessKeyResponse], error) {
	a.resolves.Add(1)
	keys := map[string]*adminv1.ResolveAccessKeyResponse{
		devKey:   {AccessKey: &adminv1.AccessKey{AccessKeyId: devKey, AccountId: devAccount}, SecretAccessKey: devSecret},
		otherKey: {AccessKey: &adminv1.AccessKey{AccessKeyId: otherKey, AccountId: otherAccount}, SecretAccessKey: otherSecret},
		agentKey: {AccessKey: &adminv1.AccessKey{AccessKeyId: agentKey, AccountId: devAccount, ContainerInstanceArn: instanceARN}, SecretAccessKey: agentSecret},
		sessionKey: {AccessKey: &adminv1.AccessKey{AccessKeyId: sessionKey, AccountId: devAccount}, SecretAccessKey: sessionSecret,
			SessionTokenSha256: sessionTokenSum[:], PrincipalArn: "arn:aws:sts::" + devAccount + ":assumed-role/app/task1", PrincipalId: "AROAEXAMPLE:task1"},
		expiringKey: {AccessKey: &adminv1.AccessKey{AccessKeyId: expiringKey, AccountId: devAccount}, SecretAccessKey: sessionSecret,
			SessionTokenSha256: sessionTokenSum[:], PrincipalArn: "arn:aws:sts::" + devAccount + ":assumed-role/app/task2", PrincipalId: "AROAEXAMPLE:task2",
			Expiration: timestamppb.New(expiringAt)},
	}
	res, ok := keys[r.Msg.GetAccessKeyId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such key"))
	}
	return connect.NewResponse(res), nil
}

func (a *stubAdmin) ResetState(context.Context, *connect.Request[adminv1.ResetStateRequest]) (*connect.Response[adminv1.ResetStateResponse], error) {
	a.resets.Add(1)
	return connect.NewResponse(&adminv1.ResetStateResponse{}), nil
}

// stubAgent answers Register with the identity it sees and acks every session message.
type stubAgent struct {
	agentv1connect.UnimplementedAgentServiceHandler
}

func (stubAgent) Register(_ context.Context, r *connect.Request[agentv1.RegisterRequest]) (*connect.Response[agentv1.RegisterResponse], error) {
	h := r.Header()
	return connect.NewResponse(&agentv1.RegisterResponse{
		ClusterArn: fmt.Sprintf("account=%s instance=%s rid=%t auth=%t", h.Get(identity.AccountHeader), h.Get(identity.ContainerInstanceHeader), h.Get(identity.RequestIDHeader) != "", h.Get("Authorization") != ""),
	}), nil
}

func (stubAgent) Session(_ context.Context, s *connect.BidiStream[agentv1.SessionRequest, agentv1.SessionResponse]) error {
	var n uint64
	for {
		if _, err := s.Receive(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n++
		if err := s.Send(&agentv1.SessionResponse{Message: &agentv1.SessionResponse_StateAck{StateAck: &agentv1.StateAck{Seqs: []uint64{n}}}}); err != nil {
			return err
		}
	}
}

type env struct {
	ecs     *stubECS
	admin   *stubAdmin
	gw      *gateway.Gateway
	url     string
	sched   string
	clock   *clock
	cfg     gateway.Config
	httpCli *http.Client
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return time.Now()
	}
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func h2cServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// newEnv serves the stubs as the scheduler and a gateway in front of them; tweak adjusts
// the gateway's config.
func newEnv(t testing.TB, tweak func(*gateway.Config)) *env {
	t.Helper()
	e := &env{ecs: &stubECS{}, admin: &stubAdmin{}, clock: &clock{}}
	mux := http.NewServeMux()
	mux.Handle(ecsv1connect.NewEcsServiceHandler(e.ecs))
	mux.Handle(adminv1connect.NewAdminServiceHandler(e.admin))
	mux.Handle(agentv1connect.NewAgentServiceHandler(stubAgent{}))
	mux.Handle(stsv1connect.NewStsServiceHandler(stubSTS{}))
	e.sched = h2cServer(t, mux).URL
	e.cfg = gateway.Config{
		SchedulerURL: e.sched,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dev:          true,
		Now:          e.clock.Now,
	}
	if tweak != nil {
		tweak(&e.cfg)
	}
	gw, err := gateway.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	e.url = h2cServer(t, gw).URL
	e.httpCli = gateway.NewH2CClient()
	return e
}
