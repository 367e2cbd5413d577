package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/scheduler/elbv2/lb"
)

func lbCommand() *cobra.Command {
	var endpoints, listenHost string
	cmd := &cobra.Command{
		Use:   "lb",
		Short: "Run the load balancer data plane: serve every ELBv2 listener on this host",
		Long: "Follows the load balancers, listeners, rules, target groups and targets kept in etcd\n" +
			"by the ELBv2 API, binds each listener of an active load balancer on --listen-host at\n" +
			"the listener's port, and forwards to healthy targets (HTTP through a reverse proxy,\n" +
			"TCP spliced). Runs the target health checks and completes deregistration drains.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := cli.JSONLogger(cmd)
			etcd, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
			if err != nil {
				return fmt.Errorf("etcd %s: %w", endpoints, err)
			}
			defer etcd.Close()
			log.Info("lb following etcd", "etcd", endpoints, "listenHost", listenHost)
			err = lb.Run(cmd.Context(), etcd, lb.Config{ListenHost: listenHost, Logger: log})
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoints, "etcd-endpoints", cli.Env("BERTH_ETCD_ENDPOINTS", "127.0.0.1:2379"), "etcd client endpoints, comma-separated")
	f.StringVar(&listenHost, "listen-host", cli.Env("BERTH_LB_LISTEN_HOST", ""), "address listeners bind on (empty: every address of the host)")
	return cmd
}
