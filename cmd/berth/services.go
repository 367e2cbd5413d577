package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/gateway/sigv4client"
	"github.com/berthhq/berth/services/scheduler/app"
)

// jsonLogger is the services' logger: slog JSON on stderr.
func jsonLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
}

func schedulerCommand() *cobra.Command {
	var endpoints, listen, region, replica string
	var leaderTTL, stableAfter time.Duration
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run a scheduler replica against an etcd cluster",
		Long: "Serves the internal Connect APIs (ECS, agent sessions, admin) on --listen over h2c\n" +
			"and campaigns for leadership; the leader runs placement, service reconciliation\n" +
			"and the reaper. Run any number of replicas against one etcd cluster.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := jsonLogger(cmd)
			cli, err := clientv3.New(clientv3.Config{
				Endpoints:   strings.Split(endpoints, ","),
				DialTimeout: 5 * time.Second,
			})
			if err != nil {
				return fmt.Errorf("etcd %s: %w", endpoints, err)
			}
			defer cli.Close()
			a, err := app.New(app.Config{Etcd: cli, Region: region, Logger: log, Replica: replica, LeaderTTL: leaderTTL,
				Registry: prometheus.NewRegistry(), TaskStableAfter: stableAfter}) // /metrics on the internal listener
			if err != nil {
				return err
			}
			if err := a.MigrateLayout(cmd.Context()); err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log.Info("scheduler listening", "addr", ln.Addr().String(), "etcd", endpoints)
			ctx := cmd.Context()
			errc := make(chan error, 2)
			go func() { errc <- app.Serve(ctx, ln, a.Handler()) }()
			go func() { errc <- a.Run(ctx) }()
			err = <-errc
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoints, "etcd-endpoints", env("BERTH_ETCD_ENDPOINTS", "127.0.0.1:2379"), "etcd client endpoints, comma-separated")
	f.StringVar(&listen, "listen", env("BERTH_SCHEDULER_ADDR", "127.0.0.1:4567"), "address of the internal Connect listener (h2c)")
	f.StringVar(&region, "region", env("BERTH_REGION", "us-east-1"), "default region: ECS state from builds without regions is moved into it once at start (requests are served in the region they are signed for)")
	f.StringVar(&replica, "replica", env("BERTH_REPLICA", ""), "replica name (default host-pid)")
	f.DurationVar(&leaderTTL, "leader-ttl", 5*time.Second, "leader election session TTL")
	f.DurationVar(&stableAfter, "task-stable-after", 0, "how long a service task without health checks stays RUNNING before it counts toward minimumHealthyPercent (0: 40s, as AWS)")
	return cmd
}

func gatewayCommand() *cobra.Command {
	var schedulerURL, listen, region, regions string
	var dev, metrics bool
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the ECS endpoint: AWS JSON 1.1 + SigV4 in, scheduler Connect calls out",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := jsonLogger(cmd)
			gw, err := gateway.New(gateway.Config{SchedulerURL: schedulerURL, Regions: splitList(regions), Logger: log, Dev: dev,
				Registry: prometheus.NewRegistry(), ServeMetrics: metrics})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log.Info("gateway listening", "addr", ln.Addr().String(), "scheduler", schedulerURL)
			return app.Serve(cmd.Context(), ln, gw)
		},
	}
	f := cmd.Flags()
	f.StringVar(&schedulerURL, "scheduler-url", env("BERTH_SCHEDULER_URL", "http://127.0.0.1:4567"), "base URL of a scheduler replica (or a load balancer in front of several)")
	f.StringVar(&listen, "listen", env("BERTH_GATEWAY_ADDR", "127.0.0.1:4566"), "address of the ECS endpoint")
	f.StringVar(&regions, "regions", env("BERTH_REGIONS", ""), "regions a request's SigV4 scope may name, comma-separated (default: every region of the public AWS partition); each is served on its own")
	f.StringVar(&region, "region", "", "ignored: requests are served in the region they are signed for")
	_ = f.MarkDeprecated("region", "requests are served in the region of their SigV4 scope; use --regions to restrict which")
	f.BoolVar(&dev, "dev", false, "serve the dev-only routes /_berth/health and /_berth/reset")
	f.BoolVar(&metrics, "metrics", env("BERTH_GATEWAY_METRICS", "") == "true", "serve Prometheus metrics at /metrics on the (public) ECS listener")
	return cmd
}

func agentCommand() *cobra.Command {
	var gatewayURL, cluster, dataDir, containerdAddr, namespace, snapshotter, region, credsFile, logAddr string
	var insecure []string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Join this host to a cluster and run its tasks through containerd",
		Long: "Registers this host as a container instance of --cluster through the gateway and\n" +
			"runs the tasks placed on it. Credentials: BERTH_ACCESS_KEY_ID and\n" +
			"BERTH_SECRET_ACCESS_KEY, or --credentials-file with lines KEY=VALUE naming them\n" +
			"(as `berth admin key create --output env` writes).",
		Example: "  berth agent --gateway http://10.0.0.5:4566 --cluster prod --credentials-file /etc/berth/agent.env",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := jsonLogger(cmd)
			keyID, secret := env("BERTH_ACCESS_KEY_ID", ""), env("BERTH_SECRET_ACCESS_KEY", "")
			if credsFile != "" {
				vals, err := readEnvFile(credsFile)
				if err != nil {
					return err
				}
				keyID, secret = vals["BERTH_ACCESS_KEY_ID"], vals["BERTH_SECRET_ACCESS_KEY"]
			}
			if keyID == "" || secret == "" {
				return fmt.Errorf("no credentials: set BERTH_ACCESS_KEY_ID and BERTH_SECRET_ACCESS_KEY or --credentials-file")
			}
			h2c := gateway.NewH2CClient()
			h2c.Transport = sigv4client.New(h2c.Transport, sigv4client.StaticCredentials(keyID, secret), region)
			abs, err := filepath.Abs(dataDir)
			if err != nil {
				return err
			}
			ag, err := agent.New(agent.Config{
				ControlPlaneURL:    gatewayURL,
				HTTPClient:         h2c,
				Cluster:            cluster,
				DataDir:            abs,
				ContainerdAddress:  containerdAddr,
				Namespace:          namespace,
				Snapshotter:        snapshotter,
				InsecureRegistries: insecure,
				LogAddr:            logAddr,
				Logger:             log,
				Registry:           prometheus.NewRegistry(), // /metrics on the LogService listener
			})
			if err != nil {
				return err
			}
			return ignoreCanceled(cmd.Context(), ag.Run(cmd.Context()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&gatewayURL, "gateway", env("BERTH_GATEWAY_URL", "http://127.0.0.1:4566"), "the gateway's URL")
	f.StringVar(&cluster, "cluster", env("BERTH_CLUSTER", "default"), "cluster to join")
	f.StringVar(&dataDir, "data-dir", env("BERTH_DATA_DIR", "./.berth/agent"), "agent state, logs and FIFOs")
	f.StringVar(&containerdAddr, "containerd", env("BERTH_CONTAINERD_ADDRESS", "/run/containerd/containerd.sock"), "containerd socket")
	f.StringVar(&namespace, "namespace", env("BERTH_CONTAINERD_NAMESPACE", "berth"), "containerd namespace of this agent's containers")
	f.StringVar(&snapshotter, "snapshotter", env("BERTH_CONTAINERD_SNAPSHOTTER", "overlayfs"), "containerd snapshotter for images and root filesystems")
	f.StringVar(&region, "region", env("BERTH_REGION", "us-east-1"), "region this host's agent registers and signs in; its tasks come from that region's clusters only")
	f.StringVar(&credsFile, "credentials-file", env("BERTH_CREDENTIALS_FILE", ""), "file with BERTH_ACCESS_KEY_ID= and BERTH_SECRET_ACCESS_KEY= lines")
	f.StringVar(&logAddr, "log-addr", env("BERTH_AGENT_LOG_ADDR", ""), "address of the agent's LogService (empty: loopback, any port)")
	f.StringSliceVar(&insecure, "insecure-registry", nil, "plain-HTTP registry host:port (repeatable); loopback ones always are")
	return cmd
}

// readEnvFile reads KEY=VALUE lines; blank lines and # comments are skipped.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not KEY=VALUE", path, line)
		}
		vals[strings.TrimSpace(strings.TrimPrefix(k, "export "))] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return vals, sc.Err()
}

func ignoreCanceled(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
