package hostinfo_test

import (
	"testing"

	"github.com/berthhq/berth/services/agent/hostinfo"
)

func TestHostIDStable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := hostinfo.HostID(dir, "berth")
	if err != nil {
		t.Fatal(err)
	}
	b, err := hostinfo.HostID(dir, "berth")
	if err != nil || a != b {
		t.Fatalf("host id changed: %q then %q (%v)", a, b, err)
	}
	if c, _ := hostinfo.HostID(t.TempDir(), "berth"); c == a {
		t.Fatal("two data dirs share a host id")
	}
}

func TestDetect(t *testing.T) {
	t.Parallel()
	info, err := hostinfo.Detect()
	if err != nil {
		t.Fatal(err)
	}
	if info.Cores < 1 || info.MemoryMiB < 1 || info.OSType != "linux" || info.Arch == "" {
		t.Fatalf("Detect = %+v", info)
	}
}
