package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/pkg/buildinfo"
)

// TestBuildInfo: a process's registry exports berth_build_info = 1 labelled with the
// stamped version and commit, and `version` prints them.
func TestBuildInfo(t *testing.T) {
	v, c := buildinfo.Version, buildinfo.Commit
	t.Cleanup(func() { buildinfo.Version, buildinfo.Commit = v, c })
	buildinfo.Version, buildinfo.Commit = "v1.2.3", "abc123"
	want := `# HELP berth_build_info A gauge of 1 whose labels are the Berth build: version (make release stamps it; dev otherwise), commit and goversion.
# TYPE berth_build_info gauge
berth_build_info{commit="abc123",goversion="` + buildinfo.GoVersion() + `",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(NewRegistry(), strings.NewReader(want), "berth_build_info"); err != nil {
		t.Error(err)
	}
	root := &cobra.Command{Use: "berth-agent", RunE: func(*cobra.Command, []string) error { return nil }}
	AddVersion(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "berth-agent v1.2.3 (commit abc123, ") {
		t.Errorf("berth-agent version printed %q", out.String())
	}
}
