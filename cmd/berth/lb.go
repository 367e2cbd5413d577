package main

import (
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/scheduler/elbv2/lb"
)

func lbCommand() *cobra.Command {
	var etcdf etcdFlags
	var listenHost string
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
			etcd, err := etcdf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer etcd.Close()
			log.Info("lb following etcd", "etcd", etcdf.endpoints, "listenHost", listenHost)
			err = lb.Run(cmd.Context(), etcd, lb.Config{ListenHost: listenHost, Logger: log})
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	etcdf.add(f)
	f.StringVar(&listenHost, "listen-host", cli.Env("BERTH_LB_LISTEN_HOST", ""), "address listeners bind on (empty: every address of the host)")
	return cmd
}
