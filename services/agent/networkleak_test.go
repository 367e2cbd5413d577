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
