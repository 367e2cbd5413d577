package network

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCheck finds the plugins present in either of two directories, names each missing
// one with the modes that need it, and reports iptables missing from PATH.
func TestCheck(t *testing.T) {
	a, b, bin := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, names := range map[string][]string{a: {"bridge", "host-local"}, b: {"firewall"}} {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A directory named like a plugin is not one.
	if err := os.Mkdir(filepath.Join(b, "loopback"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	got := Check([]string{a, b})
	var lines []string
	for _, m := range got {
		lines = append(lines, m.String())
	}
	where := a + ", " + b
	want := []string{
		`networkMode bridge unavailable: CNI plugin "portmap" not found in ` + where + ` (apt-get install containernetworking-plugins)`,
		`networkModes bridge, awsvpc and none unavailable: CNI plugin "loopback" not found in ` + where + ` (apt-get install containernetworking-plugins)`,
		`networkModes bridge and awsvpc unavailable: iptables not found in PATH (apt-get install iptables)`,
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("Check:\n got %q\nwant %q", lines, want)
	}

	// Everything there: nothing missing.
	for _, n := range []string{"portmap", "loopback"} {
		if err := os.WriteFile(filepath.Join(a, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "iptables"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Check([]string{a, b}); len(got) != 0 {
		t.Fatalf("Check with every plugin and iptables: %v", got)
	}
}
