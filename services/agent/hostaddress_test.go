package agent

import (
	"log/slog"
	"testing"
)

// TestHostAddressSurvivesFailedLookup: the address registered as the host's is the one
// this host reaches the control plane from, and a lookup that fails later (the control
// plane's name not resolving while its container restarts) keeps the one found before
// instead of registering none, which sent load balancer targets to loopback.
func TestHostAddressSurvivesFailedLookup(t *testing.T) {
	a := &Agent{cfg: Config{ControlPlaneURL: "https://192.0.2.1:4566"}, log: slog.New(slog.DiscardHandler)}
	first := a.hostAddress()
	if first == "" {
		t.Skip("no route to 192.0.2.1 (TEST-NET-1) from this host: no non-loopback source address to find")
	}
	a.cfg.ControlPlaneURL = "https://no-such-gateway.invalid:4566"
	if got, ok := a.lookupHostAddress(); ok {
		t.Fatalf("lookup of an unresolvable control plane = %q, want a failure", got)
	}
	if got := a.hostAddress(); got != first {
		t.Errorf("host address after a failed lookup = %q, want the one found before, %q", got, first)
	}
	if got := (&Agent{cfg: Config{ControlPlaneURL: "https://no-such-gateway.invalid:4566"}, log: slog.New(slog.DiscardHandler)}).hostAddress(); got != "" {
		t.Errorf("host address with no lookup ever succeeding = %q, want none", got)
	}
	// A control plane now reached over loopback is an answer: no address, not the old one.
	a.cfg.ControlPlaneURL = "https://127.0.0.1:4566"
	if got := a.hostAddress(); got != "" {
		t.Errorf("host address with the control plane on loopback = %q, want none", got)
	}
}
