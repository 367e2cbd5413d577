package agent_test

import (
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/tasks"
)

// attrs returns a registration's attributes by name.
func attrs(r *agentv1.RegisterRequest) map[string]string {
	m := map[string]string{}
	for _, a := range r.GetAttributes() {
		m[a.GetName()] = a.GetValue()
	}
	return m
}

// TestCapabilitiesFollowCNI starts an agent whose CNI plugin directory is empty (a host
// without containernetworking-plugins): it registers its OS, architecture and log drivers
// but not ecs.capability.cni-plugin-version nor ecs.capability.task-eni, which it reports
// missing naming the plugins and the directory. The plugins installed while it runs, it
// notices them within its re-check interval and registers again with both capabilities
// (the plugins' version as cni-plugin-version's value), no restart.
func TestCapabilitiesFollowCNI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables not in PATH: task networking needs it (apt-get install iptables)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cp := newControlPlaneAt(t, addr)
	plugins := t.TempDir()
	a, err := agent.New(agent.Config{
		ControlPlaneURL:        "http://" + addr,
		DataDir:                filepath.Join(t.TempDir(), "agent"),
		ContainerdAddress:      filepath.Join(t.TempDir(), "no-containerd.sock"),
		LogAddr:                "off",
		EndpointAddr:           "off",
		HeartbeatInterval:      100 * time.Millisecond,
		BackoffMin:             20 * time.Millisecond,
		BackoffMax:             200 * time.Millisecond,
		RuntimeProbeInterval:   100 * time.Millisecond,
		RuntimeProbeTimeout:    500 * time.Millisecond,
		NetworkRecheckInterval: 100 * time.Millisecond,
		Network:                network.Config{PluginDirs: []string{plugins}, HostDir: t.TempDir(), NetNSDir: t.TempDir()},
		Logger:                 slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(t.Context()) }()
	t.Cleanup(func() { <-done })

	cp.waitFor(t, 10*time.Second, "registration", func() bool { return len(cp.registrations) >= 1 })
	cp.mu.Lock()
	first := cp.registrations[0]
	cp.mu.Unlock()
	got := attrs(first)
	for _, name := range []string{"ecs.os-type", "ecs.cpu-architecture", "com.amazonaws.ecs.capability.logging-driver.awslogs", "com.amazonaws.ecs.capability.logging-driver.json-file"} {
		if _, ok := got[name]; !ok {
			t.Errorf("first registration lacks %s: %v", name, got)
		}
	}
	for _, name := range []string{agent.AttrCNIPluginVersion, agent.AttrTaskENI, agent.AttrTaskIAMRole} {
		if _, ok := got[name]; ok {
			t.Errorf("first registration has %s without the CNI plugins (or with the task endpoints off)", name)
		}
	}
	why := first.GetMissingAttributes()[agent.AttrCNIPluginVersion]
	if !strings.Contains(why, `CNI plugins "bridge", "host-local", "portmap", "firewall", "loopback" not found in `+plugins) {
		t.Errorf("missing %s: %q, want the plugins and %s named", agent.AttrCNIPluginVersion, why, plugins)
	}
	if why := first.GetMissingAttributes()[agent.AttrTaskENI]; !strings.HasPrefix(why, "CNI plugins") {
		t.Errorf("missing %s: %q", agent.AttrTaskENI, why)
	}
	if why := first.GetMissingAttributes()[agent.AttrTaskIAMRole]; !strings.Contains(why, "task endpoints are off") {
		t.Errorf("missing %s: %q", agent.AttrTaskIAMRole, why)
	}

	// initProcessEnabled's capability follows the host's static init.
	if _, err := tasks.InitBinary(); err == nil {
		if _, ok := got[agent.AttrInit]; !ok {
			t.Errorf("host with a static init does not register %s", agent.AttrInit)
		}
	} else if why := first.GetMissingAttributes()[agent.AttrInit]; !strings.Contains(why, "tini-static not found") {
		t.Errorf("host without a static init: missing %s %q", agent.AttrInit, why)
	}

	// The plugins are installed: executables of the names the network modes run.
	for _, p := range network.PluginsNeeded() {
		script := "#!/bin/sh\necho 'CNI " + p + " plugin v9.8.7'\n"
		if err := os.WriteFile(filepath.Join(plugins, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var last *agentv1.RegisterRequest
	cp.waitFor(t, 10*time.Second, "registration with the CNI capabilities", func() bool {
		last = cp.registrations[len(cp.registrations)-1]
		_, eni := attrs(last)[agent.AttrTaskENI]
		return eni
	})
	if v := attrs(last)[agent.AttrCNIPluginVersion]; v != "v9.8.7" {
		t.Errorf("%s = %q, want the plugins' version v9.8.7", agent.AttrCNIPluginVersion, v)
	}
	if m := last.GetMissingAttributes(); m[agent.AttrCNIPluginVersion] != "" || m[agent.AttrTaskENI] != "" {
		t.Errorf("still reported missing: %v", m)
	}
	if last.GetHostId() != first.GetHostId() {
		t.Errorf("registered again as host %q, was %q", last.GetHostId(), first.GetHostId())
	}
}
