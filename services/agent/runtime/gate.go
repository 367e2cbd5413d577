package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"google.golang.org/grpc"
)

// ErrNotReady is returned, wrapped with the reason, while the gate is empty.
var ErrNotReady = errors.New("container runtime not ready")

// GateConfig configures a Gate.
type GateConfig struct {
	// Address is containerd's gRPC socket path.
	Address string
	// Namespace is the containerd namespace every call uses.
	Namespace string
	// Interval is the time between dials while empty and between probes
	// while full; default 1 s.
	Interval time.Duration
	// ProbeTimeout bounds one dial or probe; default 5 s (a containerd
	// busy unpacking can take seconds to list containers).
	ProbeTimeout time.Duration
	// Log receives state changes; nil discards them.
	Log *slog.Logger
	// DialOptions are extra gRPC dial options for the containerd client, such as
	// interceptors that record call latency.
	DialOptions []grpc.DialOption
}

// Gate holds the containerd client while containerd answers. Run keeps it
// current: while empty it dials; while full it probes with a container
// list and empties the gate when the probe fails, so the next tick dials
// again. Every pull, run and list goes through Client. Methods are safe for
// concurrent use.
type Gate struct {
	cfg GateConfig

	mu     sync.Mutex
	client *containerd.Client
	reason string
	// warned is set once the missing containerd has been logged, until it connects.
	warned  bool
	changed chan struct{} // closed and replaced on every fill or clear
	probed  chan struct{} // closed after the first dial attempt
}

// NewGate returns an empty gate for cfg; call Run to fill it.
func NewGate(cfg GateConfig) *Gate {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Gate{cfg: cfg, reason: "not connected yet", changed: make(chan struct{}), probed: make(chan struct{})}
}

// Namespace returns the containerd namespace of the gate's client.
func (g *Gate) Namespace() string { return g.cfg.Namespace }

// Client returns the client, or an error wrapping ErrNotReady with the
// reason while the gate is empty.
func (g *Gate) Client() (*containerd.Client, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotReady, g.reason)
	}
	return g.client, nil
}

// State returns whether the gate is full, why not if empty, and a channel
// closed at the next change.
func (g *Gate) State() (ready bool, reason string, changed <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.client != nil, g.reason, g.changed
}

// Wait returns the client once the gate is full, or ctx's error.
func (g *Gate) Wait(ctx context.Context) (*containerd.Client, error) {
	for {
		g.mu.Lock()
		c, ch := g.client, g.changed
		g.mu.Unlock()
		if c != nil {
			return c, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Probed returns a channel closed once Run's first dial attempt is done,
// so registration can advertise the runtime as it is rather than as not yet
// tried.
func (g *Gate) Probed() <-chan struct{} { return g.probed }

// Run dials and probes every Interval until ctx is done, then closes the
// client.
func (g *Gate) Run(ctx context.Context) {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	defer g.clear("agent stopping")
	first := true
	for {
		g.tick(ctx)
		if first {
			close(g.probed)
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gate) tick(ctx context.Context) {
	g.mu.Lock()
	c := g.client
	g.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, g.cfg.ProbeTimeout)
	defer cancel()
	if c != nil {
		if _, err := c.ContainerService().List(pctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			g.cfg.Log.Warn("containerd probe failed; runtime gate cleared", "address", g.cfg.Address, "err", err)
			g.clear(fmt.Sprintf("containerd at %s stopped answering: %v", g.cfg.Address, err))
		}
		return
	}
	c, err := containerd.New(g.cfg.Address, containerd.WithDefaultNamespace(g.cfg.Namespace), containerd.WithTimeout(g.cfg.ProbeTimeout),
		containerd.WithExtraDialOpts(g.cfg.DialOptions))
	if err == nil {
		_, err = c.Version(pctx)
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		g.mu.Lock()
		g.reason = fmt.Sprintf("containerd at %s not answering: %v", g.cfg.Address, err)
		first := !g.warned
		g.warned = true
		g.mu.Unlock()
		if first {
			// Once, loudly: until containerd answers, this host advertises no capacity and
			// its instance's statusReason says why.
			g.cfg.Log.Warn("containerd not answering: no tasks can run on this host until it does (the instance stays DRAINING with this reason)",
				"address", g.cfg.Address, "err", err)
		}
		return
	}
	g.cfg.Log.Info("containerd connected; runtime gate filled", "address", g.cfg.Address)
	g.mu.Lock()
	g.warned = false
	g.client, g.reason = c, ""
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func (g *Gate) clear(reason string) {
	g.mu.Lock()
	c := g.client
	g.client, g.reason = nil, reason
	if c != nil {
		close(g.changed)
		g.changed = make(chan struct{})
	}
	g.mu.Unlock()
	if c != nil {
		// Calls in flight on the old client fail and their callers
		// come back through the gate.
		_ = c.Close()
	}
}
