package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// DefaultClientURL is where `berth dev` serves etcd clients when
// Config.ClientURL is empty.
const DefaultClientURL = "http://127.0.0.1:2379"

// DefaultReadyTimeout bounds how long Start and Restart wait for the member
// to become ready when Config.ReadyTimeout is zero.
const DefaultReadyTimeout = 30 * time.Second

// DevMaxTxnOps is the --max-txn-ops `berth dev` (and the bench) give the embedded
// member: a txn of up to 1,024 writes lets RunTask's group commit hold about a dozen
// RunTask calls of count 10 (etcd's default, 128, holds one). etcd applies a txn in
// one step, so a larger limit only lengthens single applies, not the total work.
const DevMaxTxnOps = 1024

// ErrClosed is returned by Restart and NewClient after Close.
var ErrClosed = errors.New("etcdembed: server closed")

// Config describes an embedded single-member etcd.
type Config struct {
	// Dir is the data directory. It is created if missing; starting on a
	// directory that holds data resumes that data. Required.
	Dir string
	// ClientURL is where clients connect: "http://host:port" or "host:port",
	// on a loopback address. Port 0 picks a free port. Empty means
	// DefaultClientURL.
	ClientURL string
	// PeerURL is where the raft peer listener binds. Empty or port 0 picks a
	// free loopback port. A single member has no peers, but etcd needs one.
	PeerURL string
	// ReadyTimeout bounds the wait for the member to serve; zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Logger receives etcd's server and client logs. Nil discards them.
	Logger *zap.Logger
	// AutoCompactionRetention keeps this much history and compacts older
	// revisions periodically. Zero (the default) never compacts
	// automatically; use Compact.
	AutoCompactionRetention time.Duration
	// UnsafeNoFsync skips fsync: much faster, loses data on a machine crash
	// (not on a process exit). For tests only.
	UnsafeNoFsync bool
	// MaxTxnOps is the member's --max-txn-ops, the most compares (and the most
	// writes) one txn may hold; zero keeps etcd's default, 128. Pass the same
	// value to the scheduler (app.Config.MaxTxnOps) so its group commit fills
	// txns up to it.
	MaxTxnOps int
}

// Server is a running (or stopped) embedded etcd member and a gRPC client bound
// to it. The client outlives Stop and Restart: it reconnects by itself, so
// watches and leases held through it see the restart as a disconnect. Code in
// the same process that never restarts the member can use InProcessClient
// instead, which skips gRPC.
type Server struct {
	cfg       Config // with concrete URLs, fixed across restarts
	clientURL url.URL
	peerURL   url.URL
	logger    *zap.Logger

	mu     sync.Mutex
	etcd   *embed.Etcd // nil while stopped
	client *clientv3.Client
	closed bool
}

// Start starts a member as described by cfg, waits until it serves (bounded
// by ctx and cfg.ReadyTimeout) and connects a client. Ports chosen for port 0
// stay fixed for the Server's life, so Restart comes back at the same
// address. It fails if cfg.Dir is empty, a URL is not loopback, a port is in
// use or the member does not become ready in time.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("etcdembed: Config.Dir is required")
	}
	if cfg.ClientURL == "" {
		cfg.ClientURL = DefaultClientURL
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	peer := cfg.PeerURL
	if peer == "" {
		peer = "http://127.0.0.1:0"
	}

	// Free ports are picked by binding :0 and closing, so another process
	// can take one before etcd binds it. Retry with fresh ports then, but
	// only for ports we picked.
	const attempts = 3
	var lastErr error
	for range attempts {
		cu, cPicked, err := resolveURL(cfg.ClientURL)
		if err != nil {
			return nil, fmt.Errorf("etcdembed: client URL: %w", err)
		}
		pu, pPicked, err := resolveURL(peer)
		if err != nil {
			return nil, fmt.Errorf("etcdembed: peer URL: %w", err)
		}
		s := &Server{cfg: cfg, clientURL: cu, peerURL: pu, logger: lg}
		s.cfg.ClientURL, s.cfg.PeerURL = cu.String(), pu.String()
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !(cPicked || pPicked) || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, lastErr
}

// start starts the member and, the first time, the client. The caller holds
// no lock or s.mu.
func (s *Server) start(ctx context.Context) error {
	ec := embed.NewConfig()
	ec.Dir = s.cfg.Dir
	ec.ListenClientUrls = []url.URL{s.clientURL}
	ec.AdvertiseClientUrls = []url.URL{s.clientURL}
	ec.ListenPeerUrls = []url.URL{s.peerURL}
	ec.AdvertisePeerUrls = []url.URL{s.peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.InitialClusterToken = "berth-embedded"
	ec.EnableGRPCGateway = false
	ec.Metrics = "basic"
	// A single member has no peers to wait for: a short election timeout
	// only makes it elect itself sooner after a start.
	ec.TickMs = 50
	ec.ElectionMs = 250
	ec.UnsafeNoFsync = s.cfg.UnsafeNoFsync
	if s.cfg.MaxTxnOps > 0 {
		ec.MaxTxnOps = uint(s.cfg.MaxTxnOps)
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(s.logger)
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "0" // off
	if r := s.cfg.AutoCompactionRetention; r > 0 {
		ec.AutoCompactionRetention = r.String()
	}

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("etcdembed: start etcd in %s: %w", s.cfg.Dir, err)
	}
	timer := time.NewTimer(s.cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdembed: etcd in %s failed before ready: %w", s.cfg.Dir, err)
	case <-timer.C:
		e.Close()
		return fmt.Errorf("etcdembed: etcd in %s not ready after %s", s.cfg.Dir, s.cfg.ReadyTimeout)
	case <-ctx.Done():
		e.Close()
		return fmt.Errorf("etcdembed: waiting for etcd in %s: %w", s.cfg.Dir, ctx.Err())
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.etcd = e
	if s.client == nil {
		c, err := s.newClientLocked()
		if err != nil {
			s.etcd = nil
			e.Close()
			return err
		}
		s.client = c
	}
	return nil
}

// Client returns the Server's client, nil after Close. It stays valid across
// Stop and Restart and is closed by Close; callers must not close it.
func (s *Server) Client() *clientv3.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// InProcessClient returns a client that calls the running member's API in this process
// (etcd's v3client: function calls, no gRPC, no socket). It is bound to the member as it
// runs now: it fails once the member stops (Stop, Restart, Close), so a caller that
// outlives a restart uses Client instead. A call whose context ends fails with the
// context's error, as over gRPC; etcd's gRPC-only interceptors do not apply
// (WithRequireLeader: a single member leads itself). The caller closes it. It returns
// ErrClosed after Close and an error while the member is stopped.
func (s *Server) InProcessClient() (*clientv3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case s.etcd == nil:
		return nil, errors.New("etcdembed: the member is stopped")
	}
	c := v3client.New(s.etcd.Server)
	c.KV, c.Lease = ctxKV{c.KV}, ctxLease{c.Lease}
	return c, nil
}

// Endpoint returns the client URL ("http://127.0.0.1:port"), fixed for the
// Server's life.
func (s *Server) Endpoint() string { return s.clientURL.String() }

// Dir returns the data directory.
func (s *Server) Dir() string { return s.cfg.Dir }

// NewClient connects a new client to the member; the caller closes it. It
// returns ErrClosed after Close.
func (s *Server) NewClient() (*clientv3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.newClientLocked()
}

func (s *Server) newClientLocked() (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.clientURL.String()},
		DialTimeout: 5 * time.Second,
		Logger:      s.logger,
		DialOptions: []grpc.DialOption{
			// The member is local: after a restart, reconnect within a
			// second rather than grpc's default of up to two minutes.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  50 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   time.Second,
				},
				MinConnectTimeout: 5 * time.Second,
			}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("etcdembed: connect to %s: %w", s.clientURL.String(), err)
	}
	return c, nil
}

// Stop stops the member and keeps its data and the client, so Restart can
// bring it back. Stopping a stopped Server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.etcd
	s.etcd = nil
	s.mu.Unlock()
	if e != nil {
		stopEtcd(e)
	}
}

// Restart starts a stopped member again on the same data directory and
// URLs and waits until it is ready. If the member is running it is stopped
// first. It returns ErrClosed after Close.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	s.Stop()
	return s.start(ctx)
}

// Close closes the client and stops the member. It is idempotent and always
// returns nil; the error is for io.Closer.
func (s *Server) Close() error {
	s.mu.Lock()
	e, c := s.etcd, s.client
	s.etcd, s.client, s.closed = nil, nil, true
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	if e != nil {
		stopEtcd(e)
	}
	return nil
}

// stopEtcd stops a member without waiting out the graceful drain of open
// watch streams: embed.Etcd.Close gives those the full request timeout
// (seconds) before cutting them, and a local member has nothing to drain.
func stopEtcd(e *embed.Etcd) {
	e.Server.HardStop()
	e.Close()
	<-e.Server.StopNotify()
}

// Compact compacts the store's history up to the current revision and
// returns that revision. Watches and reads at older revisions then fail
// with rpctypes.ErrCompacted. For tests of compaction handling.
func Compact(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, "compact-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcdembed: read current revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcdembed: compact at %d: %w", rev, err)
	}
	return rev, nil
}

// resolveURL parses "http://host:port" or "host:port", requires a loopback
// host, and replaces port 0 with a free port, reporting whether it did.
func resolveURL(raw string) (u url.URL, picked bool, err error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	p, err := url.Parse(raw)
	if err != nil {
		return url.URL{}, false, err
	}
	if p.Scheme != "http" {
		return url.URL{}, false, fmt.Errorf("%q: only http is supported", raw)
	}
	host, port := p.Hostname(), p.Port()
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return url.URL{}, false, fmt.Errorf("%q: host must be a loopback address", raw)
	}
	if port == "" || port == "0" {
		n, err := freePort(host)
		if err != nil {
			return url.URL{}, false, err
		}
		port, picked = strconv.Itoa(n), true
	}
	return url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}, picked, nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
