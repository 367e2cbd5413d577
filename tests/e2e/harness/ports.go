package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports below the kernel's ephemeral range. A port picked by listening on ":0" and
// closing is free only until someone binds it, and in a package whose tests run in
// parallel that someone is often another stack: every ":0" listener and every outgoing
// connection draws from the ephemeral range (docker-proxy then failed with "address
// already in use" on a compose port another test's connection held). Ports below
// ip_local_port_range are never handed out by the kernel, so between FreePort and the
// stack's bind only another FreePort could take one, and this process never returns a
// port twice.
const lowestPort = 10000

var ports struct {
	sync.Mutex
	next, end int
}

// FreePort returns a loopback TCP port on which nothing listens, taken from below the
// kernel's ephemeral range (see lowestPort); it never returns the same port twice in
// one process. Each process starts at a random point of the range, so test packages
// running side by side rarely probe the same ports, and a port some process holds is
// skipped. It fails t when the whole range is in use.
func FreePort(t testing.TB) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.end == 0 {
		ports.end = ephemeralStart()
		ports.next = lowestPort + rand.IntN(ports.end-lowestPort)
	}
	for range ports.end - lowestPort {
		p := ports.next
		ports.next++
		if ports.next >= ports.end {
			ports.next = lowestPort
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free TCP port in [%d, %d)", lowestPort, ports.end)
	return 0
}

// FreeAddr is FreePort as a "127.0.0.1:port" address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// ephemeralStart returns the first port of the kernel's ephemeral range (Linux
// /proc/sys/net/ipv4/ip_local_port_range), 32768 when it cannot be read or leaves no
// room below it.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lowestPort+1000 {
				return n
			}
		}
	}
	return 32768
}
