package agentcmd

import (
	"fmt"
	"syscall"
)

// remountProcSysWritable remounts /proc/sys read-write in the agent's mount namespace.
// A container engine mounts a container's /proc/sys read-only (a bind mount of its own,
// remounted with MS_RDONLY); an agent that is a host of its own inside a container
// (deploy/compose.yaml) writes the sysctls of its own network namespace there, as the CNI
// portmap plugin does (route_localnet of the task bridge, for every bridge-mode task with
// a host port). It needs CAP_SYS_ADMIN and no AppArmor profile forbidding mounts; the
// mount stays nosuid, nodev and noexec. It returns the mount(2) error.
func remountProcSysWritable() error {
	if err := syscall.Mount("", "/proc/sys", "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("remount /proc/sys read-write: %w", err)
	}
	return nil
}
