package control

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// DefaultCluster is the cluster ECS uses when a request names none.
const DefaultCluster = "default"

// Config configures a Server.
type Config struct {
	// KV is the etcd client (a *clientv3.Client works). Required.
	KV clientv3.KV
	// Logger receives internal faults; nil discards them.
	Logger *slog.Logger
	// Placer chooses the instances of RunTask and StartTask tasks (control writes them,
	// task.PlaceTxn); share it with the service scheduler so both see one instance cache. Nil
	// means a Placer of its own on KV without a cache (placement.WithoutCache), which
	// needs KV to be a store.Client such as *clientv3.Client.
	Placer *placement.Placer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID returns a new resource id (task and container instance ids, 32 lowercase hex
	// characters on AWS); nil means a random one.
	NewID func() string
	// MaxTxnOps is the etcd cluster's --max-txn-ops: RunTask's group commit puts as many
	// concurrent calls in one txn as this allows (about 8 writes a task). Zero means
	// DefaultMaxTxnOps (etcd's default), which holds one RunTask of count 10. When etcd
	// refuses a group as too many operations (a value above the cluster's), the Server
	// places that group's calls one by one, keeps to DefaultMaxTxnOps from then on and
	// logs a warning.
	MaxTxnOps int
	// Watcher, when set (the etcd client KV reads from), lets DescribeTasks answer from
	// a per-cluster cache of task records kept by a watch, after a linearizable read of
	// the cluster key shows the cache is current (taskCache); nil reads every record
	// from etcd. Close the Server to stop the watches.
	Watcher clientv3.Watcher
	// TaskSubnetPool is the IPv4 range the awsvpc task subnets of container instances are
	// carved from, one /24 per instance (ipv4 /24 inside); default DefaultTaskSubnetPool.
	TaskSubnetPool string
}

// Server implements the ECS API (ecsv1connect.EcsServiceHandler) over etcd, and the
// entry points of the agent session server. It holds no per-request state; one Server
// serves any number of concurrent calls. The actions it does not implement are the
// generated UnimplementedEcsServiceHandler's, which NewHandler answers with
// UnsupportedFeatureException naming the action.
type Server struct {
	ecsv1connect.UnimplementedEcsServiceHandler

	kv      clientv3.KV
	log     *slog.Logger
	placing *placing
	states  *stateBatcher // ApplyTaskStateChange's group commit
	now     func() time.Time
	newID   func() string
	pool    *net.IPNet
	// taskCache serves DescribeTasks when Config.Watcher is set (else nil).
	taskCache *taskCache
}

var _ ecsv1connect.EcsServiceHandler = (*Server)(nil)

// NewHandler is ecsv1connect.NewEcsServiceHandler with one interceptor after opts': the
// actions ecs lacks (the generated UnimplementedEcsServiceHandler's CodeUnimplemented)
// answer UnsupportedFeatureException with UnsupportedMessage, which names the action,
// why Berth lacks it and what it supports instead. Serve the ECS API through it; a bare
// handler (App.ECS) answers those actions CodeUnimplemented.
func NewHandler(ecs ecsv1connect.EcsServiceHandler, opts ...connect.HandlerOption) (string, http.Handler) {
	return ecsv1connect.NewEcsServiceHandler(ecs, append(opts[:len(opts):len(opts)], connect.WithInterceptors(unsupported))...)
}

// unsupported is NewHandler's interceptor.
var unsupported = awsapi.Unsupported{
	Service: ecsv1connect.EcsServiceName,
	Answer: func(action string) *awserr.Error {
		return awserr.New("UnsupportedFeatureException", "%s", UnsupportedMessage(action))
	},
}

// New returns a Server for cfg. It does not touch etcd.
func New(cfg Config) *Server {
	s := &Server{
		kv:      cfg.KV,
		log:     cfg.Logger,
		placing: &placing{placer: cfg.Placer, maxOps: cmp.Or(cfg.MaxTxnOps, DefaultMaxTxnOps)},
		now:     cfg.Now,
		newID:   cfg.NewID,
	}
	s.states = &stateBatcher{s: s}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.pool = parseTaskSubnetPool(cfg.TaskSubnetPool)
	if cfg.Watcher != nil {
		s.taskCache = newTaskCache(watchClient{KV: cfg.KV, Watcher: cfg.Watcher}, s.log)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = NewID
	}
	if s.placing.placer == nil {
		if cli, ok := cfg.KV.(store.Client); ok {
			s.placing.placer = placement.NewPlacer(cli, s.log, placement.WithoutCache())
		}
	}
	return s
}

// watchClient is a store.Client made of a KV and a Watcher.
type watchClient struct {
	clientv3.KV
	clientv3.Watcher
}

// Close stops the watches of the DescribeTasks cache (Config.Watcher) and waits for them
// to end; later DescribeTasks calls read etcd. It does not close the etcd client.
func (s *Server) Close() {
	if s.taskCache != nil {
		s.taskCache.close()
	}
}

// Fenced returns a Server like s whose every write goes through kv instead (reads too):
// a leader passes its term's store.FencedKV, so that what it writes through control (the
// reaper's SetAgentConnected and ApplyTaskStateChange, for instance) fails once it is
// deposed. It shares s's Placer and has its own group-commit queues (placements and
// state changes), so its writes never share a txn with unfenced ones.
func (s *Server) Fenced(kv clientv3.KV) *Server {
	c := *s
	c.kv = kv
	c.placing = &placing{placer: s.placing.placer, maxOps: s.placing.txnOps()}
	c.states = &stateBatcher{s: &c}
	return &c
}

// NewID returns 32 random lowercase hex characters, the shape of ECS task and container
// instance ids.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nowEpoch is the server's clock as an ECS timestamp (awsapi.Epoch).
func (s *Server) nowEpoch() *float64 { return proto.Float64(awsapi.Epoch(s.now())) }
