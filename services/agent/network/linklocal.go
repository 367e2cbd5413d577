package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// LinkLocalAddr is the address tasks reach the agent's credentials and metadata
// endpoints on ("169.254.170.2", port 80), as on ECS.
const LinkLocalAddr = "169.254.170.2"

// TaskResolverAddr is the nameserver bridge and awsvpc tasks get when the agent has a
// Cloud Map DNS server (Config.DNSTarget): the address of the Amazon-provided DNS server
// of a VPC.
const TaskResolverAddr = "169.254.169.253"

// TaskResolver returns the nameserver for the resolv.conf of a bridge or awsvpc task
// that sets no dnsServers: TaskResolverAddr when Config.DNSTarget is set, else "".
func (n *Network) TaskResolver() string {
	if n == nil || n.cfg.DNSTarget == "" {
		return ""
	}
	return TaskResolverAddr
}

// linkLocalComment starts the comment of the iptables rules RouteLinkLocal installs; the
// owner tag of the agent follows ("berth-task-endpoints-<owner>"), so a restarted agent
// finds (and replaces) its own rules instead of adding copies, and never touches another
// agent's.
const linkLocalComment = "berth-task-endpoints"

// ruleComment is the comment of this Network's link-local rules.
func (n *Network) ruleComment() string { return linkLocalComment + "-" + n.owner }

// RouteLinkLocal makes 169.254.170.2:80 reach target ("ip:port", the agent's endpoints
// listener) from this agent's task namespaces (networkMode bridge and awsvpc), as the ECS
// agent does on EC2, with nat PREROUTING DNAT rules. The awsvpc bridge is this agent's
// own (one per task subnet), so one rule matches all of it. The bridge of networkMode
// bridge is shared by every agent of the host (berth0): there each agent routes only the
// addresses of its own tasks (one rule per task endpoint, added by Setup and removed by
// Teardown), so two agents' tasks each reach their own agent, whose credentials they
// hold, and neither agent removes the other's rules. For a loopback target the bridges
// also get route_localnet (the kernel drops packets redirected to 127.0.0.0/8 otherwise)
// and a filter INPUT rule that drops every other packet from the bridge to 127.0.0.0/8,
// so the tasks reach only the redirected port of the host's loopback. It is idempotent:
// the rules this agent installed earlier (with any target) are replaced, never
// duplicated. It returns an error when iptables is missing or refuses a rule.
func (n *Network) RouteLinkLocal(target string) error {
	ip, err := checkLinkLocalTarget(target)
	if err != nil {
		return err
	}
	if err := n.UnrouteLinkLocal(); err != nil {
		return err
	}
	loopback := ip.IsLoopback()
	if n.cfg.DNSTarget != "" {
		dnsIP, err := checkLinkLocalTarget(n.cfg.DNSTarget)
		if err != nil {
			return err
		}
		loopback = loopback || dnsIP.IsLoopback()
	}
	shared := n.cfg.Bridge
	for _, br := range n.bridges() {
		if loopback {
			if err := iptables("-t", "filter", "-I", "INPUT", "1", "-i", br, "-d", "127.0.0.0/8",
				"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
				"-m", "comment", "--comment", n.ruleComment(), "-j", "DROP"); err != nil {
				return err
			}
			n.localnet(br)
		}
		if br == shared {
			continue // per task address: below
		}
		for _, rule := range n.dnatRules(br, "", target) {
			if err := iptables(append([]string{"-t", "nat", "-I", "PREROUTING", "1"}, rule...)...); err != nil {
				return err
			}
		}
	}
	n.mu.Lock()
	n.linkLocal, n.routed = loopback, target
	var addrs []string
	for _, tn := range n.tasks {
		addrs = append(addrs, tn.sharedBridgeAddrs()...)
	}
	n.mu.Unlock()
	for _, a := range addrs {
		if err := n.routeSource(a, target); err != nil {
			return err
		}
	}
	return nil
}

// dnatRules are the nat PREROUTING rules (without chain and position) that route
// 169.254.170.2:80, and TaskResolverAddr:53 when Config.DNSTarget is set, from bridge br
// to target: from the one source address src ("" for the whole bridge).
func (n *Network) dnatRules(br, src, target string) [][]string {
	match := []string{"-i", br}
	if src != "" {
		match = append(match, "-s", src+"/32")
	}
	comment := []string{"-m", "comment", "--comment", n.ruleComment()}
	rules := [][]string{slices.Concat(match, []string{"-d", LinkLocalAddr + "/32", "-p", "tcp", "--dport", "80"}, comment,
		[]string{"-j", "DNAT", "--to-destination", target})}
	if dns := n.cfg.DNSTarget; dns != "" {
		// The Cloud Map DNS server answers the tasks' nameserver (UDP and TCP).
		for _, proto := range []string{"udp", "tcp"} {
			rules = append(rules, slices.Concat(match, []string{"-d", TaskResolverAddr + "/32", "-p", proto, "--dport", "53"}, comment,
				[]string{"-j", "DNAT", "--to-destination", dns}))
		}
	}
	return rules
}

// routeTask installs the rules of tn's addresses on the shared bridge when this agent
// routes 169.254.170.2 (Setup, once the plugins gave the addresses).
func (n *Network) routeTask(tn *TaskNetwork) error {
	addrs := tn.sharedBridgeAddrs()
	if len(addrs) == 0 {
		return nil
	}
	n.llMu.Lock()
	defer n.llMu.Unlock()
	n.mu.Lock()
	target := n.routed
	n.mu.Unlock()
	if target == "" {
		return nil
	}
	for _, a := range addrs {
		if err := n.routeSource(a, target); err != nil {
			return err
		}
	}
	return nil
}

// routeSource installs the rules routing one task address on the shared bridge to target.
func (n *Network) routeSource(addr, target string) error {
	for _, rule := range n.dnatRules(n.cfg.Bridge, addr, target) {
		if err := iptables(append([]string{"-t", "nat", "-I", "PREROUTING", "1"}, rule...)...); err != nil {
			return err
		}
	}
	return nil
}

// unrouteSources removes this agent's rules for the task addresses addrs on the shared
// bridge (Teardown); rules already gone are not an error.
func (n *Network) unrouteSources(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, a := range addrs {
		want[a+"/32"] = true
	}
	return n.deleteRules([][2]string{{"nat", "PREROUTING"}}, func(f []string) bool {
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-s" && want[f[i+1]] {
				return true
			}
		}
		return false
	})
}

// sharedBridgeAddrs are the addresses of tn's endpoints on the shared bridge
// (networkMode bridge), which the link-local rules match one by one.
func (tn *TaskNetwork) sharedBridgeAddrs() []string {
	if tn == nil || tn.Mode != Bridge {
		return nil
	}
	var out []string
	for _, ep := range tn.Endpoints {
		if !ep.LoopbackOnly && ep.IP != "" {
			out = append(out, ep.IP)
		}
	}
	return out
}

// SetLinkLocalTarget checks target as RouteLinkLocal does and has the first Setup of a
// bridge or awsvpc network (a new task's or an adopted one's) route 169.254.170.2:80 to
// it, so an agent that never runs such a task leaves the host's rules (another agent's
// on a shared bridge) alone. A Setup that cannot install the rules fails.
func (n *Network) SetLinkLocalTarget(target string) error {
	if _, err := checkLinkLocalTarget(target); err != nil {
		return err
	}
	n.mu.Lock()
	n.llTarget = target
	n.mu.Unlock()
	return nil
}

// ensureLinkLocal installs the rules of SetLinkLocalTarget's target once.
func (n *Network) ensureLinkLocal() error {
	n.llMu.Lock()
	defer n.llMu.Unlock()
	n.mu.Lock()
	target, routed, stale := n.llTarget, n.routed, n.llStale
	n.llStale = false
	n.mu.Unlock()
	if target == "" || (routed == target && !stale) {
		return nil
	}
	if err := n.RouteLinkLocal(target); err != nil {
		return fmt.Errorf("route %s to the task endpoints: %w", LinkLocalAddr, err)
	}
	return nil
}

// ReleaseLinkLocal removes the rules this Network installed (UnrouteLinkLocal), nothing
// when it installed none.
func (n *Network) ReleaseLinkLocal() error {
	n.mu.Lock()
	routed := n.routed
	n.mu.Unlock()
	if routed == "" {
		return nil
	}
	return n.UnrouteLinkLocal()
}

// checkLinkLocalTarget parses a DNAT target "ipv4:port" and checks iptables is there.
func checkLinkLocalTarget(target string) (net.IP, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("network: link-local target: %w", err)
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("network: link-local target %q is not an IPv4 address", target)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("network: link-local target %q has no port", target)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, errors.New("network: iptables not found (install iptables)")
	}
	return ip, nil
}

// UnrouteLinkLocal removes the rules this agent's RouteLinkLocal and Setup installed (its
// owner tag in their comment), and rules of builds before the tag on its bridges; other
// agents' rules stay. Removing rules that are not there is not an error.
func (n *Network) UnrouteLinkLocal() error {
	n.mu.Lock()
	n.linkLocal, n.routed = false, ""
	n.mu.Unlock()
	return n.deleteRules([][2]string{{"nat", "PREROUTING"}, {"filter", "INPUT"}}, func([]string) bool { return true })
}

// deleteRules deletes the rules of the chains (table, chain) that this agent owns
// (ownsRule) and match accepts.
func (n *Network) deleteRules(chains [][2]string, match func(f []string) bool) error {
	return deleteRulesWhere(chains, func(f []string) bool { return n.ownsRule(f) && match(f) })
}

// ruleCommentOf returns the comment of the fields of an iptables -S line ("" for none).
func ruleCommentOf(f []string) string {
	comment := ""
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "--comment" {
			comment = strings.Trim(f[i+1], `"`)
		}
	}
	return comment
}

// deleteRulesWhere deletes the rules of the chains (table, chain) whose fields (of
// iptables -S, quotes removed) pred accepts.
func deleteRulesWhere(chains [][2]string, pred func(f []string) bool) error {
	var errs []error
	for _, tc := range chains {
		out, err := exec.Command("iptables", "-w", "-t", tc[0], "-S", tc[1]).Output()
		if err != nil {
			return fmt.Errorf("network: iptables -t %s -S %s: %w", tc[0], tc[1], err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			// iptables -S quotes some comments; -D wants them bare.
			f := strings.Fields(strings.ReplaceAll(line, `"`, ""))
			if len(f) < 2 || f[0] != "-A" || !pred(f) {
				continue
			}
			// A rule of this owner removed between the -S and the -D (a restarted agent's
			// old process still stopping): gone is removed.
			if err := iptables(append([]string{"-t", tc[0], "-D"}, f[1:]...)...); err != nil && !ruleGone(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ownsRule reports whether the fields of an iptables -S line are a link-local rule of
// this agent: its comment carries this Network's owner tag, or it is an untagged rule
// (from a build before the tags) on one of this network's bridges ("-i <bridge>").
func (n *Network) ownsRule(f []string) bool {
	switch ruleCommentOf(f) {
	case n.ruleComment():
		return true
	case linkLocalComment:
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-i" && slices.Contains(n.bridges(), f[i+1]) {
				return true
			}
		}
	}
	return false
}

func (n *Network) bridges() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg.TaskBridge == "" { // no task subnet yet
		return []string{n.cfg.Bridge}
	}
	return []string{n.cfg.Bridge, n.cfg.TaskBridge}
}

// localnet sets route_localnet on bridge br when it exists (the bridge plugin creates it
// with the first task of its network; Setup calls localnet again then).
func (n *Network) localnet(br string) {
	_ = os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", br, "route_localnet"), []byte("1"), 0o644)
}

// ruleGone reports whether an iptables -D failed because the rule is not there.
func ruleGone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "does a matching rule exist") || strings.Contains(msg, "Bad rule")
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("network: iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
