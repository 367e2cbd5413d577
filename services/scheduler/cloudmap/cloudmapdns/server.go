package cloudmapdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TaskResolver is the address tasks use as their nameserver: the address of the
// Amazon-provided DNS server in a VPC, which the agent redirects to the DNS role.
const TaskResolver = "169.254.169.253"

// Config configures a Server.
type Config struct {
	// Addr is the UDP and TCP address to listen on ("127.0.0.1:0" picks a port).
	Addr string
	// Scopes are the (account, region) pairs whose private DNS namespaces are
	// answered. A DNS question carries no account: run one server per scope the hosts
	// its tasks run on belong to.
	Scopes []keys.Scope
	// LoadBalancerAddrs are the addresses of the hosts that run the load balancer data
	// plane (`berth lb`): each active ELBv2 load balancer of Scopes has its DNSName
	// answered with them (TTL 60 s). Empty: those names are forwarded like any other.
	LoadBalancerAddrs []netip.Addr
	// Upstreams are the resolvers ("ip:port") other names are forwarded to; empty:
	// the nameservers of /etc/resolv.conf.
	Upstreams []string
	// Logger receives forwarding failures; nil discards.
	Logger *slog.Logger
}

// Server is a running DNS server: Set swaps what it answers; Close stops it.
type Server struct {
	cfg       Config
	zones     atomic.Pointer[Zones]
	udp, tcp  *dns.Server
	addr      string
	upstreams []string
	log       *slog.Logger
}

// Listen starts a server on cfg.Addr (UDP and TCP on the same port) answering nothing
// of its own until Set (or Follow) gives it zones. It returns an error when an address
// cannot be bound or no upstream resolver is known.
func Listen(cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.zones.Store(Build(nil, nil, nil))
	s.upstreams = cfg.Upstreams
	if len(s.upstreams) == 0 {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil {
			return nil, fmt.Errorf("cloudmapdns: no upstream resolvers: %w", err)
		}
		for _, srv := range cc.Servers {
			s.upstreams = append(s.upstreams, net.JoinHostPort(srv, cc.Port))
		}
	}
	pc, l, err := listenPair(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.addr = pc.LocalAddr().String()
	s.udp = &dns.Server{PacketConn: pc, Handler: s}
	s.tcp = &dns.Server{Listener: l, Handler: s}
	go func() { _ = s.udp.ActivateAndServe() }()
	go func() { _ = s.tcp.ActivateAndServe() }()
	return s, nil
}

// listenPair binds UDP and TCP on one port of addr. For port 0 the kernel picks the UDP
// port, which another process may hold for TCP: then another port is tried (up to 20),
// so an ephemeral address never fails on a clash the caller did not choose.
func listenPair(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("cloudmapdns: %w", err)
	}
	for attempt := 1; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("cloudmapdns: %w", err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) || attempt == 20 {
			return nil, nil, fmt.Errorf("cloudmapdns: %w", err)
		}
	}
}

// Addr returns the "ip:port" the server listens on (UDP and TCP).
func (s *Server) Addr() string { return s.addr }

// Set replaces what the server answers.
func (s *Server) Set(z *Zones) { s.zones.Store(z) }

// Close stops the listeners.
func (s *Server) Close() error {
	return errors.Join(s.udp.Shutdown(), s.tcp.Shutdown())
}

// ServeDNS implements dns.Handler: a question in a served zone is answered from the
// zones, any other is forwarded to the upstream resolvers (SERVFAIL when none answers).
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNotImplemented)
		_ = w.WriteMsg(m)
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	if s.zones.Load().answer(r.Question[0], m) {
		_ = w.WriteMsg(m)
		return
	}
	network := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		network = "tcp"
	}
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	for _, up := range s.upstreams {
		if up == s.addr {
			continue
		}
		res, _, err := c.Exchange(r, up)
		if err != nil {
			s.log.Debug("dns forward", "upstream", up, "name", r.Question[0].Name, "err", err)
			continue
		}
		res.Id = r.Id
		_ = w.WriteMsg(res)
		return
	}
	m = new(dns.Msg)
	m.SetRcode(r, dns.RcodeServerFailure)
	_ = w.WriteMsg(m)
}

// Client is what Follow needs from etcd; *clientv3.Client satisfies it.
type Client interface {
	clientv3.KV
	clientv3.Watcher
}

// load reads the Cloud Map records of the scopes.
func load(ctx context.Context, kv clientv3.KV, scopes []keys.Scope, lbAddrs []netip.Addr) (*Zones, int64, error) {
	var (
		nss   []*storev1.CloudMapNamespaceRecord
		svcs  []*storev1.CloudMapServiceRecord
		insts []*storev1.CloudMapInstanceRecord
		lbs   []*storev1.LoadBalancerRecord
	)
	// One linearizable read gives the revision the watch resumes after; the lists below
	// read at least that state.
	res, err := kv.Get(ctx, keys.CloudMapAll(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, 0, err
	}
	for _, sc := range scopes {
		if err := listInto(ctx, kv, keys.CloudMapNamespace(sc, ""), &nss); err != nil {
			return nil, 0, err
		}
		if err := listInto(ctx, kv, keys.CloudMapService(sc, ""), &svcs); err != nil {
			return nil, 0, err
		}
		if err := listInto(ctx, kv, keys.CloudMapInstancesInScope(sc), &insts); err != nil {
			return nil, 0, err
		}
		if len(lbAddrs) > 0 {
			if err := listInto(ctx, kv, keys.ElbLoadBalancer(sc, ""), &lbs); err != nil {
				return nil, 0, err
			}
		}
	}
	z := Build(nss, svcs, insts)
	z.addLoadBalancers(lbs, lbAddrs)
	return z, res.Header.Revision, nil
}

// listInto appends the value of every record under prefix to out (store.ListAll).
func listInto[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string, out *[]T) error {
	items, err := store.ListAll[T](ctx, kv, prefix)
	for _, it := range items {
		*out = append(*out, it.Value)
	}
	return err
}

// Follow keeps the server's zones equal to the Cloud Map records of its scopes in etcd
// (and, with LoadBalancerAddrs, their load balancers) until ctx ends: it loads them,
// watches keys.CloudMapAll (and keys.ElbLoadBalancersAll) and reloads after every
// change (changes within 50ms are taken together). It returns ctx's error.
func (s *Server) Follow(ctx context.Context, c Client) error {
	for ctx.Err() == nil {
		z, rev, err := load(ctx, c, s.cfg.Scopes, s.cfg.LoadBalancerAddrs)
		if err != nil {
			s.log.Warn("cloud map dns: load", "err", err)
			if err := store.Sleep(ctx, time.Second); err != nil {
				return err
			}
			continue
		}
		s.Set(z)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := c.Watch(wctx, keys.CloudMapAll(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		// The load balancers' names follow their records too, when they are answered.
		var lbch clientv3.WatchChan
		if len(s.cfg.LoadBalancerAddrs) > 0 {
			lbch = c.Watch(wctx, keys.ElbLoadBalancersAll(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		}
		changed := false
	watch:
		for {
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-wch:
			case resp, ok = <-lbch:
			}
			if !ok || resp.Err() != nil || resp.Canceled {
				break watch
			}
			if len(resp.Events) > 0 {
				changed = true
				break watch
			}
		}
		cancel()
		if !changed {
			// The watch ended (compaction, lost leader): load again after a pause.
			if err := store.Sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err := store.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Run listens on cfg.Addr and follows etcd until ctx ends; ready, when not nil, is
// called with the bound address once the server answers.
func Run(ctx context.Context, c Client, cfg Config, ready func(addr string)) error {
	s, err := Listen(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if ready != nil {
		ready(s.Addr())
	}
	err = s.Follow(ctx, c)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
