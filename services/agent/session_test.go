package agent_test

import (
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthhq/berth/services/agent"
)

// TestSessionReconnects starts the agent before its control plane exists,
// then takes the control plane down and up again: the agent registers once
// it appears (same instance on re-registration) and opens a new session
// after the outage. No containerd here: the agent registers with zero
// capacity and says why.
func TestSessionReconnects(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := agent.Config{
		ControlPlaneURL:      "http://" + addr,
		DataDir:              filepath.Join(t.TempDir(), "agent"),
		ContainerdAddress:    filepath.Join(t.TempDir(), "no-containerd.sock"),
		HeartbeatInterval:    100 * time.Millisecond,
		BackoffMin:           20 * time.Millisecond,
		BackoffMax:           200 * time.Millisecond,
		RuntimeProbeInterval: 100 * time.Millisecond,
		RuntimeProbeTimeout:  500 * time.Millisecond,
		Logger:               slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { <-done })

	time.Sleep(500 * time.Millisecond) // attempts fail and back off
	cp := newControlPlaneAt(t, addr)
	cp.waitFor(t, 10*time.Second, "hello", func() bool { return len(cp.hellos) == 1 })
	cp.mu.Lock()
	reg := cp.registrations[0]
	cp.mu.Unlock()
	if reg.GetRuntimeReady() || reg.GetRuntimeReason() == "" || reg.GetCluster() != "default" || reg.GetHostId() != a.HostID() {
		t.Errorf("registration without containerd: %v", reg)
	}

	cp.close()
	cp2 := newControlPlaneAt(t, addr)
	cp2.instances = cp.instances
	cp2.waitFor(t, 10*time.Second, "hello after outage", func() bool { return len(cp2.hellos) == 1 })
	cp2.waitFor(t, 10*time.Second, "heartbeats", func() bool { return len(cp2.heartbeats) >= 2 })
	cp.mu.Lock()
	first := cp.hellos[0].GetContainerInstanceArn()
	cp.mu.Unlock()
	cp2.mu.Lock()
	defer cp2.mu.Unlock()
	if got := cp2.hellos[0].GetContainerInstanceArn(); got != first {
		t.Errorf("instance after re-registration %q, want %q", got, first)
	}
	if hb := cp2.heartbeats[len(cp2.heartbeats)-1]; hb.GetRuntimeReady() || hb.GetCpu() != 0 || hb.GetMemory() != 0 {
		t.Errorf("heartbeat without containerd: %v", hb)
	}
}
