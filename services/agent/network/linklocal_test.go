package network

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// linkLocalRules counts the redirect rules of n's bridges: DNATs and loopback guards.
func linkLocalRules(t *testing.T, n *Network) (dnat, guard int) {
	t.Helper()
	for _, table := range []string{"nat", "filter"} {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			t.Fatalf("iptables-save: %v", err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.Contains(l, linkLocalComment) || !n.ownsRule(strings.Fields(l)) {
				continue
			}
			switch {
			case strings.Contains(l, "-j DNAT"):
				dnat++
			case strings.Contains(l, "-j DROP"):
				guard++
			}
		}
	}
	return dnat, guard
}

// TestRouteLinkLocal: RouteLinkLocal refuses targets it cannot DNAT to, installs one DNAT
// per bridge (and, for a loopback target, one loopback guard per bridge) however often it
// runs, replaces the rules of an earlier target, sets route_localnet on a bridge the first
// task creates, and UnrouteLinkLocal removes every rule. SetLinkLocalTarget defers the
// rules to the first task network; ReleaseLinkLocal removes them.
func TestRouteLinkLocal(t *testing.T) {
	n := newTestNetwork(t)
	if _, err := exec.LookPath("iptables-save"); err != nil {
		t.Skip("iptables not installed (make deps installs it)")
	}
	t.Cleanup(func() { _ = n.UnrouteLinkLocal() })
	for _, bad := range []string{"", "127.0.0.1", "[::1]:80", "localhost:80", "127.0.0.1:0"} {
		if err := n.RouteLinkLocal(bad); err == nil {
			t.Errorf("RouteLinkLocal(%q) accepted", bad)
		}
	}
	for range 2 {
		if err := n.RouteLinkLocal("127.0.0.1:51679"); err != nil {
			t.Fatal(err)
		}
	}
	if d, g := linkLocalRules(t, n); d != 2 || g != 2 {
		t.Fatalf("after two routes to loopback: %d DNAT, %d guard rules, want 2 and 2", d, g)
	}
	ctx := context.Background()
	if _, err := n.Setup(ctx, "ll1", AWSVPC, []EndpointRequest{{ID: "ll1-main"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Teardown(ctx, "ll1") })
	b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + n.cfg.TaskBridge + "/route_localnet")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("route_localnet of %s = %q %v, want 1", n.cfg.TaskBridge, b, err)
	}
	if err := n.RouteLinkLocal("10.99.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	if d, g := linkLocalRules(t, n); d != 2 || g != 0 {
		t.Fatalf("after a route to a non-loopback address: %d DNAT, %d guard rules, want 2 and 0", d, g)
	}
	if err := n.UnrouteLinkLocal(); err != nil {
		t.Fatal(err)
	}
	if d, g := linkLocalRules(t, n); d != 0 || g != 0 {
		t.Fatalf("after UnrouteLinkLocal: %d DNAT, %d guard rules", d, g)
	}
	if err := n.UnrouteLinkLocal(); err != nil {
		t.Errorf("a second UnrouteLinkLocal: %v", err)
	}

	// SetLinkLocalTarget installs nothing until a bridge or awsvpc network is set up.
	if err := n.SetLinkLocalTarget("127.0.0.1:51680"); err != nil {
		t.Fatal(err)
	}
	if err := n.SetLinkLocalTarget("127.0.0.1"); err == nil {
		t.Errorf("SetLinkLocalTarget without a port accepted")
	}
	if d, g := linkLocalRules(t, n); d != 0 || g != 0 {
		t.Fatalf("before a task network: %d DNAT, %d guard rules", d, g)
	}
	if _, err := n.Setup(ctx, "ll2", Bridge, []EndpointRequest{{ID: "ll2-main"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Teardown(ctx, "ll2") })
	if d, g := linkLocalRules(t, n); d != 2 || g != 2 {
		t.Fatalf("after a bridge task network: %d DNAT, %d guard rules, want 2 and 2", d, g)
	}
	if err := n.ReleaseLinkLocal(); err != nil {
		t.Fatal(err)
	}
	if d, g := linkLocalRules(t, n); d != 0 || g != 0 {
		t.Fatalf("after ReleaseLinkLocal: %d DNAT, %d guard rules", d, g)
	}
}
