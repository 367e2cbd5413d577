package network

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/containerd/containerd/v2/pkg/netns"
	cnins "github.com/containernetworking/plugins/pkg/ns"
	"path/filepath"
	"strings"
	"testing"
)

// newTestNetwork returns a Network on a bridge and subnets of its own, or skips when the
// machine cannot run CNI (not root, or no plugins: make deps installs
// containernetworking-plugins).
// testPluginDirs are the directories the tests look for the CNI plugins in: those of
// BERTH_CNI_PLUGIN_DIR (comma-separated, as berth dev reads it), then the defaults.
func testPluginDirs() []string {
	var dirs []string
	for _, d := range strings.Split(os.Getenv("BERTH_CNI_PLUGIN_DIR"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	return append(dirs, DefaultPluginDir, "/opt/cni/bin")
}

func newTestNetwork(t *testing.T) *Network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CNI needs root")
	}
	if findPlugin(testPluginDirs(), "bridge") == "" {
		t.Skip("containernetworking-plugins not installed (make deps installs it)")
	}
	dir := t.TempDir()
	k := os.Getpid() % 200
	n, err := New(Config{
		PluginDirs: testPluginDirs(),
		StateDir:   dir, NetNSDir: filepath.Join(dir, "netns"),
		Bridge: fmt.Sprintf("bnt%d", k), BridgeSubnet: fmt.Sprintf("10.%d.0.0/24", 100+k%50),
		TaskBridge: fmt.Sprintf("bnv%d", k), TaskSubnet: fmt.Sprintf("10.%d.1.0/24", 100+k%50),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The bridges outlive the process otherwise, and a later run whose pid maps to the
	// same subnets (k%50) on other bridge names would route them to the stale bridge.
	t.Cleanup(func() {
		for _, br := range []string{n.cfg.Bridge, n.cfg.TaskBridge} {
			_ = exec.Command("ip", "link", "del", br).Run()
		}
	})
	return n
}

func TestSetupTeardownBridgeAndAWSVPC(t *testing.T) {
	n := newTestNetwork(t)
	ctx := context.Background()
	tn, err := n.Setup(ctx, "t1", Bridge, []EndpointRequest{
		{Key: "web", ID: "t1-web", Ports: []PortRequest{{ContainerPort: 80}, {ContainerPort: 53, Protocol: "udp"}}},
		{Key: "db", ID: "t1-db"},
		{Key: "batch", ID: "t1-batch", LoopbackOnly: true, Ports: []PortRequest{{ContainerPort: 9}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := tn.Endpoint("batch"); b.IP != "" || len(b.Bindings) != 0 || b.NetNS == "" {
		t.Errorf("disableNetworking endpoint %+v, want a namespace with loopback only", b)
	}
	web := tn.Endpoint("web")
	if net.ParseIP(web.IP) == nil || web.MAC == "" || len(web.Bindings) != 2 {
		t.Fatalf("web endpoint %+v", web)
	}
	for _, b := range web.Bindings {
		if b.HostPort < int32(n.cfg.PortRange[0]) || b.HostPort > int32(n.cfg.PortRange[1]) {
			t.Errorf("binding %+v outside the dynamic range %v", b, n.cfg.PortRange)
		}
	}
	if tn.Endpoint("db").IP == web.IP {
		t.Errorf("two containers share %s", web.IP)
	}
	// A second Setup of the same task (an adopting agent) returns the same network.
	again, err := n.Setup(ctx, "t1", Bridge, []EndpointRequest{{Key: "web", ID: "t1-web"}, {Key: "db", ID: "t1-db"}, {Key: "batch", ID: "t1-batch", LoopbackOnly: true}})
	if err != nil || again.Endpoint("web").IP != web.IP {
		t.Fatalf("re-setup: %v %+v", err, again)
	}
	// A new Network on the same state (a restarted agent) keeps the ports allocated.
	n2, err := New(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n2.used[portKey("tcp", web.Bindings[0].HostPort)] != "t1" {
		t.Errorf("restarted network lost the port allocation: %v", n2.used)
	}
	vpc, err := n.Setup(ctx, "t2", AWSVPC, []EndpointRequest{{Key: "", ID: "t2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, sub, _ := net.ParseCIDR(n.cfg.TaskSubnet); !sub.Contains(net.ParseIP(vpc.Endpoints[0].IP)) {
		t.Errorf("awsvpc address %s outside %s", vpc.Endpoints[0].IP, n.cfg.TaskSubnet)
	}
	// The host reaches the task address.
	var l net.Listener
	if err := netns.LoadNetNS(vpc.Endpoints[0].NetNS).Do(func(cnins.NetNS) error {
		var err error
		l, err = net.Listen("tcp", vpc.Endpoints[0].IP+":8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = c.Write([]byte("hi"))
			_ = c.Close()
		}
	}()
	if c, err := net.DialTimeout("tcp", vpc.Endpoints[0].IP+":8080", 2*time.Second); err != nil {
		t.Errorf("dial the awsvpc address from the host: %v", err)
	} else {
		_ = c.Close()
	}
	_ = l.Close()
	for _, task := range []string{"t1", "t2"} {
		if err := n.Teardown(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.Tasks()) != 0 || len(n.used) != 0 {
		t.Errorf("left after teardown: %v %v", n.Tasks(), n.used)
	}
	ents, _ := os.ReadDir(n.cfg.NetNSDir)
	if len(ents) != 0 {
		t.Errorf("namespaces left: %v", ents)
	}
}

// TestBridgeUDPPortMapping: a UDP mapping with a dynamic host port delivers datagrams sent
// to the host's address to the listener in the container's namespace.
func TestBridgeUDPPortMapping(t *testing.T) {
	n := newTestNetwork(t)
	ctx := context.Background()
	tn, err := n.Setup(ctx, "udp1", Bridge, []EndpointRequest{{Key: "dns", ID: "udp1-dns", Ports: []PortRequest{{ContainerPort: 5353, Protocol: "udp"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Teardown(ctx, "udp1") }()
	ep := tn.Endpoint("dns")
	var conn net.PacketConn
	if err := netns.LoadNetNS(ep.NetNS).Do(func(cnins.NetNS) error {
		var err error
		conn, err = net.ListenPacket("udp", ":5353")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var hostAddr string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() && !strings.HasPrefix(ip.IP.String(), "10.") {
			hostAddr = ip.IP.String()
			break
		}
	}
	if hostAddr == "" {
		t.Skip("no host address outside the test subnets")
	}
	c, err := net.Dial("udp", net.JoinHostPort(hostAddr, fmt.Sprint(ep.Bindings[0].HostPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 16)
	for range 20 {
		_, _ = c.Write([]byte("ping"))
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if k, _, err := conn.ReadFrom(buf); err == nil && string(buf[:k]) == "ping" {
			return
		}
	}
	t.Fatalf("no datagram reached the container through host port %d/udp", ep.Bindings[0].HostPort)
}
