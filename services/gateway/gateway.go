package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/pkg/failover"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/pki"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/berthhq/berth/services/gateway/rpcv2cbor"
	"github.com/berthhq/berth/services/gateway/sigv4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TargetPrefix is the X-Amz-Target prefix of ECS operations.
const TargetPrefix = "AmazonEC2ContainerServiceV20141113."

// SigningName is the SigV4 signing name (service) of ECS.
const SigningName = "ecs"

// Defaults used when the corresponding Config field is zero.
const (
	// DefaultMaxBodyBytes limits an ECS request body (1 MiB).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultRate is the sustained per-account rate, in requests per second.
	DefaultRate = 200
	// DefaultBurst is the per-account bucket size.
	DefaultBurst = 400
	// DefaultKeyCacheTTL is how long a resolved access key is cached.
	DefaultKeyCacheTTL = 10 * time.Second
	// DefaultNegativeTTL is how long an unknown access key is remembered.
	DefaultNegativeTTL = 2 * time.Second
	// DefaultLockoutAfter is the number of consecutive failed authentications that lock
	// an address out.
	DefaultLockoutAfter = 10
	// DefaultLockoutBase is the first lockout's length.
	DefaultLockoutBase = time.Second
	// DefaultLockoutMax caps the lockout length.
	DefaultLockoutMax = 5 * time.Minute
	// DefaultRequestTimeout bounds one ECS call to the scheduler.
	DefaultRequestTimeout = 60 * time.Second
)

// Config configures the gateway.
type Config struct {
	// SchedulerURL is the base URL of the scheduler's internal Connect listener, e.g.
	// "http://127.0.0.1:7070". Required.
	SchedulerURL string
	// HTTPClient talks to the scheduler; when nil, a client with an h2c transport (HTTP/2
	// without TLS, http.Protocols with SetUnencryptedHTTP2) is used. It must speak HTTP/2
	// for the agent's bidi stream.
	HTTPClient *http.Client
	// SchedulerReplicas, when it names more than one base URL, spreads the calls (the
	// agent relay's streams included) over those replicas through HTTPClient's transport
	// (see package failover): round robin over the healthy ones, a replica whose
	// connection fails set aside for a moment, idempotent calls and refused dials sent
	// again to another. SchedulerURL is then only the URL calls are built on.
	SchedulerReplicas []string
	// Regions is the allow-list of regions a request's SigV4 scope may name; each is
	// served on its own (state, ARNs, agents). Nil or empty means every region of the
	// commercial AWS partition (sigv4.PublicRegions). A request signed for another region
	// is refused with InvalidSignatureException, as AWS answers.
	Regions []string
	// Logger receives the access log and errors; slog.Default() when nil.
	Logger *slog.Logger
	// Dev enables GET /_berth/health and POST /_berth/reset (for `berth dev` only).
	Dev bool
	// Health reports readiness for /_berth/health: a JSON-encodable value and whether the
	// stack is ready. Nil means always ready.
	Health func(ctx context.Context) (any, bool)
	// MaxBodyBytes limits ECS request bodies; DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
	// Rate is the sustained per-account request rate (requests per second) and Burst the
	// bucket size; DefaultRate and DefaultBurst when zero. A negative Rate disables
	// throttling.
	Rate  float64
	Burst int
	// KeyCacheTTL is how long a resolved access key is cached (DefaultKeyCacheTTL when
	// zero); NegativeTTL how long an unknown key is remembered (DefaultNegativeTTL).
	KeyCacheTTL, NegativeTTL time.Duration
	// LockoutAfter is the number of consecutive failed authentications from one address
	// after which it is locked out, for LockoutBase doubling at each further lockout up to
	// LockoutMax. Defaults DefaultLockoutAfter, DefaultLockoutBase, DefaultLockoutMax; a
	// negative LockoutAfter disables lockout.
	LockoutAfter            int
	LockoutBase, LockoutMax time.Duration
	// ClientAddress returns the address lockout counts failures against; the host part of
	// the connection's remote address when nil. Behind a load balancer, return the client
	// address the balancer reports (and only trust that header from the balancer).
	ClientAddress func(r *http.Request) string
	// RequestTimeout bounds each ECS call to the scheduler; DefaultRequestTimeout when
	// zero. It does not apply to the agent's streams.
	RequestTimeout time.Duration
	// Now is the clock used for SigV4 skew checks, throttling and lockout; time.Now when
	// nil (tests set it).
	Now func() time.Time
	// Registry, when set, receives the request metrics (berth_gateway_requests_total and
	// berth_gateway_request_duration_seconds by action and status code). Nil records
	// nothing.
	Registry *prometheus.Registry
	// ServeMetrics serves Registry at GET /metrics on the gateway's own listener (off by
	// default: the listener is public; expose metrics on a separate listener with
	// promhttp instead where that matters).
	ServeMetrics bool
	// Console, when set, serves the web console at /console (see package console and
	// ConsoleConfig); nil leaves /console unrouted.
	Console *ConsoleConfig
	// RequireAgentCert relays the AgentService only for clients whose verified TLS
	// certificate carries the agent role (pki.RoleAgent); others get
	// AccessDeniedException (403). Serve the gateway with pki.Files.ServerConfig and
	// tls.VerifyClientCertIfGiven so agents can present one while ECS clients need not.
	RequireAgentCert bool
}

// Gateway is the gateway's http.Handler; New builds it.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	services map[string]*service
	ops      map[string]*operation // ECS's, services["ecs"].ops
	verifier *sigv4.Verifier
	keys     *keyCache
	admin    adminv1connect.AdminServiceClient
	throttle *throttler
	lockout  *lockout
	agent    http.Handler
	metrics  *metrics
	console  http.Handler
}

// NewH2CClient returns an http.Client that speaks only HTTP/2 without TLS (h2c) to http://
// URLs, for reaching the scheduler's internal listener (bidi streams need HTTP/2). It is
// h2c.NewClient, which callers that link no gateway server (the agent) use directly.
func NewH2CClient() *http.Client { return h2c.NewClient() }

// New returns the gateway handler. Serve it with an http.Server whose Protocols include
// unencrypted HTTP/2 (or TLS) so the agent's bidi stream works. New returns an error when
// SchedulerURL is missing.
func New(cfg Config) (*Gateway, error) {
	if cfg.SchedulerURL == "" {
		return nil, errors.New("gateway: SchedulerURL is required")
	}
	cfg.SchedulerURL = strings.TrimRight(cfg.SchedulerURL, "/")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = NewH2CClient()
	}
	if len(cfg.SchedulerReplicas) > 1 {
		lb, err := failover.New(cfg.HTTPClient.Transport, cfg.SchedulerReplicas)
		if err != nil {
			return nil, err
		}
		client := *cfg.HTTPClient
		client.Transport = lb
		cfg.HTTPClient = &client
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.KeyCacheTTL <= 0 {
		cfg.KeyCacheTTL = DefaultKeyCacheTTL
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = DefaultNegativeTTL
	}
	if cfg.LockoutAfter == 0 {
		cfg.LockoutAfter = DefaultLockoutAfter
	}
	if cfg.LockoutBase <= 0 {
		cfg.LockoutBase = DefaultLockoutBase
	}
	if cfg.LockoutMax <= 0 {
		cfg.LockoutMax = DefaultLockoutMax
	}
	if cfg.ClientAddress == nil {
		cfg.ClientAddress = remoteAddr
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	services, err := newServices(Services, cfg.HTTPClient, cfg.SchedulerURL)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(services))
	for name := range services {
		names = append(names, name)
	}
	admin := adminv1connect.NewAdminServiceClient(cfg.HTTPClient, cfg.SchedulerURL)
	keys := newKeyCache(admin, cfg.KeyCacheTTL, cfg.NegativeTTL, cfg.Now)
	verifier, err := sigv4.New(sigv4.Options{Regions: cfg.Regions, Services: names, Now: cfg.Now, Resolver: keys})
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg:      cfg,
		log:      cfg.Logger,
		services: services,
		ops:      services[SigningName].ops,
		verifier: verifier,
		keys:     keys,
		admin:    admin,
		throttle: newThrottler(cfg.Rate, cfg.Burst, cfg.Now),
		lockout:  newLockout(cfg.LockoutAfter, cfg.LockoutBase, cfg.LockoutMax, cfg.Now),
	}
	if cfg.Registry != nil {
		g.metrics = newMetrics(cfg.Registry)
	}
	g.agent, err = g.newAgentProxy()
	if err != nil {
		return nil, err
	}
	if cfg.Console != nil {
		c, err := g.newConsole(cfg.Console)
		if err != nil {
			return nil, err
		}
		g.console = c
	}
	return g, nil
}

// Operations returns the names of the ECS actions the gateway routes (every method of
// the EcsService descriptor), sorted.
func (g *Gateway) Operations() []string {
	names := make([]string, 0, len(g.ops))
	for name := range g.ops {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// exchange is one request's state, for the access log.
type exchange struct {
	id      string
	account string
	action  string
	errType string
}

// ServeHTTP routes a request: POST / (and GET / for query-protocol services) to the AWS
// service its SigV4 credential scope names (see Services), /berth.agent.v1.AgentService/* to the
// agent relay, the dev routes when enabled; anything else gets an AWS JSON error. Every
// response carries x-amzn-RequestId.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	x := &exchange{id: newRequestID()}
	w.Header().Set("X-Amzn-RequestId", x.id)
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			g.log.Error("panic serving request", "request_id", x.id, "panic", p)
			if !rec.wrote {
				writeError(rec, http.StatusInternalServerError, "ServerException", "An internal error occurred.")
			}
		}
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("request_id", x.id),
			slog.String("remote", r.RemoteAddr),
			slog.String("account", x.account),
			slog.String("action", x.action),
			slog.Int("status", rec.status()),
			slog.String("error", x.errType),
			slog.Duration("latency", time.Since(start)),
		)
		g.metrics.observe(x.action, rec.status(), time.Since(start))
	}()
	path := r.URL.Path
	switch {
	case path == "/" || strings.HasPrefix(path, rpcv2cbor.PathPrefix):
		ctx, span := startAPISpan(r, x.id)
		g.serveAWS(rec, r.WithContext(ctx), x)
		endAPISpan(span, x, rec.status())
	case strings.HasPrefix(path, "/"+agentv1connect.AgentServiceName+"/") || path == agentv1connect.AgentExecServiceAttachProcedure:
		if agentProcedures[path] {
			x.action = strings.TrimPrefix(path, "/")
		}
		if g.cfg.RequireAgentCert && !pki.PeerHasRole(r.TLS, pki.RoleAgent) {
			x.errType = "AccessDeniedException"
			writeError(rec, http.StatusForbidden, "AccessDeniedException", "The agent API needs a TLS client certificate with the agent role.")
			return
		}
		g.serveAgent(rec, r, x)
	case strings.HasPrefix(path, DataChannelPath):
		rec.code = http.StatusSwitchingProtocols
		g.serveDataChannel(w, r, x)
	case g.cfg.Dev && path == "/_berth/health":
		x.action = "_berth/health"
		g.serveHealth(rec, r)
	case g.cfg.ServeMetrics && g.cfg.Registry != nil && path == "/metrics":
		x.action = "metrics"
		promhttp.HandlerFor(g.cfg.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, r)
	case g.console != nil && (path == "/console" || strings.HasPrefix(path, "/console/")):
		// The console logs its own ECS calls (one access-log line per page would hide
		// them) and counts them under their actions.
		x.action = "console"
		g.console.ServeHTTP(rec, r)
	case g.cfg.Dev && path == "/_berth/reset":
		x.action = "_berth/reset"
		g.serveReset(rec, r, x)
	default:
		x.errType = "UnknownOperationException"
		writeError(rec, http.StatusNotFound, "UnknownOperationException", "No such route; ECS requests are POST / with X-Amz-Target.")
	}
}

// agentProcedures are the AgentService paths named in logs and metrics; other paths
// under the service are relayed (the scheduler answers them) but count as unknown, so a
// client cannot grow the metrics' label set.
var agentProcedures = map[string]bool{
	agentv1connect.AgentServiceRegisterProcedure:           true,
	agentv1connect.AgentServiceSessionProcedure:            true,
	agentv1connect.AgentServiceEnsureLogStreamProcedure:    true,
	agentv1connect.AgentServiceShipLogsProcedure:           true,
	agentv1connect.AgentServiceGetTaskCredentialsProcedure: true,
	agentv1connect.AgentExecServiceAttachProcedure:         true,
}

// recorder remembers the status written, for the access log.
type recorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

// WriteHeader records code and passes it on.
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and passes b on.
func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and full-duplex control.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush implements http.Flusher for the agent relay's streams.
func (r *recorder) Flush() {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) status() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.code
}

// writeError writes an AWS JSON error response.
func writeError(w http.ResponseWriter, status int, typ, message string) {
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.1")
	h.Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_, _ = w.Write(awsjson.AppendError(nil, typ, message))
}

// newRequestID returns a random UUID (version 4), the form of AWS request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// remoteAddr returns the client's address without the port, the unit of lockout.
func remoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
