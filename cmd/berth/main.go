// Command berth is Berth's one CLI: `berth dev` runs everything on one host; `berth
// gateway`, `berth scheduler` and `berth agent` run one service each; `berth admin`
// manages accounts and access keys; `berth image` puts images into a registry. The
// berth-agent and berth-gateway binaries (subdirectories) run one role each and link only
// what that role needs.
package main

import (
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/agentcmd"
	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/cmd/berth/internal/gatewaycmd"
)

func main() {
	root := &cobra.Command{
		Use:   "berth",
		Short: "Berth: a container orchestrator that speaks the Amazon ECS API",
	}
	root.AddCommand(devCommand(), schedulerCommand(), gatewaycmd.Command("gateway"), agentcmd.Command("agent"),
		adminCommand(), logsCommand(), imageCommand(), lbCommand(), dnsCommand(), tlsCommand(), registryCommand())
	cli.Main(root)
}
