package network

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/pkg/netns"
	"github.com/containernetworking/cni/libcni"
)

// This file is what the Berth agents of one host share and must not fight over: the
// awsvpc task subnets (each installation has its own etcd, so two of them may be given
// the same /24), the dynamic host ports (portmap publishes them with DNAT rules, no
// socket a second agent could see), and what an agent leaves behind when it is killed or
// its data dir is removed (namespaces, the plugins' leases, rules and veths). Everything
// an agent creates carries its owner tag, a hash of its state dir.

// DefaultCNICacheDir is where libcni (go-cni) caches each network it set up: the
// configuration, the container id, the namespace and the result DEL needs.
const DefaultCNICacheDir = "/var/lib/cni"

// ErrSubnetTaken is wrapped by the errors of New and SetTaskSubnet when the task subnet
// overlaps one another agent of the host claimed or an interface's network: the agent
// registers again, reporting it in TakenSubnets, to be given another.
var ErrSubnetTaken = errors.New("task subnet taken on this host")

// ownerTag returns the tag of the agent whose network state is stateDir: 8 hex digits.
func ownerTag(stateDir string) string {
	h := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(h[:4])
}

// TaskBridgeName returns the Linux bridge of the awsvpc task subnet cidr: bv- and the
// subnet's address and prefix in hex, e.g. bv-0af00300-18 for 10.240.3.0/24 (at most 15
// characters, as Linux wants). Two installations on one host have different subnets, so
// never one bridge.
func TaskBridgeName(cidr string) string {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil || n.IP.To4() == nil {
		return "bv-" + ownerTag(cidr)
	}
	ones, _ := n.Mask.Size()
	return fmt.Sprintf("bv-%s-%02x", hex.EncodeToString(n.IP.To4()), ones)
}

// subnetClaim is a file of HostDir/subnets: the task subnet an agent of the host uses.
type subnetClaim struct {
	Subnet   string `json:"subnet"`
	Owner    string `json:"owner"`
	StateDir string `json:"stateDir"`
}

func (n *Network) claimFile(cidr string) string {
	return filepath.Join(n.cfg.HostDir, "subnets", strings.ReplaceAll(cidr, "/", "_"))
}

// alive reports whether the agent of stateDir may still use what it claimed: its state
// dir exists (a stopped agent comes back and adopts its tasks; a removed data dir never
// does).
func alive(stateDir string) bool {
	_, err := os.Stat(stateDir)
	return err == nil
}

// otherClaims returns the subnet claims of the host's other live agents; claims of
// agents whose state dir is gone are removed.
func (n *Network) otherClaims() []subnetClaim {
	dir := filepath.Join(n.cfg.HostDir, "subnets")
	ents, _ := os.ReadDir(dir)
	var out []subnetClaim
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var c subnetClaim
		if err != nil || json.Unmarshal(b, &c) != nil || c.Owner == n.owner {
			continue
		}
		if !alive(c.StateDir) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		out = append(out, c)
	}
	return out
}

// TakenSubnets returns the IPv4 networks of this host that another Berth installation
// or anything else holds, which the control plane must not give this instance as its
// awsvpc task subnet: the subnets other live agents claimed and the networks of the
// host's interface addresses, except this agent's own task subnet.
func (n *Network) TakenSubnets() []string {
	n.mu.Lock()
	own := n.cfg.TaskSubnet
	n.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	add := func(c string) {
		if c != "" && c != own && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, c := range n.otherClaims() {
		add(c.Subnet)
	}
	mine := map[string]bool{own: true}
	if b, err := os.ReadDir(filepath.Join(n.cfg.HostDir, "subnets")); err == nil {
		for _, e := range b {
			var c subnetClaim
			if raw, err := os.ReadFile(filepath.Join(n.cfg.HostDir, "subnets", e.Name())); err == nil && json.Unmarshal(raw, &c) == nil && c.Owner == n.owner {
				mine[c.Subnet] = true
			}
		}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if ones, _ := ipn.Mask.Size(); ones < minTakenPrefix {
			continue
		}
		nw := (&net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask}).String()
		if !mine[nw] {
			add(nw)
		}
	}
	return out
}

// minTakenPrefix: an interface network wider than a /16 (a host on 10.0.0.0/8) does not
// take the task subnets inside it (the task bridge's /24 route is more specific); a /16 or
// narrower one (another bridge, a VPN) does.
const minTakenPrefix = 16

// overlaps reports whether CIDRs a and b share an address.
func overlaps(a, b string) bool {
	_, x, err1 := net.ParseCIDR(a)
	_, y, err2 := net.ParseCIDR(b)
	return err1 == nil && err2 == nil && (x.Contains(y.IP) || y.Contains(x.IP))
}

// claimSubnet records cidr as this agent's task subnet in HostDir/subnets, after checking
// no other live agent claimed an overlapping one and no interface of the host outside
// this agent's task bridge has an address in it. It returns an error naming the holder
// otherwise. The agent's earlier claims are released.
func (n *Network) claimSubnet(cidr string) error {
	for _, c := range n.otherClaims() {
		if overlaps(c.Subnet, cidr) {
			return fmt.Errorf("network: task subnet %s overlaps %s, which the Berth agent of %s on this host uses: %w", cidr, c.Subnet, c.StateDir, ErrSubnetTaken)
		}
	}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Name == TaskBridgeName(cidr) || (n.cfg.TaskBridge != "" && ifc.Name == n.cfg.TaskBridge) {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				if ones, _ := ipn.Mask.Size(); ones < minTakenPrefix {
					continue
				}
				nw := (&net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask}).String()
				if overlaps(nw, cidr) {
					return fmt.Errorf("network: task subnet %s overlaps %s on the host's interface %s: %w", cidr, nw, ifc.Name, ErrSubnetTaken)
				}
			}
		}
	}
	dir := filepath.Join(n.cfg.HostDir, "subnets")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		var c subnetClaim
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && json.Unmarshal(b, &c) == nil && c.Owner == n.owner && c.Subnet != cidr {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	b, _ := json.Marshal(subnetClaim{Subnet: cidr, Owner: n.owner, StateDir: n.cfg.StateDir})
	f, err := os.OpenFile(n.claimFile(cidr), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		var c subnetClaim
		raw, rerr := os.ReadFile(n.claimFile(cidr))
		if rerr == nil && json.Unmarshal(raw, &c) == nil && c.Owner != n.owner && alive(c.StateDir) {
			return fmt.Errorf("network: task subnet %s is used by the Berth agent of %s on this host: %w", cidr, c.StateDir, ErrSubnetTaken)
		}
		return os.WriteFile(n.claimFile(cidr), b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("network: claim task subnet: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// portReservation is a file of HostDir/hostports: a dynamic host port a task holds.
type portReservation struct {
	Owner    string `json:"owner"`
	StateDir string `json:"stateDir"`
	Task     string `json:"task"`
}

func (n *Network) portFile(proto string, port int32) string {
	return filepath.Join(n.cfg.HostDir, "hostports", proto+"-"+strconv.Itoa(int(port)))
}

// reservedByOther reports whether another live agent of the host reserved proto port.
func (n *Network) reservedByOther(proto string, port int32) bool {
	b, err := os.ReadFile(n.portFile(proto, port))
	if err != nil {
		return false
	}
	var r portReservation
	if json.Unmarshal(b, &r) != nil {
		return true
	}
	return r.Owner != n.owner && alive(r.StateDir)
}

// reservePorts records cnt host ports from first as task's in HostDir/hostports, so the
// host's other agents skip them.
func (n *Network) reservePorts(task, proto string, first, cnt int32) error {
	b, _ := json.Marshal(portReservation{Owner: n.owner, StateDir: n.cfg.StateDir, Task: task})
	for p := first; p < first+cnt; p++ {
		if err := os.WriteFile(n.portFile(proto, p), b, 0o644); err != nil {
			return fmt.Errorf("network: reserve host port %s/%d: %w", proto, p, err)
		}
	}
	return nil
}

// releasePorts removes the reservations of tn's dynamic host ports that are this agent's.
func (n *Network) releasePorts(tn *TaskNetwork) {
	for _, ep := range tn.Endpoints {
		for _, bd := range ep.Bindings {
			_, host, cnt := bd.ports()
			for p := host; p < host+cnt; p++ {
				n.releasePort(bd.Protocol, p)
			}
		}
	}
}

func (n *Network) releasePort(proto string, port int32) {
	n.mu.Lock()
	if fd, ok := n.held[portKey(proto, port)]; ok {
		_ = syscall.Close(fd)
		delete(n.held, portKey(proto, port))
	}
	n.mu.Unlock()
	path := n.portFile(proto, port)
	b, err := os.ReadFile(path)
	var r portReservation
	if err == nil && json.Unmarshal(b, &r) == nil && r.Owner == n.owner {
		_ = os.Remove(path)
	}
}

// Reap releases what this agent (its owner tag) or an agent whose state dir is gone left
// on the host without a task network recorded here: the plugins' DEL for every network
// in libcni's cache (address leases, port mappings, masquerade and firewall rules, veths),
// the namespaces under NetNSDir, the host port reservations, and a gone agent's
// 169.254.170.2 redirect rules. Another live agent's
// resources are never touched. It returns what it released and the errors of what it
// could not.
func (n *Network) Reap(ctx context.Context) (int, error) {
	n.setupMu.Lock()
	defer n.setupMu.Unlock()
	n.mu.Lock()
	live := map[string]bool{}
	nsLive := map[string]bool{}
	for _, tn := range n.tasks {
		for _, ep := range tn.Endpoints {
			live[ep.ID] = true
			nsLive[ep.NetNS] = true
		}
	}
	n.mu.Unlock()
	dead := n.deadOwners()
	ours := func(tag string) bool { return tag == n.owner || dead[tag] }
	var errs []error
	released := 0

	// 1. The plugins' DEL, while the namespace still exists.
	cacheDir := filepath.Join(DefaultCNICacheDir, "results")
	ents, _ := os.ReadDir(cacheDir)
	cni := libcni.NewCNIConfigWithCacheDir(n.cfg.PluginDirs, DefaultCNICacheDir, nil)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(cacheDir, e.Name()))
		if err != nil {
			continue
		}
		var ci struct {
			ContainerID    string         `json:"containerId"`
			Config         []byte         `json:"config"`
			IfName         string         `json:"ifName"`
			NetNS          string         `json:"netns"`
			CapabilityArgs map[string]any `json:"capabilityArgs"`
		}
		if json.Unmarshal(b, &ci) != nil {
			continue
		}
		tag, _, ok := strings.Cut(ci.ContainerID, "-")
		if !ok || !ours(tag) || live[ci.ContainerID] {
			continue
		}
		list, err := libcni.ConfListFromBytes(ci.Config)
		if err != nil {
			continue
		}
		path := ci.NetNS
		if closed, err := netns.LoadNetNS(path).Closed(); path == "" || err != nil || closed {
			path = ""
		}
		rt := &libcni.RuntimeConf{ContainerID: ci.ContainerID, NetNS: path, IfName: ci.IfName, CapabilityArgs: ci.CapabilityArgs}
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			errs = append(errs, fmt.Errorf("CNI DEL of %s (%s): %w", ci.ContainerID, list.Name, err))
			continue
		}
		released++
	}
	// 2. Namespaces.
	nsEnts, _ := os.ReadDir(n.cfg.NetNSDir)
	for _, e := range nsEnts {
		rest, ok := strings.CutPrefix(e.Name(), "berth-")
		tag, _, ok2 := strings.Cut(rest, "-")
		path := filepath.Join(n.cfg.NetNSDir, e.Name())
		if !ok || !ok2 || !ours(tag) || nsLive[path] {
			continue
		}
		if err := netns.LoadNetNS(path).Remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove namespace %s: %w", path, err))
			continue
		}
		released++
	}
	// 3. Host port reservations.
	n.mu.Lock()
	used := map[string]bool{}
	for k := range n.used {
		used[k] = true
	}
	n.mu.Unlock()
	portDir := filepath.Join(n.cfg.HostDir, "hostports")
	pEnts, _ := os.ReadDir(portDir)
	for _, e := range pEnts {
		b, err := os.ReadFile(filepath.Join(portDir, e.Name()))
		var r portReservation
		if err != nil || json.Unmarshal(b, &r) != nil || !ours(r.Owner) {
			continue
		}
		if r.Owner == n.owner && used[strings.Replace(e.Name(), "-", "/", 1)] {
			continue
		}
		if os.Remove(filepath.Join(portDir, e.Name())) == nil {
			released++
		}
	}
	// 4. The 169.254.170.2 redirect rules of agents that are gone (this agent's own are
	// replaced by its RouteLinkLocal).
	if len(dead) > 0 {
		if _, err := exec.LookPath("iptables"); err == nil {
			comments := map[string]bool{}
			for tag := range dead {
				comments[linkLocalComment+"-"+tag] = true
			}
			if err := deleteRulesWhere([][2]string{{"nat", "PREROUTING"}, {"filter", "INPUT"}}, func(f []string) bool {
				return comments[ruleCommentOf(f)]
			}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for tag := range dead {
		_ = os.Remove(filepath.Join(n.cfg.HostDir, "owners", tag))
	}
	return released, errors.Join(errs...)
}

// registerOwner records this agent's tag and state dir in HostDir/owners, so the host's
// agents know whose leftovers are an agent's that is gone.
func (n *Network) registerOwner() error {
	dir := filepath.Join(n.cfg.HostDir, "owners")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, n.owner), []byte(n.cfg.StateDir), 0o644)
}

// deadOwners returns the tags of the host's agents whose state dir no longer exists.
func (n *Network) deadOwners() map[string]bool {
	dir := filepath.Join(n.cfg.HostDir, "owners")
	ents, _ := os.ReadDir(dir)
	out := map[string]bool{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || e.Name() == n.owner {
			continue
		}
		if !alive(string(b)) {
			out[e.Name()] = true
		}
	}
	return out
}
