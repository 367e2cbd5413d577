package main

import (
	"os"
	"testing"
)

// TestPeerURL: the log store peer URL defaults to the listener (h2c or TLS), uses the host
// name for a wildcard listener, and "none" turns replication off.
func TestPeerURL(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatalf("os.Hostname: %v (the wildcard-listener case needs the host's name)", err)
	}
	for _, tc := range []struct {
		flag, listen string
		tls          bool
		want         string
	}{
		{"", "127.0.0.1:4567", false, "http://127.0.0.1:4567"},
		{"", "10.0.0.5:4567", true, "https://10.0.0.5:4567"},
		{"", "0.0.0.0:4567", false, "http://" + host + ":4567"},
		{"", ":4567", true, "https://" + host + ":4567"},
		{"https://s1:4567/", "0.0.0.0:4567", true, "https://s1:4567"},
		{"none", "127.0.0.1:4567", false, ""},
	} {
		got, err := peerURL(tc.flag, tc.listen, tc.tls)
		if err != nil || got != tc.want {
			t.Errorf("peerURL(%q, %q, %v) = %q, %v; want %q", tc.flag, tc.listen, tc.tls, got, err, tc.want)
		}
	}
	if _, err := peerURL("", "no-port", false); err == nil {
		t.Error("a listen address without a port was accepted")
	}
}
