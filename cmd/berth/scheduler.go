package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/gateway/h2c"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/seal"
)

// loadKeyring reads the secrets keyring from path, else from BERTH_SECRETS_KEY; nil when
// neither is set.
func loadKeyring(path string) (*seal.Keyring, error) {
	if path != "" {
		return seal.Load(path)
	}
	if v := os.Getenv("BERTH_SECRETS_KEY"); v != "" {
		k, err := seal.Parse(v)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SECRETS_KEY: %w", err)
		}
		return k, nil
	}
	return nil, nil
}

func schedulerCommand() *cobra.Command {
	var endpoints, listen, region, replica, keyFile string
	var leaderTTL, stableAfter time.Duration
	var maxTxnOps, gzipMinBytes int
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run a scheduler replica against an etcd cluster",
		Long: "Serves the internal Connect APIs (ECS, agent sessions, admin) on --listen over h2c\n" +
			"and campaigns for leadership; the leader runs placement, service reconciliation\n" +
			"and the reaper. Run any number of replicas against one etcd cluster.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := cli.JSONLogger(cmd)
			etcd, err := clientv3.New(clientv3.Config{
				Endpoints:   strings.Split(endpoints, ","),
				DialTimeout: 5 * time.Second,
			})
			if err != nil {
				return fmt.Errorf("etcd %s: %w", endpoints, err)
			}
			defer etcd.Close()
			keyring, err := loadKeyring(keyFile)
			if err != nil {
				return err
			}
			if keyring == nil {
				log.Warn("no secrets key: Secrets Manager and SSM Parameter Store are disabled (set --secrets-key-file or BERTH_SECRETS_KEY)")
			}
			a, err := app.New(app.Config{Keyring: keyring, Etcd: etcd, Region: region, Logger: log, Replica: replica, LeaderTTL: leaderTTL,
				Registry: prometheus.NewRegistry(), TaskStableAfter: stableAfter, // /metrics on the internal listener
				MaxTxnOps: maxTxnOps, GzipMinBytes: gzipMinBytes})
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
			go func() { errc <- h2c.Serve(ctx, ln, a.Handler()) }()
			go func() { errc <- a.Run(ctx) }()
			err = <-errc
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoints, "etcd-endpoints", cli.Env("BERTH_ETCD_ENDPOINTS", "127.0.0.1:2379"), "etcd client endpoints, comma-separated")
	f.StringVar(&listen, "listen", cli.Env("BERTH_SCHEDULER_ADDR", "127.0.0.1:4567"), "address of the internal Connect listener (h2c)")
	f.StringVar(&region, "region", cli.Env("BERTH_REGION", "us-east-1"), "default region: ECS state from builds without regions is moved into it once at start (requests are served in the region they are signed for)")
	f.StringVar(&keyFile, "secrets-key-file", cli.Env("BERTH_SECRETS_KEY_FILE", ""), "key file sealing secret and parameter values at rest: lines {id}:{base64 of 32 bytes}, primary first (docs/secrets.md); BERTH_SECRETS_KEY may hold the same lines comma-separated instead")
	f.StringVar(&replica, "replica", cli.Env("BERTH_REPLICA", ""), "replica name (default host-pid)")
	f.DurationVar(&leaderTTL, "leader-ttl", 5*time.Second, "leader election session TTL")
	f.DurationVar(&stableAfter, "task-stable-after", 0, "how long a service task without health checks stays RUNNING before it counts toward minimumHealthyPercent (0: 40s, as AWS)")
	f.IntVar(&maxTxnOps, "etcd-max-txn-ops", 128, "the etcd cluster's --max-txn-ops (etcd's default: 128); RunTask's group commit fills txns up to it, so raise both together (1024 holds about a dozen RunTask calls of count 10 per txn)")
	f.IntVar(&gzipMinBytes, "gzip-min-bytes", 0, "gzip responses of at least this many bytes to clients that accept gzip (the gateway and agents); 0 never compresses, which costs least CPU on internal links")
	return cmd
}
