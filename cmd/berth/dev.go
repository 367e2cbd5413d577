package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/containerdproc"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/ociregistry"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/gateway/sigv4"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/cloudmap/cloudmapdns"
	"github.com/berthhq/berth/services/scheduler/elbv2/lb"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

func devCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Run everything on this host: etcd, scheduler, gateway, one agent, a registry",
		Long: "Runs embedded etcd, a scheduler, the gateway, one agent for this host and an OCI\n" +
			"registry in one process, configured from the environment (BERTH_DATA_DIR,\n" +
			"BERTH_GATEWAY_ADDR, BERTH_REGION, BERTH_CLUSTER, BERTH_ACCOUNT_ID,\n" +
			"BERTH_ACCESS_KEY_ID, BERTH_SECRET_ACCESS_KEY, BERTH_CONTAINERD_ADDRESS,\n" +
			"BERTH_REGISTRY_ADDR, BERTH_INSECURE_REGISTRIES, BERTH_AGENT_LOG_ADDR, BERTH_REGIONS,\n" +
			"BERTH_CNI_PLUGIN_DIR, BERTH_BRIDGE_SUBNET, BERTH_TASK_SUBNET, BERTH_TASK_SUBNET_POOL,\n" +
			"BERTH_AGENT_ENDPOINT_ADDR, BERTH_TASK_STABLE_AFTER, BERTH_LB_LISTEN_HOST). Prints a line containing \"ready\" once the agent has\n" +
			"registered. State persists in the data dir.\n\n" +
			"The gateway's address also serves the web console at /console/ (sign in with the dev\n" +
			"key) and Prometheus metrics of every part at /metrics; OTEL_EXPORTER_OTLP_ENDPOINT\n" +
			"turns on trace export (docs/console.md, docs/observability.md).\n\n" +
			"Every region answers on its own (the region of each request's SigV4 scope; BERTH_REGIONS,\n" +
			"comma-separated, narrows the default of every public AWS region). BERTH_REGION is the\n" +
			"dev agent's region, where its tasks run, and the region of the ready line.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), devConfigFromEnv())
		},
	}
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
	AgentLogAddr      string
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

// splitList splits a comma-separated list, dropping blanks.

// runDev runs `berth dev` until ctx ends. The ready line goes to out, logs to logw.
func runDev(ctx context.Context, out, logw io.Writer, cfg devConfig) error {
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var stableAfter time.Duration
	if cfg.TaskStableAfter != "" {
		d, err := time.ParseDuration(cfg.TaskStableAfter)
		if err != nil || d <= 0 {
			return fmt.Errorf("BERTH_TASK_STABLE_AFTER=%q: want a positive duration such as 5s", cfg.TaskStableAfter)
		}
		stableAfter = d
	}
	var credsLifetime time.Duration
	if cfg.TaskCredentialsLifetime != "" {
		d, err := time.ParseDuration(cfg.TaskCredentialsLifetime)
		if err != nil || d < 10*time.Second {
			return fmt.Errorf("BERTH_TASK_CREDENTIALS_LIFETIME=%q: want a duration of at least 10s", cfg.TaskCredentialsLifetime)
		}
		credsLifetime = d
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
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
	defer unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	etcd, err := etcdembed.Start(ctx, etcdembed.Config{Dir: filepath.Join(dataDir, "etcd"), ClientURL: "http://127.0.0.1:0", MaxTxnOps: etcdembed.DevMaxTxnOps})
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer etcd.Close()
	// The scheduler and the other parts in this process reach etcd by function calls;
	// the client port stays for clients outside it (etcdctl) and the health check.
	local, err := etcd.InProcessClient()
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer local.Close()

	// One registry for every part of the stack, served at /metrics on the gateway's
	// address (docs/observability.md).
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Secrets are sealed with a key file beside etcd's data, never in it (docs/secrets.md).
	keyring, err := seal.LoadOrCreate(filepath.Join(dataDir, "secrets.key"))
	if err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	logStore, err := logstore.Open(logstore.Config{Dir: filepath.Join(dataDir, "cwlogs")})
	if err != nil {
		return err
	}
	defer logStore.Close()
	sched, err := app.New(app.Config{Etcd: local, Region: cfg.Region, Logger: log.With("service", "scheduler"), Dev: true,
		TaskStableAfter: stableAfter, MaxTxnOps: etcdembed.DevMaxTxnOps, Registry: registry, Logs: logStore, Keyring: keyring,
		TaskSubnetPool: cli.Env("BERTH_TASK_SUBNET_POOL", ""), TaskCredentialsLifetime: credsLifetime})
	if err != nil {
		return err
	}
	// A data dir from a build without regions: its state moves into BERTH_REGION.
	if err := sched.MigrateLayout(ctx); err != nil {
		return err
	}
	schedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	done := make(chan error, 8)
	running := 0
	start := func(name string, run func() error) {
		running++
		go func() {
			err := run()
			if err != nil && ctx.Err() == nil {
				err = fmt.Errorf("%s: %w", name, err)
			} else {
				err = nil
			}
			done <- err
		}()
	}
	start("scheduler listener", func() error { return h2c.Serve(ctx, schedLn, sched.Handler()) })
	start("scheduler", func() error { return sched.Run(ctx) })

	if err := seedDevAccount(ctx, sched, cfg); err != nil {
		cancel()
		return err
	}

	regions, err := devRegions(cfg)
	if err != nil {
		cancel()
		return err
	}
	health := func(ctx context.Context) (any, bool) { return devHealth(ctx, etcd, sched, cfg) }
	// The console reads a task's logs from its agent's berth.log-endpoint (the dev
	// agent's BERTH_AGENT_LOG_ADDR), as it does outside `berth dev`.
	consoleCfg := &gateway.ConsoleConfig{DefaultRegion: cfg.Region}
	gw, err := gateway.New(gateway.Config{
		SchedulerURL: "http://" + schedLn.Addr().String(),
		Regions:      regions,
		Logger:       log.With("service", "gateway"),
		Dev:          true,
		Health:       health,
		Registry:     registry,
		ServeMetrics: true,
		Console:      consoleCfg,
	})
	if err != nil {
		cancel()
		return err
	}
	gwLn, err := net.Listen("tcp", cfg.GatewayAddr)
	if err != nil {
		cancel()
		return fmt.Errorf("gateway address %s: %w", cfg.GatewayAddr, err)
	}
	endpoint := "http://" + gwLn.Addr().String()
	start("gateway", func() error { return h2c.Serve(ctx, gwLn, gw) })
	// The load balancer data plane: listeners bind on BERTH_LB_LISTEN_HOST.
	start("lb", func() error {
		return lb.Run(ctx, local, lb.Config{ListenHost: cfg.LBListenHost, Logger: log.With("service", "lb")})
	})

	// The Cloud Map DNS server of the dev account and region (docs/service-discovery.md).
	dnsTarget := ""
	if cfg.DNSAddr != "off" {
		dnsSrv, err := cloudmapdns.Listen(cloudmapdns.Config{
			Addr: cfg.DNSAddr, Scopes: []keys.Scope{{Account: cfg.AccountID, Region: cfg.Region}}, Logger: log.With("service", "dns"),
		})
		if err != nil {
			cancel()
			return fmt.Errorf("cloud map dns at %s (set BERTH_DNS_ADDR, or off to disable): %w", cfg.DNSAddr, err)
		}
		defer dnsSrv.Close()
		dnsTarget = dnsSrv.Addr()
		start("dns", func() error {
			if err := dnsSrv.Follow(ctx, local); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		})
	}

	if cfg.RegistryAddr != "" {
		reg, err := ociregistry.Serve(ctx, cfg.RegistryAddr)
		if err != nil {
			cancel()
			return fmt.Errorf("registry at %s (set BERTH_REGISTRY_ADDR, or empty to disable): %w", cfg.RegistryAddr, err)
		}
		defer reg.Close()
	}

	netCfg := network.Config{
		PluginDirs:   cli.SplitList(cli.Env("BERTH_CNI_PLUGIN_DIR", network.DefaultPluginDir+",/opt/cni/bin")),
		BridgeSubnet: cli.Env("BERTH_BRIDGE_SUBNET", ""),
		TaskSubnet:   cli.Env("BERTH_TASK_SUBNET", ""),
		StateDir:     filepath.Join(dataDir, "agent", "network"),
		DNSTarget:    dnsTarget,
	}
	ctrd, snapshotter, runcRoot, stopContainerd := devContainerd(ctx, log, dataDir, cfg.ContainerdAddress)
	defer stopContainerd()

	if cfg.Cluster != "default" {
		ictx := caller.With(ctx, caller.Identity{Account: cfg.AccountID, Region: cfg.Region})
		if _, err := sched.ECS().CreateCluster(ictx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String(cfg.Cluster)})); err != nil {
			cancel()
			return fmt.Errorf("create cluster %s: %w", cfg.Cluster, err)
		}
	}

	h2c := gateway.NewH2CClient()
	h2c.Transport = sigv4client.New(h2c.Transport, sigv4client.StaticCredentials(cfg.AccessKeyID, cfg.SecretAccessKey), cfg.Region)
	ag, err := agent.New(agent.Config{
		ControlPlaneURL:    endpoint,
		HTTPClient:         h2c,
		Cluster:            cfg.Cluster,
		DataDir:            filepath.Join(dataDir, "agent"),
		ContainerdAddress:  ctrd,
		Snapshotter:        snapshotter,
		RuncRoot:           runcRoot,
		InsecureRegistries: cfg.InsecureRegistries,
		LogAddr:            cfg.AgentLogAddr,
		EndpointAddr:       cfg.AgentEndpointAddr,
		Network:            netCfg,
		Logger:             log.With("service", "agent"),
		Registry:           registry,
	})
	if err != nil {
		cancel()
		return err
	}
	start("agent", func() error { return ag.Run(ctx) })

	go func() {
		if err := waitRegistered(ctx, sched, cfg, ag.HostID()); err != nil {
			return
		}
		fmt.Fprintf(out, "berth dev: plain HTTP, no TLS and an open AdminService: for this machine only (see docs/security.md for a deployment)\n")
		fmt.Fprintf(out, "berth dev ready: endpoint %s region %s access key %s secret %s cluster %s\n",
			endpoint, cfg.Region, cfg.AccessKeyID, cfg.SecretAccessKey, cfg.Cluster)
	}()

	var firstErr error
	for i := 0; i < running; i++ {
		if err := <-done; err != nil && firstErr == nil {
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
