package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// linkLocalComment marks the iptables rules RouteLinkLocal installs, so a restarted agent
// finds (and replaces) them instead of adding copies.
const linkLocalComment = "berth-task-endpoints"

// RouteLinkLocal makes 169.254.170.2:80 reach target ("ip:port", the agent's endpoints
// listener) from the task namespaces of both bridges (networkMode bridge and awsvpc), as
// the ECS agent does on EC2: a nat PREROUTING DNAT rule per bridge. For a loopback target
// the bridges also get route_localnet (the kernel drops packets redirected to 127.0.0.0/8
// otherwise) and a filter INPUT rule that drops every other packet from the bridge to
// 127.0.0.0/8, so the tasks reach only the redirected port of the host's loopback. It is
// idempotent: rules a previous agent left (with any target) are replaced, never
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
	for _, br := range n.bridges() {
		if loopback {
			if err := iptables("-t", "filter", "-I", "INPUT", "1", "-i", br, "-d", "127.0.0.0/8",
				"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
				"-m", "comment", "--comment", linkLocalComment, "-j", "DROP"); err != nil {
				return err
			}
			n.localnet(br)
		}
		if err := iptables("-t", "nat", "-I", "PREROUTING", "1", "-i", br, "-d", LinkLocalAddr+"/32", "-p", "tcp", "--dport", "80",
			"-m", "comment", "--comment", linkLocalComment, "-j", "DNAT", "--to-destination", target); err != nil {
			return err
		}
		if dns := n.cfg.DNSTarget; dns != "" {
			// The Cloud Map DNS server answers the tasks' nameserver (UDP and TCP).
			for _, proto := range []string{"udp", "tcp"} {
				if err := iptables("-t", "nat", "-I", "PREROUTING", "1", "-i", br, "-d", TaskResolverAddr+"/32", "-p", proto, "--dport", "53",
					"-m", "comment", "--comment", linkLocalComment, "-j", "DNAT", "--to-destination", dns); err != nil {
					return err
				}
			}
		}
	}
	n.mu.Lock()
	n.linkLocal, n.routed = loopback, target
	n.mu.Unlock()
	return nil
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

// UnrouteLinkLocal removes the rules RouteLinkLocal installed for this network's bridges
// (whichever agent installed them). Removing rules that are not there is not an error.
func (n *Network) UnrouteLinkLocal() error {
	n.mu.Lock()
	n.linkLocal, n.routed = false, ""
	n.mu.Unlock()
	var errs []error
	for _, tc := range [][2]string{{"nat", "PREROUTING"}, {"filter", "INPUT"}} {
		out, err := exec.Command("iptables", "-w", "-t", tc[0], "-S", tc[1]).Output()
		if err != nil {
			return fmt.Errorf("network: iptables -t %s -S %s: %w", tc[0], tc[1], err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || !strings.Contains(line, linkLocalComment) || !n.ownsRule(f) {
				continue
			}
			// Another agent on the host may have removed the same rule between the -S
			// and the -D (it replaces rules it finds, as this does): gone is removed.
			if err := iptables(append([]string{"-t", tc[0], "-D"}, f[1:]...)...); err != nil && !ruleGone(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ownsRule reports whether the fields of an iptables -S line match one of this network's
// bridges ("-i <bridge>").
func (n *Network) ownsRule(f []string) bool {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-i" {
			for _, br := range n.bridges() {
				if f[i+1] == br {
					return true
				}
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
