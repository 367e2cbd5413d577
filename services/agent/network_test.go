package agent_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/network"
)

// netSeq gives each networked test agent a bridge and subnets of its own, so the tests of
// this package (and several agents of one test) never share addresses.
var netSeq = func() func() int {
	n := os.Getpid() % 40 * 5
	return func() int { n++; return n }
}()

// netConfig returns cfg with CNI networking on a bridge and subnets of its own, or skips
// when the machine cannot run CNI (not root, or no plugins: make deps installs
// containernetworking-plugins).
func netConfig(t *testing.T, cfg agent.Config) agent.Config {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CNI networking needs root")
	}
	// The plugin directories: BERTH_CNI_PLUGIN_DIR's (comma-separated, as berth dev reads
	// it), then the default.
	var dirs []string
	for _, d := range strings.Split(os.Getenv("BERTH_CNI_PLUGIN_DIR"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, network.DefaultPluginDir)
	found := false
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			found = true
		}
	}
	if !found {
		t.Skipf("containernetworking-plugins not installed in %s (make deps installs it)", strings.Join(dirs, ", "))
	}
	k := netSeq()
	cfg.Network = network.Config{
		PluginDirs:   dirs,
		NetNSDir:     filepath.Join(cfg.DataDir, "netns"),
		Bridge:       fmt.Sprintf("bt%d", k),
		BridgeSubnet: fmt.Sprintf("10.%d.%d.0/24", 150+k/250, k%250),
		TaskBridge:   fmt.Sprintf("bv%d", k),
		TaskSubnet:   fmt.Sprintf("10.%d.%d.0/24", 200+k/250, k%250),
	}
	t.Cleanup(func() {
		for _, br := range []string{cfg.Network.Bridge, cfg.Network.TaskBridge} {
			_ = exec.Command("ip", "link", "del", br).Run()
		}
	})
	return cfg
}

func httpGet(addr string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// waitHTTP polls addr until it answers 200 "ok".
func waitHTTP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, err := httpGet(addr)
		if err == nil && strings.TrimSpace(body) == "ok" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET http://%s/: %q %v", addr, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func bridgeTaskDef(family string, ctrs ...*ecsv1.ContainerDefinition) *ecsv1.TaskDefinition {
	td := taskDef(family, ctrs...)
	td.NetworkMode = proto.String("bridge")
	return td
}

func hostIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			return ip.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on the host")
	return ""
}

// TestBridgeNetworking runs two copies of a bridge task whose port mapping has no hostPort
// on one agent: both reach RUNNING with different dynamic host ports from the range,
// reported in networkBindings, each answering HTTP on its port; a linked container
// resolves its peer by name; a stop releases the ports and namespaces.
func TestBridgeNetworking(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := netConfig(t, testConfig(t, w, cp, name))
	startAgent(t, cfg, cp)

	web := containerDef("web", w.image, "serve", "8080")
	web.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080), Protocol: proto.String("tcp")}}
	td := bridgeTaskDef("web", web)
	var arns []string
	ports := map[int32]bool{}
	for range 2 {
		arn := taskARN(name)
		arns = append(arns, arn)
		cp.assign(t, arn, td)
	}
	for _, arn := range arns {
		st := cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		bs := containerOf(st, "web").GetNetworkBindings()
		if len(bs) != 1 || bs[0].GetContainerPort() != 8080 || bs[0].GetProtocol() != "tcp" || bs[0].GetBindIp() != "0.0.0.0" {
			t.Fatalf("networkBindings = %v", bs)
		}
		hp := bs[0].GetHostPort()
		if hp < 32768 || hp > 65535 || hp == 8080 {
			t.Errorf("hostPort %d is not a dynamic port", hp)
		}
		ports[hp] = true
		waitHTTP(t, fmt.Sprintf("%s:%d", hostIP(t), hp))
		waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", hp))
	}
	if len(ports) != 2 {
		t.Fatalf("both copies got host port %v", ports)
	}

	// links: the client reaches the server by the link's alias and by name; extraHosts
	// and dnsServers land in its files.
	server := containerDef("server", w.image, "serve", "8081")
	client := containerDef("client", w.image, "sleep", "3600")
	client.Links = []string{"server:backend"}
	client.ExtraHosts = []*ecsv1.HostEntry{{Hostname: proto.String("legacy.internal"), IpAddress: proto.String("192.0.2.10")}}
	client.DnsServers = []string{"192.0.2.53"}
	client.DnsSearchDomains = []string{"corp.example"}
	client.HealthCheck = &ecsv1.HealthCheck{Command: []string{"CMD", "/berth-testimage", "check", "http://backend:8081/"}, Interval: proto.Int32(5), Retries: proto.Int32(10)}
	client.DependsOn = []*ecsv1.ContainerDependency{{ContainerName: proto.String("server"), Condition: proto.String("START")}}
	linked := taskARN(name)
	cp.assign(t, linked, bridgeTaskDef("linked", server, client))
	cp.waitFor(t, 60*time.Second, "client healthy through the link", func() bool {
		c := containerOf(cp.latestLocked(linked), "client")
		return c.GetHealthStatus() == "HEALTHY"
	})
	for _, arn := range append(arns, linked) {
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	}
	for p := range ports {
		if _, err := httpGet(fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			t.Errorf("port %d still answers after the task stopped", p)
		}
	}
	ents, _ := os.ReadDir(cfg.Network.NetNSDir)
	if len(ents) != 0 {
		t.Errorf("namespaces left after the tasks stopped: %d", len(ents))
	}
}

// TestAWSVPCNetworking runs an awsvpc task of two containers on one agent: they share
// the task's namespace (the probe's health check reaches the server on localhost), the
// host reaches the server on the task's address, the task reports its ENI ATTACHED with
// AWS's details and hostPort = containerPort bindings, then DELETED once stopped. A task
// on an agent without a task subnet stops with a ResourceInitializationError, never
// RUNNING without its network.
func TestAWSVPCNetworking(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := netConfig(t, testConfig(t, w, cp, name))
	startAgent(t, cfg, cp)

	web := containerDef("web", w.image, "serve", "8080")
	web.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080), HostPort: proto.Int32(8080), Protocol: proto.String("tcp")}}
	probe := containerDef("probe", w.image, "sleep", "3600")
	probe.HealthCheck = &ecsv1.HealthCheck{Command: []string{"CMD", "/berth-testimage", "check", "http://localhost:8080/"}, Interval: proto.Int32(5), Retries: proto.Int32(10)}
	td := taskDef("vpc", web, probe)
	td.NetworkMode = proto.String("awsvpc")
	arn := taskARN(name)
	cp.assign(t, arn, td)
	st := cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
	if len(st.GetAttachments()) != 1 {
		t.Fatalf("attachments = %v", st.GetAttachments())
	}
	att := st.GetAttachments()[0]
	details := map[string]string{}
	for _, d := range att.GetDetails() {
		details[d.GetName()] = d.GetValue()
	}
	ip := details["privateIPv4Address"]
	_, sub, _ := net.ParseCIDR(cfg.Network.TaskSubnet)
	if att.GetType() != "ElasticNetworkInterface" || att.GetStatus() != "ATTACHED" || net.ParseIP(ip) == nil || !sub.Contains(net.ParseIP(ip)) ||
		details["macAddress"] == "" || !strings.HasPrefix(details["networkInterfaceId"], "eni-") || !strings.HasPrefix(details["privateDnsName"], "ip-") {
		t.Fatalf("attachment %v", att)
	}
	for _, c := range []string{"web", "probe"} {
		ni := containerOf(st, c).GetNetworkInterfaces()
		if len(ni) != 1 || ni[0].GetPrivateIpv4Address() != ip || ni[0].GetAttachmentId() != att.GetId() {
			t.Errorf("%s networkInterfaces = %v", c, ni)
		}
	}
	if bs := containerOf(st, "web").GetNetworkBindings(); len(bs) != 1 || bs[0].GetHostPort() != 8080 || bs[0].GetContainerPort() != 8080 {
		t.Errorf("web networkBindings = %v", bs)
	}
	waitHTTP(t, ip+":8080")
	cp.waitFor(t, 60*time.Second, "probe healthy over localhost", func() bool {
		return containerOf(cp.latestLocked(arn), "probe").GetHealthStatus() == "HEALTHY"
	})
	cp.stop(t, arn, "UserInitiated")
	stopped := cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	if a := stopped.GetAttachments(); len(a) != 1 || a[0].GetStatus() != "DELETED" {
		t.Errorf("attachments after STOPPED = %v", a)
	}
	if _, err := httpGet(ip + ":8080"); err == nil {
		t.Errorf("the task address still answers after STOPPED")
	}

	// An agent without a task subnet cannot give the task its network.
	cp2 := newControlPlane(t)
	name2 := clusterName(t) + "-nosub"
	cfg2 := netConfig(t, testConfig(t, w, cp2, name2))
	cfg2.Network.TaskSubnet = ""
	startAgent(t, cfg2, cp2)
	arn2 := taskARN(name2)
	cp2.assign(t, arn2, td)
	st2 := cp2.waitStatus(t, arn2, "STOPPED", 60*time.Second)
	if st2.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st2.GetStoppedReason(), "ResourceInitializationError: ") {
		t.Errorf("stopCode %q stoppedReason %q", st2.GetStopCode(), st2.GetStoppedReason())
	}
	for _, s := range cp2.statesOf(arn2) {
		if s.GetLastStatus() == "RUNNING" {
			t.Errorf("task without a network reported RUNNING")
		}
	}
}

// TestLinkLocalEndpoints: on an agent with CNI networking, a bridge task, an awsvpc task
// and a task without networkMode (bridge) with a taskRoleArn get AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and
// ECS_CONTAINER_METADATA_URI_V4 on 169.254.170.2, and read their credentials and
// metadata v4 from inside their own namespace (the host's DNAT to the agent's loopback
// listener). The first task network installs the redirect rules and the agent's stop
// removes them; an agent that finds the rules of one that died replaces them instead of
// adding copies.
func TestLinkLocalEndpoints(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := netConfig(t, testConfig(t, w, cp, name))
	ta := startAgent(t, cfg, cp)

	// rules counts the redirect rules of this agent's bridges (the DNATs to target only,
	// when given).
	rules := func(target string) int {
		n := 0
		for _, table := range []string{"nat", "filter"} {
			out, err := exec.Command("iptables-save", "-t", table).Output()
			if err != nil {
				t.Fatalf("iptables-save: %v", err)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "berth-task-endpoints") && (target == "" || strings.Contains(l, "--to-destination "+target)) && (strings.Contains(l, "-i "+cfg.Network.Bridge+" ") || strings.Contains(l, "-i "+cfg.Network.TaskBridge+" ")) {
					n++
				}
			}
		}
		return n
	}
	if n := rules(""); n != 0 {
		t.Errorf("%d redirect rules before any bridge or awsvpc task, want 0", n)
	}

	probe := func(family, mode string) {
		t.Helper()
		c := containerDef("main", w.image, "get",
			"http://169.254.170.2${AWS_CONTAINER_CREDENTIALS_RELATIVE_URI}", "${ECS_CONTAINER_METADATA_URI_V4}", "${ECS_CONTAINER_METADATA_URI_V4}/task")
		td := taskDef(family, c)
		td.NetworkMode = proto.String(mode)
		if mode == "" {
			td.NetworkMode = nil // bridge, the EC2 default
		}
		td.TaskRoleArn = proto.String("arn:aws:iam::000000000000:role/app")
		arn := taskARN(name)
		cp.assign(t, arn, td)
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		out := texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn}), "stdout")
		if code := containerOf(st, "main").GetExitCode(); code != 0 || len(out) != 3 {
			t.Fatalf("%s task: exit %d, output %q (reason %q)", mode, code, out, st.GetStoppedReason())
		}
		var creds struct{ AccessKeyId, SecretAccessKey, Token, Expiration, RoleArn string }
		if f := strings.SplitN(out[0], " ", 3); !strings.HasPrefix(f[0], "http://169.254.170.2/v2/credentials/") || f[1] != "200" ||
			json.Unmarshal([]byte(f[2]), &creds) != nil || !strings.HasPrefix(creds.AccessKeyId, "ASIATEST") || creds.Token != "token" || creds.RoleArn == "" {
			t.Errorf("%s task credentials: %q", mode, out[0])
		}
		var ctr struct{ Name string }
		if f := strings.SplitN(out[1], " ", 3); !strings.HasPrefix(f[0], "http://169.254.170.2/v4/") || f[1] != "200" ||
			json.Unmarshal([]byte(f[2]), &ctr) != nil || ctr.Name != "main" {
			t.Errorf("%s task metadata: %q", mode, out[1])
		}
		var task struct{ TaskARN, Family string }
		if f := strings.SplitN(out[2], " ", 3); f[1] != "200" || json.Unmarshal([]byte(f[2]), &task) != nil || task.TaskARN != arn || task.Family != family {
			t.Errorf("%s task metadata /task: %q", mode, out[2])
		}
	}
	probe("ll-bridge", "bridge")
	probe("ll-vpc", "awsvpc")
	probe("ll-default", "")

	// A DNAT for the awsvpc bridge (the bridge tasks' own, one per task address on the
	// shared bridge, went with the tasks) and a loopback guard per bridge; the agent's
	// stop removes them.
	if n := rules(""); n != 3 {
		t.Errorf("%d redirect rules with the agent running, want 3", n)
	}
	ta.stop()
	if n := rules(""); n != 0 {
		t.Errorf("%d redirect rules left after the agent stopped", n)
	}
	// An agent killed without its cleanup leaves its rules (here: a network on the same
	// state dir, so the same owner): the next one on that data dir replaces them.
	nw, err := network.New(network.Config{PluginDirs: cfg.Network.PluginDirs, StateDir: filepath.Join(cfg.DataDir, "network"), NetNSDir: cfg.Network.NetNSDir,
		Bridge: cfg.Network.Bridge, TaskBridge: cfg.Network.TaskBridge, BridgeSubnet: cfg.Network.BridgeSubnet})
	if err != nil {
		t.Fatal(err)
	}
	if err := nw.RouteLinkLocal("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if err := nw.RouteLinkLocal("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if n := rules("127.0.0.1:1"); n != 1 {
		t.Fatalf("%d stale DNAT rules, want 1 (the awsvpc bridge's)", n)
	}
	ta = startAgent(t, cfg, cp)
	probe("ll-bridge-again", "bridge") // the first task network installs the redirect
	if addr := ta.a.EndpointAddr(); rules(addr) != 1 || rules("") != 3 || rules("127.0.0.1:1") != 0 {
		t.Errorf("after the new agent's first bridge task: %d DNAT rules to %s, %d stale, %d rules in all; want 1, 0 and 3", rules(addr), addr, rules("127.0.0.1:1"), rules(""))
	}
	ta.stop()
	if n := rules(""); n != 0 {
		t.Errorf("%d redirect rules left after the second agent stopped", n)
	}
}

// TestBridgePortRange runs two copies of a bridge task whose container maps
// containerPortRange 9100-9102 and serves HTTP on each of those ports: each copy reports
// one networkBinding with containerPortRange and a hostPortRange of three contiguous
// ports of the dynamic range, the two copies' ranges do not overlap, and every host port
// of each range answers (reaching the matching container port). A stop releases the
// ports and their host-wide reservations.
func TestBridgePortRange(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := netConfig(t, testConfig(t, w, cp, name))
	cfg.Network.HostDir = t.TempDir()
	startAgent(t, cfg, cp)

	web := containerDef("web", w.image, "serve", "9100-9102")
	web.PortMappings = []*ecsv1.PortMapping{{ContainerPortRange: proto.String("9100-9102"), Protocol: proto.String("tcp")}}
	td := bridgeTaskDef("range", web)
	var arns []string
	hostPorts := map[int32]string{}
	for range 2 {
		arn := taskARN(name)
		arns = append(arns, arn)
		cp.assign(t, arn, td)
	}
	for _, arn := range arns {
		st := cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		bs := containerOf(st, "web").GetNetworkBindings()
		if len(bs) != 1 || bs[0].GetContainerPortRange() != "9100-9102" || bs[0].GetProtocol() != "tcp" || bs[0].GetBindIp() != "0.0.0.0" || bs[0].ContainerPort != nil || bs[0].HostPort != nil {
			t.Fatalf("networkBindings = %v", bs)
		}
		lo, hi, ok := network.ParseRange(bs[0].GetHostPortRange())
		if !ok || hi-lo != 2 || lo < 32768 || hi > 65535 {
			t.Fatalf("hostPortRange %q is not 3 ports of the dynamic range", bs[0].GetHostPortRange())
		}
		for p := lo; p <= hi; p++ {
			if other, dup := hostPorts[p]; dup {
				t.Fatalf("host port %d given to %s and %s", p, other, arn)
			}
			hostPorts[p] = arn
			waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", p))
			waitHTTP(t, fmt.Sprintf("%s:%d", hostIP(t), p))
			if _, err := os.Stat(filepath.Join(cfg.Network.HostDir, "hostports", fmt.Sprintf("tcp-%d", p))); err != nil {
				t.Errorf("host port %d not reserved host-wide: %v", p, err)
			}
		}
	}
	for _, arn := range arns {
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	}
	for p := range hostPorts {
		if _, err := httpGet(fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			t.Errorf("port %d still answers after the task stopped", p)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(cfg.Network.HostDir, "hostports")); len(ents) != 0 {
		t.Errorf("host port reservations left after the tasks stopped: %d", len(ents))
	}
}

// TestTwoInstallationsTaskSubnets runs two agents on this host with different data dirs
// whose control planes (two Berth installations, each with its own etcd) both hand out
// the same task subnet first: the second agent finds it claimed by the first, registers
// again reporting it taken, and gets the next one; each gets a bridge of its own; an
// awsvpc task on each reaches RUNNING with an address of its agent's subnet and answers
// from the host.
func TestTwoInstallationsTaskSubnets(t *testing.T) {
	w := newWorld(t)
	hostDir := t.TempDir()
	k := netSeq()
	subnets := []string{fmt.Sprintf("10.%d.%d.0/24", 230+k/250, k%250), fmt.Sprintf("10.%d.%d.0/24", 240+k/250, k%250)}
	type inst struct {
		cp   *controlPlane
		name string
		cfg  agent.Config
	}
	var insts []inst
	for i := range 2 {
		cp := newControlPlane(t)
		cp.taskSubnets = subnets
		name := fmt.Sprintf("%s-%d", clusterName(t), i)
		cfg := netConfig(t, testConfig(t, w, cp, name))
		cfg.Network.TaskSubnet, cfg.Network.TaskBridge = "", "" // allocated by the control plane
		cfg.Network.HostDir = hostDir
		t.Cleanup(func() {
			for _, s := range subnets {
				_ = exec.Command("ip", "link", "del", network.TaskBridgeName(s)).Run()
			}
		})
		startAgent(t, cfg, cp)
		// The first agent's subnet is claimed before the second registers.
		cp.waitFor(t, 30*time.Second, "hello", func() bool { return len(cp.hellos) >= 1 })
		insts = append(insts, inst{cp, name, cfg})
	}
	insts[1].cp.mu.Lock()
	regs := insts[1].cp.registrations
	if len(regs) == 0 || !slices.Contains(regs[len(regs)-1].GetTakenTaskSubnets(), subnets[0]) {
		t.Errorf("second agent's registration did not report %s taken: %v", subnets[0], regs)
	}
	insts[1].cp.mu.Unlock()
	for i, in := range insts {
		web := containerDef("web", w.image, "serve", "8080")
		web.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080), Protocol: proto.String("tcp")}}
		td := taskDef("vpc", web)
		td.NetworkMode = proto.String("awsvpc")
		arn := taskARN(in.name)
		in.cp.assign(t, arn, td)
		st := in.cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		ip := containerOf(st, "web").GetNetworkInterfaces()[0].GetPrivateIpv4Address()
		_, sub, _ := net.ParseCIDR(subnets[i])
		if !sub.Contains(net.ParseIP(ip)) {
			t.Fatalf("agent %d's task has address %s, want one of %s", i, ip, subnets[i])
		}
		if _, err := net.InterfaceByName(network.TaskBridgeName(subnets[i])); err != nil {
			t.Errorf("agent %d has no bridge %s: %v", i, network.TaskBridgeName(subnets[i]), err)
		}
		waitHTTP(t, ip+":8080")
		t.Cleanup(func() {
			in.cp.stop(t, arn, "UserInitiated")
			in.cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
		})
	}
}

// TestBridgeStaticHostPortHeld: a bridge task's hostPort is held while the task runs (a
// host process cannot bind it), and a hostPort a host process already has fails the
// task's start, naming the port, instead of taking the process's connections over (as
// Docker's "port is already allocated" does); the process keeps answering.
func TestBridgeStaticHostPortHeld(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := netConfig(t, testConfig(t, w, cp, name))
	startAgent(t, cfg, cp)

	freePort := func() int32 {
		l, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return int32(l.Addr().(*net.TCPAddr).Port)
	}
	withHostPort := func(port int32) *ecsv1.TaskDefinition {
		web := containerDef("web", w.image, "serve", "8080")
		web.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080), HostPort: proto.Int32(port), Protocol: proto.String("tcp")}}
		return bridgeTaskDef("web", web)
	}

	// Free: the task runs, answers on it, and the port is held.
	free := freePort()
	arn := taskARN(name)
	cp.assign(t, arn, withHostPort(free))
	cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
	waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", free))
	if l, err := net.Listen("tcp", fmt.Sprintf(":%d", free)); err == nil {
		l.Close()
		t.Errorf("a host process could bind hostPort %d while the task publishes it", free)
	}
	cp.stop(t, arn, "UserInitiated")
	cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
	cp.waitFor(t, 30*time.Second, "hostPort released once the task stopped", func() bool {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", free))
		if err == nil {
			l.Close()
		}
		return err == nil
	})

	// Taken by a host process: the task fails to start and the process keeps its port.
	host, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host process\n"))
			c.Close()
		}
	}()
	taken := int32(host.Addr().(*net.TCPAddr).Port)
	arn2 := taskARN(name)
	cp.assign(t, arn2, withHostPort(taken))
	st := cp.waitStatus(t, arn2, "STOPPED", 60*time.Second)
	if !strings.Contains(st.GetStoppedReason(), fmt.Sprintf("host port %d/tcp is already in use", taken)) {
		t.Errorf("stoppedReason = %q, want the port named as in use", st.GetStoppedReason())
	}
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", taken), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 64)
	n, _ := c.Read(b)
	if got := string(b[:n]); got != "host process\n" {
		t.Errorf("the host process's port answered %q after the refused task", got)
	}
}
