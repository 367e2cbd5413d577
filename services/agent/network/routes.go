package network

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// PeerRouteProtocol is the rtnetlink protocol number of the routes SyncPeerRoutes keeps
// (`ip route` shows it as "proto 190"): a restarted agent finds its own routes by it and
// never touches the host's other routes.
const PeerRouteProtocol = netlink.RouteProtocol(190)

// PeerRoute is another host's awsvpc task subnet and the address it is reached at, as
// the control plane lists them (host-gateway routing, as flannel's host-gw does).
type PeerRoute struct {
	// Subnet is the peer's task subnet, an IPv4 CIDR.
	Subnet string
	// Via is the peer host's IPv4 address, which must be on a network this host reaches
	// directly (L2 adjacency): the kernel refuses a route via an address it has no
	// on-link route to.
	Via string
}

// SyncPeerRoutes makes the host's routes to other hosts' task subnets match peers: a
// route `subnet via host` (protocol PeerRouteProtocol, main table) is added or replaced
// for each peer and removed for each earlier peer no longer listed. A peer whose
// address is this host's own (two agents on one host), loopback, or whose subnet
// overlaps this host's task subnet, or already has a route that is not this package's
// (a bridge's connected route) is skipped. It then rewrites this host's peer firewall
// chains (see peerRules) for the peers routed. The error joins every peer that could
// not be routed and any iptables failure; the other peers are routed all the same.
func (n *Network) SyncPeerRoutes(peers []PeerRoute) error {
	n.mu.Lock()
	own := n.cfg.TaskSubnet
	n.mu.Unlock()
	routed, err := syncRoutes(own, peers)
	if ierr := syncPeerRules(own, routed); ierr != nil {
		err = errors.Join(err, ierr)
	}
	return err
}

// syncRoutes is SyncPeerRoutes' route half; it returns the peers routed.
func syncRoutes(own string, peers []PeerRoute) ([]PeerRoute, error) {
	var ownNet *net.IPNet
	if own != "" {
		_, ownNet, _ = net.ParseCIDR(own)
	}
	local := localAddrs()
	existing, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: PeerRouteProtocol, Table: 254}, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("network: list peer routes: %w", err)
	}
	var errs []error
	var routed []PeerRoute
	want := map[string]bool{}
	for _, p := range peers {
		_, dst, err := net.ParseCIDR(p.Subnet)
		gw := net.ParseIP(p.Via).To4()
		switch {
		case err != nil || dst.IP.To4() == nil:
			errs = append(errs, fmt.Errorf("peer subnet %q is not an IPv4 CIDR", p.Subnet))
			continue
		case gw == nil || gw.IsLoopback() || gw.IsUnspecified():
			errs = append(errs, fmt.Errorf("peer %s: host address %q is not a routable IPv4 address", p.Subnet, p.Via))
			continue
		case local[gw.String()]:
			continue // a peer on this very host: its bridge already routes the subnet
		case ownNet != nil && (ownNet.Contains(dst.IP) || dst.Contains(ownNet.IP)):
			errs = append(errs, fmt.Errorf("peer subnet %s overlaps this host's task subnet %s", dst, own))
			continue
		}
		if other := foreignRoute(dst); other != "" {
			errs = append(errs, fmt.Errorf("peer subnet %s: the host already routes it (%s); not replaced", dst, other))
			continue
		}
		want[dst.String()] = true
		r := &netlink.Route{Dst: dst, Gw: gw, Protocol: PeerRouteProtocol, Table: 254}
		if err := netlink.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w", dst, gw, err))
			continue
		}
		routed = append(routed, PeerRoute{Subnet: dst.String(), Via: gw.String()})
	}
	for _, r := range existing {
		if r.Dst == nil || want[r.Dst.String()] {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("remove route %s: %w", r.Dst, err))
		}
	}
	return routed, errors.Join(errs...)
}

// foreignRoute describes a main-table route to exactly dst that another owner (the
// kernel, an operator, another tool) installed, or returns "".
func foreignRoute(dst *net.IPNet) string {
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst, Table: 254}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return ""
	}
	for _, r := range rs {
		if r.Protocol != PeerRouteProtocol {
			return r.String()
		}
	}
	return ""
}

// PeerRoutes returns the routes SyncPeerRoutes installed, as PeerRoute values sorted by
// subnet.
func PeerRoutes() ([]PeerRoute, error) {
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: PeerRouteProtocol, Table: 254}, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	var out []PeerRoute
	for _, r := range rs {
		if r.Dst != nil && r.Gw != nil {
			out = append(out, PeerRoute{Subnet: r.Dst.String(), Via: r.Gw.String()})
		}
	}
	slices.SortFunc(out, func(a, b PeerRoute) int { return strings.Compare(a.Subnet, b.Subnet) })
	return out, nil
}

func localAddrs() map[string]bool {
	out := map[string]bool{}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return out
	}
	for _, a := range addrs {
		out[a.IP.String()] = true
	}
	return out
}

// PeerChain returns the name of the iptables chains (filter and nat) holding the peer
// rules of the host whose task subnet is own: BERTH-PEERS- and 8 hex digits of the
// subnet's hash, so two agents on one host keep separate chains.
func PeerChain(own string) string {
	h := sha256.Sum256([]byte(own))
	return "BERTH-PEERS-" + hex.EncodeToString(h[:4])
}

// syncPeerRules rewrites the host's peer chains for the peers routed (nothing without a
// task subnet of its own):
//   - filter PeerChain (jumped to first from FORWARD): ACCEPT traffic between the own
//     subnet and each peer's subnet and host address, both ways, whatever the FORWARD
//     policy (Docker sets DROP);
//   - nat PeerChain (jumped to first from POSTROUTING): ACCEPT, i.e. do not masquerade,
//     traffic from the own subnet to each peer subnet, so the peer task sees the real
//     source address (the bridge plugin's ipMasq still hides tasks behind the host for
//     every other destination).
func syncPeerRules(own string, peers []PeerRoute) error {
	if own == "" {
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return errors.New("network: iptables not found (install iptables): peer task subnets are routed but not let through")
	}
	chain := PeerChain(own)
	var filter, nat [][]string
	for _, p := range peers {
		filter = append(filter,
			[]string{"-s", p.Subnet, "-d", own, "-j", "ACCEPT"},
			[]string{"-s", p.Via + "/32", "-d", own, "-j", "ACCEPT"},
			[]string{"-s", own, "-d", p.Subnet, "-j", "ACCEPT"},
			[]string{"-s", own, "-d", p.Via + "/32", "-j", "ACCEPT"})
		nat = append(nat, []string{"-s", own, "-d", p.Subnet, "-j", "ACCEPT"})
	}
	if err := rewriteChain("filter", chain, "FORWARD", filter); err != nil {
		return err
	}
	return rewriteChain("nat", chain, "POSTROUTING", nat)
}

// rewriteChain creates chain in table when missing, replaces its rules with rules, and
// makes from jump to it first (once).
func rewriteChain(table, chain, from string, rules [][]string) error {
	if err := iptables("-t", table, "-N", chain); err != nil && !strings.Contains(err.Error(), "exists") {
		return err
	}
	if err := iptables("-t", table, "-F", chain); err != nil {
		return err
	}
	for _, r := range rules {
		if err := iptables(append([]string{"-t", table, "-A", chain}, r...)...); err != nil {
			return err
		}
	}
	if iptables("-t", table, "-C", from, "-j", chain) != nil {
		if err := iptables("-t", table, "-I", from, "1", "-j", chain); err != nil {
			return err
		}
	}
	return nil
}
