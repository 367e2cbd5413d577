// Package app assembles one scheduler replica: the handler of every AWS service the
// scheduler serves (ECS's control + service, STS, Secrets Manager, SSM, CloudWatch Logs
// with its replication between replicas, ELBv2, Cloud Map, ECR, EventBridge), the agent session server,
// the admin service, the console's change feed and the placement engine, served over
// Connect on one h2c handler behind caller.Interceptor; and the leader loops (reaper, service reconciler,
// EventBridge's events.Runner) that run while this
// replica holds the etcd election. `berth scheduler` and `berth dev` both build on it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/gen/berth/applicationautoscaling/v1/applicationautoscalingv1connect"
	"github.com/berthhq/berth/gen/berth/cloudwatch/v1/cloudwatchv1connect"
	"github.com/berthhq/berth/gen/berth/console/v1/consolev1connect"
	"github.com/berthhq/berth/gen/berth/ecr/v1/ecrv1connect"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/gen/berth/elbv2/v1/elbv2v1connect"
	"github.com/berthhq/berth/gen/berth/events/v1/eventsv1connect"
	"github.com/berthhq/berth/gen/berth/logs/v1/logsv1connect"
	"github.com/berthhq/berth/gen/berth/secretsmanager/v1/secretsmanagerv1connect"
	"github.com/berthhq/berth/gen/berth/servicediscovery/v1/servicediscoveryv1connect"
	"github.com/berthhq/berth/gen/berth/ssm/v1/ssmv1connect"
	"github.com/berthhq/berth/gen/berth/sts/v1/stsv1connect"
	"github.com/berthhq/berth/services/scheduler/admin"
	"github.com/berthhq/berth/services/scheduler/autoscaling"
	"github.com/berthhq/berth/services/scheduler/cloudmap"
	"github.com/berthhq/berth/services/scheduler/cloudwatch"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/ecs/agentsession"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/daemon"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/reaper"
	"github.com/berthhq/berth/services/scheduler/ecs/service"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/ecs/taskcreds"
	"github.com/berthhq/berth/services/scheduler/ecs/tasksecrets"
	"github.com/berthhq/berth/services/scheduler/elbv2/elbapi"
	"github.com/berthhq/berth/services/scheduler/events"
	"github.com/berthhq/berth/services/scheduler/logs/logpeers"
	"github.com/berthhq/berth/services/scheduler/logs/logsapi"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/changefeed"
	"github.com/berthhq/berth/services/scheduler/platform/etcdmetrics"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"github.com/berthhq/berth/services/scheduler/secretsmanager"
	"github.com/berthhq/berth/services/scheduler/ssm"
	"github.com/berthhq/berth/services/scheduler/sts"
)

// Config configures a replica.
type Config struct {
	// Etcd is the etcd client. Required.
	Etcd *clientv3.Client
	// Region is the default region, e.g. "us-east-1" (default): ECS state written by
	// builds that had no regions is moved into it once (see MigrateLayout). Requests are
	// served in the region of their SigV4 scope, whatever this is.
	Region string
	// Logger receives the replica's logs; nil discards them.
	Logger *slog.Logger
	// Replica names this replica in the election and in agent presence; default
	// "{hostname}-{pid}".
	Replica string
	// LeaderTTL is the election session's TTL. Default 5 s.
	LeaderTTL time.Duration
	// Dev enables AdminService.ResetState and makes every AdminService method,
	// ResolveAccessKey included, need the admin token (admin.Guard.Strict): `berth dev`
	// only, whose plain loopback listener any local process reaches.
	Dev bool
	// HeartbeatTimeout is how long an agent stream may stay silent before the replica
	// treats the agent as gone. Default agentsession.DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// ReaperInterval, LostAfter, PendingTimeout and Retention tune the reaper (see
	// reaper.Config); zero keeps its defaults.
	ReaperInterval, LostAfter, PendingTimeout, Retention time.Duration
	// ReconcileInterval is the time between service reconcile passes. Default 1 s.
	ReconcileInterval time.Duration
	// TaskStableAfter is how long a service task without health checks must stay RUNNING
	// before it counts toward minimumHealthyPercent and its deployment's completion (see
	// service.ReconcilerConfig.StableAfter). Zero means service.DefaultStableAfter (40 s,
	// as AWS); negative counts tasks at once.
	TaskStableAfter time.Duration
	// DeploymentBakeMinute is the length of one minute of the bake times and lifecycle
	// hook timeouts of BLUE_GREEN, LINEAR and CANARY deployments
	// (service.ReconcilerConfig.BakeMinute). Zero means time.Minute; `berth dev` takes
	// BERTH_DEV_BAKE_MINUTE for tests.
	DeploymentBakeMinute time.Duration
	// Registry, when set, receives the replica's Prometheus metrics (placements, etcd
	// requests, tasks by status, sessions, heartbeat lag, leadership) and Handler serves
	// it at /metrics. Nil records nothing.
	Registry *prometheus.Registry
	// GzipMinBytes is the smallest response message (bytes) the replica gzips for a
	// client that accepts gzip. Zero (the default) never compresses: the replica's
	// clients are the gateway and agents over internal links, where gzip cost more CPU
	// than the bytes it saved (about a tenth of the placement path's CPU, on every
	// agent assignment and every ECS response). Requests that arrive gzipped are
	// decoded either way.
	GzipMinBytes int
	// MaxTxnOps is the etcd cluster's --max-txn-ops (operations per txn): it bounds how
	// many placements RunTask's group commit puts in one txn (control.Config.MaxTxnOps).
	// Zero means etcd's default, 128.
	MaxTxnOps int
	// Logs is the replica's CloudWatch Logs store (on its disk, never in etcd): agents
	// ship awslogs output into it and Run sweeps it for retention. Nil serves no logs.
	Logs *logstore.Store
	// LogPeerURL, when set with Logs, makes this replica a member of the log store
	// replica set (package logpeers): the base URL other replicas reach it at (its
	// listener: http:// for h2c, https:// with TLS). Changes are copied to every live
	// member and a (re)starting replica catches up before it answers reads. Empty keeps
	// the store to this replica (`berth dev`).
	LogPeerURL string
	// LogPeerClient is the HTTP client for the other members (with TLS, carrying this
	// replica's scheduler certificate); nil is a plain client.
	LogPeerClient *http.Client
	// LogSweepInterval is the time between retention sweeps of Logs; default 10 min.
	LogSweepInterval time.Duration
	// Metrics is the replica's CloudWatch metric store (on its disk, never in etcd):
	// PutMetricData and the AWS/ECS metrics of the agents' samples are written to it.
	// Nil serves CloudWatch's metric actions with an error and drops the samples.
	Metrics metricstore.Store
	// AlarmActions runs CloudWatch alarm actions; nil runs them with the replica's
	// Application Auto Scaling (step scaling policies' ARNs).
	AlarmActions cloudwatch.AlarmActions
	// AlarmEvaluationInterval is the time between the leader's alarm evaluations;
	// default 1 minute, as CloudWatch.
	AlarmEvaluationInterval time.Duration
	// Keyring seals the values of Secrets Manager secrets and SSM parameters and the
	// secrets of access keys (see package seal; the key is never in etcd). Nil disables
	// both services (their actions answer an error naming the missing key) and stores
	// new access keys' secrets in the clear.
	Keyring *seal.Keyring
	// ECRRegistryHost is the host[:port] clients reach the ECR registry (package
	// ecr/registry) at: the host of every repositoryUri and the proxyEndpoint of
	// GetAuthorizationToken. "" when no registry runs: every ECR action answers an error
	// saying so. The registry's tokens are sealed with Keyring.
	ECRRegistryHost string
	// ECRRegistryHTTPS says the registry at ECRRegistryHost serves HTTPS: the
	// proxyEndpoint GetAuthorizationToken answers is https://, not http://.
	ECRRegistryHTTPS bool
	// ECRBlobDir is the ECR registry's blob directory, where PutImage checks that the
	// layers of a manifest are present; "" lets PutImage only tag images a repository
	// already holds.
	ECRBlobDir string
	// TaskSubnetPool is the IPv4 range container instances' awsvpc task subnets (one /24
	// each) are allocated from; "" is control.DefaultTaskSubnetPool.
	TaskSubnetPool string
	// NoTaskCache makes DescribeTasks read every task record from etcd instead of
	// answering from the replica's watch-fed task cache (control.Config.Watcher): less
	// memory per cluster described, more etcd reads. The bench compares the two.
	NoTaskCache bool
	// PeerOf returns what a request's connection proved about the caller (the roles of
	// its verified TLS client certificate; see caller.Peer), for a replica served over
	// TLS with client certificates. When set, identity headers count only from gateway
	// peers and ResolveAccessKey answers only gateway and admin peers. Nil (a plain
	// listener: `berth dev`, or a network only gateways reach) proves nothing and trusts
	// the listener's reach.
	PeerOf func(r *http.Request) caller.Peer
	// EtcdRequestTimeout bounds each etcd request of the API and the leader loops, which
	// also require an etcd leader (store.RequireQuorum): without quorum a call answers
	// ServerException within this long instead of waiting for its caller's deadline.
	// Zero means store.DefaultRequestTimeout (4 s).
	EtcdRequestTimeout time.Duration
	// TaskCredentialsLifetime is how long task role credentials are accepted
	// (taskcreds.DefaultLifetime when zero); the agent refreshes them at half of it.
	TaskCredentialsLifetime time.Duration
	// AutoScalingInterval is how often the leader fires due scheduled actions of
	// Application Auto Scaling (target tracking is evaluated once a minute). Default 5 s.
	AutoScalingInterval time.Duration
}

// App is one scheduler replica.
type App struct {
	cfg      Config
	log      *slog.Logger
	control  *control.Server
	services *service.Handler
	kick     *service.Kicker
	sessions *agentsession.Server
	admin    *admin.Service
	placer   *placement.Placer
	elector  *leader.Elector
	leading  atomic.Bool
	handler  http.Handler
	// rolloutDone observes finished deployments (nil without a registry).
	rolloutDone func(state string, d time.Duration)
	secrets     *secretsmanager.Handler
	params      *ssm.Handler
	ecr         *ecr.Handler
	cloudMap    *cloudmap.Registry
	kv          clientv3.KV        // cfg.Etcd's KV, instrumented when metrics are on
	watchKV     etcdmetrics.Client // the same with the watcher, for placement and services
	tokens      *admin.Tokens
	logPeers    *logpeers.Peers // nil without Config.LogPeerURL
	autoScaling *autoscaling.Handler
	events      *events.Handler
	// daemons serves the managed daemon actions; daemonKick wakes the leader's daemon
	// loop after one.
	daemons    *daemon.Daemons
	daemonKick *service.Kicker
	cwMetrics  *cloudwatch.Metrics    // nil without Config.Metrics
	ecsMetrics *cloudwatch.ECSMetrics // nil without Config.Metrics
}

// ecsHandler serves the ECS API: service actions from service.Handler, everything else
// from control.Server; the actions neither implements fall to control.Server's embedded
// UnimplementedEcsServiceHandler (one embedding level deeper), which control.NewHandler
// answers with UnsupportedFeatureException.
type ecsHandler struct {
	*control.Server
	*service.Handler
	*daemon.Daemons
}

// New assembles a replica. It touches etcd only through the components' own lazy use.
func New(cfg Config) (*App, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("app: Config.Etcd is required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Replica == "" {
		host, _ := os.Hostname()
		cfg.Replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.LeaderTTL <= 0 {
		cfg.LeaderTTL = 5 * time.Second
	}
	a := &App{cfg: cfg, log: cfg.Logger}
	var reg prometheus.Registerer
	if cfg.Registry != nil {
		reg = cfg.Registry
	}
	em := etcdmetrics.NewMetrics(reg)
	quorumKV := store.RequireQuorum(cfg.Etcd.KV, cfg.EtcdRequestTimeout)
	a.kv = etcdmetrics.Wrap(quorumKV, em)
	a.watchKV = etcdmetrics.Client{KV: etcdmetrics.Wrap(quorumKV, em), Watcher: cfg.Etcd.Watcher}
	a.placer = placement.NewPlacer(a.watchKV, cfg.Logger.With("component", "placement"),
		placement.WithMetrics(placement.NewMetrics(reg)))
	if err := control.CheckTaskSubnetPool(cfg.TaskSubnetPool); err != nil {
		return nil, err
	}
	a.control = control.New(control.Config{
		KV:             a.kv,
		Watcher:        taskCacheWatcher(cfg),
		Logger:         cfg.Logger.With("component", "control"),
		Placer:         a.placer,
		MaxTxnOps:      cfg.MaxTxnOps,
		TaskSubnetPool: cfg.TaskSubnetPool,
	})
	a.kick = service.NewKicker()
	a.services = service.NewHandler(service.Config{
		KV:     a.kv,
		Logger: cfg.Logger.With("component", "service"),
		Kick:   a.kick,
	})
	a.daemonKick = service.NewKicker()
	a.daemons = daemon.NewHandler(daemon.Config{
		KV:     a.kv,
		Logger: cfg.Logger.With("component", "daemon"),
		Kick:   a.daemonKick.Kick,
	})
	a.secrets = secretsmanager.New(a.kv, cfg.Keyring, nil)
	a.secrets.Logger = cfg.Logger.With("component", "secretsmanager")
	a.params = ssm.New(a.kv, cfg.Keyring, nil)
	a.params.Logger = cfg.Logger.With("component", "ssm")
	ecrStore := ecr.NewStore(a.kv, cfg.Keyring, cfg.ECRRegistryHost, nil)
	ecrStore.HTTPS = cfg.ECRRegistryHTTPS
	if cfg.ECRBlobDir != "" {
		ecrStore.Blobs = ecr.DiskBlobs(cfg.ECRBlobDir)
		ecrStore.BlobDir = cfg.ECRBlobDir
	}
	a.ecr = ecr.New(ecrStore)
	a.ecr.Logger = cfg.Logger.With("component", "ecr")
	a.cloudMap = cloudmap.NewRegistry(a.kv, nil)
	var onTaskStats func(keys.Scope, string, string, *agentv1.TaskStats)
	if cfg.Metrics != nil {
		a.cwMetrics = cloudwatch.NewMetrics(cfg.Metrics, cfg.Logger.With("component", "cloudwatch"))
		a.ecsMetrics = cloudwatch.NewECSMetrics(a.cwMetrics)
		onTaskStats = a.ecsMetrics.Observe
	}
	creds := taskcreds.New(taskcreds.Config{KV: a.kv, Lease: cfg.Etcd, Keyring: cfg.Keyring, Lifetime: cfg.TaskCredentialsLifetime})
	a.sessions = agentsession.New(agentsession.Config{
		Credentials:      creds,
		Etcd:             cfg.Etcd,
		Control:          a.control,
		Replica:          cfg.Replica,
		HeartbeatTimeout: cfg.HeartbeatTimeout,
		Logger:           cfg.Logger.With("component", "agentsession"),
		OnHeartbeat:      a.registerMetrics(reg),
		OnTaskStats:      onTaskStats,
		Logs:             cfg.Logs,
		Secrets:          tasksecrets.Resolver{Secrets: a.secrets, Parameters: a.params, ECR: a.ecr.Store},
	})
	a.admin = admin.New(a.kv, cfg.Logger.With("component", "admin"), admin.Options{AllowReset: cfg.Dev, Sessions: creds, Keyring: cfg.Keyring})
	a.elector = leader.New(leader.Config{
		Client:   cfg.Etcd,
		Identity: cfg.Replica,
		TTL:      cfg.LeaderTTL,
		Logger:   cfg.Logger.With("component", "leader"),
	})

	identity := connect.WithHandlerOptions(
		connect.WithInterceptors(caller.Interceptor{RequireGateway: cfg.PeerOf != nil}, tracing{}, rpcLog{log: cfg.Logger.With("component", "rpc")}),
		recoverOption(cfg.Logger.With("component", "rpc")))
	gzip := gzipOption(cfg.GzipMinBytes)
	mux := http.NewServeMux()
	mux.Handle(control.NewHandler(ecsHandler{a.control, a.services, a.daemons}, identity, gzip))
	mux.Handle(agentv1connect.NewAgentServiceHandler(a.sessions, identity, gzip))
	for path, h := range a.sessions.ExecHandlers(identity) {
		mux.Handle(path, h) // ECS Exec: the gateway's and the agent's halves (docs/exec.md)
	}
	// The other AWS services the gateway routes to (gateway.Services): one handler each.
	mux.Handle(stsv1connect.NewStsServiceHandler(&sts.Handler{Roles: creds, Logger: cfg.Logger.With("component", "sts")}, identity, gzip))
	mux.Handle(secretsmanagerv1connect.NewSecretsManagerServiceHandler(a.secrets, identity, gzip))
	mux.Handle(ssmv1connect.NewSsmServiceHandler(a.params, identity, gzip))
	mux.Handle(ecrv1connect.NewEcrServiceHandler(a.ecr, identity, gzip))
	a.autoScaling = autoscaling.New(a.kv, ecsHandler{a.control, a.services, a.daemons}, nil)
	a.autoScaling.Logger = cfg.Logger.With("component", "autoscaling")
	mux.Handle(applicationautoscalingv1connect.NewApplicationAutoScalingServiceHandler(a.autoScaling, identity, gzip))
	if cfg.Logs != nil && cfg.LogPeerURL != "" {
		var authorize func(*http.Request) bool
		if cfg.PeerOf != nil {
			authorize = func(r *http.Request) bool { return cfg.PeerOf(r).Scheduler }
		}
		a.logPeers = logpeers.New(logpeers.Config{Etcd: cfg.Etcd, Store: cfg.Logs, Replica: cfg.Replica, URL: cfg.LogPeerURL,
			Client: cfg.LogPeerClient, Authorize: authorize, Logger: cfg.Logger.With("component", "logpeers")})
		h := a.logPeers.Handler()
		mux.Handle(logpeers.ApplyPath, h)
		mux.Handle(logpeers.ShardPath, h)
	}
	if cfg.Logs != nil {
		mux.Handle(logsv1connect.NewLogsServiceHandler(logsapi.NewService(cfg.Logs, cfg.Logger.With("component", "logs")), identity, gzip))
	} else {
		mux.Handle(logsv1connect.NewLogsServiceHandler(logsv1connect.UnimplementedLogsServiceHandler{}, identity, gzip))
	}
	elbHandler := elbapi.New(a.kv, elbapi.InstanceHost(a.kv))
	elbHandler.Logger = cfg.Logger.With("component", "elbv2")
	mux.Handle(elbv2v1connect.NewElbv2ServiceHandler(elbHandler, identity, gzip))
	cloudMapHandler := cloudmap.NewHandler(a.cloudMap)
	cloudMapHandler.Logger = cfg.Logger.With("component", "cloudmap")
	mux.Handle(servicediscoveryv1connect.NewServicediscoveryServiceHandler(cloudMapHandler, identity, gzip))
	a.events = events.New(a.kv, ecsTargets{srv: a.control}, nil)
	a.events.Logger = cfg.Logger.With("component", "events")
	mux.Handle(eventsv1connect.NewEventsServiceHandler(a.events, identity, gzip))
	if cfg.AlarmActions == nil {
		// Alarm actions whose ARN is a scaling policy's run Application Auto Scaling's
		// step scaling (autoscaling.Handler.InvokeAlarmAction).
		cfg.AlarmActions = a.autoScaling
		a.cfg.AlarmActions = a.autoScaling
	}
	if a.cwMetrics != nil {
		// Target tracking reads the metrics CloudWatch keeps (AWS/ECS, AWS/ApplicationELB).
		a.autoScaling.Metrics = a.cwMetrics
	}
	mux.Handle(cloudwatchv1connect.NewCloudwatchServiceHandler(&cloudwatch.Handler{Metrics: a.cwMetrics, KV: a.kv, Actions: cfg.AlarmActions,
		Logger: cfg.Logger.With("component", "cloudwatch")}, identity, gzip))
	mux.Handle(adminv1connect.NewAdminServiceHandler(a.admin, gzip, connect.WithInterceptors(admin.Guard{Strict: cfg.Dev})))
	mux.Handle(consolev1connect.NewConsoleServiceHandler(changefeed.New(cfg.Etcd, a.kv, cfg.Logger.With("component", "changefeed")), identity, gzip))
	a.handleIntrospection(mux)
	a.tokens = admin.NewTokens(a.kv)
	a.handler = a.authenticate(mux)
	return a, nil
}

// authenticate puts the caller.Peer of each request into its context: what its TLS
// client certificate proves (Config.PeerOf) and, for a request carrying
// "Authorization: Bearer <token>", whether that is the admin token.
func (a *App) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p caller.Peer
		if a.cfg.PeerOf != nil {
			p = a.cfg.PeerOf(r)
			p.Authenticated = true
		}
		if tok := admin.BearerToken(r.Header.Get("Authorization")); tok != "" && a.tokens.Check(r.Context(), tok) {
			p.Admin = true
		}
		next.ServeHTTP(w, r.WithContext(caller.WithPeer(r.Context(), p)))
	})
}

// Bootstrap stores the admin bootstrap token unless one exists (admin.Bootstrap): token,
// or a generated one when empty. It returns the token and true when this call stored it;
// print a generated token once, to the operator, never to a log.
func (a *App) Bootstrap(ctx context.Context, token string) (string, bool, error) {
	return admin.Bootstrap(ctx, a.kv, token)
}

// SetAdminToken stores token as the admin token, replacing another (admin.SetToken):
// `berth dev`'s token, kept in its data dir.
func (a *App) SetAdminToken(ctx context.Context, token string) error {
	return admin.SetToken(ctx, a.kv, token)
}

// recoverOption turns a handler's panic into ServerException ("An internal error
// occurred.") and logs it with its stack at error level, so that a client whose input
// trips a bug gets an AWS error instead of a reset stream, and the replica keeps serving.
// A panic is still a bug to fix; the log line names the procedure.
func recoverOption(log *slog.Logger) connect.HandlerOption {
	return connect.WithRecover(func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
		log.ErrorContext(ctx, "handler panicked", "procedure", spec.Procedure, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return awserr.ToConnect(fmt.Errorf("panic in %s: %v", spec.Procedure, p))
	})
}

// gzipOption is the handlers' response compression: gzip for messages of at least
// minBytes when minBytes > 0, else none. Connect compresses every response a client
// accepts gzip for (its clients do by default) unless the minimum is above every message.
func gzipOption(minBytes int) connect.HandlerOption {
	if minBytes <= 0 {
		minBytes = math.MaxInt
	}
	return connect.WithCompressMinBytes(minBytes)
}

// Handler returns the replica's Connect handler: EcsService, AgentService and
// ConsoleService (all require the gateway's identity headers), AdminService, grpc.health.v1.Health (see
// LeaderServiceName), gRPC reflection (v1 and v1alpha), and /metrics when
// Config.Registry is set.
func (a *App) Handler() http.Handler { return a.handler }

// ECS returns the replica's ECS API handler, for in-process callers such as `berth dev`
// (calls need an identity in the context: caller.With). It is the bare handler, without
// Handler's interceptors: an action Berth does not implement answers CodeUnimplemented
// here, UnsupportedFeatureException through Handler (control.NewHandler).
func (a *App) ECS() ecsv1connect.EcsServiceHandler {
	return ecsHandler{a.control, a.services, a.daemons}
}

// Admin returns the replica's admin service, for in-process callers such as `berth dev`.
func (a *App) Admin() adminv1connect.AdminServiceHandler { return a.admin }

// AutoScaling returns the replica's Application Auto Scaling handler: set its Metrics
// (target tracking's metrics source) before Run, and call its InvokeAlarmAction from
// CloudWatch alarm actions that name a scaling policy ARN.
func (a *App) AutoScaling() *autoscaling.Handler { return a.autoScaling }

// IsLeader reports whether this replica currently runs the leader loops.
func (a *App) IsLeader() bool { return a.leading.Load() }

// Sessions returns the number of agent sessions this replica holds.
func (a *App) Sessions() int { return a.sessions.Sessions() }

// MigrateLayout brings ECS state written by earlier builds to this build's layout, once:
// state from builds without regions moves into the default region (Config.Region,
// keys.MigrateLayout), then instances' task counts move out of their records
// (task.MigrateCounts), and access keys' secrets stored in the clear are sealed with the
// keyring (admin.SealAccessKeys). Call it before serving. It logs what it changed.
func (a *App) MigrateLayout(ctx context.Context) error {
	n, err := keys.MigrateLayout(ctx, a.cfg.Etcd, a.cfg.Region)
	if err != nil {
		return fmt.Errorf("app: migrate key layout: %w", err)
	}
	if n > 0 {
		a.log.Info("moved state from before regions into the default region", "keys", n, "region", a.cfg.Region)
	}
	if n, err = task.MigrateCounts(ctx, a.cfg.Etcd); err != nil {
		return fmt.Errorf("app: migrate task counts: %w", err)
	}
	if n > 0 {
		a.log.Info("moved instances' task counts out of their records", "writes", n)
	}
	if n, err = admin.SealAccessKeys(ctx, a.cfg.Etcd, a.cfg.Keyring); err != nil {
		return fmt.Errorf("app: seal access keys: %w", err)
	}
	if n > 0 {
		a.log.Info("sealed access key secrets stored in the clear", "keys", n)
	}
	return nil
}

// Run campaigns for leadership until ctx ends; while leading it runs the reaper, the
// service reconciler and EventBridge's events.Runner with every write fenced by the term: all write through the term's
// store.FencedKV (leader.Term.KV), the reaper's calls into control and the reconciler's
// placements included. It returns ctx's error.
func (a *App) Run(ctx context.Context) error {
	defer a.sessions.Close()
	defer a.placer.Close()
	defer a.control.Close()
	if a.cfg.Logs != nil {
		go a.sweepLogs(ctx)
	}
	if a.logPeers != nil {
		go a.logPeers.Run(ctx)
	}
	if a.ecsMetrics != nil {
		go func() { _ = a.ecsMetrics.Run(ctx) }()
	}
	return a.elector.Run(ctx, func(ctx context.Context, term leader.Term) {
		a.leading.Store(true)
		defer a.leading.Store(false)
		a.log.Info("leading", "replica", a.cfg.Replica, "term", term.Rev)
		// Each leader loop runs until the term ends (ctx); the term is over when all
		// have returned.
		var loops sync.WaitGroup
		run := func(name string, loop func() error) {
			loops.Add(1)
			go func() {
				defer loops.Done()
				if err := loop(); err != nil && ctx.Err() == nil {
					a.log.Error(name+" stopped", "err", err)
				}
			}()
		}
		run("reaper", func() error {
			r := reaper.New(reaper.Config{
				KV:             a.kv,
				Control:        func(kv clientv3.KV) reaper.Control { return a.control.Fenced(kv) },
				Interval:       a.cfg.ReaperInterval,
				LostAfter:      a.cfg.LostAfter,
				PendingTimeout: a.cfg.PendingTimeout,
				Retention:      a.cfg.Retention,
				Logger:         a.log.With("component", "reaper"),
			})
			return r.Run(ctx, term)
		})
		run("service reconciler", func() error {
			rec := service.NewReconciler(service.ReconcilerConfig{
				// Every write of the loop, placements included, goes through the term's
				// fenced client.
				Client: term.Client(a.watchKV),
				Placer: a.placer,
				Logger: a.log.With("component", "reconciler"),
				// A pass launches as many tasks of a service as one txn holds.
				MaxTxnOps: a.cfg.MaxTxnOps,
				Interval:  a.cfg.ReconcileInterval,
				Kick:      a.kick,

				StableAfter:   a.cfg.TaskStableAfter,
				OnRolloutDone: a.rolloutDone,
				BakeMinute:    a.cfg.DeploymentBakeMinute,
			})
			return rec.Run(ctx)
		})
		run("autoscaling loop", func() error {
			return a.autoScaling.Run(ctx, term.Client(a.watchKV), a.cfg.AutoScalingInterval)
		})
		run("events runner", func() error {
			// EventBridge: scheduled rules and task state change events, whose targets
			// run through the term's fenced ECS handler.
			r := events.Runner{Client: term.Client(a.watchKV), ECS: ecsTargets{srv: a.control.Fenced(term.KV(a.kv))},
				Logger: a.log.With("component", "events")}
			return r.Run(ctx)
		})
		run("daemon reconciler", func() error {
			rec := daemon.NewReconciler(daemon.ReconcilerConfig{
				// Every write of the daemon loop, placements included, is fenced by the term.
				Client:      term.Client(a.watchKV),
				Placer:      a.placer,
				MaxTxnOps:   a.cfg.MaxTxnOps,
				Logger:      a.log.With("component", "daemons"),
				Interval:    a.cfg.ReconcileInterval,
				Kick:        a.daemonKick.C(),
				StableAfter: a.cfg.TaskStableAfter,
			})
			return rec.Run(ctx)
		})
		run("alarm evaluator", func() error {
			ev := &cloudwatch.Evaluator{KV: term.KV(a.kv), Metrics: a.cwMetrics, Actions: a.cfg.AlarmActions,
				Interval: a.cfg.AlarmEvaluationInterval, Log: a.log.With("component", "alarms")}
			return ev.Run(ctx)
		})
		loops.Wait()
		a.log.Info("no longer leading", "replica", a.cfg.Replica)
	})
}

// taskCacheWatcher is the watcher of control's task cache: etcd's, unless
// cfg.NoTaskCache.
func taskCacheWatcher(cfg Config) clientv3.Watcher {
	if cfg.NoTaskCache {
		return nil
	}
	return cfg.Etcd.Watcher
}

// Logs returns the replica's log store (nil when Config.Logs was not set).
func (a *App) Logs() *logstore.Store { return a.cfg.Logs }

// sweepLogs deletes log events past their group's retention every LogSweepInterval
// until ctx ends. Every replica sweeps its own store (the store is not in etcd).
func (a *App) sweepLogs(ctx context.Context) {
	every := a.cfg.LogSweepInterval
	if every <= 0 {
		every = 10 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := a.cfg.Logs.Sweep(time.Now()); err != nil {
			a.log.Warn("log retention sweep", "err", err)
		} else if n > 0 {
			a.log.Info("log retention sweep", "deleted_events", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
