package network

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// PluginsFor are the CNI plugins each networkMode runs (confList and load): the bridge
// plugin with host-local addresses, portmap for bridge's published ports, firewall, and
// loopback in every namespace. New needs all of them (PluginsNeeded).
var PluginsFor = map[Mode][]string{
	Bridge: {"bridge", "host-local", "portmap", "firewall", "loopback"},
	AWSVPC: {"bridge", "host-local", "firewall", "loopback"},
	None:   {"loopback"},
}

// checkModes is the order modes are named in.
var checkModes = []Mode{Bridge, AWSVPC, None}

// PluginsNeeded are the plugins New looks for: every plugin of PluginsFor, in the order
// Bridge names them.
func PluginsNeeded() []string { return slices.Clone(PluginsFor[Bridge]) }

// Missing is one piece of task networking this host lacks.
type Missing struct {
	// Modes are the networkModes that cannot run without it.
	Modes []Mode
	// What names it: `CNI plugin "portmap"`, "iptables".
	What string
	// Where says where it was looked for: "/usr/lib/cni, /opt/cni/bin", "PATH".
	Where string
	// Package is the Debian package that provides it.
	Package string
}

// String is one line for an operator, e.g. `networkMode bridge unavailable: CNI plugin
// "portmap" not found in /usr/lib/cni (apt-get install containernetworking-plugins)`.
func (m Missing) String() string {
	modes := make([]string, len(m.Modes))
	for i, md := range m.Modes {
		modes[i] = string(md)
	}
	s := "networkModes " + strings.Join(modes[:len(modes)-1], ", ") + " and " + modes[len(modes)-1]
	if len(modes) == 1 {
		s = "networkMode " + modes[0]
	}
	return fmt.Sprintf("%s unavailable: %s not found in %s (apt-get install %s)", s, m.What, m.Where, m.Package)
}

// Check reports what task networking needs and this host lacks, in the order PluginsFor
// names it: each CNI plugin not found in pluginDirs (as New looks for them; nil for New's
// default directories), then iptables (bridge's NAT, portmap and firewall run it) when it
// is not in PATH. Nothing missing is an empty list. It does not check that the agent is
// root, which CNI needs too.
func Check(pluginDirs []string) []Missing {
	if len(pluginDirs) == 0 {
		pluginDirs = []string{DefaultPluginDir, "/opt/cni/bin"}
	}
	var out []Missing
	for _, p := range PluginsNeeded() {
		if findPlugin(pluginDirs, p) != "" {
			continue
		}
		m := Missing{What: fmt.Sprintf("CNI plugin %q", p), Where: strings.Join(pluginDirs, ", "), Package: "containernetworking-plugins"}
		for _, md := range checkModes {
			for _, q := range PluginsFor[md] {
				if q == p {
					m.Modes = append(m.Modes, md)
				}
			}
		}
		out = append(out, m)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		out = append(out, Missing{Modes: []Mode{Bridge, AWSVPC}, What: "iptables", Where: "PATH", Package: "iptables"})
	}
	return out
}
