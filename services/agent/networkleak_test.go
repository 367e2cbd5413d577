package agent_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent"
)

// netCounts counts what this agent's task networks hold on the host, leaving out what
// other agents of the host (tests running beside this one) hold: namespaces under the
// agent's netns dir, address leases of its bridge and task subnets, veths on its bridges,
// and CNI iptables rules naming its subnets or its tasks.
type netCounts struct{ netns, leases, veths, rules int }

func countNet(t *testing.T, cfg agent.Config, taskIDs []string) netCounts {
	t.Helper()
	var c netCounts
	ents, _ := os.ReadDir(cfg.Network.NetNSDir)
	c.netns = len(ents)
	_, bridgeNet, _ := net.ParseCIDR(cfg.Network.BridgeSubnet)
	_, taskNet, _ := net.ParseCIDR(cfg.Network.TaskSubnet)
	for _, dir := range []string{"/var/lib/cni/networks/berth-bridge", filepath.Join(cfg.DataDir, "network", "ipam", "berth-awsvpc")} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if ip := net.ParseIP(e.Name()); ip != nil && (bridgeNet.Contains(ip) || taskNet.Contains(ip)) {
				c.leases++
			}
		}
	}
	for _, br := range []string{cfg.Network.Bridge, cfg.Network.TaskBridge} {
		out, err := exec.Command("ip", "-o", "link", "show", "master", br).Output()
		if err == nil {
			c.veths += strings.Count(string(out), "\n")
		}
	}
	prefixes := []string{strings.TrimSuffix(bridgeNet.IP.String(), "0"), strings.TrimSuffix(taskNet.IP.String(), "0")}
	for _, table := range []string{"nat", "filter"} {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			t.Fatalf("iptables-save: %v", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "-A") || !strings.Contains(line, "CNI") {
				continue
			}
			mine := false
			for _, k := range append(append([]string{}, prefixes...), taskIDs...) {
				mine = mine || strings.Contains(line, k)
			}
			if mine {
				c.rules++
			}
		}
	}
	return c
}

// TestNetworkNoLeaks starts and stops bridge (dynamic port) and awsvpc tasks many times,
// then hard-stops the agent under running tasks (in process, like kill -9: no teardown
// runs) and starts a new one: the adopted tasks keep their host ports and answer on them,
// and once every task stopped the host holds exactly the namespaces, leases, veths and
// CNI iptables rules it held before.
func TestNetworkNoLeaks(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := netConfig(t, testConfig(t, w, cp, name))
	cfg.StopTimeout = time.Second
	ta := startAgent(t, cfg, cp)

	web := containerDef("web", w.image, "serve", "8080")
	web.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080)}, {ContainerPort: proto.Int32(5353), Protocol: proto.String("udp")}}
	side := containerDef("side", w.image, "sleep", "600")
	bridge := bridgeTaskDef("leak-bridge", web, side)
	vpc := taskDef("leak-vpc", containerDef("main", w.image, "sleep", "601"))
	vpc.NetworkMode = proto.String("awsvpc")
	var ids []string
	newTask := func() string {
		arn := taskARN(name)
		ids = append(ids, arn[strings.LastIndex(arn, "/")+1:])
		return arn
	}
	cycle := func(n int) {
		var arns []string
		for i := range n {
			arn := newTask()
			arns = append(arns, arn)
			if i%2 == 0 {
				cp.assign(t, arn, bridge)
			} else {
				cp.assign(t, arn, vpc)
			}
		}
		for _, arn := range arns {
			cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		}
		for _, arn := range arns {
			cp.stop(t, arn, "UserInitiated")
		}
		for _, arn := range arns {
			cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		}
	}
	cycle(2) // the first task creates the bridges and the plugins' fixed chains
	before := countNet(t, cfg, ids)
	start := time.Now()
	const rounds, perRound = 10, 5
	for range rounds {
		cycle(perRound)
	}
	t.Logf("%d tasks started and stopped in %s", rounds*perRound, time.Since(start).Round(time.Millisecond))
	if after := countNet(t, cfg, ids); after != before {
		t.Fatalf("after %d start/stop cycles: %+v, before %+v", rounds*perRound, after, before)
	}

	// Hard stop under running tasks, then a new agent adopts them.
	keep, gone := newTask(), newTask()
	cp.assign(t, keep, bridge)
	cp.assign(t, gone, vpc)
	st := cp.waitStatus(t, keep, "RUNNING", 60*time.Second)
	cp.waitStatus(t, gone, "RUNNING", 60*time.Second)
	// The counters see a running task's resources (they would miss a leak otherwise).
	if during := countNet(t, cfg, ids); during.netns <= before.netns || during.leases <= before.leases || during.veths <= before.veths || during.rules <= before.rules {
		t.Fatalf("with tasks running: %+v, before %+v", during, before)
	}
	port := containerOf(st, "web").GetNetworkBindings()[0].GetHostPort()
	waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", port))
	ta.stop()
	// While no agent runs, the awsvpc task's container is killed: the new agent must
	// release its network.
	if out, err := exec.Command("pkill", "-KILL", "-f", "berth-testimage sleep 601").CombinedOutput(); err != nil && len(out) > 0 {
		t.Logf("pkill: %v %s", err, out)
	}
	startAgent(t, cfg, cp)
	cp.waitFor(t, 30*time.Second, "second hello", func() bool { return len(cp.hellos) >= 2 })
	cp.assign(t, keep, bridge) // redelivered, as the control plane does
	cp.waitStatus(t, gone, "STOPPED", 30*time.Second)
	waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", port))
	cp.waitFor(t, 10*time.Second, "adopted task reporting its binding", func() bool {
		bs := containerOf(cp.latestLocked(keep), "web").GetNetworkBindings()
		return len(bs) > 0 && bs[0].GetHostPort() == port
	})
	cp.stop(t, keep, "UserInitiated")
	cp.waitStatus(t, keep, "STOPPED", 30*time.Second)
	if after := countNet(t, cfg, ids); after != before {
		t.Fatalf("after the agent's hard stop and restart: %+v, before %+v", after, before)
	}
}

// TestNetworkReapsDeadAgent: an agent is hard-stopped under a running bridge task (a
// dynamic host port) and an awsvpc task, its containers die and its data dir is removed
// (a `berth dev` temp dir, an agent killed and wiped). A second agent of the host, with a
// data dir of its own, starts: it releases what the first left — namespaces, the bridge
// network's host-local leases, veths, CNI iptables rules and host port reservations —
// back to the counts before the tasks, and never touches the running task of a third,
// live agent.
func TestNetworkReapsDeadAgent(t *testing.T) {
	w := newWorld(t)
	hostDir, nsDir := t.TempDir(), t.TempDir()
	shared := func(cfg agent.Config) agent.Config {
		cfg.Network.HostDir, cfg.Network.NetNSDir = hostDir, nsDir
		cfg.StopTimeout = time.Second
		return cfg
	}
	cp1, cp3 := newControlPlane(t), newControlPlane(t)
	name1, name3 := clusterName(t)+"-dead", clusterName(t)+"-live"
	cfg1 := shared(netConfig(t, testConfig(t, w, cp1, name1)))
	cfg3 := shared(netConfig(t, testConfig(t, w, cp3, name3)))
	cfg3.Network.Bridge, cfg3.Network.BridgeSubnet = cfg1.Network.Bridge, cfg1.Network.BridgeSubnet // one host bridge
	ta1 := startAgent(t, cfg1, cp1)
	startAgent(t, cfg3, cp3)

	web := containerDef("web", w.image, "serve", "8093")
	web.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8093)}}
	bridge := bridgeTaskDef("dead-bridge", web)
	vpc := taskDef("dead-vpc", containerDef("main", w.image, "sleep", "603"))
	vpc.NetworkMode = proto.String("awsvpc")
	var ids []string
	newTask := func(cluster string) string {
		arn := taskARN(cluster)
		ids = append(ids, arn[strings.LastIndex(arn, "/")+1:])
		return arn
	}
	// A first task creates the bridges and the plugins' fixed chains.
	warm := newTask(name1)
	cp1.assign(t, warm, bridge)
	cp1.waitStatus(t, warm, "RUNNING", 60*time.Second)
	cp1.stop(t, warm, "UserInitiated")
	cp1.waitStatus(t, warm, "STOPPED", 60*time.Second)
	before := countNet(t, cfg1, ids)
	ports := func() int { e, _ := os.ReadDir(filepath.Join(hostDir, "hostports")); return len(e) }

	// The live agent's task: its network must survive the reaping.
	live := newTask(name3)
	cp3.assign(t, live, bridge)
	lst := cp3.waitStatus(t, live, "RUNNING", 60*time.Second)
	livePort := containerOf(lst, "web").GetNetworkBindings()[0].GetHostPort()
	withLive := countNet(t, cfg1, ids)
	livePorts := ports()

	deadWeb := containerDef("web", w.image, "serve", "8094")
	deadWeb.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8094)}}
	b, v := newTask(name1), newTask(name1)
	cp1.assign(t, b, bridgeTaskDef("dead-bridge2", deadWeb))
	cp1.assign(t, v, vpc)
	st := cp1.waitStatus(t, b, "RUNNING", 60*time.Second)
	cp1.waitStatus(t, v, "RUNNING", 60*time.Second)
	waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", containerOf(st, "web").GetNetworkBindings()[0].GetHostPort()))
	if during := countNet(t, cfg1, ids); during.netns <= withLive.netns || during.leases <= withLive.leases || during.veths <= withLive.veths || during.rules <= withLive.rules {
		t.Fatalf("with the tasks running: %+v, before %+v", during, withLive)
	}
	ta1.stop()
	// The dead agent's containers die (the test's containerd removes them at the end).
	for _, pat := range []string{"berth-testimage sleep 603", "berth-testimage serve 8094"} {
		_ = exec.Command("pkill", "-KILL", "-f", pat).Run()
	}
	if err := os.RemoveAll(cfg1.DataDir); err != nil {
		t.Fatalf("remove the dead agent's data dir: %v", err)
	}

	cp2 := newControlPlane(t)
	cfg2 := shared(netConfig(t, testConfig(t, w, cp2, clusterName(t)+"-new")))
	cfg2.Network.Bridge, cfg2.Network.BridgeSubnet = cfg1.Network.Bridge, cfg1.Network.BridgeSubnet
	startAgent(t, cfg2, cp2)
	cp2.waitFor(t, 30*time.Second, "hello", func() bool { return len(cp2.hellos) >= 1 })
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := countNet(t, cfg1, ids)
		if got == withLive && ports() == livePorts {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a new agent started: %+v and %d host port reservations, want %+v and %d (before the tasks %+v)", got, ports(), withLive, livePorts, before)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitHTTP(t, fmt.Sprintf("127.0.0.1:%d", livePort))
	cp3.stop(t, live, "UserInitiated")
	cp3.waitStatus(t, live, "STOPPED", 30*time.Second)
	if after := countNet(t, cfg1, ids); after != before || ports() != 0 {
		t.Errorf("after the live agent's task stopped: %+v and %d reservations, want %+v and 0", after, ports(), before)
	}
}
