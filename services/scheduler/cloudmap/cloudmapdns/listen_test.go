package cloudmapdns

import (
	"net"
	"strings"
	"testing"
)

// TestListenPair: an ephemeral address gets UDP and TCP on one port; a port the caller
// chose whose TCP side is taken fails instead of moving to another port.
func TestListenPair(t *testing.T) {
	pc, l, err := listenPair("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if pc.LocalAddr().String() != l.Addr().String() {
		t.Errorf("UDP on %s, TCP on %s: want one port", pc.LocalAddr(), l.Addr())
	}
	pc.Close()
	l.Close()

	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if pc, l, err := listenPair(held.Addr().String()); err == nil {
		pc.Close()
		l.Close()
		t.Fatalf("listenPair(%s) with its TCP port held succeeded", held.Addr())
	} else if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("listenPair with its TCP port held: %v", err)
	}
}
