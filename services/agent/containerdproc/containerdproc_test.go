package containerdproc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/berthhq/berth/services/agent/containerdproc"
)

// TestStartProcessLongDir: a data dir too long for a unix socket path gets its socket in
// a short directory under /tmp, and the daemon serves there.
func TestStartProcessLongDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	inst, err := containerdproc.StartProcess(t.Context(), dir)
	if errors.Is(err, containerdproc.ErrUnavailable) {
		t.Skip(err) // names what is missing: root or a binary
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := inst.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Error(err)
		}
		os.RemoveAll(filepath.Dir(inst.Address()))
	}()
	if got := inst.Address(); len(got) > 100 || !strings.HasPrefix(got, os.TempDir()+"/bt-") {
		t.Errorf("address %q: want a short path under %s/bt-*", got, os.TempDir())
	}
	client, err := containerd.New(inst.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Version(t.Context()); err != nil {
		t.Errorf("Version: %v", err)
	}
}
