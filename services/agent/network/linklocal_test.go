package network

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
			if !n.ownsRule(strings.Fields(l)) {
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
// for the awsvpc bridge and one per bridge task address on the shared bridge (and, for a
// loopback target, one loopback guard per bridge) however often it runs, replaces the
// rules of an earlier target, sets route_localnet on a bridge the first task creates, and
// UnrouteLinkLocal removes every rule. SetLinkLocalTarget defers the rules to the first
// task network; ReleaseLinkLocal removes them.
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
	if d, g := linkLocalRules(t, n); d != 1 || g != 2 {
		t.Fatalf("after two routes to loopback, no bridge task: %d DNAT, %d guard rules, want 1 (awsvpc bridge) and 2", d, g)
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
	if d, g := linkLocalRules(t, n); d != 1 || g != 0 {
		t.Fatalf("after a route to a non-loopback address: %d DNAT, %d guard rules, want 1 and 0", d, g)
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
		t.Fatalf("after a bridge task network: %d DNAT, %d guard rules, want 2 (awsvpc bridge, the task's address) and 2", d, g)
	}
	if err := n.ReleaseLinkLocal(); err != nil {
		t.Fatal(err)
	}
	if d, g := linkLocalRules(t, n); d != 0 || g != 0 {
		t.Fatalf("after ReleaseLinkLocal: %d DNAT, %d guard rules", d, g)
	}
}

// dnatTargets maps the source match ("-s" value, "" for none) of the link-local DNATs of n
// on bridge br to their target.
func dnatTargets(t *testing.T, n *Network, br string) map[string]string {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil {
		t.Fatalf("iptables -S: %v", err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if !strings.Contains(l, n.ruleComment()) || !strings.Contains(l, "--dport 80") || !slices.Contains(f, br) {
			continue
		}
		src, to := "", ""
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "-s":
				src = f[i+1]
			case "--to-destination":
				to = f[i+1]
			}
		}
		if _, dup := got[src]; dup {
			t.Errorf("two DNATs of %s for source %q", n.ruleComment(), src)
		}
		got[src] = to
	}
	return got
}

// TestLinkLocalTwoAgents: two agents' networks on one host share the bridge of networkMode
// bridge (as berth dev beside a system agent, or the tests' agents, share berth0), each
// with its own awsvpc bridge and endpoints listener. Each routes 169.254.170.2 from its
// own bridge tasks' addresses to its own listener; re-installing (RouteLinkLocal again,
// as a restarted agent does) and releasing one agent's rules leave the other's in place,
// a task's teardown removes only that task's rule, and the rules of an agent that is gone
// (its state dir removed) go with the other's Reap.
func TestLinkLocalTwoAgents(t *testing.T) {
	a := newTestNetwork(t)
	if _, err := exec.LookPath("iptables-save"); err != nil {
		t.Skip("iptables not installed (make deps installs it)")
	}
	dir := t.TempDir()
	k := (os.Getpid() + 101) % 200
	b, err := New(Config{
		PluginDirs: testPluginDirs(),
		StateDir:   dir, NetNSDir: filepath.Join(dir, "netns"),
		Bridge: a.cfg.Bridge, BridgeSubnet: a.cfg.BridgeSubnet, // the shared bridge
		TaskBridge: fmt.Sprintf("bnv%d", k), TaskSubnet: fmt.Sprintf("10.%d.2.0/24", 100+a.owner[0]%50),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", b.cfg.TaskBridge).Run() })
	if a.owner == b.owner {
		t.Fatalf("two state dirs, one owner tag %s", a.owner)
	}
	ctx := context.Background()
	for _, n := range []*Network{a, b} {
		t.Cleanup(func() { _ = n.UnrouteLinkLocal() })
	}
	const targetA, targetB = "127.0.0.1:51681", "127.0.0.1:51682"
	if err := a.SetLinkLocalTarget(targetA); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLinkLocalTarget(targetB); err != nil {
		t.Fatal(err)
	}
	ta, err := a.Setup(ctx, "twoa", Bridge, []EndpointRequest{{ID: "twoa-main"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Teardown(ctx, "twoa") })
	tb, err := b.Setup(ctx, "twob", Bridge, []EndpointRequest{{ID: "twob-main"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Teardown(ctx, "twob") })
	ipA, ipB := ta.Endpoints[0].IP+"/32", tb.Endpoints[0].IP+"/32"
	check := func(when string, n *Network, want map[string]string) {
		t.Helper()
		if got := dnatTargets(t, n, n.cfg.Bridge); !maps.Equal(got, want) {
			t.Errorf("%s: %s's DNATs on the shared bridge = %v, want %v", when, n.ruleComment(), got, want)
		}
	}
	check("both set up", a, map[string]string{ipA: targetA})
	check("both set up", b, map[string]string{ipB: targetB})

	// Each re-installs its rules (a restarted agent does), in turn and twice.
	for range 2 {
		for _, n := range []*Network{a, b} {
			n.mu.Lock()
			target := n.routed
			n.mu.Unlock()
			if err := n.RouteLinkLocal(target); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("after both re-installed", a, map[string]string{ipA: targetA})
	check("after both re-installed", b, map[string]string{ipB: targetB})
	if got := dnatTargets(t, b, b.cfg.TaskBridge); got[""] != targetB {
		t.Errorf("b's awsvpc bridge DNAT = %v, want the whole bridge to %s", got, targetB)
	}

	// One agent's task goes, then the agent releases its rules: the other's stay.
	if err := a.Teardown(ctx, "twoa"); err != nil {
		t.Fatal(err)
	}
	check("after a's task's teardown", a, map[string]string{})
	check("after a's task's teardown", b, map[string]string{ipB: targetB})
	if err := a.ReleaseLinkLocal(); err != nil {
		t.Fatal(err)
	}
	check("after a released", b, map[string]string{ipB: targetB})
	if d, g := linkLocalRules(t, a); d != 0 || g != 0 {
		t.Errorf("after a released: a keeps %d DNAT and %d guard rules", d, g)
	}
	if d, g := linkLocalRules(t, b); d != 2 || g != 2 {
		t.Errorf("after a released: b has %d DNAT and %d guard rules, want 2 (task, awsvpc bridge) and 2", d, g)
	}

	// b dies without releasing its rules, and its state dir goes: a's Reap removes them.
	if err := b.Teardown(ctx, "twob"); err != nil {
		t.Fatal(err)
	}
	if d, g := linkLocalRules(t, b); d != 1 || g != 2 {
		t.Fatalf("after b's task's teardown: b has %d DNAT and %d guard rules, want 1 (awsvpc bridge) and 2", d, g)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if d, g := linkLocalRules(t, b); d != 0 || g != 0 {
		t.Errorf("after a reaped the gone agent b: b's %d DNAT and %d guard rules are left", d, g)
	}
}
