package agent

import (
	"log/slog"
	"net"
	"testing"
)

// TestHostAddressSurvivesFailedLookup: the address registered as the host's is the one
// this host reaches the control plane from, and a lookup that fails later (the control
// plane's name not resolving while its container restarts) keeps the one found before
// instead of registering none, which sent load balancer targets to loopback; a control
// plane reached over loopback is an answer (no address), not a failure.
func TestHostAddressSurvivesFailedLookup(t *testing.T) {
	a := &Agent{cfg: Config{ControlPlaneURL: "https://192.0.2.1:4566"}, log: slog.New(slog.DiscardHandler)}
	// What the kernel picks as the source for 192.0.2.1 (TEST-NET-1), found without the
	// code under test; a host with no such route finds none, and the memo is seeded.
	want := ""
	if c, err := net.Dial("udp4", "192.0.2.1:4566"); err == nil {
		if ip := c.LocalAddr().(*net.UDPAddr).IP; !ip.IsLoopback() {
			want = ip.String()
		}
		c.Close()
	}
	if got := a.hostAddress(); got != want {
		t.Fatalf("host address = %q, want the route's source %q", got, want)
	}
	if want == "" {
		want = "198.51.100.7"
		a.lastHostAddress.Store(want)
	}
	a.cfg.ControlPlaneURL = "https://no-such-gateway.invalid:4566"
	if got, ok := a.lookupHostAddress(); ok {
		t.Fatalf("lookup of an unresolvable control plane = %q, want a failure", got)
	}
	if got := a.hostAddress(); got != want {
		t.Errorf("host address after a failed lookup = %q, want the one found before, %q", got, want)
	}
	if got := (&Agent{cfg: Config{ControlPlaneURL: "https://no-such-gateway.invalid:4566"}, log: slog.New(slog.DiscardHandler)}).hostAddress(); got != "" {
		t.Errorf("host address with no lookup ever succeeding = %q, want none", got)
	}
	a.cfg.ControlPlaneURL = "https://127.0.0.1:4566"
	if got := a.hostAddress(); got != "" {
		t.Errorf("host address with the control plane on loopback = %q, want none", got)
	}
}
