package agent

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/endpoints"
	"github.com/berthhq/berth/services/agent/gpu"
	"github.com/berthhq/berth/services/agent/hostinfo"
	"github.com/berthhq/berth/services/agent/logs"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/outbox"
	"github.com/berthhq/berth/services/agent/runtime"
	"github.com/berthhq/berth/services/agent/session"
	"github.com/berthhq/berth/services/agent/tasks"
)

// Version is the agent version reported in registration.
const Version = "0.1.0"

// ReservedPorts are the TCP ports registered as taken, as the ECS agent
// reserves them (SSH, Docker, the ECS agent's introspection).
var ReservedPorts = []int{22, 2375, 2376, 51678, 51679}

// LogEndpointAttribute is the attribute that carries the URL of the
// agent's LogService (h2c), so clients can find a task's logs.
const LogEndpointAttribute = "berth.log-endpoint"

// Capabilities are the com.amazonaws.ecs.capability.* and ecs.capability.*
// attributes the agent registers: the Docker remote API levels whose
// task-definition features it implements, health checks and container
// ordering (dependsOn).
var Capabilities = []string{
	"com.amazonaws.ecs.capability.docker-remote-api.1.17",
	"com.amazonaws.ecs.capability.docker-remote-api.1.18",
	"com.amazonaws.ecs.capability.docker-remote-api.1.19",
	"com.amazonaws.ecs.capability.docker-remote-api.1.21",
	"com.amazonaws.ecs.capability.docker-remote-api.1.22",
	"com.amazonaws.ecs.capability.docker-remote-api.1.23",
	"com.amazonaws.ecs.capability.docker-remote-api.1.24",
	"ecs.capability.container-health-check",
	"ecs.capability.container-ordering",
	"com.amazonaws.ecs.capability.privileged-container",
	"ecs.capability.task-cpu-mem-limit",
	"ecs.capability.pid-ipc-namespace-sharing",
	"ecs.capability.container-port-range",
	"ecs.capability.secrets.asm.environment-variables",
	"ecs.capability.secrets.ssm.environment-variables",
	"ecs.capability.private-registry-authentication.secretsmanager",
	// The log drivers the agent runs (logConfiguration).
	"com.amazonaws.ecs.capability.logging-driver.json-file",
	"com.amazonaws.ecs.capability.logging-driver.awslogs",
}

// Attributes the agent registers only when the host has what they need (the scheduler's
// placement matches tasks against them; placement.PlatformRequirements); when it lacks
// it, the agent reports the attribute in RegisterRequest.missing_attributes with what is
// missing instead.
const (
	// AttrCNIPluginVersion: the CNI plugins of networkMode bridge and none (and iptables)
	// are installed; its value is their version.
	AttrCNIPluginVersion = "ecs.capability.cni-plugin-version"
	// AttrTaskENI: networkMode awsvpc can be set up (the CNI plugins; the scheduler
	// withdraws it when it has no task subnet for the instance).
	AttrTaskENI = "ecs.capability.task-eni"
	// AttrTaskIAMRole and AttrTaskIAMRoleNetworkHost: the agent serves task role
	// credentials (its task endpoints are on), to host mode tasks too.
	AttrTaskIAMRole            = "com.amazonaws.ecs.capability.task-iam-role"
	AttrTaskIAMRoleNetworkHost = "com.amazonaws.ecs.capability.task-iam-role-network-host"
	// AttrInit is the Docker remote API level AWS requires of linuxParameters
	// initProcessEnabled: registered when the host has a static init to run
	// (tasks.InitBinary: docker-init or tini-static).
	AttrInit = "com.amazonaws.ecs.capability.docker-remote-api.1.25"
)

// initMissing is what a host without a static init lacks for AttrInit.
const initMissing = "docker-init or tini-static not found in PATH: initProcessEnabled cannot run (apt-get install tini)"

// hasInit reports whether the host has a static init (tasks.InitBinary).
func hasInit() bool {
	_, err := tasks.InitBinary()
	return err == nil
}

// DefaultNetworkRecheck is how often an agent whose host cannot set up task networking
// looks again (Config.NetworkRecheckInterval).
const DefaultNetworkRecheck = 10 * time.Second

// Config configures an agent. Zero values take the defaults named.
type Config struct {
	// ControlPlaneURL is the base URL of the AgentService (the gateway in
	// production); http:// URLs use h2c. Required.
	ControlPlaneURL string
	// HTTPClient carries control-plane calls; it must speak HTTP/2 for
	// the bidi session. Plug a signing (SigV4) transport in here. Default:
	// session.DefaultHTTPClient().
	HTTPClient *http.Client
	// Cluster is the cluster to join; default "default".
	Cluster string
	// DataDir holds the agent's state (state.db, host-id), FIFOs and logs.
	// Required.
	DataDir string
	// ContainerdAddress is containerd's socket; default
	// /run/containerd/containerd.sock.
	ContainerdAddress string
	// Namespace is the containerd namespace for the agent's containers;
	// default "berth".
	Namespace string
	// Snapshotter unpacks images and holds root filesystems; default
	// "overlayfs".
	Snapshotter string
	// RuncRoot is runc's state directory for the agent's containers (runc --root); ""
	// keeps runc's default /run/containerd/runc, which every containerd of the host
	// shares. A private containerd (berth dev, tests) passes its own
	// (containerdproc.Instance.RuncRoot).
	RuncRoot string
	// MemoryReserveMiB is memory kept back from registration for the host
	// (ECS_RESERVED_MEMORY); default 0.
	MemoryReserveMiB int64
	// Attributes are custom attributes registered with the instance.
	Attributes map[string]string
	// HostAddress is the IPv4 address the cluster's other hosts reach this host at
	// (RegisterRequest.host_address): they route its awsvpc task subnet through it, and
	// load balancer targets of its bridge and host mode tasks use it; "" picks the address
	// this host reaches the control plane from (none when that is loopback: no peer
	// routes to it, and targets use loopback).
	HostAddress string
	// PullBehavior is default|always|once|prefer-cached
	// (ECS_IMAGE_PULL_BEHAVIOR); default "default".
	PullBehavior string
	// InsecureRegistries are registry hosts ("host:port") pulled over
	// plain HTTP; loopback registries always are.
	InsecureRegistries []string
	// RegistryRootCAs verifies HTTPS registries' certificates (runtime.PullConfig.RootCAs);
	// nil: the system roots.
	RegistryRootCAs *x509.CertPool
	// RegistryCredentials maps registry host to credentials.
	RegistryCredentials map[string]runtime.Credential
	// EFS maps EFS file system ids to the NFS export ("HOST:/EXPORT") or local
	// directory ("/PATH") the agent mounts for tasks' efsVolumeConfiguration volumes
	// (tasks.ParseEFSMappings; berth agent --efs).
	EFS map[string]string
	// PullTimeout bounds one pull attempt; default 5 min.
	PullTimeout time.Duration
	// PullRetries is the number of retries after a failed pull; default 2
	// (negative means none).
	PullRetries int
	// StopTimeout is the default time between the stop signal and SIGKILL
	// (ECS_CONTAINER_STOP_TIMEOUT); default 30 s.
	StopTimeout time.Duration
	// CleanupWait is how long stopped containers are kept before removal
	// (ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION); default 3 h.
	CleanupWait time.Duration
	// LogRetention keeps logs after container removal; default 3 h.
	LogRetention time.Duration
	// LogMaxFileBytes rotates a container log past this size; default 10 MiB.
	LogMaxFileBytes int64
	// LogMaxFiles is the number of log files kept per container; default 3.
	LogMaxFiles int
	// LogAddr is where the LogService listens ("host:port"; port 0 picks
	// one); default "127.0.0.1:0" (loopback, any port); "off" disables it.
	// The address is registered as the berth.log-endpoint attribute.
	LogAddr string
	// LogTLS, when set, makes the LogService listener serve HTTPS with it (HTTP/2 by ALPN;
	// give it client-certificate verification for mTLS) and registers an https://
	// berth.log-endpoint; nil serves plain h2c, for loopback only (berth dev).
	LogTLS *tls.Config
	// LogAuthorize, when set, is asked about every LogService and /metrics request's TLS
	// connection state (nil for a plain connection); false answers PermissionDenied
	// (HTTP 403). `berth agent` lets in only client, admin and gateway certificates.
	LogAuthorize func(*tls.ConnectionState) bool
	// EndpointAddr is where the tasks' credentials and metadata endpoints listen
	// ("host:port"; port 0 picks one); default "127.0.0.1:0"; "off" disables them (a task
	// with a taskRoleArn then fails to start). The ECS agent's is 127.0.0.1:51679.
	EndpointAddr string
	// HeartbeatInterval is the time between heartbeats; default 10 s.
	HeartbeatInterval time.Duration
	// ResendInterval resends unacknowledged state changes; default 15 s.
	ResendInterval time.Duration
	// StatsInterval is the time between samples of the running tasks' CPU and memory
	// sent to the control plane (CloudWatch's AWS/ECS metrics); default 15 s.
	StatsInterval time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff; defaults
	// 250 ms and 30 s.
	BackoffMin, BackoffMax time.Duration
	// RuntimeProbeInterval is the runtime gate's dial/probe period;
	// default 1 s.
	RuntimeProbeInterval time.Duration
	// RuntimeProbeTimeout bounds one dial or probe of containerd; a probe
	// that does not answer in time empties the gate. Default 5 s.
	RuntimeProbeTimeout time.Duration
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// GPUs finds the host's NVIDIA GPUs once at New; nil is gpu.NVIDIA{} (the
	// /dev/nvidia[0-9]* nodes and nvidia-smi). A host without GPUs registers none.
	GPUs gpu.Lister
	// Network configures task networking through CNI (networkMode bridge, awsvpc, none);
	// zero values take package network's defaults, StateDir defaults to DataDir/network.
	// When the host cannot do CNI (not root, plugins missing) the agent still runs, and
	// tasks of those modes fail to start saying why.
	Network network.Config
	// NetworkRecheckInterval is how often the agent looks again at what task networking
	// needs (the CNI plugins, iptables) and for a static init: when the host gains or
	// loses one it registers again (found plugins set the network up first, then
	// ecs.capability.cni-plugin-version and ecs.capability.task-eni are registered; a
	// found init registers AttrInit). Default DefaultNetworkRecheck.
	NetworkRecheckInterval time.Duration
	// Registry, when set, receives the agent's Prometheus metrics (containerd call
	// latency, tasks by status), served at /metrics on the LogAddr listener. Nil
	// records nothing.
	Registry *prometheus.Registry
}

// Agent is one host's agent.
type Agent struct {
	cfg    Config
	host   hostinfo.Info
	hostID string
	gpus   gpu.Host
	log    *slog.Logger
	logLn  net.Listener
	// endpointAddr is the task endpoints' listener address once Run opened it.
	endpointAddr atomic.Value
	// lastHostAddress is the last address hostAddress found (string).
	lastHostAddress atomic.Value
}

// EndpointAddr returns the address of the tasks' credentials and metadata endpoints once
// Run has opened them, else "".
func (a *Agent) EndpointAddr() string {
	s, _ := a.endpointAddr.Load().(string)
	return s
}

// newEndpoints opens the tasks' credentials and metadata endpoints (nil when
// EndpointAddr is "off"). The key of their URI ids is kept in the data dir, so the ids
// baked into running containers' environment survive an agent restart.
func (a *Agent) newEndpoints() (*endpoints.Server, error) {
	if a.cfg.EndpointAddr == "off" {
		return nil, nil
	}
	key, err := loadOrCreateKey(filepath.Join(a.cfg.DataDir, "endpoints.key"))
	if err != nil {
		return nil, err
	}
	httpClient := a.cfg.HTTPClient
	if httpClient == nil {
		httpClient = session.DefaultHTTPClient()
	}
	client := agentv1connect.NewAgentServiceClient(httpClient, a.cfg.ControlPlaneURL)
	return endpoints.New(endpoints.Config{
		Addr: a.cfg.EndpointAddr,
		Key:  key,
		API:  a.cfg.ControlPlaneURL,
		Credentials: func(ctx context.Context, taskARN, roleType string) (*agentv1.GetTaskCredentialsResponse, error) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			res, err := client.GetTaskCredentials(ctx, connect.NewRequest(&agentv1.GetTaskCredentialsRequest{TaskArn: taskARN, RoleType: roleType}))
			if err != nil {
				return nil, err
			}
			return res.Msg, nil
		},
		Log: a.log.With("component", "endpoints"),
	})
}

// linkLocalTarget returns where 169.254.170.2:80 is redirected for the endpoint listener
// at addr: its address, 127.0.0.1 when it listens on every address; false for an IPv6
// listener.
func linkLocalTarget(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return "", false
	}
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip.To4() == nil {
		return "", false
	}
	return net.JoinHostPort(ip.To4().String(), port), true
}

// loadOrCreateKey reads a 32-byte key from path, creating it (mode 0600) when absent.
func loadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	return b, nil
}

// New checks cfg, detects the host and loads (or creates) its host id, and
// opens the LogService listener if cfg.LogAddr is set. It returns an error
// for a missing ControlPlaneURL or DataDir, or when the host cannot be
// described.
func New(cfg Config) (*Agent, error) {
	if cfg.ControlPlaneURL == "" {
		return nil, errors.New("agent: ControlPlaneURL is required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("agent: DataDir is required")
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "default"
	}
	if cfg.ContainerdAddress == "" {
		cfg.ContainerdAddress = "/run/containerd/containerd.sock"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "berth"
	}
	if cfg.Snapshotter == "" {
		cfg.Snapshotter = "overlayfs"
	}
	if cfg.PullRetries == 0 {
		cfg.PullRetries = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create data dir: %w", err)
	}
	host, err := hostinfo.Detect()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	hostID, err := hostinfo.HostID(cfg.DataDir, cfg.Namespace)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{cfg: cfg, host: host, hostID: hostID, log: cfg.Logger}
	if cfg.GPUs == nil {
		cfg.GPUs = gpu.NVIDIA{}
	}
	// A host whose GPUs cannot be identified registers none (its GPU tasks then fail
	// placement with RESOURCE:GPU) rather than not starting: its other tasks still run.
	if a.gpus, err = cfg.GPUs.List(context.Background()); err != nil {
		a.log.Warn("GPUs not registered", "err", err)
		a.gpus = gpu.Host{}
	}
	if cfg.LogAddr == "" {
		cfg.LogAddr = "127.0.0.1:0"
	}
	if cfg.LogAddr != "off" {
		ln, err := net.Listen("tcp", cfg.LogAddr)
		if err != nil {
			return nil, fmt.Errorf("agent: log service listen on %s: %w", cfg.LogAddr, err)
		}
		a.logLn = ln
	}
	return a, nil
}

// HostID returns the host id the agent registers with.
func (a *Agent) HostID() string { return a.hostID }

// LogAddr returns the LogService's listening address, "" when disabled.
func (a *Agent) LogAddr() string {
	if a.logLn == nil {
		return ""
	}
	return a.logLn.Addr().String()
}

// Run runs the agent until ctx is done: it opens the state file, watches
// containerd through the runtime gate, registers and holds the control-plane
// session, runs tasks and serves logs. Running containers are left running
// when it returns (a new agent re-adopts them). It returns nil after ctx is
// done, or an error if the state file or log store cannot be opened.
func (a *Agent) Run(ctx context.Context) error {
	ob, err := outbox.Open(filepath.Join(a.cfg.DataDir, "state.db"))
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer ob.Close()
	store, err := logs.NewStore(logs.Config{
		Dir:          filepath.Join(a.cfg.DataDir, "logs"),
		MaxFileBytes: a.cfg.LogMaxFileBytes,
		MaxFiles:     a.cfg.LogMaxFiles,
		Retention:    a.cfg.LogRetention,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	var dialOpts []grpc.DialOption
	if a.cfg.Registry != nil {
		dialOpts = newContainerdMetrics(a.cfg.Registry).dialOptions()
	}
	gate := runtime.NewGate(runtime.GateConfig{
		DialOptions:  dialOpts,
		Address:      a.cfg.ContainerdAddress,
		Namespace:    a.cfg.Namespace,
		Interval:     a.cfg.RuntimeProbeInterval,
		ProbeTimeout: a.cfg.RuntimeProbeTimeout,
		Log:          a.log.With("component", "runtime"),
	})
	ep, err := a.newEndpoints()
	if err != nil {
		return fmt.Errorf("agent: task endpoints: %w", err)
	}
	var taskEndpoints tasks.Endpoints
	if ep != nil {
		taskEndpoints = ep
	}
	reports := make(chan struct{}, 1)
	var onContainer func(string)
	if a.cfg.Registry != nil {
		events := newContainerEvents()
		a.cfg.Registry.MustRegister(events)
		defer a.cfg.Registry.Unregister(events)
		onContainer = func(ev string) { events.WithLabelValues(ev).Inc() }
	}
	httpClient := a.cfg.HTTPClient
	if httpClient == nil {
		httpClient = session.DefaultHTTPClient()
	}
	plane := agentv1connect.NewAgentServiceClient(httpClient, a.cfg.ControlPlaneURL)
	shipper := logs.NewShipper(logs.ShipperConfig{Store: store, Client: plane, Log: a.log.With("component", "awslogs")})
	netCfg := a.cfg.Network
	if netCfg.StateDir == "" {
		netCfg.StateDir = filepath.Join(a.cfg.DataDir, "network")
	}
	nw, err := network.New(netCfg)
	netErr := ""
	if err != nil {
		a.log.Warn("task networking unavailable: bridge, awsvpc and none tasks are not placed here until the agent finds what they need", "err", err)
		nw, netErr = nil, err.Error()
	}
	netSt := checkNetwork(netCfg, nw, err)
	// linkLocal installs the redirect of the task endpoints for nw (see below); release
	// undoes it when Run returns.
	var releaseLinkLocal []func()
	defer func() {
		for _, f := range releaseLinkLocal {
			f()
		}
	}()
	linkLocal := func(nw *network.Network) {
		if nw == nil || ep == nil {
			return
		}
		// Tasks in their own namespace (bridge, awsvpc) reach the endpoints on
		// 169.254.170.2:80, as on ECS: the first such task network installs the host's
		// redirect, removed when Run returns. Without it they keep the loopback URIs.
		if target, ok := linkLocalTarget(ep.Addr()); !ok {
			a.log.Warn("task endpoints not reachable from bridge and awsvpc tasks: the endpoint listener is not IPv4", "addr", ep.Addr())
		} else if err := nw.SetLinkLocalTarget(target); err != nil {
			a.log.Warn("task endpoints not reachable from bridge and awsvpc tasks", "err", err)
		} else {
			ep.SetLinkLocal(true)
			releaseLinkLocal = append(releaseLinkLocal, func() {
				if err := nw.ReleaseLinkLocal(); err != nil {
					a.log.Warn("removing the task endpoints redirect", "err", err)
				}
			})
		}
	}
	linkLocal(nw)
	manager := tasks.New(tasks.Config{
		Endpoints:    taskEndpoints,
		OnContainer:  onContainer,
		LogStreams:   logStreams{plane},
		Network:      nw,
		NetworkError: netErr,
		GPUs:         a.gpus,
		Gate:         gate,
		Outbox:       ob,
		Logs:         store,
		Reports:      reports,
		Pull: runtime.PullConfig{
			Behavior:           a.cfg.PullBehavior,
			Snapshotter:        a.cfg.Snapshotter,
			InsecureRegistries: a.cfg.InsecureRegistries,
			Credentials:        a.cfg.RegistryCredentials,
			RootCAs:            a.cfg.RegistryRootCAs,
			Timeout:            a.cfg.PullTimeout,
			Retries:            a.cfg.PullRetries,
		},
		RuncRoot:    a.cfg.RuncRoot,
		Cluster:     a.cfg.Cluster,
		HostID:      a.hostID,
		FIFODir:     filepath.Join(a.cfg.DataDir, "fifo"),
		VolumeDir:   filepath.Join(a.cfg.DataDir, "volumes"),
		EFS:         a.cfg.EFS,
		StopTimeout: a.cfg.StopTimeout,
		CleanupWait: a.cfg.CleanupWait,
		Log:         a.log.With("component", "tasks"),
	})
	if a.cfg.Registry != nil {
		a.cfg.Registry.MustRegister(taskCollector{manager})
		defer a.cfg.Registry.Unregister(taskCollector{manager})
	}
	view := &hostView{a: a, gate: gate, endpoints: ep != nil, reregister: make(chan struct{}, 1)}
	view.net.Store(netSt)
	view.init.Store(hasInit())
	sess := session.New(session.Config{
		BaseURL:           a.cfg.ControlPlaneURL,
		HTTPClient:        a.cfg.HTTPClient,
		Outbox:            ob,
		Reports:           reports,
		HeartbeatInterval: a.cfg.HeartbeatInterval,
		ResendInterval:    a.cfg.ResendInterval,
		BackoffMin:        a.cfg.BackoffMin,
		BackoffMax:        a.cfg.BackoffMax,
		Log:               a.log.With("component", "session"),
		Stats:             view.taskStats(tasks.NewSampler(manager)),
		StatsInterval:     a.cfg.StatsInterval,
	}, view, &handler{m: manager})

	var wg sync.WaitGroup
	if ep != nil {
		ep.SetSource(manager)
		a.endpointAddr.Store(ep.Addr())
		wg.Go(func() { _ = ep.Run(ctx) })
	}
	// The runtime client outlives the task goroutines: a container that exits as the
	// agent stops is still being deleted (exited's delete runs past ctx), and a client
	// closed under that delete leaves containerd without the task but its shim running,
	// an orphan no later agent can find.
	gateCtx, stopGate := context.WithCancel(context.WithoutCancel(ctx))
	defer stopGate()
	wg.Go(func() { gate.Run(gateCtx) })
	wg.Go(func() {
		_ = manager.Run(ctx)
		<-ctx.Done()
		stopGate()
	})
	wg.Go(func() { _ = shipper.Run(ctx) })
	// A host that lacks what task networking needs is looked at again until it has it:
	// the network is then set up and handed to the tasks, and the agent registers again
	// with the capabilities it now has.
	recheck := cmp.Or(a.cfg.NetworkRecheckInterval, DefaultNetworkRecheck)
	wg.Go(func() {
		t := time.NewTicker(recheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if in := hasInit(); in != view.init.Load() {
				view.init.Store(in)
				a.log.Info("static init changed: registering again", "init", in)
				view.changed()
			}
			cur := view.net.Load()
			nw, err := cur.nw, error(nil)
			if nw == nil {
				if nw, err = network.New(netCfg); err != nil {
					nw = nil
				}
			}
			next := recheckNetwork(netCfg, nw, err, cur)
			if next.missing == cur.missing && next.version == cur.version && next.nw == cur.nw {
				continue
			}
			if cur.nw == nil && nw != nil {
				linkLocal(nw)
				manager.SetNetwork(nw)
			}
			if next.missing == "" {
				a.log.Info("task networking available: registering again with its capabilities", "cni_plugin_version", next.version)
			} else {
				a.log.Warn("task networking unavailable: registering again without its capabilities", "missing", next.missing)
			}
			view.net.Store(next)
			view.changed()
		}
	})
	wg.Go(func() {
		select { // register with the runtime's real state
		case <-gate.Probed():
		case <-ctx.Done():
			return
		}
		_ = sess.Run(ctx)
	})
	if a.logLn != nil {
		mux := http.NewServeMux()
		mux.Handle(agentv1connect.NewLogServiceHandler(logs.NewService(store)))
		if a.cfg.Registry != nil {
			mux.Handle("/metrics", promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{}))
		}
		var p http.Protocols
		p.SetHTTP1(true)
		var h http.Handler = mux
		if auth := a.cfg.LogAuthorize; auth != nil {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !auth(r.TLS) {
					// The Connect protocol's error shape, for any client.
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusForbidden)
					_, _ = io.WriteString(w, `{"code":"permission_denied","message":"the agent's log service needs a client, admin or gateway certificate"}`)
					return
				}
				mux.ServeHTTP(w, r)
			})
		}
		srv := &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}
		if a.cfg.LogTLS != nil {
			p.SetHTTP2(true)
			srv.TLSConfig = a.cfg.LogTLS
			a.log.Info("log service listening, mTLS (berth logs --agent https://ADDR --tls-ca … --tls-cert …)", "addr", a.logLn.Addr().String())
			wg.Go(func() { _ = srv.ServeTLS(a.logLn, "", "") })
		} else {
			p.SetUnencryptedHTTP2(true)
			a.log.Info("log service listening (berth logs --agent http://ADDR)", "addr", a.logLn.Addr().String())
			wg.Go(func() { _ = srv.Serve(a.logLn) })
		}
		context.AfterFunc(ctx, func() { _ = srv.Close() })
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// hostView answers the session's questions about the host.
type hostView struct {
	a    *Agent
	gate *runtime.Gate
	// net is task networking as last checked.
	net atomic.Pointer[netState]
	// endpoints: the task credentials endpoints are on.
	endpoints bool
	// init: the host has a static init (hasInit), as last checked.
	init atomic.Bool
	// reregister is signalled when the host's capabilities changed.
	reregister chan struct{}
}

// netState is what the host has of task networking.
type netState struct {
	nw *network.Network // nil without CNI
	// missing is what the host lacks for the network modes CNI sets up, one line for an
	// operator ("" when it has everything).
	missing string
	// version is the CNI plugins' version ("" when unknown).
	version string
}

// checkNetwork returns the host's networking state: nw (nil when network.New failed with
// newErr) and what network.Check finds missing in cfg's plugin directories.
func checkNetwork(cfg network.Config, nw *network.Network, newErr error) *netState {
	return recheckNetwork(cfg, nw, newErr, nil)
}

// recheckNetwork is checkNetwork, keeping prev's plugin version when the host had
// everything then and still has (the version is probed only when the plugins appear).
func recheckNetwork(cfg network.Config, nw *network.Network, newErr error, prev *netState) *netState {
	st := &netState{nw: nw}
	var plugins []string
	var other []string
	where := ""
	for _, m := range network.Check(cfg.PluginDirs) {
		if name, ok := strings.CutPrefix(m.What, "CNI plugin "); ok {
			plugins, where = append(plugins, name), m.Where
			continue
		}
		other = append(other, fmt.Sprintf("%s not found in %s (apt-get install %s)", m.What, m.Where, m.Package))
	}
	var lines []string
	switch len(plugins) {
	case 0:
	case 1:
		lines = append(lines, fmt.Sprintf("CNI plugin %s not found in %s (apt-get install containernetworking-plugins)", plugins[0], where))
	default:
		lines = append(lines, fmt.Sprintf("CNI plugins %s not found in %s (apt-get install containernetworking-plugins)", strings.Join(plugins, ", "), where))
	}
	lines = append(lines, other...)
	if len(lines) == 0 && nw == nil {
		msg := "the agent could not set up task networking"
		if newErr != nil {
			msg = newErr.Error()
		}
		lines = append(lines, msg)
	}
	st.missing = strings.Join(lines, "; ")
	if st.missing == "" {
		if prev != nil && prev.missing == "" && prev.nw != nil {
			st.version = prev.version
		} else {
			st.version = pluginVersion(cfg.PluginDirs)
		}
	}
	return st
}

// pluginVersion is the version the CNI bridge plugin prints when run without a CNI
// command ("CNI bridge plugin v1.1.1"), "" when it prints none.
func pluginVersion(dirs []string) string {
	if len(dirs) == 0 {
		dirs = []string{network.DefaultPluginDir, "/opt/cni/bin"}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "bridge")
		if _, err := os.Stat(p); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		out, _ := exec.CommandContext(ctx, p).CombinedOutput()
		cancel()
		return pluginVersionRE.FindString(string(out))
	}
	return ""
}

var pluginVersionRE = regexp.MustCompile(`v[0-9]+\.[0-9]+\.[0-9]+`)

// changed asks the session to register again (Reregister); a request already pending
// covers this one.
func (h *hostView) changed() {
	select {
	case h.reregister <- struct{}{}:
	default:
	}
}

// Reregister is signalled when what the host can run changed (session.Reregisterer).
func (h *hostView) Reregister() <-chan struct{} { return h.reregister }

func (h *hostView) capacity() (ready bool, reason string, cpu, mem int32) {
	ready, reason, _ = h.gate.State()
	if !ready {
		return false, reason, 0, 0
	}
	mem64 := max(h.a.host.MemoryMiB-h.a.cfg.MemoryReserveMiB, 0)
	return true, "", int32(h.a.host.Cores * 1024), int32(mem64)
}

func (h *hostView) Registration() *agentv1.RegisterRequest {
	ready, reason, cpu, mem := h.capacity()
	ports := make([]string, len(ReservedPorts))
	for i, p := range ReservedPorts {
		ports[i] = strconv.Itoa(p)
	}
	req := &agentv1.RegisterRequest{
		Cluster: h.a.cfg.Cluster,
		HostId:  h.a.hostID,
		Resources: []*ecsv1.Resource{
			{Name: proto.String("CPU"), Type: proto.String("INTEGER"), IntegerValue: cpu},
			{Name: proto.String("MEMORY"), Type: proto.String("INTEGER"), IntegerValue: mem},
			{Name: proto.String("PORTS"), Type: proto.String("STRINGSET"), StringSetValue: ports},
			{Name: proto.String("PORTS_UDP"), Type: proto.String("STRINGSET"), StringSetValue: []string{}},
		},
		VersionInfo:   &ecsv1.VersionInfo{AgentVersion: proto.String(Version), DockerVersion: proto.String("containerd")},
		RuntimeReady:  ready,
		RuntimeReason: reason,
		HostAddress:   h.a.hostAddress(),
	}
	st := h.net.Load()
	if st == nil {
		st = &netState{missing: "the agent has not set up task networking"}
	}
	if st.nw != nil {
		req.TakenTaskSubnets = st.nw.TakenSubnets()
	}
	// GPUs as the ECS agent registers them: resource "GPU", a STRINGSET of the GPU ids,
	// only when the host has some.
	if ids := h.a.gpus.IDs(); len(ids) > 0 {
		req.Resources = append(req.Resources, &ecsv1.Resource{Name: proto.String("GPU"), Type: proto.String("STRINGSET"), StringSetValue: ids})
	}
	attr := func(name, value string) {
		a := &ecsv1.Attribute{Name: proto.String(name)}
		if value != "" {
			a.Value = proto.String(value)
		}
		req.Attributes = append(req.Attributes, a)
	}
	attr("ecs.os-type", h.a.host.OSType)
	attr("ecs.cpu-architecture", h.a.host.Arch)
	for _, c := range Capabilities {
		attr(c, "")
	}
	missing := map[string]string{}
	if st.nw != nil && st.missing == "" {
		attr(AttrCNIPluginVersion, st.version)
		attr(AttrTaskENI, "")
	} else {
		missing[AttrCNIPluginVersion] = st.missing
		missing[AttrTaskENI] = st.missing
	}
	if h.endpoints {
		attr(AttrTaskIAMRole, "")
		attr(AttrTaskIAMRoleNetworkHost, "")
	} else {
		const off = "task role credentials unavailable: the agent's task endpoints are off (EndpointAddr off)"
		missing[AttrTaskIAMRole], missing[AttrTaskIAMRoleNetworkHost] = off, off
	}
	if h.init.Load() {
		attr(AttrInit, "")
	} else {
		missing[AttrInit] = initMissing
	}
	req.MissingAttributes = missing
	if addr := h.a.LogAddr(); addr != "" {
		scheme := "http://"
		if h.a.cfg.LogTLS != nil {
			scheme = "https://"
		}
		attr(LogEndpointAttribute, scheme+addr)
	}
	for k, v := range h.a.cfg.Attributes {
		attr(k, v)
	}
	return req
}

func (h *hostView) Heartbeat() *agentv1.Heartbeat {
	ready, _, cpu, mem := h.capacity()
	return &agentv1.Heartbeat{RuntimeReady: ready, Cpu: cpu, Memory: mem}
}

func (h *hostView) CapacityChanged() <-chan struct{} {
	_, _, ch := h.gate.State()
	return ch
}

// handler routes the session's messages to the task manager.
type handler struct{ m *tasks.Manager }

func (h *handler) Registered(ctx context.Context, resp *agentv1.RegisterResponse) error {
	arn := resp.GetContainerInstance().GetContainerInstanceArn()
	if arn == "" {
		return errors.New("registration returned no container instance ARN")
	}
	if err := h.m.SetTaskSubnet(resp.GetTaskSubnet()); err != nil {
		return err
	}
	h.m.SetInstance(arn)
	h.m.WaitReconciled(ctx, 30*time.Second)
	return nil
}
func (h *handler) RunningTasks() []string { return h.m.RunningTasks() }

// Exec runs an ECS Exec command (session.ExecRunner).
func (h *handler) Exec(ctx context.Context, start *agentv1.ExecStart, stdin io.Reader, stdout io.Writer, resize <-chan [2]uint32) (int, error) {
	return h.m.Exec(ctx, start, stdin, stdout, resize)
}
func (h *handler) Assign(ctx context.Context, a *agentv1.Assignment) error {
	return h.m.Assign(ctx, a)
}
func (h *handler) Stop(ctx context.Context, o *agentv1.StopOrder) error { return h.m.Stop(ctx, o) }
func (h *handler) Expected(ctx context.Context, e *agentv1.ExpectedTasks) {
	h.m.Expected(ctx, e)
}

// TaskSubnetRoutes keeps the host's routes to the other instances' task subnets
// (session.RouteHandler).
func (h *handler) TaskSubnetRoutes(ctx context.Context, r *agentv1.TaskSubnetRoutes) {
	var peers []network.PeerRoute
	for _, p := range r.GetRoutes() {
		peers = append(peers, network.PeerRoute{Subnet: p.GetSubnet(), Via: p.GetHostAddress()})
	}
	h.m.SyncPeerRoutes(peers)
}

// hostAddress is Config.HostAddress, or the IPv4 address this host reaches the control
// plane from ("" when that is loopback or cannot be found). When the lookup fails after
// one succeeded, it returns the address found before (a loopback route is an answer, not
// a failure): the control plane's name may not
// resolve for a moment (its container restarting, under compose), and a registration
// without the address would send load balancers to loopback and peers nowhere until the
// next one.
func (a *Agent) hostAddress() string {
	if a.cfg.HostAddress != "" {
		return a.cfg.HostAddress
	}
	addr, ok := a.lookupHostAddress()
	if ok {
		a.lastHostAddress.Store(addr)
		return addr
	}
	last, _ := a.lastHostAddress.Load().(string)
	if last != "" {
		a.log.Warn("cannot find the address this host reaches the control plane from; registering the one found before",
			"control_plane", a.cfg.ControlPlaneURL, "host_address", last)
	}
	return last
}

// lookupHostAddress is the IPv4 address this host reaches the control plane from, ""
// when that is loopback (the control plane on this host), and ok false when it cannot be
// found (the control plane's name does not resolve, no route).
func (a *Agent) lookupHostAddress() (addr string, ok bool) {
	u, err := url.Parse(a.cfg.ControlPlaneURL)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	// A UDP "connection" sends nothing: it only asks the kernel for the route's source.
	c, err := net.Dial("udp4", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return "", false
	}
	defer c.Close()
	ip := c.LocalAddr().(*net.UDPAddr).IP
	if ip.To4() == nil || ip.IsLoopback() || ip.IsUnspecified() {
		return "", true
	}
	return ip.String(), true
}

// logStreams creates awslogs streams through the control plane (tasks.LogStreams).
type logStreams struct {
	c agentv1connect.AgentServiceClient
}

// EnsureLogStream creates the stream; the error is the control plane's message, which
// starts with the AWS error type.
func (l logStreams) EnsureLogStream(ctx context.Context, region, group, stream string, createGroup bool) error {
	_, err := l.c.EnsureLogStream(ctx, connect.NewRequest(&agentv1.EnsureLogStreamRequest{Region: region, LogGroup: group, LogStream: stream, CreateGroup: createGroup}))
	var ce *connect.Error
	if errors.As(err, &ce) {
		return errors.New(ce.Message())
	}
	return err
}
