package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/cmd/berth/internal/agentcmd"
	"github.com/berthhq/berth/cmd/berth/internal/cli"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/containerdproc"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/ociregistry"
	"github.com/berthhq/berth/services/agent/tasks"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/gateway/sigv4"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/cloudmap/cloudmapdns"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/ecr"
	ecrregistry "github.com/berthhq/berth/services/scheduler/ecr/registry"
	"github.com/berthhq/berth/services/scheduler/elbv2/lb"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

func devCommand() *cobra.Command {
	var efs []string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on this host: etcd, scheduler, gateway, one agent, a registry",
		Long: "Runs embedded etcd, a scheduler, the gateway, one agent for this host and an OCI\n" +
			"registry in one process, configured from the environment (BERTH_DATA_DIR,\n" +
			"BERTH_GATEWAY_ADDR, BERTH_REGION, BERTH_CLUSTER, BERTH_ACCOUNT_ID,\n" +
			"BERTH_ACCESS_KEY_ID, BERTH_SECRET_ACCESS_KEY, BERTH_CONTAINERD_ADDRESS,\n" +
			"BERTH_REGISTRY_ADDR, BERTH_ECR_ADDR, BERTH_INSECURE_REGISTRIES, BERTH_AGENT_LOG_ADDR, BERTH_REGIONS,\n" +
			"BERTH_CNI_PLUGIN_DIR, BERTH_BRIDGE_SUBNET, BERTH_TASK_SUBNET, BERTH_TASK_SUBNET_POOL,\n" +
			"BERTH_AGENT_ENDPOINT_ADDR, BERTH_TASK_STABLE_AFTER, BERTH_LB_LISTEN_HOST, BERTH_DNS_ADDR, BERTH_EFS or --efs). Prints a line containing \"ready\" once the agent has\n" +
			"registered. State persists in the data dir.\n\n" +
			"The gateway's address also serves the web console at /console/ (sign in with the dev\n" +
			"key) and Prometheus metrics of every part at /metrics; OTEL_EXPORTER_OTLP_ENDPOINT\n" +
			"turns on trace export (docs/console.md, docs/observability.md).\n\n" +
			"Every region answers on its own (the region of each request's SigV4 scope; BERTH_REGIONS,\n" +
			"comma-separated, narrows the default of every public AWS region). BERTH_REGION is the\n" +
			"dev agent's region, where its tasks run, and the region of the ready line.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := devConfigFromEnv()
			var err error
			if cfg.EFS, err = tasks.ParseEFSMappings(efs); err != nil {
				return err
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
		},
	}
	cmd.Flags().StringSliceVar(&efs, "efs", cli.SplitList(cli.Env("BERTH_EFS", "")), agentcmd.EFSFlagUsage)
	return cmd
}

// devConfig is `berth dev`'s configuration; see DESIGN.md's environment table.
type devConfig struct {
	DataDir           string
	GatewayAddr       string
	Region            string   // the dev agent's region and the default one
	Regions           []string // allow-list of SigV4 scope regions; nil: every public AWS region
	Cluster           string
	AccountID         string
	AccessKeyID       string
	SecretAccessKey   string
	ContainerdAddress string
	RegistryAddr      string
	// ECRAddr (BERTH_ECR_ADDR) is where the ECR registry listens (docs/ecr.md): the host
	// of every repositoryUri. "" disables ECR.
	ECRAddr      string
	AgentLogAddr string
	// AgentEndpointAddr is where the agent serves its tasks' credentials and metadata
	// endpoints (BERTH_AGENT_ENDPOINT_ADDR; default any loopback port).
	AgentEndpointAddr  string
	InsecureRegistries []string
	// LBListenHost (BERTH_LB_LISTEN_HOST) is where load balancer listeners bind.
	LBListenHost string
	// DNSAddr (BERTH_DNS_ADDR) is where the Cloud Map DNS server listens (UDP and TCP);
	// tasks reach it on 169.254.169.253:53 through the agent's redirect. "off" disables.
	DNSAddr string

	// TaskStableAfter (BERTH_TASK_STABLE_AFTER, a Go duration such as "5s") shortens how
	// long a service task without health checks must stay RUNNING before it counts toward
	// minimumHealthyPercent and its rollout's completion; empty keeps AWS's 40 s.
	TaskStableAfter string
	// EFS maps EFS file system ids to NFS exports or local directories for the dev agent
	// (--efs, BERTH_EFS; tasks.ParseEFSMappings).
	EFS map[string]string
	// TaskCredentialsLifetime (BERTH_TASK_CREDENTIALS_LIFETIME, a Go duration) is how long
	// task role credentials are accepted; the agent refreshes them at half of it. Empty
	// keeps 1 h (taskcreds.DefaultLifetime); tests shorten it to see expiry.
	TaskCredentialsLifetime string
}

func devConfigFromEnv() devConfig {
	insecure := cli.SplitList(cli.Env("BERTH_INSECURE_REGISTRIES", ""))
	return devConfig{
		DataDir:            cli.Env("BERTH_DATA_DIR", "./.berth"),
		GatewayAddr:        cli.Env("BERTH_GATEWAY_ADDR", "127.0.0.1:4566"),
		Region:             cli.Env("BERTH_REGION", "us-east-1"),
		Regions:            cli.SplitList(cli.Env("BERTH_REGIONS", "")),
		Cluster:            cli.Env("BERTH_CLUSTER", "default"),
		AccountID:          cli.Env("BERTH_ACCOUNT_ID", "000000000000"),
		AccessKeyID:        cli.Env("BERTH_ACCESS_KEY_ID", "test"),
		SecretAccessKey:    cli.Env("BERTH_SECRET_ACCESS_KEY", "test"),
		ContainerdAddress:  cli.Env("BERTH_CONTAINERD_ADDRESS", ""),
		RegistryAddr:       cli.Env("BERTH_REGISTRY_ADDR", "127.0.0.1:5000"),
		ECRAddr:            cli.Env("BERTH_ECR_ADDR", "127.0.0.1:5001"),
		AgentLogAddr:       cli.Env("BERTH_AGENT_LOG_ADDR", "127.0.0.1:4568"),
		AgentEndpointAddr:  cli.Env("BERTH_AGENT_ENDPOINT_ADDR", "127.0.0.1:0"),
		InsecureRegistries: insecure,
		LBListenHost:       cli.Env("BERTH_LB_LISTEN_HOST", "127.0.0.1"),
		DNSAddr:            cli.Env("BERTH_DNS_ADDR", "127.0.0.1:0"),

		TaskStableAfter:         cli.Env("BERTH_TASK_STABLE_AFTER", ""),
		TaskCredentialsLifetime: cli.Env("BERTH_TASK_CREDENTIALS_LIFETIME", ""),
	}
}

// devRegions is the gateway's allow-list for `berth dev`: BERTH_REGIONS, which must hold
// BERTH_REGION (the dev agent signs for it), or else every public AWS region plus
// BERTH_REGION, so a dev region of one's own naming keeps working.
func devRegions(cfg devConfig) ([]string, error) {
	if len(cfg.Regions) > 0 {
		if !slices.Contains(cfg.Regions, cfg.Region) {
			return nil, fmt.Errorf("BERTH_REGIONS (%s) must include BERTH_REGION (%s), the dev agent's region", strings.Join(cfg.Regions, ","), cfg.Region)
		}
		return cfg.Regions, nil
	}
	if slices.Contains(sigv4.PublicRegions, cfg.Region) {
		return nil, nil // the gateway's default
	}
	return append(slices.Clone(sigv4.PublicRegions), cfg.Region), nil
}

// runDev runs `berth dev` until ctx ends. The ready line goes to out, logs to logw.
//
// It brings the stack up in dependency order — etcd, the scheduler, the gateway and the
// load balancer, DNS, the registry, the agent — each part in its own goroutine
// (devParts), and returns when they have all ended: the first to end, or ctx, ends the
// others. What it opened is closed last first when it returns.
func runDev(ctx context.Context, out, logw io.Writer, cfg devConfig) error {
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	stableAfter, credsLifetime, err := devDurations(cfg)
	if err != nil {
		return err
	}
	d := &devStack{cfg: cfg, log: log, logw: logw}
	defer d.close()
	if err := d.openDataDir(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	d.onClose(cancel)
	if err := d.startEtcd(ctx); err != nil {
		return err
	}
	if err := d.newScheduler(ctx, stableAfter, credsLifetime); err != nil {
		return err
	}
	parts := &devParts{ctx: ctx, done: make(chan error, 8)}
	// From here on, parts run: a failure cancels them before the deferred closes.
	endpoint, err := d.startControlPlane(ctx, parts)
	if err != nil {
		cancel()
		return err
	}
	dnsTarget, err := d.startDNS(ctx, parts)
	if err != nil {
		cancel()
		return err
	}
	if err := d.startRegistry(ctx); err != nil {
		cancel()
		return err
	}
	if err := d.startECR(ctx, parts); err != nil {
		cancel()
		return err
	}
	ag, err := d.startAgent(ctx, parts, endpoint, dnsTarget)
	if err != nil {
		cancel()
		return err
	}
	go func() {
		if err := waitRegistered(ctx, d.sched, cfg, ag.HostID()); err != nil {
			return
		}
		if dnsTarget != "" {
			host, port, _ := net.SplitHostPort(dnsTarget)
			fmt.Fprintf(out, "berth dev: Cloud Map DNS server on %s (UDP and TCP; BERTH_DNS_ADDR): service discovery names and load balancers' DNSName, e.g. dig @%s -p %s NAME\n", dnsTarget, host, port)
		}
		fmt.Fprintf(out, "berth dev: plain HTTP and no TLS, for this machine only; `berth admin` uses the admin token in %s (see docs/security.md for a deployment)\n", filepath.Join(d.dataDir, devAdminTokenFile))
		fmt.Fprintf(out, "berth dev ready: endpoint %s region %s access key %s secret %s cluster %s\n",
			endpoint, cfg.Region, cfg.AccessKeyID, cfg.SecretAccessKey, cfg.Cluster)
	}()
	return parts.wait(cancel)
}

// devDurations parses BERTH_TASK_STABLE_AFTER and BERTH_TASK_CREDENTIALS_LIFETIME (0 when
// unset: the scheduler's defaults).
func devDurations(cfg devConfig) (stableAfter, credsLifetime time.Duration, err error) {
	if cfg.TaskStableAfter != "" {
		d, err := time.ParseDuration(cfg.TaskStableAfter)
		if err != nil || d <= 0 {
			return 0, 0, fmt.Errorf("BERTH_TASK_STABLE_AFTER=%q: want a positive duration such as 5s", cfg.TaskStableAfter)
		}
		stableAfter = d
	}
	if cfg.TaskCredentialsLifetime != "" {
		d, err := time.ParseDuration(cfg.TaskCredentialsLifetime)
		if err != nil || d < 10*time.Second {
			return 0, 0, fmt.Errorf("BERTH_TASK_CREDENTIALS_LIFETIME=%q: want a duration of at least 10s", cfg.TaskCredentialsLifetime)
		}
		credsLifetime = d
	}
	return stableAfter, credsLifetime, nil
}

// devStack is what runDev's phases open and share.
type devStack struct {
	cfg     devConfig
	log     *slog.Logger
	logw    io.Writer // where log writes: CheckHost's lines go there too
	dataDir string    // absolute
	// undo holds what to close when runDev returns (runDev's context's cancel among it),
	// in the order it was opened; close runs it backwards, as defers would.
	undo     []func()
	etcd     *etcdembed.Server
	local    *clientv3.Client // etcd's in-process client
	registry *prometheus.Registry
	sched    *app.App
	keyring  *seal.Keyring
	// ecrLn is the ECR registry's listener (nil when BERTH_ECR_ADDR is empty), opened
	// before the scheduler so that its address is the repositoryUri host.
	ecrLn net.Listener
}

// onClose adds f to what close runs.
func (d *devStack) onClose(f func()) { d.undo = append(d.undo, f) }

// close runs what the phases opened, last first.
func (d *devStack) close() {
	for i := len(d.undo) - 1; i >= 0; i-- {
		d.undo[i]()
	}
}

// openDataDir creates and locks the data dir, so two `berth dev` never share it; the
// lock is the last thing close releases.
func (d *devStack) openDataDir() error {
	dataDir, err := filepath.Abs(d.cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	d.dataDir = dataDir
	d.onClose(unlock)
	return nil
}

// startEtcd starts the embedded etcd member under the data dir.
func (d *devStack) startEtcd(ctx context.Context) error {
	etcd, err := etcdembed.Start(ctx, etcdembed.Config{Dir: filepath.Join(d.dataDir, "etcd"), ClientURL: "http://127.0.0.1:0", MaxTxnOps: etcdembed.DevMaxTxnOps})
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	d.onClose(func() { _ = etcd.Close() })
	d.etcd = etcd
	// The scheduler and the other parts in this process reach etcd by function calls;
	// the client port stays for clients outside it (etcdctl) and the health check.
	local, err := etcd.InProcessClient()
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	d.onClose(func() { _ = local.Close() })
	d.local = local
	return nil
}

// newScheduler builds the scheduler (not yet running) with the stores it needs beside
// etcd, and moves the state of a data dir from before regions into BERTH_REGION.
func (d *devStack) newScheduler(ctx context.Context, stableAfter, credsLifetime time.Duration) error {
	// One registry for every part of the stack, served at /metrics on the gateway's
	// address (docs/observability.md).
	d.registry = cli.NewRegistry()
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Secrets are sealed with a key file beside etcd's data, never in it (docs/secrets.md).
	keyring, err := seal.LoadOrCreate(filepath.Join(d.dataDir, "secrets.key"))
	if err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	d.keyring = keyring
	logStore, err := logstore.Open(logstore.Config{Dir: filepath.Join(d.dataDir, "cwlogs")})
	if err != nil {
		return err
	}
	d.onClose(func() { _ = logStore.Close() })
	metricStore, err := metricstore.OpenTSDB(filepath.Join(d.dataDir, "cwmetrics"), 0, d.log.With("component", "metricstore"))
	if err != nil {
		return err
	}
	d.onClose(func() { _ = metricStore.Close() })
	ecrHost := ""
	if d.cfg.ECRAddr != "" {
		ln, err := net.Listen("tcp", d.cfg.ECRAddr)
		if err != nil {
			return fmt.Errorf("ECR registry at %s (set BERTH_ECR_ADDR, or empty to disable): %w", d.cfg.ECRAddr, err)
		}
		d.onClose(func() { _ = ln.Close() })
		d.ecrLn, ecrHost = ln, ln.Addr().String()
	}
	bakeMinute, err := devBakeMinute()
	if err != nil {
		return err
	}
	d.sched, err = app.New(app.Config{Etcd: d.local, Region: d.cfg.Region, Logger: d.log.With("service", "scheduler"), Dev: true, DeploymentBakeMinute: bakeMinute,
		TaskStableAfter: stableAfter, MaxTxnOps: etcdembed.DevMaxTxnOps, Registry: d.registry, Logs: logStore, Metrics: metricStore, Keyring: keyring,
		TaskSubnetPool: cli.Env("BERTH_TASK_SUBNET_POOL", ""), TaskCredentialsLifetime: credsLifetime, ECRRegistryHost: ecrHost, ECRBlobDir: d.ecrBlobDir()})
	if err != nil {
		return err
	}
	// A data dir from a build without regions: its state moves into BERTH_REGION.
	return d.sched.MigrateLayout(ctx)
}

// startControlPlane starts the scheduler (its Connect server on a loopback port and its
// loops), seeds the dev account, then starts the gateway in front of it and the load
// balancer's data plane. It returns the gateway's endpoint.
func (d *devStack) startControlPlane(ctx context.Context, parts *devParts) (string, error) {
	cfg := d.cfg
	schedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	parts.start("scheduler listener", func() error { return h2c.Serve(ctx, schedLn, d.sched.Handler()) })
	parts.start("scheduler", func() error { return d.sched.Run(ctx) })
	if err := seedDevAccount(ctx, d.sched, cfg); err != nil {
		return "", err
	}
	// The internal listener is plain HTTP on loopback, which every local process reaches:
	// its AdminService answers only the dev admin token, kept 0600 in the data dir, where
	// `berth admin` finds it beside the listener's URL (docs/security.md).
	schedURL := "http://" + schedLn.Addr().String()
	token, err := devAdminToken(d.dataDir)
	if err != nil {
		return "", err
	}
	if err := d.sched.SetAdminToken(ctx, token); err != nil {
		return "", fmt.Errorf("dev admin token: %w", err)
	}
	if err := writeDevSchedulerURL(d.dataDir, schedURL); err != nil {
		return "", err
	}
	d.onClose(func() { _ = os.Remove(filepath.Join(d.dataDir, devSchedulerURLFile)) })
	schedClient := gateway.NewH2CClient()
	schedClient.Transport = bearer{next: schedClient.Transport, token: token}
	regions, err := devRegions(cfg)
	if err != nil {
		return "", err
	}
	health := func(ctx context.Context) (any, bool) { return devHealth(ctx, d.etcd, d.sched, cfg) }
	// The console reads a task's logs from its agent's berth.log-endpoint (the dev
	// agent's BERTH_AGENT_LOG_ADDR), as it does outside `berth dev`.
	consoleCfg := &gateway.ConsoleConfig{DefaultRegion: cfg.Region}
	gw, err := gateway.New(gateway.Config{
		SchedulerURL: schedURL,
		HTTPClient:   schedClient,
		Regions:      regions,
		Logger:       d.log.With("service", "gateway"),
		Dev:          true,
		Health:       health,
		Registry:     d.registry,
		ServeMetrics: true,
		Console:      consoleCfg,
	})
	if err != nil {
		return "", err
	}
	gwLn, err := net.Listen("tcp", cfg.GatewayAddr)
	if err != nil {
		return "", fmt.Errorf("gateway address %s: %w", cfg.GatewayAddr, err)
	}
	parts.start("gateway", func() error { return h2c.Serve(ctx, gwLn, gw) })
	// The load balancer data plane: listeners bind on BERTH_LB_LISTEN_HOST.
	parts.start("lb", func() error {
		return lb.Run(ctx, d.local, lb.Config{ListenHost: cfg.LBListenHost, Logger: d.log.With("service", "lb")})
	})
	return "http://" + gwLn.Addr().String(), nil
}

// startDNS starts the Cloud Map DNS server of the dev account and region
// (docs/service-discovery.md), unless BERTH_DNS_ADDR is off. It returns its address
// ("" when off), which the agent points its tasks' DNS at.
func (d *devStack) startDNS(ctx context.Context, parts *devParts) (string, error) {
	if d.cfg.DNSAddr == "off" {
		return "", nil
	}
	// Load balancers' DNS names answer where this stack's lb binds their listeners, when
	// that is one IPv4 address (BERTH_LB_LISTEN_HOST, 127.0.0.1 by default: reachable from
	// this host and its host-mode tasks).
	var lbAddrs []netip.Addr
	if a, err := netip.ParseAddr(d.cfg.LBListenHost); err == nil && a.Is4() && !a.IsUnspecified() {
		lbAddrs = []netip.Addr{a}
	}
	dnsSrv, err := cloudmapdns.Listen(cloudmapdns.Config{
		Addr: d.cfg.DNSAddr, Scopes: []keys.Scope{{Account: d.cfg.AccountID, Region: d.cfg.Region}}, Logger: d.log.With("service", "dns"),
		LoadBalancerAddrs: lbAddrs,
	})
	if err != nil {
		return "", fmt.Errorf("cloud map dns at %s (set BERTH_DNS_ADDR, or off to disable): %w", d.cfg.DNSAddr, err)
	}
	d.onClose(func() { _ = dnsSrv.Close() })
	parts.start("dns", func() error {
		if err := dnsSrv.Follow(ctx, d.local); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	})
	return dnsSrv.Addr(), nil
}

// startRegistry serves the embedded OCI registry, unless BERTH_REGISTRY_ADDR is empty.
func (d *devStack) startRegistry(ctx context.Context) error {
	if d.cfg.RegistryAddr == "" {
		return nil
	}
	reg, err := ociregistry.Serve(ctx, d.cfg.RegistryAddr)
	if err != nil {
		return fmt.Errorf("registry at %s (set BERTH_REGISTRY_ADDR, or empty to disable): %w", d.cfg.RegistryAddr, err)
	}
	d.onClose(func() { _ = reg.Close() })
	return nil
}

// ecrBlobDir is where the ECR registry keeps its blobs.
func (d *devStack) ecrBlobDir() string { return filepath.Join(d.dataDir, "ecr", "blobs") }

// startECR serves the ECR registry (docs/ecr.md) on the listener newScheduler opened,
// its blobs under the data dir's ecr/blobs, so pushed images survive a restart, and
// runs its background pass (lifecycle policies, garbage collection) every 10 minutes.
func (d *devStack) startECR(ctx context.Context, parts *devParts) error {
	if d.ecrLn == nil {
		return nil
	}
	reg, err := ecrregistry.New(ecrregistry.Config{
		Store:  ecr.NewStore(d.local, d.keyring, d.ecrLn.Addr().String(), nil),
		Dir:    d.ecrBlobDir(),
		Logger: d.log.With("service", "ecr-registry"),
	})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: reg, ReadHeaderTimeout: 10 * time.Second}
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	parts.start("ecr registry", func() error {
		if err := srv.Serve(d.ecrLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	// Every 10 minutes: lifecycle policies, then the blobs no image references any more
	// (deleted or expired images, abandoned uploads) after their grace (docs/ecr.md).
	go reg.RunBackground(ctx, 10*time.Minute)
	return nil
}

// startAgent starts this host's agent against the gateway at endpoint, signing as the
// dev account, on the containerd devContainerd finds; BERTH_CLUSTER is created first
// unless it is default (which the agent's registration creates, as the ECS agent's does).
func (d *devStack) startAgent(ctx context.Context, parts *devParts, endpoint, dnsTarget string) (*agent.Agent, error) {
	cfg := d.cfg
	netCfg := network.Config{
		PluginDirs:   cli.SplitList(cli.Env("BERTH_CNI_PLUGIN_DIR", network.DefaultPluginDir+",/opt/cni/bin")),
		BridgeSubnet: cli.Env("BERTH_BRIDGE_SUBNET", ""),
		TaskSubnet:   cli.Env("BERTH_TASK_SUBNET", ""),
		StateDir:     filepath.Join(d.dataDir, "agent", "network"),
		DNSTarget:    dnsTarget,
	}
	ctrd, snapshotter, runcRoot, stopContainerd := devContainerd(ctx, d.log, d.dataDir, cfg.ContainerdAddress)
	d.onClose(stopContainerd)
	// One line per piece of the runtime this host lacks; the agent runs with the rest.
	for _, l := range agent.CheckHost(ctrd, netCfg.PluginDirs) {
		fmt.Fprintln(d.logw, "berth dev: "+l)
	}

	if cfg.Cluster != "default" {
		ictx := caller.With(ctx, caller.Identity{Account: cfg.AccountID, Region: cfg.Region})
		if _, err := d.sched.ECS().CreateCluster(ictx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String(cfg.Cluster)})); err != nil {
			return nil, fmt.Errorf("create cluster %s: %w", cfg.Cluster, err)
		}
	}

	h2c := gateway.NewH2CClient()
	h2c.Transport = sigv4client.New(h2c.Transport, sigv4client.StaticCredentials(cfg.AccessKeyID, cfg.SecretAccessKey), cfg.Region)
	ag, err := agent.New(agent.Config{
		ControlPlaneURL:    endpoint,
		HTTPClient:         h2c,
		Cluster:            cfg.Cluster,
		DataDir:            filepath.Join(d.dataDir, "agent"),
		ContainerdAddress:  ctrd,
		Snapshotter:        snapshotter,
		RuncRoot:           runcRoot,
		InsecureRegistries: cfg.InsecureRegistries,
		EFS:                cfg.EFS,
		LogAddr:            cfg.AgentLogAddr,
		EndpointAddr:       cfg.AgentEndpointAddr,
		Network:            netCfg,
		Logger:             d.log.With("service", "agent"),
		Registry:           d.registry,
	})
	if err != nil {
		return nil, err
	}
	parts.start("agent", func() error { return ag.Run(ctx) })
	return ag, nil
}

// devParts runs the stack's long-lived parts, each in a goroutine, and waits for them.
type devParts struct {
	ctx     context.Context
	done    chan error // one value per part when it ends; room for every part
	running int
}

// start runs part name. Its error counts unless ctx had ended by then: a part that stops
// because the stack is stopping has not failed.
func (p *devParts) start(name string, run func() error) {
	p.running++
	go func() {
		err := run()
		if err != nil && p.ctx.Err() == nil {
			err = fmt.Errorf("%s: %w", name, err)
		} else {
			err = nil
		}
		p.done <- err
	}()
}

// wait waits for every part to end and returns the first error. The first part to end,
// failed or not, ends the others (cancel): `berth dev` is whole or stops.
func (p *devParts) wait(cancel context.CancelFunc) error {
	var firstErr error
	for i := 0; i < p.running; i++ {
		if err := <-p.done; err != nil && firstErr == nil {
			firstErr = err
			cancel()
		}
		if i == 0 {
			cancel()
		}
	}
	return firstErr
}

// seedDevAccount creates the dev account and its access key if they are absent.
func seedDevAccount(ctx context.Context, sched *app.App, cfg devConfig) error {
	_, err := sched.Admin().CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: cfg.AccountID, Name: "dev"}))
	if err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
		return fmt.Errorf("seed dev account: %w", err)
	}
	_, err = sched.Admin().CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{
		AccountId:       cfg.AccountID,
		AccessKeyId:     cfg.AccessKeyID,
		SecretAccessKey: cfg.SecretAccessKey,
		Description:     "berth dev",
	}))
	if err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
		return fmt.Errorf("seed dev access key: %w", err)
	}
	return nil
}

// devContainerd finds the containerd the agent drives: BERTH_CONTAINERD_ADDRESS, else the
// system socket if it answers, else a private containerd under the data dir when the
// binary exists, else none (the agent then runs runtime-less, advertising no capacity).
// It returns the address, the snapshotter to use ("" for the daemon's default), runc's
// state directory for the containers ("" for runc's default; the private daemon's own, so
// two dev instances or a killed one never share runc state) and a stop function, which
// stops a private daemon and leaves its containers running for the next start to adopt.
func devContainerd(ctx context.Context, log *slog.Logger, dataDir, addr string) (string, string, string, func()) {
	const system = "/run/containerd/containerd.sock"
	if addr != "" {
		return addr, "", "", func() {}
	}
	if c, err := net.DialTimeout("unix", system, time.Second); err == nil {
		_ = c.Close()
		return system, "", "", func() {}
	}
	inst, err := containerdproc.StartProcess(ctx, filepath.Join(dataDir, "containerd"))
	if err != nil {
		log.Warn("no container runtime: the agent advertises zero CPU and memory until one answers; "+
			"install containerd and runc (apt-get install containerd runc) or set BERTH_CONTAINERD_ADDRESS",
			"reason", err.Error())
		return filepath.Join(dataDir, "containerd", "containerd.sock"), "", "", func() {}
	}
	log.Info("started a private containerd", "address", inst.Address(), "snapshotter", inst.Snapshotter())
	return inst.Address(), inst.Snapshotter(), inst.RuncRoot(), func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		// The containers stay: their shims outlive containerd, and the next start on this
		// data dir adopts them (README: running containers are still there). An agent
		// starting on this host reaps the networks of a data dir that is gone.
		_ = inst.Stop(stop)
	}
}

// waitRegistered polls until the dev agent's container instance is registered and
// connected in the dev cluster.
func waitRegistered(ctx context.Context, sched *app.App, cfg devConfig, hostID string) error {
	ictx := caller.With(ctx, caller.Identity{Account: cfg.AccountID, Region: cfg.Region})
	for {
		// Sessions counts live agent streams on this (only) replica: the instance record
		// alone can still say agentConnected from before a restart.
		if sched.Sessions() > 0 && connectedInstances(ictx, sched, cfg.Cluster) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// connectedInstances counts the cluster's ACTIVE instances whose agent is connected.
func connectedInstances(ctx context.Context, sched *app.App, cluster string) int {
	list, err := sched.ECS().ListContainerInstances(ctx, connect.NewRequest(&ecsv1.ListContainerInstancesRequest{Cluster: proto.String(cluster)}))
	if err != nil || len(list.Msg.GetContainerInstanceArns()) == 0 {
		return 0
	}
	desc, err := sched.ECS().DescribeContainerInstances(ctx, connect.NewRequest(&ecsv1.DescribeContainerInstancesRequest{
		Cluster: proto.String(cluster), ContainerInstances: list.Msg.GetContainerInstanceArns(),
	}))
	if err != nil {
		return 0
	}
	n := 0
	for _, ci := range desc.Msg.GetContainerInstances() {
		if ci.GetAgentConnected() {
			n++
		}
	}
	return n
}

// devHealth is GET /_berth/health's report: ready once etcd answers and an agent is
// connected.
func devHealth(ctx context.Context, etcd *etcdembed.Server, sched *app.App, cfg devConfig) (any, bool) {
	report := map[string]any{"etcd": "ok", "leader": sched.IsLeader(), "agents": 0}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := etcd.Client().Status(sctx, etcd.Endpoint()); err != nil {
		report["etcd"] = err.Error()
		return report, false
	}
	agents := 0
	if sched.Sessions() > 0 {
		agents = connectedInstances(caller.With(sctx, caller.Identity{Account: cfg.AccountID, Region: cfg.Region}), sched, cfg.Cluster)
	}
	report["agents"] = agents
	return report, agents > 0
}

// lockDataDir takes an exclusive lock on dataDir/berth.lock so a second `berth dev` on the
// same data dir fails at once instead of waiting forever on etcd's database lock. It
// returns the function that releases the lock.
func lockDataDir(dataDir string) (func(), error) {
	path := filepath.Join(dataDir, "berth.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another berth dev (pid %s): stop it, or set BERTH_DATA_DIR to another directory",
			dataDir, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
