// Package gatewaycmd is the command line of the gateway role, shared by `berth gateway`
// (the all-in-one binary) and the berth-gateway binary. It links the gateway only: no
// containerd client and no etcd server (the deps test in cmd/berth checks it).
package gatewaycmd

import (
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/gateway/h2c"
)

// Command returns the gateway command named use ("gateway" under berth, "berth-gateway"
// as a binary of its own): it serves the ECS endpoint on --listen and calls a scheduler
// replica at --scheduler-url until its context is canceled.
func Command(use string) *cobra.Command {
	var schedulerURL, listen, regions string
	var dev, metrics, console bool
	cmd := &cobra.Command{
		Use:   use,
		Short: "Run the ECS endpoint: AWS JSON 1.1 + SigV4 in, scheduler Connect calls out",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := cli.JSONLogger(cmd)
			var cc *gateway.ConsoleConfig
			if console {
				cc = &gateway.ConsoleConfig{}
			}
			gw, err := gateway.New(gateway.Config{SchedulerURL: schedulerURL, Regions: cli.SplitList(regions), Logger: log, Dev: dev,
				Registry: prometheus.NewRegistry(), ServeMetrics: metrics, Console: cc})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log.Info("gateway listening", "addr", ln.Addr().String(), "scheduler", schedulerURL)
			return h2c.Serve(cmd.Context(), ln, gw)
		},
	}
	f := cmd.Flags()
	f.StringVar(&schedulerURL, "scheduler-url", cli.Env("BERTH_SCHEDULER_URL", "http://127.0.0.1:4567"), "base URL of a scheduler replica (or a load balancer in front of several)")
	f.StringVar(&listen, "listen", cli.Env("BERTH_GATEWAY_ADDR", "127.0.0.1:4566"), "address of the ECS endpoint")
	f.StringVar(&regions, "regions", cli.Env("BERTH_REGIONS", ""), "regions a request's SigV4 scope may name, comma-separated (default: every region of the public AWS partition); each is served on its own")
	f.BoolVar(&dev, "dev", false, "serve the dev-only routes /_berth/health and /_berth/reset")
	f.BoolVar(&metrics, "metrics", cli.Env("BERTH_GATEWAY_METRICS", "") == "true", "serve Prometheus metrics at /metrics on the (public) ECS listener")
	f.BoolVar(&console, "console", cli.Env("BERTH_GATEWAY_CONSOLE", "") == "true", "serve the web console at /console (docs/console.md)")
	return cmd
}
