package agentsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Control is what the session server needs from the ECS domain (package control's
// *Server satisfies it). Each method takes the caller's account.
type Control interface {
	// RegisterInstance registers or refreshes the host described by req.
	RegisterInstance(ctx context.Context, account keys.Scope, req *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error)
	// ApplyTaskStateChange records a task state change the agent of instanceARN reported.
	ApplyTaskStateChange(ctx context.Context, account keys.Scope, instanceARN string, change *agentv1.TaskStateChange) error
	// SetAgentConnected sets the instance's agentConnected.
	SetAgentConnected(ctx context.Context, account keys.Scope, instanceARN string, connected bool) error
}

// Defaults for Config.
const (
	DefaultHeartbeatTimeout = 30 * time.Second // silence after which a session is dropped
	DefaultPresenceTTL      = 10 * time.Second // TTL of the replica's presence lease
	DefaultReassertEvery    = time.Minute      // period of agentConnected re-assertion
)

// Config configures a Server.
type Config struct {
	// Etcd is the etcd client. Required.
	Etcd *clientv3.Client
	// Control is the ECS domain. Required.
	Control Control
	// Replica names this scheduler replica in presence records (host name or pod name).
	Replica string
	// HeartbeatTimeout is how long a session may go without any message from the agent
	// before this replica drops it (the agent then reconnects). Default 30s.
	HeartbeatTimeout time.Duration
	// PresenceTTL is the TTL of this replica's presence lease: how long an agent still
	// looks present after this replica dies. Default 10s; rounded up to whole seconds.
	PresenceTTL time.Duration
	// ReassertEvery is how often a live session re-asserts agentConnected=true, healing a
	// reaper that raced a reconnect. Default 1 minute.
	ReassertEvery time.Duration
	// Logger receives session events; nil discards them.
	Logger *slog.Logger
	// OnHeartbeat, when set, is called with each heartbeat's lag: receipt time minus the
	// agent's sent_at (for metrics).
	OnHeartbeat func(lag time.Duration)
	// OnTaskStats, when set, receives each task stats sample of an agent with the
	// session's scope, cluster name and container instance ARN (CloudWatch's AWS/ECS
	// metrics); it must not block. Nil drops the samples.
	OnTaskStats func(scope keys.Scope, cluster, instanceARN string, stats *agentv1.TaskStats)
	// Logs is the CloudWatch Logs store agents ship awslogs output to; nil answers
	// EnsureLogStream and ShipLogs with Unavailable.
	Logs *logstore.Store
	// Secrets, when set, resolves the secrets of a task whose definition references any
	// (tasksecrets) as its assignment is sent: the values ride on the message only.
	Secrets SecretResolver
	// Credentials issues task role credentials (GetTaskCredentials); nil answers
	// Unimplemented.
	Credentials CredentialIssuer
}

// SecretResolver resolves a task definition's secrets in a scope (tasksecrets.Resolver):
// a *tasksecrets.Failure is the task's stoppedReason, any other error a fault to retry.
type SecretResolver interface {
	// Needs reports whether td needs resolving at all (tasksecrets.Resolver.Needs).
	Needs(td *ecsv1.TaskDefinition) bool
	Resolve(ctx context.Context, s keys.Scope, td *ecsv1.TaskDefinition) ([]*agentv1.ResolvedSecret, error)
}

// CredentialIssuer issues session credentials for a task's role (package taskcreds).
type CredentialIssuer interface {
	Issue(ctx context.Context, id caller.Identity, taskARN, roleType string) (*agentv1.GetTaskCredentialsResponse, error)
}

// GetTaskCredentials issues session credentials for the role of a task of the caller's
// (on the caller's instance when its credential is instance-scoped) through
// Config.Credentials.
func (s *Server) GetTaskCredentials(ctx context.Context, req *connect.Request[agentv1.GetTaskCredentialsRequest]) (*connect.Response[agentv1.GetTaskCredentialsResponse], error) {
	id, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	if s.cfg.Credentials == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("task credentials are not served by this scheduler"))
	}
	res, err := s.cfg.Credentials.Issue(ctx, id, req.Msg.GetTaskArn(), req.Msg.GetRoleType())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

// Server implements agentv1connect.AgentServiceHandler: Register, and one Session stream
// per agent. Heartbeats live in memory; presence lives in etcd on this replica's lease
// (see the package doc). Close it to end every session and revoke the lease.
type Server struct {
	cfg      Config
	log      *slog.Logger
	presence *presence
	acks     *inboxAcks   // deletes acknowledged inbox entries in batches
	tds      taskDefs     // the task definitions deliveries add to assignments
	routes   routeWatches // one watch of a cluster's task subnet routes for all its sessions
	inboxes  *store.Hub   // one watch of every inbox for all sessions (store.WatchShared)

	mu       sync.Mutex
	sessions map[string]*session // by instance id

	exec execHub // ECS Exec sessions waiting for or relaying to their agent (exec.go)

	count   atomic.Int64
	nextSID atomic.Uint64
}

var _ agentv1connect.AgentServiceHandler = (*Server)(nil)

// New returns a Server for cfg. It touches etcd only when the first session opens.
func New(cfg Config) *Server {
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.PresenceTTL <= 0 {
		cfg.PresenceTTL = DefaultPresenceTTL
	}
	if cfg.ReassertEvery <= 0 {
		cfg.ReassertEvery = DefaultReassertEvery
	}
	if cfg.Replica == "" {
		cfg.Replica = "scheduler"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:      cfg,
		log:      log,
		presence: newPresence(cfg.Etcd, cfg.PresenceTTL, log),
		acks:     &inboxAcks{kv: cfg.Etcd},
		routes:   routeWatches{cli: cfg.Etcd},
		inboxes:  store.NewHub(cfg.Etcd, keys.Inboxes(), keys.InboxPart),
		sessions: map[string]*session{},
	}
}

// Close ends every session this replica holds and revokes its presence lease, so other
// replicas see the agents gone at once rather than after the TTL.
func (s *Server) Close() {
	s.mu.Lock()
	for _, ss := range s.sessions {
		ss.cancel()
	}
	s.mu.Unlock()
	s.presence.close()
}

// Sessions returns how many agent sessions this replica holds.
func (s *Server) Sessions() int { return int(s.count.Load()) }

// Connected reports whether this replica holds a session for the instance id and when
// it last heard from the agent.
func (s *Server) Connected(instanceID string) (time.Time, bool) {
	s.mu.Lock()
	ss := s.sessions[instanceID]
	s.mu.Unlock()
	if ss == nil {
		return time.Time{}, false
	}
	return time.Unix(0, ss.lastHeard.Load()), true
}

// callerOf returns the caller of an agent call, refusing one without an account or region.
func callerOf(ctx context.Context) (caller.Identity, error) {
	id, ok := caller.From(ctx)
	if !ok || id.Account == "" {
		return caller.Identity{}, connect.NewError(connect.CodeUnauthenticated, caller.ErrNoAccount)
	}
	if id.Region == "" {
		return caller.Identity{}, connect.NewError(connect.CodeUnauthenticated, caller.ErrNoRegion)
	}
	return id, nil
}

// errScope is returned when an instance-scoped credential acts for another instance.
var errScope = errors.New("credential is scoped to another container instance")

// Register registers the host as a container instance through Control.RegisterInstance.
// An instance-scoped credential may only refresh its own instance's registration: the
// host must already map to that instance. Errors are ECS exceptions at the boundary.
func (s *Server) Register(ctx context.Context, req *connect.Request[agentv1.RegisterRequest]) (*connect.Response[agentv1.RegisterResponse], error) {
	id, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	if id.ContainerInstanceARN != "" {
		if err := s.checkHostScope(ctx, id, req.Msg); err != nil {
			return nil, err
		}
	}
	resp, err := s.cfg.Control.RegisterInstance(ctx, id.Scope(), req.Msg)
	if err != nil {
		return nil, awserr.ToConnect(err)
	}
	if id.ContainerInstanceARN != "" && !sameInstance(id.ContainerInstanceARN, resp.GetContainerInstance().GetContainerInstanceArn()) {
		return nil, connect.NewError(connect.CodePermissionDenied, errScope)
	}
	return connect.NewResponse(resp), nil
}

// checkHostScope refuses a scoped credential whose host maps to no instance or another.
func (s *Server) checkHostScope(ctx context.Context, id caller.Identity, req *agentv1.RegisterRequest) error {
	cluster := req.GetCluster()
	if cluster == "" {
		cluster = "default"
	}
	if arn.IsARN(cluster) {
		a, err := arn.Parse(cluster)
		if err != nil {
			return awserr.ToConnect(awserr.InvalidParameterf("Invalid cluster: %s", cluster))
		}
		cluster = a.Name
	}
	if strings.Contains(cluster, "/") || req.GetHostId() == "" {
		return awserr.ToConnect(awserr.InvalidParameterf("Invalid cluster or host id."))
	}
	v, _, err := store.Get[*wrapperspb.StringValue](ctx, s.cfg.Etcd, keys.InstanceByHost(id.Scope(), cluster, req.GetHostId()))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodePermissionDenied, errScope)
	case err != nil:
		return awserr.ToConnect(err)
	}
	if !sameInstance(id.ContainerInstanceARN, v.GetValue()) {
		return connect.NewError(connect.CodePermissionDenied, errScope)
	}
	return nil
}

// sameInstance compares two container instance references (ARNs in long or short form,
// or bare ids) by instance id.
func sameInstance(a, b string) bool { return instanceID(a) != "" && instanceID(a) == instanceID(b) }

func instanceID(ref string) string {
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.ContainerInstance {
			return ""
		}
		return a.Name
	}
	return ref
}

// Session serves one agent's stream. The first message must be Hello naming a registered
// container instance of the caller's account (and, for a scoped credential, its own).
// Then: ExpectedTasks, the instance's inbox (every undelivered or unacked assignment and
// stop order, then new ones as they are written), StateAck for each recorded task state
// change. The session ends when the agent goes silent for HeartbeatTimeout, when the
// same instance opens a newer session on this replica, or when the stream breaks.
func (s *Server) Session(ctx context.Context, stream *connect.BidiStream[agentv1.SessionRequest, agentv1.SessionResponse]) error {
	id, err := callerOf(ctx)
	if err != nil {
		return err
	}
	return s.serve(ctx, id, stream)
}

// stream is the part of a Connect bidi stream a session uses.
type stream interface {
	Send(*agentv1.SessionResponse) error
	Receive() (*agentv1.SessionRequest, error)
}

// serve is Session for an authenticated caller over any stream (tests and benchmarks
// drive it with in-memory streams).
func (s *Server) serve(ctx context.Context, id caller.Identity, stream stream) error {
	first, err := stream.Receive()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("the first session message must be hello"))
	}
	ref, err := arn.Parse(hello.GetContainerInstanceArn())
	if err != nil || ref.Type != arn.ContainerInstance || ref.Cluster == "" {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("hello: container_instance_arn %q is not a long-format container instance ARN", hello.GetContainerInstanceArn()))
	}
	if ref.Account != id.Account {
		return connect.NewError(connect.CodePermissionDenied, errors.New("container instance belongs to another account"))
	}
	if ref.Region != id.Region || ref.Partition != keys.Partition {
		// The agent registered (and signs) in one region; its instance lives there only.
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("container instance is not registered in region %s", id.Region))
	}
	if id.ContainerInstanceARN != "" && !sameInstance(id.ContainerInstanceARN, ref.Name) {
		return connect.NewError(connect.CodePermissionDenied, errScope)
	}
	rec, _, err := store.Get[*storev1.ContainerInstanceRecord](ctx, s.cfg.Etcd, keys.Instance(id.Scope(), ref.Cluster, ref.Name))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return connect.NewError(connect.CodeNotFound, errors.New("container instance is not registered"))
		}
		return connect.NewError(connect.CodeUnavailable, err)
	}
	if rec.GetContainerInstance().GetStatus() == "INACTIVE" {
		// Deregistered: the agent must register again (and gets a new instance).
		return connect.NewError(connect.CodeNotFound, errors.New("container instance is deregistered"))
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ss := &session{
		srv:      s,
		id:       fmt.Sprintf("%s-%d", s.cfg.Replica, s.nextSID.Add(1)),
		account:  id.Scope(),
		cluster:  ref.Cluster,
		instance: ref.Name,
		arn:      hello.GetContainerInstanceArn(),
		stream:   stream,
		cancel:   cancel,
		pending:  map[string]*delivery{},
		byKey:    map[string]string{},
		log:      s.log.With("instance", ref.Name, "cluster", ref.Cluster),
	}
	ss.lastHeard.Store(time.Now().UnixNano())
	ss.noteRegistration(rec)
	s.attach(ss)
	defer s.detach(ss)

	return ss.run(sctx)
}

// attach makes ss the instance's session on this replica, ending an older one.
func (s *Server) attach(ss *session) {
	s.mu.Lock()
	old := s.sessions[ss.instance]
	s.sessions[ss.instance] = ss
	s.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	s.count.Add(1)
}

func (s *Server) detach(ss *session) {
	s.mu.Lock()
	if s.sessions[ss.instance] == ss {
		delete(s.sessions, ss.instance)
	}
	s.mu.Unlock()
	s.count.Add(-1)
}
