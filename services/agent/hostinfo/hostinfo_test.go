package hostinfo_test

import (
	"net"
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

// TestRouteAddress: the address the host sends from toward a target is loopback for a
// control plane on this host, and for another host one of this host's own interface
// addresses (what other hosts reach it at); a target without a host is an error.
func TestRouteAddress(t *testing.T) {
	for _, target := range []string{"http://127.0.0.1:4566", "127.0.0.1:4566", "http://localhost:4566"} {
		got, err := hostinfo.RouteAddress(target)
		if err != nil || !net.ParseIP(got).IsLoopback() {
			t.Errorf("RouteAddress(%q) = %q, %v; want a loopback address", target, got, err)
		}
	}
	own := map[string]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			own[n.IP.String()] = true
		}
	}
	// A documentation address (TEST-NET-3) is routed by the default route, if any.
	got, err := hostinfo.RouteAddress("https://203.0.113.7")
	if err != nil {
		t.Fatalf("RouteAddress to another host (this host needs a default route): %v", err)
	}
	if !own[got] {
		t.Errorf("RouteAddress to another host = %q, not one of this host's addresses %v", got, own)
	}
	if _, err := hostinfo.RouteAddress("http://"); err == nil {
		t.Error("RouteAddress without a host: no error")
	}
}
