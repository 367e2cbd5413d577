package agentcmd

import (
	"context"
	"testing"
	"time"
)

// TestGatewayURLs: --gateway's list, and what it refuses.
func TestGatewayURLs(t *testing.T) {
	got, err := gatewayURLs("https://gw1:4566, https://gw2:4566")
	if err != nil || len(got) != 2 || got[0] != "https://gw1:4566" || got[1] != "https://gw2:4566" {
		t.Errorf("two gateways: %q, %v", got, err)
	}
	for _, bad := range []string{"", " , ", "gw1:4566", "https://gw1:4566,http://gw2:4566", "ftp://gw"} {
		if got, err := gatewayURLs(bad); err == nil {
			t.Errorf("gatewayURLs(%q) = %q, want an error", bad, got)
		}
	}
}

// TestResolveDNSTarget: a name becomes its IPv4 address (the agent's iptables rules need
// one); an address or nothing is kept; a name that resolves nowhere is an error.
func TestResolveDNSTarget(t *testing.T) {
	ctx := context.Background()
	for in, want := range map[string]string{"": "", "10.0.0.5:53": "10.0.0.5:53", "localhost:5353": "127.0.0.1:5353"} {
		if got, err := resolveDNSTarget(ctx, in); err != nil || got != want {
			t.Errorf("resolveDNSTarget(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := resolveDNSTarget(ctx, "no-port"); err == nil {
		t.Error("a target without a port accepted")
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if got, err := resolveDNSTarget(short, "nowhere.invalid:53"); err == nil {
		t.Errorf("nowhere.invalid resolved to %q", got)
	}
}
