package network

import "sync"

// addGate runs CNI ADDs. The standard plugins create shared host state on a network's
// first ADD (the bridge, the IPAM directory, iptables chains) by checking and then
// creating, which two concurrent first ADDs race on: the firewall plugin (1.1.1, as
// Debian ships it) then fails one of them with "CHAIN_USER_ADD failed (File exists)"
// for CNI-FORWARD, and the task stops with a ResourceInitializationError. So until an
// ADD of a network has succeeded, ADDs run one at a time (whatever their network, as
// the networks share chains); after that, a network's ADDs run concurrently.
type addGate struct {
	first  sync.Mutex // held by an ADD of a network with no successful ADD yet
	mu     sync.Mutex
	primed map[string]bool // networks with a successful ADD
}

// add runs f, the ADD of network (a name of the caller's), under the gate and returns
// its error.
func (g *addGate) add(network string, f func() error) error {
	g.mu.Lock()
	primed := g.primed[network]
	g.mu.Unlock()
	if primed {
		return f()
	}
	g.first.Lock()
	defer g.first.Unlock()
	err := f()
	if err == nil {
		g.mu.Lock()
		if g.primed == nil {
			g.primed = map[string]bool{}
		}
		g.primed[network] = true
		g.mu.Unlock()
	}
	return err
}

// cniAdds gates every Network's ADDs: the chains are the host's, so two Networks of one
// process (agents in one test binary) race on them as two tasks of one Network do.
var cniAdds addGate
