// Package gatewaycmd is the command line of the gateway role, shared by `berth gateway`
// (the all-in-one binary) and the berth-gateway binary. It links the gateway only: no
// containerd client and no etcd server (the deps test in cmd/berth checks it).
package gatewaycmd

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/pki"
	"github.com/berthhq/berth/services/gateway"
)

// Command returns the gateway command named use ("gateway" under berth, "berth-gateway"
// as a binary of its own): it serves the ECS endpoint on --listen and calls a scheduler
// replica at --scheduler-url until its context is canceled.
func Command(use string) *cobra.Command {
	var schedulerURL, listen, regions string
	var dev, metrics, console, requireAgentCert bool
	var files pki.Files
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
			// The certificate serves HTTPS and, for an https:// scheduler, is the client
			// certificate the scheduler believes identity headers from.
			replicas := cli.SplitList(schedulerURL)
			if len(replicas) == 0 {
				return fmt.Errorf("--scheduler-url: no URL")
			}
			for _, r := range replicas[1:] {
				if strings.HasPrefix(r, "https://") != strings.HasPrefix(replicas[0], "https://") {
					return fmt.Errorf("--scheduler-url: mixes https:// and http:// replicas")
				}
			}
			var schedFiles pki.Files
			if strings.HasPrefix(replicas[0], "https://") {
				schedFiles = files
			}
			client, err := cli.HTTPClient(replicas[0], schedFiles)
			if err != nil {
				return fmt.Errorf("--scheduler-url: %w", err)
			}
			var serverTLS *tls.Config
			if files.Cert != "" || files.Key != "" {
				auth := tls.NoClientCert
				if files.CA != "" {
					auth = tls.VerifyClientCertIfGiven
				}
				if serverTLS, err = files.ServerConfig(auth); err != nil {
					return err
				}
			}
			if requireAgentCert && (serverTLS == nil || files.CA == "") {
				return fmt.Errorf("--require-agent-cert needs --tls-cert, --tls-key and --tls-ca")
			}
			gw, err := gateway.New(gateway.Config{SchedulerURL: replicas[0], SchedulerReplicas: replicas, HTTPClient: client, Regions: cli.SplitList(regions), Logger: log, Dev: dev,
				Registry: cli.NewRegistry(), ServeMetrics: metrics, RequireAgentCert: requireAgentCert, Console: cc})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			if serverTLS == nil {
				log.Warn("gateway serving plain HTTP (no --tls-cert): use it on loopback or behind a TLS terminator only", "addr", ln.Addr().String())
				log.Info("gateway listening", "addr", ln.Addr().String(), "scheduler", schedulerURL, "tls", false)
				return h2c.Serve(cmd.Context(), ln, gw)
			}
			log.Info("gateway listening", "addr", ln.Addr().String(), "scheduler", schedulerURL, "tls", true, "require_agent_cert", requireAgentCert)
			return h2c.ServeTLS(cmd.Context(), ln, gw, serverTLS)
		},
	}
	f := cmd.Flags()
	f.StringVar(&schedulerURL, "scheduler-url", cli.Env("BERTH_SCHEDULER_URL", "http://127.0.0.1:4567"), "base URLs of the scheduler replicas, comma-separated: calls are balanced over the healthy ones and idempotent ones retried on another (or one load balancer's URL); https:// for mTLS with --tls-*")
	f.StringVar(&listen, "listen", cli.Env("BERTH_GATEWAY_ADDR", "127.0.0.1:4566"), "address of the ECS endpoint")
	f.StringVar(&regions, "regions", cli.Env("BERTH_REGIONS", ""), "regions a request's SigV4 scope may name, comma-separated (default: every region of the public AWS partition); each is served on its own")
	cli.AddTLSFlags(f, &files, "the gateway serves HTTPS with and presents to the scheduler (role gateway)")
	f.BoolVar(&requireAgentCert, "require-agent-cert", cli.Env("BERTH_REQUIRE_AGENT_CERT", "") == "true", "relay the agent API only for clients presenting an agent-role certificate (needs --tls-ca)")
	f.BoolVar(&dev, "dev", false, "serve the dev-only routes /_berth/health and /_berth/reset")
	f.BoolVar(&metrics, "metrics", cli.Env("BERTH_GATEWAY_METRICS", "") == "true", "serve Prometheus metrics at /metrics on the (public) ECS listener")
	f.BoolVar(&console, "console", cli.Env("BERTH_GATEWAY_CONSOLE", "") == "true", "serve the web console at /console (docs/console.md)")
	return cmd
}
