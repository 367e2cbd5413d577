package agent

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/berthhq/berth/services/agent/network"
)

// CheckHost returns one line per piece of the runtime this host lacks, for an agent to
// print when it starts: root (containerd and CNI need it), containerd answering at
// containerdAddr (skipped when ""), runc in PATH, and what task networking needs
// (network.Check of pluginDirs: the CNI plugins of bridge, awsvpc and none, iptables).
// Nothing missing is an empty list. It only reports: the agent runs with what is there
// (runtime-less, or without the network modes it lacks), as before.
func CheckHost(containerdAddr string, pluginDirs []string) []string {
	var out []string
	if uid := os.Geteuid(); uid != 0 {
		out = append(out, fmt.Sprintf("not root (uid %d): containerd and task networking (CNI) need root", uid))
	}
	if containerdAddr != "" {
		c, err := net.DialTimeout("unix", containerdAddr, time.Second)
		if err != nil {
			out = append(out, fmt.Sprintf("containerd not reachable at %s: no task can run and the instance advertises no CPU or memory (apt-get install containerd)", containerdAddr))
		} else {
			_ = c.Close()
		}
	}
	for _, b := range []struct{ name, pkg string }{{"runc", "runc"}, {"containerd-shim-runc-v2", "containerd"}} {
		if _, err := exec.LookPath(b.name); err != nil {
			out = append(out, fmt.Sprintf("%s not found in PATH: containerd cannot start containers (apt-get install %s)", b.name, b.pkg))
		}
	}
	for _, m := range network.Check(pluginDirs) {
		out = append(out, m.String())
	}
	return out
}
