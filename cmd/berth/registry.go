package main

import (
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/agent/ociregistry"
)

// registryCommand is `berth registry`: the OCI registry `berth dev` embeds, on its own,
// for a multi-host stack (the compose stack's registry service) that reaches no public
// registry. Images live in memory: a restart empties it.
func registryCommand() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Serve a plain-HTTP OCI registry (in memory) for `berth image push` and agents' pulls",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := cli.JSONLogger(cmd)
			reg, err := ociregistry.Serve(cmd.Context(), listen)
			if err != nil {
				return err
			}
			defer reg.Close()
			log.Info("registry listening", "addr", reg.Addr(), "storage", "memory")
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", cli.Env("BERTH_REGISTRY_ADDR", "127.0.0.1:5000"), "address of the registry")
	return cmd
}
