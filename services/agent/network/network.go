package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/containerd/v2/pkg/netns"
	gocni "github.com/containerd/go-cni"
)

// Mode is an ECS networkMode that needs a network namespace.
type Mode string

// The modes Network sets up; networkMode host needs nothing.
const (
	// Bridge gives each container its own namespace on the Berth bridge, with outbound
	// NAT and its port mappings published on the host.
	Bridge Mode = "bridge"
	// AWSVPC gives the task one namespace, shared by its containers, with an address of
	// the host's task subnet (the task's "ENI").
	AWSVPC Mode = "awsvpc"
	// None gives each container a namespace with loopback only.
	None Mode = "none"
)

// Defaults of Config.
const (
	// DefaultPluginDir is where Debian's containernetworking-plugins installs the
	// plugins; /opt/cni/bin (the upstream location) is searched after it.
	DefaultPluginDir = "/usr/lib/cni"
	// DefaultBridge is the Linux bridge of networkMode bridge.
	DefaultBridge = "berth0"
	// DefaultBridgeSubnet is the subnet networkMode bridge containers get addresses from.
	DefaultBridgeSubnet = "172.29.0.0/16"
	// DefaultNetNSDir is where the namespaces are bind-mounted.
	DefaultNetNSDir = "/run/berth/netns"
	// DefaultHostDir holds what the Berth agents of one host share: the task subnets
	// they claimed (subnets/) and the dynamic host ports they reserved (hostports/).
	DefaultHostDir = "/run/berth"
)

// Config configures a Network.
type Config struct {
	// PluginDirs are searched for the CNI plugin binaries; default DefaultPluginDir and
	// /opt/cni/bin.
	PluginDirs []string
	// StateDir holds the per-task state files and host-local's address leases; it must
	// survive agent restarts (a directory under the agent's data dir).
	StateDir string
	// NetNSDir is where the namespaces are bind-mounted; default DefaultNetNSDir.
	NetNSDir string
	// Bridge and BridgeSubnet are the Linux bridge and the IPv4 subnet of networkMode
	// bridge; defaults DefaultBridge and DefaultBridgeSubnet.
	Bridge, BridgeSubnet string
	// TaskBridge is the Linux bridge of awsvpc tasks; default TaskBridgeName of the task
	// subnet, so two Berth installations on one host (each with its own subnet) never
	// share one bridge.
	TaskBridge string
	// HostDir is the directory the agents of one host share; default DefaultHostDir.
	HostDir string
	// TaskSubnet is this host's awsvpc subnet (an IPv4 CIDR the control plane allocated
	// to the instance); "" refuses awsvpc tasks.
	TaskSubnet string
	// PortRange is the inclusive range of dynamic host ports; default the host's
	// net.ipv4.ip_local_port_range (32768–60999 on Linux), as the ECS agent uses it.
	PortRange [2]int
	// DNSTarget is the "ipv4:port" of the Cloud Map DNS server (the DNS role): when set,
	// the rules that route 169.254.170.2 (SetLinkLocalTarget) also route
	// TaskResolverAddr:53 (UDP and TCP) from both bridges to it, and TaskResolver
	// returns that address for the tasks' resolv.conf. "" leaves tasks the host's
	// resolvers.
	DNSTarget string
}

// PortRequest is one port mapping of a container.
type PortRequest struct {
	// ContainerPort is the port in the container's namespace.
	ContainerPort int32
	// HostPort is the host port; 0 asks for a dynamic one (bridge only).
	HostPort int32
	// Protocol is "tcp" or "udp".
	Protocol string
	// ContainerPortRange, when its first port is set, maps ports first..last instead of
	// ContainerPort (PortMapping.containerPortRange): bridge publishes them on a
	// contiguous range of free dynamic host ports.
	ContainerPortRange [2]int32
}

// EndpointRequest asks for one namespace: a container's (bridge, none) or the task's
// (awsvpc).
type EndpointRequest struct {
	// Key names the endpoint within its task: the container name, or "" for the task's.
	Key string
	// ID is the CNI container id, unique on the host (the containerd container id).
	ID string
	// Ports are the port mappings published on the host (bridge only).
	Ports []PortRequest
	// LoopbackOnly gives the endpoint loopback only whatever the task's mode (ECS
	// disableNetworking); it publishes no port.
	LoopbackOnly bool
}

// Binding is one published port, as ECS reports it in networkBindings.
type Binding struct {
	BindIP        string `json:"bindIP"`
	ContainerPort int32  `json:"containerPort"`
	HostPort      int32  `json:"hostPort"`
	Protocol      string `json:"protocol"`
	// ContainerPortRange and HostPortRange ("first-last") replace ContainerPort and
	// HostPort for a mapped range: host port HostPortRange.first+i publishes container
	// port ContainerPortRange.first+i.
	ContainerPortRange string `json:"containerPortRange,omitempty"`
	HostPortRange      string `json:"hostPortRange,omitempty"`
}

// ports returns the first container port, the first host port and how many ports b maps.
func (b Binding) ports() (ctr, host, n int32) {
	if b.ContainerPortRange == "" {
		return b.ContainerPort, b.HostPort, 1
	}
	clo, chi, _ := ParseRange(b.ContainerPortRange)
	hlo, _, _ := ParseRange(b.HostPortRange)
	return clo, hlo, chi - clo + 1
}

// ParseRange parses "first-last" (first <= last); ok is false otherwise.
func ParseRange(s string) (first, last int32, ok bool) {
	a, b, found := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !found || err1 != nil || err2 != nil || lo > hi || lo < 0 || hi > 65535 {
		return 0, 0, false
	}
	return int32(lo), int32(hi), true
}

// RangeString formats first..last as "first-last".
func RangeString(first, last int32) string { return fmt.Sprintf("%d-%d", first, last) }

// Endpoint is one namespace with its address.
type Endpoint struct {
	Key      string    `json:"key"`
	ID       string    `json:"id"`
	NetNS    string    `json:"netns"`
	IP       string    `json:"ip,omitempty"`
	Gateway  string    `json:"gateway,omitempty"`
	MAC      string    `json:"mac,omitempty"`
	Subnet   string    `json:"subnet,omitempty"`
	Bindings []Binding `json:"bindings,omitempty"`
	// LoopbackOnly is EndpointRequest's.
	LoopbackOnly bool `json:"loopbackOnly,omitempty"`
}

// TaskNetwork is the network of one task: what Setup made and Teardown undoes.
type TaskNetwork struct {
	Task      string      `json:"task"`
	Mode      Mode        `json:"mode"`
	Endpoints []*Endpoint `json:"endpoints"`
}

// Endpoint returns the endpoint of key, or nil.
func (tn *TaskNetwork) Endpoint(key string) *Endpoint {
	if tn == nil {
		return nil
	}
	for _, e := range tn.Endpoints {
		if e.Key == key {
			return e
		}
	}
	return nil
}

// Network sets up and tears down task networks on this host. It is safe for concurrent
// use.
type Network struct {
	cfg  Config
	cnis map[Mode]gocni.CNI

	// owner tags what this agent creates on the host (namespace names, CNI container
	// ids, host port and subnet claims): a hash of StateDir, so an agent reaps only its own.
	owner string
	// pinned: Config.TaskSubnet was given; taskBridge: Config.TaskBridge as given.
	pinned     bool
	taskBridge string

	// setupMu: Setup holds it shared, Reap exclusively, so Reap never takes a namespace
	// or a cache entry of a network being set up for its own.
	setupMu sync.RWMutex

	mu    sync.Mutex
	tasks map[string]*TaskNetwork
	used  map[string]string // "tcp/8080" → task holding it
	// held are the sockets bound on this agent's dynamic host ports ("tcp/32771" → the
	// socket's descriptor), so the kernel gives none of them to another process
	// (holdPort).
	held map[string]int
	// linkLocal: RouteLinkLocal redirects to loopback, so the bridges need
	// route_localnet once the plugins create them.
	linkLocal bool
	// routed is the target of the rules this Network installed ("" for none); llTarget
	// the one SetLinkLocalTarget asks Setup to install. llMu serialises installing.
	routed, llTarget string
	// llStale: the bridges changed (a task subnet arrived) since the rules were installed.
	llStale bool
	llMu    sync.Mutex
}

// New checks cfg, loads the CNI configurations and the state of the task networks a
// previous agent left (their host ports stay allocated). It returns an error when a
// plugin is missing or the state directory is unusable.
func New(cfg Config) (*Network, error) {
	if len(cfg.PluginDirs) == 0 {
		cfg.PluginDirs = []string{DefaultPluginDir, "/opt/cni/bin"}
	}
	if cfg.StateDir == "" {
		return nil, errors.New("network: no state directory")
	}
	cfg.NetNSDir = cmpOr(cfg.NetNSDir, DefaultNetNSDir)
	cfg.Bridge = cmpOr(cfg.Bridge, DefaultBridge)
	cfg.BridgeSubnet = cmpOr(cfg.BridgeSubnet, DefaultBridgeSubnet)
	cfg.HostDir = cmpOr(cfg.HostDir, DefaultHostDir)
	if cfg.DNSTarget != "" {
		if _, err := checkLinkLocalTarget(cfg.DNSTarget); err != nil {
			return nil, fmt.Errorf("network: DNS target: %w", err)
		}
	}
	if cfg.PortRange[0] == 0 {
		cfg.PortRange = hostPortRange()
	}
	if cfg.PortRange[0] < 1024 || cfg.PortRange[1] > 65535 || cfg.PortRange[0] > cfg.PortRange[1] {
		return nil, fmt.Errorf("network: invalid dynamic port range %d-%d", cfg.PortRange[0], cfg.PortRange[1])
	}
	for _, p := range PluginsNeeded() {
		if findPlugin(cfg.PluginDirs, p) == "" {
			return nil, fmt.Errorf("network: CNI plugin %q not found in %s (install containernetworking-plugins: a running agent looks for them again every few seconds)", p, strings.Join(cfg.PluginDirs, ", "))
		}
	}
	if _, _, err := net.ParseCIDR(cfg.BridgeSubnet); err != nil {
		return nil, fmt.Errorf("network: bridge subnet: %w", err)
	}
	if cfg.TaskSubnet != "" {
		if _, _, err := net.ParseCIDR(cfg.TaskSubnet); err != nil {
			return nil, fmt.Errorf("network: task subnet: %w", err)
		}
	}
	if abs, err := filepath.Abs(cfg.StateDir); err == nil {
		cfg.StateDir = abs
	}
	taskBridge := cfg.TaskBridge
	if cfg.TaskSubnet != "" {
		cfg.TaskBridge = cmpOr(cfg.TaskBridge, TaskBridgeName(cfg.TaskSubnet))
	}
	for _, d := range []string{filepath.Join(cfg.StateDir, "tasks"), filepath.Join(cfg.StateDir, "ipam"), cfg.NetNSDir, filepath.Join(cfg.HostDir, "hostports"), filepath.Join(cfg.HostDir, "subnets")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	n := &Network{cfg: cfg, owner: ownerTag(cfg.StateDir), pinned: cfg.TaskSubnet != "", taskBridge: taskBridge, cnis: map[Mode]gocni.CNI{}, tasks: map[string]*TaskNetwork{}, used: map[string]string{}, held: map[string]int{}}
	if err := n.registerOwner(); err != nil {
		return nil, err
	}
	if cfg.TaskSubnet != "" {
		if err := n.claimSubnet(cfg.TaskSubnet); err != nil {
			return nil, err
		}
	}
	lists := map[Mode][]byte{
		Bridge: n.confList("berth-bridge", cfg.Bridge, cfg.BridgeSubnet, true),
		None:   nil,
	}
	if cfg.TaskSubnet != "" {
		lists[AWSVPC] = n.confList("berth-awsvpc", cfg.TaskBridge, cfg.TaskSubnet, false)
	}
	for mode, list := range lists {
		c, err := n.load(list)
		if err != nil {
			return nil, fmt.Errorf("network: %s: %w", mode, err)
		}
		n.cnis[mode] = c
	}
	entries, err := os.ReadDir(filepath.Join(cfg.StateDir, "tasks"))
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(cfg.StateDir, "tasks", e.Name()))
		if err != nil {
			continue
		}
		var tn TaskNetwork
		if json.Unmarshal(b, &tn) != nil || tn.Task == "" {
			continue
		}
		n.tasks[tn.Task] = &tn
		for _, ep := range tn.Endpoints {
			for _, b := range ep.Bindings {
				if tn.Mode == Bridge {
					_, host, cnt := b.ports()
					for p := host; p < host+cnt; p++ {
						n.used[portKey(b.Protocol, p)] = tn.Task
						// A port of an adopted task: held again, as far as it still can
						// be (best effort: the agent was down a moment).
						if fd, err := holdPort(b.Protocol, p); err == nil {
							n.held[portKey(b.Protocol, p)] = fd
						}
					}
				}
			}
		}
	}
	return n, nil
}

// load returns a go-cni instance of the configuration list (loopback only when nil) plus
// loopback.
func (n *Network) load(list []byte) (gocni.CNI, error) {
	opts := []gocni.Opt{gocni.WithPluginDir(n.cfg.PluginDirs), gocni.WithInterfacePrefix("eth")}
	var load []gocni.Opt
	if list != nil {
		load = append(load, gocni.WithConfListBytes(list))
	} else {
		opts = append(opts, gocni.WithMinNetworkCount(1))
	}
	load = append(load, gocni.WithLoNetwork)
	c, err := gocni.New(opts...)
	if err != nil {
		return nil, err
	}
	if err := c.Load(load...); err != nil {
		return nil, err
	}
	return c, nil
}

// SetTaskSubnet sets the instance's awsvpc task subnet (the CIDR the control plane
// allocated at registration, which replaces an earlier allocated one) when
// Config.TaskSubnet gave none; a configured subnet is kept. It returns the subnet in use,
// or an error wrapping ErrSubnetTaken when another agent of the host holds cidr.
func (n *Network) SetTaskSubnet(cidr string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pinned || cidr == "" || cidr == n.cfg.TaskSubnet {
		return n.cfg.TaskSubnet, nil
	}
	if _, _, err := net.ParseCIDR(cidr); err != nil {
		return "", fmt.Errorf("network: task subnet: %w", err)
	}
	if err := n.claimSubnet(cidr); err != nil {
		return "", err
	}
	bridge := n.taskBridge
	if bridge == "" {
		bridge = TaskBridgeName(cidr)
	}
	if bridge != n.cfg.TaskBridge {
		n.llStale = true // the next Setup routes 169.254.170.2 on the new bridge too
	}
	n.cfg.TaskSubnet, n.cfg.TaskBridge = cidr, bridge
	c, err := n.load(n.confList("berth-awsvpc", bridge, cidr, false))
	if err != nil {
		n.cfg.TaskSubnet = ""
		return "", fmt.Errorf("network: awsvpc: %w", err)
	}
	n.cnis[AWSVPC] = c
	return cidr, nil
}

// confList is the CNI configuration list of a bridge network: the bridge plugin with
// host-local addresses and outbound NAT, portmap for
// published ports (bridge mode only) and firewall to let the containers' traffic through
// the host's FORWARD chain.
func (n *Network) confList(name, bridge, subnet string, portmap bool) []byte {
	ipam := map[string]any{
		"type":   "host-local",
		"ranges": [][]map[string]string{{{"subnet": subnet}}},
		"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
	}
	if !portmap {
		// The instance's own task subnet: its leases live with the agent's state. The
		// bridge network's stay in host-local's host-wide directory
		// (/var/lib/cni/networks), shared by every agent of the host on that bridge.
		ipam["dataDir"] = filepath.Join(n.cfg.StateDir, "ipam")
	}
	plugins := []map[string]any{{
		"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": true, "hairpinMode": true,
		"ipam": ipam,
	}}
	if portmap {
		plugins = append(plugins, map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true})
	}
	plugins = append(plugins, map[string]any{"type": "firewall"})
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": name, "plugins": plugins})
	return b
}

// Config returns the configuration in use, defaults filled in.
func (n *Network) Config() Config {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg
}

// Lookup returns the network of task (its id), or nil when it has none.
func (n *Network) Lookup(task string) *TaskNetwork {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tasks[task]
}

// Tasks returns the ids of the tasks that have a network, sorted.
func (n *Network) Tasks() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for t := range n.tasks {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Setup gives task (its id, unique on the host) a network of mode with one endpoint per
// request: a namespace, an address, and for bridge its port mappings on the host (host
// port 0: a free port of the dynamic range, never one another task holds). When the task
// already has a complete network of the same endpoints (an agent restarted and adopts the
// task), that network is returned unchanged. On error nothing of the network is left.
func (n *Network) Setup(ctx context.Context, task string, mode Mode, reqs []EndpointRequest) (*TaskNetwork, error) {
	n.setupMu.RLock()
	defer n.setupMu.RUnlock()
	n.mu.Lock()
	c, lo := n.cnis[mode], n.cnis[None]
	n.mu.Unlock()
	if c == nil {
		if mode == AWSVPC {
			return nil, errors.New("this container instance has no awsvpc task subnet")
		}
		return nil, fmt.Errorf("network mode %q is not set up by CNI", mode)
	}
	if mode != None {
		if err := n.ensureLinkLocal(); err != nil {
			return nil, err
		}
	}
	n.mu.Lock()
	old := n.tasks[task]
	n.mu.Unlock()
	if old != nil {
		if n.complete(old, mode, reqs) {
			return old, nil
		}
		if err := n.Teardown(ctx, task); err != nil {
			return nil, fmt.Errorf("clear the earlier network of the task: %w", err)
		}
	}
	tn := &TaskNetwork{Task: task, Mode: mode}
	n.mu.Lock()
	n.tasks[task] = tn
	for _, r := range reqs {
		// The CNI container id carries the owner tag, so an agent finds what it set up in
		// the plugins' cache (/var/lib/cni/results) after its state is lost.
		ep := &Endpoint{Key: r.Key, ID: n.owner + "-" + r.ID, LoopbackOnly: r.LoopbackOnly}
		if mode == Bridge && !r.LoopbackOnly {
			for _, p := range r.Ports {
				proto := cmpOr(p.Protocol, "tcp")
				if lo, hi := p.ContainerPortRange[0], p.ContainerPortRange[1]; lo > 0 {
					host, err := n.dynamicPortsLocked(proto, hi-lo+1)
					if err != nil {
						n.mu.Unlock()
						_ = n.Teardown(context.WithoutCancel(ctx), task)
						return nil, err
					}
					for i := range hi - lo + 1 {
						n.used[portKey(proto, host+i)] = task
					}
					// Recorded before the reservations, so a failure leaves what Teardown releases.
					ep.Bindings = append(ep.Bindings, Binding{BindIP: "0.0.0.0", Protocol: proto, ContainerPortRange: RangeString(lo, hi), HostPortRange: RangeString(host, host+hi-lo)})
					if err := n.reservePorts(task, proto, host, hi-lo+1); err != nil {
						n.mu.Unlock()
						_ = n.Teardown(context.WithoutCancel(ctx), task)
						return nil, err
					}
					continue
				}
				host := p.HostPort
				if host == 0 {
					var err error
					if host, err = n.dynamicPortsLocked(proto, 1); err != nil {
						n.mu.Unlock()
						_ = n.Teardown(context.WithoutCancel(ctx), task)
						return nil, err
					}
					ep.Bindings = append(ep.Bindings, Binding{BindIP: "0.0.0.0", ContainerPort: p.ContainerPort, HostPort: host, Protocol: proto})
					n.used[portKey(proto, host)] = task
					if err := n.reservePorts(task, proto, host, 1); err != nil {
						n.mu.Unlock()
						_ = n.Teardown(context.WithoutCancel(ctx), task)
						return nil, err
					}
					continue
				}
				// A hostPort the task names is held like a dynamic one: a host process
				// that has it already fails the task, as Docker's "port is already
				// allocated" does, instead of having its connections taken over.
				fd, err := holdPort(proto, host)
				if err != nil {
					n.mu.Unlock()
					_ = n.Teardown(context.WithoutCancel(ctx), task)
					return nil, fmt.Errorf("host port %d/%s is already in use on this host: %w", host, proto, err)
				}
				n.held[portKey(proto, host)] = fd
				n.used[portKey(proto, host)] = task
				ep.Bindings = append(ep.Bindings, Binding{BindIP: "0.0.0.0", ContainerPort: p.ContainerPort, HostPort: host, Protocol: proto})
			}
		}
		tn.Endpoints = append(tn.Endpoints, ep)
	}
	n.mu.Unlock()
	fail := func(err error) (*TaskNetwork, error) {
		_ = n.Teardown(context.WithoutCancel(ctx), task)
		return nil, err
	}
	for _, ep := range tn.Endpoints {
		path, err := newNetNS(n.cfg.NetNSDir, n.owner)
		if err != nil {
			return fail(err)
		}
		ep.NetNS = path
	}
	// Stored before any plugin runs: a crash from here on leaves what Teardown needs.
	if err := n.save(tn); err != nil {
		return fail(err)
	}
	for _, ep := range tn.Endpoints {
		c, network := c, string(mode)
		if ep.LoopbackOnly {
			c, network = lo, string(None)
		}
		var res *gocni.Result
		err := cniAdds.add(network, func() error {
			var err error
			res, err = c.Setup(ctx, ep.ID, ep.NetNS, cniOpts(ep)...)
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("CNI %s network for %s: %w", mode, cmpOr(ep.Key, "the task"), err))
		}
		if cfg := res.Interfaces["eth0"]; cfg != nil {
			ep.MAC = cfg.Mac
			for _, ip := range cfg.IPConfigs {
				if ip.IP.To4() != nil {
					ep.IP, ep.Gateway = ip.IP.String(), ip.Gateway.String()
				}
			}
		}
		if mode != None && !ep.LoopbackOnly && ep.IP == "" {
			return fail(fmt.Errorf("CNI %s network for %s: no IPv4 address in the plugins' result", mode, cmpOr(ep.Key, "the task")))
		}
		if mode == AWSVPC {
			n.mu.Lock()
			ep.Subnet = n.cfg.TaskSubnet
			n.mu.Unlock()
		}
	}
	if err := n.save(tn); err != nil {
		return fail(err)
	}
	if err := n.routeTask(tn); err != nil {
		return fail(fmt.Errorf("route %s to the task endpoints: %w", LinkLocalAddr, err))
	}
	n.mu.Lock()
	localnet, br := n.linkLocal, n.cfg.Bridge
	if mode == AWSVPC {
		br = n.cfg.TaskBridge
	}
	n.mu.Unlock()
	if localnet && mode != None {
		n.localnet(br)
	}
	return tn, nil
}

// complete reports whether tn is a finished network of mode with the endpoints reqs ask
// for, whose namespaces still exist.
func (n *Network) complete(tn *TaskNetwork, mode Mode, reqs []EndpointRequest) bool {
	if tn.Mode != mode || len(tn.Endpoints) != len(reqs) {
		return false
	}
	for i, ep := range tn.Endpoints {
		if ep.Key != reqs[i].Key || ep.NetNS == "" || (mode != None && !ep.LoopbackOnly && ep.IP == "") {
			return false
		}
		if closed, err := netns.LoadNetNS(ep.NetNS).Closed(); err != nil || closed {
			return false
		}
	}
	return true
}

// Teardown undoes task's network: the plugins' DEL (address lease, port mappings,
// firewall rules, veth), the namespaces, the host ports and the state file. A task
// without a network is not an error. When a plugin fails the state file is kept, so a
// later Teardown (or Sweep after a restart) retries.
func (n *Network) Teardown(ctx context.Context, task string) error {
	n.mu.Lock()
	tn := n.tasks[task]
	n.mu.Unlock()
	if tn == nil {
		return nil
	}
	var errs []error
	// This agent's link-local rules for the task's addresses on the shared bridge go
	// before the addresses do (another agent's task may get them next).
	if addrs := tn.sharedBridgeAddrs(); len(addrs) > 0 {
		if _, err := exec.LookPath("iptables"); err == nil {
			if err := n.unrouteSources(addrs); err != nil {
				errs = append(errs, err)
			}
		}
	}
	n.mu.Lock()
	c, lo := n.cnis[tn.Mode], n.cnis[None]
	n.mu.Unlock()
	if c == nil && tn.Mode == AWSVPC && len(tn.Endpoints) > 0 && tn.Endpoints[0].Subnet != "" {
		// The instance's task subnet is not known yet (a restarted agent before it
		// registered, berth dev's stop): the network recorded it.
		sub := tn.Endpoints[0].Subnet
		n.mu.Lock()
		br := n.taskBridge
		n.mu.Unlock()
		if br == "" {
			br = TaskBridgeName(sub)
		}
		if rc, err := n.load(n.confList("berth-awsvpc", br, sub, false)); err == nil {
			c = rc
		}
	}
	for _, ep := range tn.Endpoints {
		c := c
		if ep.LoopbackOnly {
			c = lo
		}
		if c != nil && ep.NetNS != "" {
			path := ep.NetNS
			if closed, err := netns.LoadNetNS(path).Closed(); err != nil || closed {
				path = "" // gone with a reboot: the plugins clean up what they can without it
			}
			if err := c.Remove(ctx, ep.ID, path, cniOpts(ep)...); err != nil {
				errs = append(errs, fmt.Errorf("CNI DEL of %s: %w", cmpOr(ep.Key, "the task"), err))
				continue
			}
		}
		if ep.NetNS != "" {
			if err := netns.LoadNetNS(ep.NetNS).Remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove namespace %s: %w", ep.NetNS, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	n.mu.Lock()
	delete(n.tasks, task)
	for k, t := range n.used {
		if t == task {
			delete(n.used, k)
		}
	}
	n.mu.Unlock()
	n.releasePorts(tn)
	if err := os.Remove(n.stateFile(task)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Sweep tears down the network of every task keep does not claim: what a previous agent
// left for tasks that are gone. It returns the errors of the teardowns that failed.
func (n *Network) Sweep(ctx context.Context, keep func(task string) bool) error {
	var errs []error
	for _, t := range n.Tasks() {
		if !keep(t) {
			if err := n.Teardown(ctx, t); err != nil {
				errs = append(errs, fmt.Errorf("task %s: %w", t, err))
			}
		}
	}
	return errors.Join(errs...)
}

func cniOpts(ep *Endpoint) []gocni.NamespaceOpts {
	if len(ep.Bindings) == 0 {
		return nil
	}
	var pm []gocni.PortMapping
	for _, b := range ep.Bindings {
		ctr, host, cnt := b.ports()
		for i := range cnt {
			pm = append(pm, gocni.PortMapping{HostPort: host + i, ContainerPort: ctr + i, Protocol: b.Protocol})
		}
	}
	return []gocni.NamespaceOpts{gocni.WithCapabilityPortMap(pm)}
}

// dynamicPortsLocked picks cnt contiguous free host ports of the dynamic range for proto
// and returns the first: ports no task of this agent holds, no other agent of the host
// reserved (HostDir/hostports) and this agent can bind on every address, which it then
// holds (holdPort) until the ports are released. Call with n.mu held.
func (n *Network) dynamicPortsLocked(proto string, cnt int32) (int32, error) {
	lo, hi := int32(n.cfg.PortRange[0]), int32(n.cfg.PortRange[1])
	size := hi - lo + 1
	if cnt < 1 || cnt > size {
		return 0, fmt.Errorf("no %d contiguous %s host ports in the dynamic range %d-%d", cnt, proto, lo, hi)
	}
	starts := size - cnt + 1
	start := int32(rand.IntN(int(starts)))
	for i := int32(0); i < starts; i++ {
		first := lo + (start+i)%starts
		fds := make([]int, 0, cnt)
		ok := true
		for p := first; p < first+cnt && ok; p++ {
			_, taken := n.used[portKey(proto, p)]
			ok = !taken && !n.reservedByOther(proto, p)
			if ok {
				fd, err := holdPort(proto, p)
				if ok = err == nil; ok {
					fds = append(fds, fd)
				}
			}
		}
		if ok {
			for j, fd := range fds {
				n.held[portKey(proto, first+int32(j))] = fd
			}
			return first, nil
		}
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}
	if cnt == 1 {
		return 0, fmt.Errorf("no free %s host port in the dynamic range %d-%d", proto, lo, hi)
	}
	return 0, fmt.Errorf("no %d contiguous free %s host ports in the dynamic range %d-%d", cnt, proto, lo, hi)
}

// holdPort binds a socket of proto ("tcp" or "udp") on port of every IPv4 address and
// returns its descriptor; an error when a host process has the port. The socket never
// listens and is never read: it only keeps the kernel from giving the port to anyone
// else while the task's mapping publishes it. portmap publishes with DNAT rules, which
// no bind sees, so without it a host process could get the same port from the dynamic
// (ephemeral) range and have its own connections on 127.0.0.1 sent to the task instead
// (Docker's port mapping holds its ports with docker-proxy for the same reason).
// Connections to the port are DNATed before any socket is looked up, so the task still
// gets them.
func holdPort(proto string, port int32) (int, error) {
	typ := syscall.SOCK_STREAM
	if proto == "udp" {
		typ = syscall.SOCK_DGRAM
	}
	fd, err := syscall.Socket(syscall.AF_INET, typ|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(port)}); err != nil {
		_ = syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func (n *Network) stateFile(task string) string {
	return filepath.Join(n.cfg.StateDir, "tasks", task+".json")
}

// save writes tn's state file atomically.
func (n *Network) save(tn *TaskNetwork) error {
	b, err := json.Marshal(tn)
	if err != nil {
		return err
	}
	tmp := n.stateFile(tn.Task) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("network state: %w", err)
	}
	if err := os.Rename(tmp, n.stateFile(tn.Task)); err != nil {
		return fmt.Errorf("network state: %w", err)
	}
	return nil
}

// hostPortRange reads net.ipv4.ip_local_port_range; 32768–60999 (Linux's default) when
// it cannot.
func hostPortRange() [2]int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && lo >= 1024 && lo <= hi {
				return [2]int{lo, hi}
			}
		}
	}
	return [2]int{32768, 60999}
}

func findPlugin(dirs []string, name string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

func portKey(proto string, port int32) string { return proto + "/" + strconv.Itoa(int(port)) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
