// Package network gives ECS tasks their network through CNI, driven with containerd's
// go-cni library and the standard plugins (bridge, host-local, portmap, firewall,
// loopback): a network namespace per container on the Berth bridge for networkMode
// bridge (outbound NAT, host ports mapped by portmap, dynamic host ports allocated here),
// one per task on the host's awsvpc subnet for networkMode awsvpc, and loopback only for
// networkMode none. It owns the namespaces, the host ports it hands out and a small state
// file per task under its state directory, so a restarted agent finds the network of the
// tasks it adopts and tears down what it no longer runs.
package network
