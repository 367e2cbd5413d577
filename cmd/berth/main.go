// Command berth is Berth's one CLI. Its subcommands:
//
//   - `berth dev` runs everything on one host: embedded etcd, a scheduler, the gateway,
//     one agent and a registry;
//   - `berth gateway`, `berth scheduler` and `berth agent` run one service each;
//   - `berth lb` runs the load balancer's data plane (ELBv2 listeners) on a host, and
//     `berth dns` the Cloud Map DNS server;
//   - `berth admin` manages accounts and access keys;
//   - `berth tls` creates a private CA and the certificates of each role;
//   - `berth image` puts images into a registry without Docker (`push`, `demo`), and
//     `berth registry` serves a plain-HTTP one;
//   - `berth logs` prints a task's output;
//   - `berth version` (and --version, in every binary) prints the version `make release`
//     stamps.
//
// The berth-agent and berth-gateway binaries (subdirectories) run one role each and link
// only what that role needs.
package main

import (
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/agentcmd"
	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/cmd/berth/internal/gatewaycmd"
)

func main() { cli.Main(rootCommand()) }

// rootCommand returns the berth command with every subcommand the package doc names
// (TestPackageDocNamesEverySubcommand holds the two together).
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "Berth: a container orchestrator that speaks the Amazon ECS API",
	}
	root.AddCommand(devCommand(), schedulerCommand(), gatewaycmd.Command("gateway"), agentcmd.Command("agent"),
		adminCommand(), logsCommand(), imageCommand(), lbCommand(), dnsCommand(), tlsCommand(), registryCommand())
	cli.AddVersion(root)
	return root
}
