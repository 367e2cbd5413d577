package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// DefaultTTL is the session TTL when Config.TTL is zero: how long a dead leader keeps
// leadership before another replica takes over.
const DefaultTTL = 10 * time.Second

// Config configures an Elector.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// Name names the leadership; the election lives under keys.Election(Name). Default
	// "scheduler".
	Name string
	// Identity is this replica's name, the value it campaigns with (Leader returns it).
	// Required.
	Identity string
	// TTL is the session's lease TTL, rounded up to whole seconds. Default DefaultTTL.
	TTL time.Duration
	// Logger receives leadership changes; nil discards them.
	Logger *slog.Logger
}

// Term is one leadership term of this replica.
type Term struct {
	// Key is the election key this replica created (its candidacy).
	Key string
	// Rev is the key's creation revision; Fence compares it.
	Rev int64
	// Lease is the session's lease.
	Lease clientv3.LeaseID
	// Since is when this replica became leader.
	Since time.Time
}

// Fence returns the compare every write of this term must carry (store.If or
// Txn.If): it holds while this term's election key exists.
func (t Term) Fence() clientv3.Cmp { return store.Fence(t.Key, t.Rev) }

// KV returns kv with every write fenced by this term (store.FencedKV): the one wrapper a
// leader's loops write through, so a deposed leader cannot write.
func (t Term) KV(kv clientv3.KV) clientv3.KV { return store.FencedKV(kv, t.Key, t.Rev) }

// Client is KV for a store.Client (watches unchanged).
func (t Term) Client(c store.Client) store.Client { return store.FencedClient(c, t.Key, t.Rev) }

// Elector campaigns for leadership and runs the leader's work while it leads.
type Elector struct {
	cfg Config
	log *slog.Logger

	leading atomic.Bool
	mu      sync.Mutex
	term    Term
}

// New returns an Elector for cfg; Run starts campaigning.
func New(cfg Config) *Elector {
	if cfg.Name == "" {
		cfg.Name = "scheduler"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, log: log.With("identity", cfg.Identity)}
}

// IsLeader reports whether this replica leads now, for health and metrics.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// CurrentTerm returns this replica's term and true while it leads.
func (e *Elector) CurrentTerm() (Term, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term, e.leading.Load()
}

// Leader returns the identity of the current leader (any replica's), or "" when there is
// none.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.cfg.Client.Get(ctx, keys.Election(e.cfg.Name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return "", fmt.Errorf("leader: read election: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Run campaigns until ctx ends. Each time this replica wins, it calls lead with a context
// that is cancelled the moment leadership is lost (session done) or ctx ends, and the
// term. When lead returns while still leading, Run resigns and campaigns again (a
// leader whose loops failed should let another replica try). Run returns ctx's error.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term Term)) error {
	ttl := int((e.cfg.TTL + time.Second - 1) / time.Second)
	for ctx.Err() == nil {
		if err := e.runOnce(ctx, ttl, lead); err != nil && ctx.Err() == nil {
			e.log.Warn("leader: election round failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return ctx.Err()
}

func (e *Elector) runOnce(ctx context.Context, ttl int, lead func(context.Context, Term)) error {
	sess, err := concurrency.NewSession(e.cfg.Client, concurrency.WithTTL(ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("leader: new session: %w", err)
	}
	defer sess.Close() // revokes the lease: a clean exit hands over at once

	// Campaign until won, the session dies, or ctx ends.
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, cancel)
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	el := concurrency.NewElection(sess, keys.Election(e.cfg.Name))
	if err := el.Campaign(cctx, e.cfg.Identity); err != nil {
		cancel()
		stop()
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return fmt.Errorf("leader: campaign: %w", err)
	}
	term := Term{Key: el.Key(), Rev: el.Rev(), Lease: sess.Lease(), Since: time.Now()}
	e.mu.Lock()
	e.term = term
	e.mu.Unlock()
	e.leading.Store(true)
	e.log.Info("leader: elected", "key", term.Key, "rev", term.Rev)

	lead(cctx, term)

	e.leading.Store(false)
	lost := cctx.Err() != nil
	cancel()
	stop()
	select {
	case <-sess.Done():
		e.log.Warn("leader: session lost; leadership ended", "key", term.Key)
		return nil
	default:
	}
	if !lost || ctx.Err() != nil {
		rctx, c := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer c()
		if err := el.Resign(rctx); err != nil {
			e.log.Warn("leader: resign", "err", err)
		}
	}
	e.log.Info("leader: stepped down", "key", term.Key)
	return nil
}
