package network

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestDynamicPortHeldUntilReleased: a dynamic host port the agent picks is bound by the
// agent until the task's ports are released, so no host process gets it from the
// ephemeral range meanwhile (portmap's DNAT would send that process's own loopback
// connections to the task: TestAgentRestartAdoptsContainers once met its control plane's
// listener on a port a bridge task of another test published). A port a host process
// has is never picked.
func TestDynamicPortHeldUntilReleased(t *testing.T) {
	// A range of two ports, the first taken by a host process and the second free: try
	// ephemeral ports until one's neighbour is free (rather than skip when it is not).
	var first int32
	for attempt := 0; ; attempt++ {
		busy, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		port := int32(busy.Addr().(*net.TCPAddr).Port)
		free, err := net.Listen("tcp4", "0.0.0.0:"+strconv.Itoa(int(port+1)))
		if err == nil {
			free.Close()
			defer busy.Close()
			first = port
			break
		}
		busy.Close()
		if attempt == 50 {
			t.Fatalf("no ephemeral port with a free neighbour in 50 tries: %v", err)
		}
	}
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "hostports"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Network{cfg: Config{PortRange: [2]int{int(first), int(first + 1)}, HostDir: host, StateDir: t.TempDir()},
		owner: "test", used: map[string]string{}, held: map[string]int{}, tasks: map[string]*TaskNetwork{}}

	n.mu.Lock()
	got, err := n.dynamicPortsLocked("tcp", 1)
	n.mu.Unlock()
	if err != nil || got != first+1 {
		t.Fatalf("dynamic port = %d, %v; want %d (%d is a host process's)", got, err, first+1, first)
	}
	if l, err := net.Listen("tcp", ":"+strconv.Itoa(int(got))); err == nil {
		l.Close()
		t.Fatalf("a host process could bind dynamic port %d while a task publishes it", got)
	}
	if err := n.reservePorts("task-1", "tcp", got, 1); err != nil {
		t.Fatal(err)
	}
	n.releasePorts(&TaskNetwork{Task: "task-1", Endpoints: []*Endpoint{{Bindings: []Binding{{Protocol: "tcp", HostPort: got}}}}})
	l, err := net.Listen("tcp", ":"+strconv.Itoa(int(got)))
	if err != nil {
		t.Fatalf("port %d still held after its release: %v", got, err)
	}
	l.Close()
	if len(n.held) != 0 {
		t.Errorf("held after release: %v", n.held)
	}

	// No port free: an error, and nothing left held.
	busy2, err := net.Listen("tcp4", "0.0.0.0:"+strconv.Itoa(int(first+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer busy2.Close()
	n.mu.Lock()
	_, err = n.dynamicPortsLocked("tcp", 1)
	n.mu.Unlock()
	if err == nil || len(n.held) != 0 {
		t.Errorf("with every port taken: %v, held %v", err, n.held)
	}
}
