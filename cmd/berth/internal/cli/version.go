package cli

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/pkg/buildinfo"
)

// AddVersion gives root a `version` subcommand and a --version flag, both printing
// buildinfo.String (the version `make release` stamps; "dev" otherwise). Main calls it
// for every binary; a root that has them already is left as it is.
func AddVersion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() == "version" {
			return
		}
	}
	root.Version = buildinfo.Version
	root.SetVersionTemplate(buildinfo.String(root.Name()) + "\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go toolchain of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.String(root.Name()))
			return err
		},
	})
}

// NewRegistry returns the Prometheus registry of a Berth process, holding
// berth_build_info: a gauge of 1 labelled with the version, commit and Go version.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfoGauge())
	return reg
}

// BuildInfoGauge is berth_build_info{version, commit, goversion} = 1.
func BuildInfoGauge() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_build_info",
		Help: "A gauge of 1 whose labels are the Berth build: version (make release stamps it; dev otherwise), commit and goversion.",
		ConstLabels: prometheus.Labels{
			"version": buildinfo.Version, "commit": buildinfo.Commit, "goversion": buildinfo.GoVersion(),
		},
	})
	g.Set(1)
	return g
}
