package agent

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckHost names an unreachable containerd, runc and the shim missing from PATH,
// and a missing CNI plugin; with all of them there (a listening socket standing for
// containerd) it reports nothing but what root-ness adds.
func TestCheckHost(t *testing.T) {
	bin, cni := t.TempDir(), t.TempDir()
	t.Setenv("PATH", bin)
	exe := func(dir, name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"bridge", "host-local", "firewall", "loopback"} {
		exe(cni, p)
	}
	exe(bin, "iptables")
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	got := CheckHost(sock, []string{cni})
	if os.Geteuid() != 0 {
		got = slices.DeleteFunc(got, func(l string) bool { return strings.HasPrefix(l, "not root") })
	}
	want := []string{
		"containerd not reachable at " + sock + ": no task can run and the instance advertises no CPU or memory (apt-get install containerd)",
		"runc not found in PATH: containerd cannot start containers (apt-get install runc)",
		"containerd-shim-runc-v2 not found in PATH: containerd cannot start containers (apt-get install containerd)",
		`networkMode bridge unavailable: CNI plugin "portmap" not found in ` + cni + ` (apt-get install containernetworking-plugins)`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CheckHost:\n got %q\nwant %q", got, want)
	}

	exe(cni, "portmap")
	exe(bin, "runc")
	exe(bin, "containerd-shim-runc-v2")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got = CheckHost(sock, []string{cni})
	if os.Geteuid() != 0 {
		got = slices.DeleteFunc(got, func(l string) bool { return strings.HasPrefix(l, "not root") })
	}
	if len(got) != 0 {
		t.Fatalf("CheckHost with everything there: %q", got)
	}
}
