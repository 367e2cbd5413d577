// Command berth is Berth's one CLI: `berth dev` runs everything on one host; `berth
// gateway`, `berth scheduler` and `berth agent` run one service each; `berth admin`
// manages accounts and access keys; `berth image` puts images into a registry.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "berth",
		Short:         "Berth: a container orchestrator that speaks the Amazon ECS API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(devCommand(), schedulerCommand(), gatewayCommand(), agentCommand(), adminCommand(), logsCommand(), imageCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "berth:", err)
		os.Exit(1)
	}
}

// env returns the environment variable name's value, or def when it is unset.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
