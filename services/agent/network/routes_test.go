package network

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/netns"
	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// twoHosts is the test's world: two "hosts" (network namespaces joined by a veth pair,
// as two machines on one L2 segment) each with one awsvpc "task" (a namespace behind a
// veth, its address in the host's task subnet, default route via the host).
type twoHosts struct {
	hostA, hostB, taskA, taskB string // namespace paths
}

const (
	rtHostA, rtHostB = "192.168.240.1", "192.168.240.2"
	rtSubA, rtSubB   = "10.241.1.0/24", "10.241.2.0/24"
	rtTaskA, rtTaskB = "10.241.1.5", "10.241.2.5"
)

func inNS(t *testing.T, path string, f func() error) {
	t.Helper()
	if err := netns.LoadNetNS(path).Do(func(cnins.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

func newTwoHosts(t *testing.T) *twoHosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces and routes need root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables not installed (make deps installs it)")
	}
	dir := t.TempDir()
	w := &twoHosts{}
	for _, p := range []*string{&w.hostA, &w.hostB, &w.taskA, &w.taskB} {
		path, err := newNetNS(dir, "routestest")
		if err != nil {
			t.Fatal(err)
		}
		*p = path
		t.Cleanup(func() { _ = netns.LoadNetNS(path).Remove() })
	}
	nsFD := func(path string) int {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return int(f.Fd())
	}
	addr := func(link netlink.Link, cidr string) {
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.AddrAdd(link, a); err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
	}
	// veth name in ns "from" ↔ peer in ns "to", made inside "from".
	pair := func(from, name, to, peer string) {
		inNS(t, from, func() error {
			return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(nsFD(to))})
		})
	}
	pair(w.hostA, "wire", w.hostB, "wire")
	pair(w.hostA, "vtask", w.taskA, "eth0")
	pair(w.hostB, "vtask", w.taskB, "eth0")
	host := func(ns, hostAddr, sub string) {
		inNS(t, ns, func() error {
			wire, _ := netlink.LinkByName("wire")
			addr(wire, hostAddr+"/24")
			vt, _ := netlink.LinkByName("vtask")
			_, n, _ := net.ParseCIDR(sub)
			gw := n.IP.To4()
			gw[3] = 1
			addr(vt, gw.String()+"/24")
			lo, _ := netlink.LinkByName("lo")
			_ = netlink.LinkSetUp(lo)
			if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
				return err
			}
			// As on a Docker host: nothing is forwarded unless a rule accepts it. And as
			// the bridge plugin's ipMasq: tasks leave masqueraded behind the host.
			if err := iptables("-P", "FORWARD", "DROP"); err != nil {
				return err
			}
			return iptables("-t", "nat", "-A", "POSTROUTING", "-s", sub, "!", "-d", sub, "-j", "MASQUERADE")
		})
	}
	host(w.hostA, rtHostA, rtSubA)
	host(w.hostB, rtHostB, rtSubB)
	task := func(ns, ip, sub string) {
		inNS(t, ns, func() error {
			eth, _ := netlink.LinkByName("eth0")
			addr(eth, ip+"/24")
			lo, _ := netlink.LinkByName("lo")
			_ = netlink.LinkSetUp(lo)
			_, n, _ := net.ParseCIDR(sub)
			gw := n.IP.To4()
			gw[3] = 1
			return netlink.RouteAdd(&netlink.Route{Gw: gw})
		})
	}
	task(w.taskA, rtTaskA, rtSubA)
	task(w.taskB, rtTaskB, rtSubB)
	return w
}

// serve listens on port in ns and answers each connection with the caller's address as
// the server sees it.
func serve(t *testing.T, ns, addr string) {
	t.Helper()
	var ln net.Listener
	inNS(t, ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = io.WriteString(c, host)
			c.Close()
		}
	}()
}

// fetch connects to addr from ns and returns what the server wrote: the source address
// it saw.
func fetch(t *testing.T, ns, addr string) (string, error) {
	t.Helper()
	var out string
	var ferr error
	inNS(t, ns, func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			ferr = err
			return nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		out, ferr = string(b), err
		return nil
	})
	return out, ferr
}

// TestPeerRoutesBetweenTwoHosts proves host-gateway routing between two hosts' task
// subnets on real namespaces, routes and iptables: before SyncPeerRoutes the task on
// host A cannot reach the task on host B; after it, the task on A and host A itself reach
// B's task, which sees A's task's own address (no NAT between task subnets) and host A's
// address; the routes carry PeerRouteProtocol; a changed peer address replaces the route;
// an empty list removes routes and rules, and a foreign route to a peer subnet is never
// replaced.
func TestPeerRoutesBetweenTwoHosts(t *testing.T) {
	w := newTwoHosts(t)
	serve(t, w.taskB, rtTaskB+":8080")
	target := rtTaskB + ":8080"

	if _, err := fetch(t, w.taskA, target); err == nil {
		t.Fatal("task A reached task B with no route between the hosts")
	}
	sync := func(ns, own string, peers []PeerRoute) {
		t.Helper()
		inNS(t, ns, func() error {
			if _, err := syncRoutes(own, peers); err != nil {
				return err
			}
			routed, _ := PeerRoutes()
			return syncPeerRules(own, routed)
		})
	}
	sync(w.hostA, rtSubA, []PeerRoute{{Subnet: rtSubB, Via: rtHostB}})
	sync(w.hostB, rtSubB, []PeerRoute{{Subnet: rtSubA, Via: rtHostA}})

	got, err := fetch(t, w.taskA, target)
	if err != nil || got != rtTaskA {
		t.Fatalf("task A → task B: saw source %q, err %v; want task A's own address %s", got, err, rtTaskA)
	}
	got, err = fetch(t, w.hostA, target)
	if err != nil || got != rtHostA {
		t.Fatalf("host A → task B: saw source %q, err %v; want %s", got, err, rtHostA)
	}
	inNS(t, w.hostA, func() error {
		rs, err := PeerRoutes()
		if err != nil {
			return err
		}
		if len(rs) != 1 || rs[0] != (PeerRoute{Subnet: rtSubB, Via: rtHostB}) {
			return fmt.Errorf("host A's peer routes %v", rs)
		}
		out, err := exec.Command("iptables", "-t", "nat", "-S", "POSTROUTING").Output()
		if err != nil {
			return err
		}
		if !strings.Contains(strings.Split(string(out), "\n")[1], PeerChain(rtSubA)) {
			return fmt.Errorf("the peer chain is not first in nat POSTROUTING:\n%s", out)
		}
		return nil
	})
	// Idempotent: a second sync changes nothing and adds no duplicate jump.
	sync(w.hostA, rtSubA, []PeerRoute{{Subnet: rtSubB, Via: rtHostB}})
	inNS(t, w.hostA, func() error {
		out, err := exec.Command("iptables", "-S", "FORWARD").Output()
		if err != nil {
			return err
		}
		if n := strings.Count(string(out), "-j "+PeerChain(rtSubA)); n != 1 {
			return fmt.Errorf("%d jumps to the peer chain in FORWARD:\n%s", n, out)
		}
		return nil
	})

	// The peer moves to another address: the route is replaced.
	inNS(t, w.hostA, func() error {
		wire, _ := netlink.LinkByName("wire")
		a, _ := netlink.ParseAddr("192.168.240.9/24")
		return netlink.AddrAdd(wire, a)
	})
	sync(w.hostA, rtSubA, []PeerRoute{{Subnet: rtSubB, Via: "192.168.240.3"}})
	inNS(t, w.hostA, func() error {
		rs, err := PeerRoutes()
		if err != nil {
			return err
		}
		if len(rs) != 1 || rs[0].Via != "192.168.240.3" {
			return fmt.Errorf("after the move: %v", rs)
		}
		return nil
	})

	// Gone from the list: route and rules removed, task B unreachable again.
	sync(w.hostA, rtSubA, nil)
	inNS(t, w.hostA, func() error {
		rs, err := PeerRoutes()
		if err != nil || len(rs) != 0 {
			return fmt.Errorf("routes left: %v %v", rs, err)
		}
		out, err := exec.Command("iptables", "-S", PeerChain(rtSubA)).Output()
		if err != nil {
			return err
		}
		if strings.Contains(string(out), "-A ") {
			return fmt.Errorf("rules left:\n%s", out)
		}
		return nil
	})
	if _, err := fetch(t, w.taskA, target); err == nil {
		t.Fatal("task A still reaches task B after its peer route was removed")
	}

	// Peers on this host, loopback or overlapping, and a subnet the host already routes
	// otherwise: skipped, never installed.
	inNS(t, w.hostA, func() error {
		vt, _ := netlink.LinkByName("vtask")
		_, other, _ := net.ParseCIDR("10.241.7.0/24")
		if err := netlink.RouteAdd(&netlink.Route{Dst: other, LinkIndex: vt.Attrs().Index}); err != nil {
			return err
		}
		routed, err := syncRoutes(rtSubA, []PeerRoute{
			{Subnet: "10.241.9.0/24", Via: rtHostA},
			{Subnet: "10.241.8.0/24", Via: "127.0.0.1"},
			{Subnet: "10.241.1.128/25", Via: rtHostB},
			{Subnet: "10.241.7.0/24", Via: rtHostB},
			{Subnet: rtSubB, Via: rtHostB},
		})
		if err == nil || !strings.Contains(err.Error(), "already routes") || !strings.Contains(err.Error(), "overlaps") || !strings.Contains(err.Error(), "127.0.0.1") {
			return fmt.Errorf("want errors naming the refused peers, got %v", err)
		}
		if len(routed) != 1 || routed[0].Subnet != rtSubB {
			return fmt.Errorf("routed %v, want only %s", routed, rtSubB)
		}
		rs, _ := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: other}, netlink.RT_FILTER_DST)
		if len(rs) != 1 || rs[0].Protocol == PeerRouteProtocol {
			return fmt.Errorf("the foreign route to %s was touched: %v", other, rs)
		}
		return nil
	})
}
