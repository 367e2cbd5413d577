package control

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/caller"
	"github.com/berthhq/berth/services/scheduler/ecserr"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/placement"
	"github.com/berthhq/berth/services/scheduler/store"
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
	// PlaceTxn); share it with the service scheduler so both see one instance cache. Nil
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
// serves any number of concurrent calls. Operations Berth does not implement answer
// UnsupportedFeatureException naming the action.
type Server struct {
	unsupported

	kv      clientv3.KV
	log     *slog.Logger
	placing *placing
	now     func() time.Time
	newID   func() string
	pool    *net.IPNet
	// taskCache serves DescribeTasks when Config.Watcher is set (else nil).
	taskCache *taskCache
}

var _ ecsv1connect.EcsServiceHandler = (*Server)(nil)

// New returns a Server for cfg. It does not touch etcd.
func New(cfg Config) *Server {
	s := &Server{
		kv:      cfg.KV,
		log:     cfg.Logger,
		placing: &placing{placer: cfg.Placer, maxOps: cmp.Or(cfg.MaxTxnOps, DefaultMaxTxnOps)},
		now:     cfg.Now,
		newID:   cfg.NewID,
	}
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
// deposed. It shares s's Placer and has its own group-commit queues, so its placements
// never share a txn with unfenced ones.
func (s *Server) Fenced(kv clientv3.KV) *Server {
	c := *s
	c.kv = kv
	c.placing = &placing{placer: s.placing.placer, maxOps: s.placing.maxOps}
	return &c
}

// NewID returns 32 random lowercase hex characters, the shape of ECS task and container
// instance ids.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// handle is Handle with the server's logger.
func handle[Req, Resp any](ctx context.Context, s *Server, req *connect.Request[Req], fn func(ctx context.Context, account keys.Scope, msg *Req) (*Resp, error)) (*connect.Response[Resp], error) {
	return Handle(ctx, s.log, req, fn)
}

// Handle runs an ECS action: fn gets the caller's (account, region) scope (from
// caller.From; a call without an account or region is refused with
// AccessDeniedException) and the request message (never nil,
// also for a nil request). fn's error is converted with ecserr.ToConnect; errors that are
// not ECS exceptions are logged to log first, since the client only sees ServerException.
func Handle[Req, Resp any](ctx context.Context, log *slog.Logger, req *connect.Request[Req], fn func(ctx context.Context, account keys.Scope, msg *Req) (*Resp, error)) (*connect.Response[Resp], error) {
	id, ok := caller.From(ctx)
	if !ok || id.Account == "" {
		return nil, ecserr.ToConnect(ecserr.New("AccessDeniedException", "The request carries no account."))
	}
	if id.Region == "" {
		// Every resource lives in a region; a call without one would silently land in
		// some default. The gateway always sends it (caller.RegionHeader).
		return nil, ecserr.ToConnect(ecserr.New("AccessDeniedException", "The request carries no region."))
	}
	var msg *Req
	if req != nil {
		msg = req.Msg
	}
	if msg == nil {
		msg = new(Req)
	}
	resp, err := fn(ctx, id.Scope(), msg)
	if err != nil {
		return nil, toConnect(ctx, log, err)
	}
	return connect.NewResponse(resp), nil
}

// toConnect converts err with ecserr.ToConnect, logging what is not a domain error.
func (s *Server) toConnect(ctx context.Context, err error) error { return toConnect(ctx, s.log, err) }

func toConnect(ctx context.Context, log *slog.Logger, err error) error {
	var e *ecserr.Error
	if !errors.As(err, &e) {
		log.ErrorContext(ctx, "ecs call failed", "err", err)
	}
	return ecserr.ToConnect(err)
}

// epoch returns t as ECS timestamps are written: seconds since the epoch, millisecond
// precision.
func epoch(t time.Time) float64 {
	return math.Round(float64(t.UnixMilli())) / 1000
}

// nowEpoch is epoch(s.now()).
func (s *Server) nowEpoch() *float64 { return proto.Float64(epoch(s.now())) }

// retry is Retry.
func retry(ctx context.Context, fn func() error) error { return Retry(ctx, fn) }

// Retry runs fn until it returns something other than a store revision conflict
// (ErrConflict, or ErrExists from a create-if-absent race), with a short jittered
// backoff, until ctx ends, whose error it then returns. Use it for multi-record
// transactions Mutate cannot express.
func Retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !(errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) || errors.Is(err, errRetry)) {
			return err
		}
		d := time.Millisecond << min(attempt-1, 5)
		t := time.NewTimer(d/2 + mrand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errRetry asks retry for another attempt.
var errRetry = errors.New("control: retry")
