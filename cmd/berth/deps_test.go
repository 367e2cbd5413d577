package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// roleRule is one binary's link rule: the packages it must not import, directly or not.
type roleRule struct {
	pkg       string   // package path relative to this module
	forbidden []string // import path prefixes
}

var (
	// etcd proper: client, server and API. (go.etcd.io/bbolt is a local key-value file,
	// the agent's outbox, not etcd.)
	etcdAny    = "go.etcd.io/etcd/"
	etcdServer = "go.etcd.io/etcd/server/"
	containerd = "github.com/containerd/"
	testkit    = "github.com/berthhq/berth/testkit/"
	etcdTest   = "github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	// The gateway module: an agent only dials the gateway, with the client libraries of
	// pkg/ (h2c, sigv4client, failover, pki), which both sides import.
	gatewayModule = "github.com/berthhq/berth/services/gateway"
	// The scheduler module: neither the agent nor the gateway links the control plane.
	schedulerModule = "github.com/berthhq/berth/services/scheduler"

	// roleRules are the module split issue 13 asks for: an agent host carries no etcd
	// and nothing of the gateway or the scheduler, a gateway no containerd client and no
	// etcd server; no binary links the test harness.
	roleRules = []roleRule{
		{pkg: "./berth-agent", forbidden: []string{etcdAny, gatewayModule + "/", gatewayModule + "$", schedulerModule + "/", testkit}},
		{pkg: "./berth-gateway", forbidden: []string{containerd, etcdServer, testkit}},
		// No binary links the test harness (testkit, etcdembed's etcdtest): `berth image
		// demo` packs its image with pkg/demoimage.
		{pkg: ".", forbidden: []string{testkit, etcdTest}},
	}
)

// deps returns every package pkg links (go list -deps), standard library included.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

// violations returns the packages of list that match one of forbidden: a prefix, or
// with a trailing "$" one exact package.
func violations(list, forbidden []string) []string {
	var bad []string
	match := func(p, f string) bool {
		if exact, ok := strings.CutSuffix(f, "$"); ok {
			return p == exact
		}
		return strings.HasPrefix(p, f)
	}
	for _, p := range list {
		if slices.ContainsFunc(forbidden, func(f string) bool { return match(p, f) }) {
			bad = append(bad, p)
		}
	}
	return bad
}

// TestRoleBinariesLinkOnlyTheirRole fails when berth-agent links etcd
// (or the gateway server) or berth-gateway links containerd or etcd's server, naming the
// offending packages.
func TestRoleBinariesLinkOnlyTheirRole(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; this test runs `go list -deps`")
	}
	for _, r := range roleRules {
		t.Run(strings.TrimPrefix(r.pkg, "./"), func(t *testing.T) {
			if bad := violations(deps(t, r.pkg), r.forbidden); len(bad) > 0 {
				t.Errorf("%s links %d forbidden packages (prefixes %v), e.g.:\n  %s",
					r.pkg, len(bad), r.forbidden, strings.Join(bad[:min(len(bad), 10)], "\n  "))
			}
		})
	}
}

// TestRoleRulesCatchTheAllInOne is the check's own check: the all-in-one berth links
// every role, so each rule applied to it must report violations. If it reports none, the
// rule's prefixes no longer match the packages they are meant to keep out. The test
// harness, which no binary links, is checked against the packages of the harness itself
// (testkit's test image, etcdtest) instead.
func TestRoleRulesCatchTheAllInOne(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; this test runs `go list -deps`")
	}
	all := deps(t, ".")
	all = append(all, deps(t, testkit+"testimage")...)
	all = append(all, deps(t, etcdTest)...)
	for _, r := range roleRules {
		for _, f := range r.forbidden {
			if len(violations(all, []string{f})) == 0 {
				t.Errorf("the all-in-one berth links nothing under %s: the %s rule would pass vacuously", f, r.pkg)
			}
		}
	}
}
