package control

import (
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// kernelCapabilities are the values KernelCapabilities add and drop take, as the ECS API
// reference lists them (KernelCapabilities).
var kernelCapabilities = map[string]bool{}

func init() {
	for _, c := range strings.Fields(`ALL AUDIT_CONTROL AUDIT_WRITE BLOCK_SUSPEND CHOWN DAC_OVERRIDE
		DAC_READ_SEARCH FOWNER FSETID IPC_LOCK IPC_OWNER KILL LEASE LINUX_IMMUTABLE MAC_ADMIN
		MAC_OVERRIDE MKNOD NET_ADMIN NET_BIND_SERVICE NET_BROADCAST NET_RAW SETFCAP SETGID
		SETPCAP SETUID SYS_ADMIN SYS_BOOT SYS_CHROOT SYS_MODULE SYS_NICE SYS_PACCT SYS_PTRACE
		SYS_RAWIO SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG SYSLOG WAKE_ALARM`) {
		kernelCapabilities[c] = true
	}
}

// validateLinuxParameters checks the values of a container's linuxParameters Berth
// honours (capabilities, devices, maxSwap, swappiness, tmpfs, sharedMemorySize) and returns ClientException naming the
// field, as RegisterTaskDefinition answers; members Berth refuses are CheckFields'.
func validateLinuxParameters(container string, hasMemory bool, lp *ecsv1.LinuxParameters) error {
	if lp == nil {
		return nil
	}
	if lp.MaxSwap != nil && (lp.GetMaxSwap() < 0 || !hasMemory) {
		return awserr.Clientf("Invalid 'linuxParameters.maxSwap' setting for container '%s'. maxSwap must be 0 or more MiB and needs the container's 'memory'.", container)
	}
	if lp.Swappiness != nil && (lp.GetSwappiness() < 0 || lp.GetSwappiness() > 100 || lp.MaxSwap == nil) {
		return awserr.Clientf("Invalid 'linuxParameters.swappiness' setting for container '%s'. swappiness must be between 0 and 100 and needs maxSwap.", container)
	}
	for what, caps := range map[string][]string{"add": lp.GetCapabilities().GetAdd(), "drop": lp.GetCapabilities().GetDrop()} {
		for _, c := range caps {
			if !kernelCapabilities[c] {
				return awserr.Clientf("Invalid 'linuxParameters.capabilities.%s' setting for container '%s'. Unknown capability '%s'.", what, container, c)
			}
		}
	}
	if lp.SharedMemorySize != nil && lp.GetSharedMemorySize() < 1 {
		return awserr.Clientf("Invalid 'linuxParameters.sharedMemorySize' setting for container '%s'. The value must be a positive number of MiB.", container)
	}
	for _, d := range lp.GetDevices() {
		if !strings.HasPrefix(d.GetHostPath(), "/") || (d.ContainerPath != nil && !strings.HasPrefix(d.GetContainerPath(), "/")) {
			return awserr.Clientf("Invalid 'linuxParameters.devices' setting for container '%s'. hostPath and containerPath must be absolute paths.", container)
		}
		for _, p := range d.GetPermissions() {
			if !oneOf(p, "read", "write", "mknod") {
				return awserr.Clientf("Invalid 'linuxParameters.devices' setting for container '%s'. Unknown permission '%s': valid values are read, write and mknod.", container, p)
			}
		}
	}
	for _, t := range lp.GetTmpfs() {
		if !strings.HasPrefix(t.GetContainerPath(), "/") {
			return awserr.Clientf("Invalid 'linuxParameters.tmpfs' setting for container '%s'. containerPath must be an absolute path: %q.", container, t.GetContainerPath())
		}
		if t.GetSize() < 1 {
			return awserr.Clientf("Invalid 'linuxParameters.tmpfs' setting for container '%s'. size must be a positive number of MiB.", container)
		}
	}
	return nil
}

// validateSystemControls checks a container's systemControls: kernel parameters
// namespaced by the container's own IPC namespace, and net.* ones unless networkMode is
// host (the network namespace is then the host's); none with ipcMode host (the IPC
// namespace is then the host's too). ClientException names the field.
func validateSystemControls(container, ipcMode, networkMode string, scs []*ecsv1.SystemControl) error {
	if ipcMode == "host" && len(scs) > 0 {
		return awserr.Clientf("Invalid 'systemControls' setting for container '%s'. IPC namespaced kernel parameters cannot be set when ipcMode is host: they would change the host's.", container)
	}
	for _, sc := range scs {
		ns := sc.GetNamespace()
		ipc := oneOf(ns, "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem", "kernel.shmall",
			"kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced") || strings.HasPrefix(ns, "fs.mqueue.")
		switch {
		case ns == "":
			return awserr.Clientf("Invalid 'systemControls' setting for container '%s'. namespace should not be null or empty.", container)
		case strings.HasPrefix(ns, "net.") && networkMode == "host":
			return awserr.Clientf("Invalid 'systemControls' setting for container '%s'. %s cannot be set when networkMode is host: it would change the host's network namespace.", container, ns)
		case strings.HasPrefix(ns, "net.") && sc.GetValue() == "":
			return awserr.Clientf("Invalid 'systemControls' setting for container '%s'. value should not be null or empty.", container)
		case strings.HasPrefix(ns, "net."):
		case !ipc:
			return awserr.Clientf("Invalid 'systemControls' setting for container '%s'. %s is not a namespaced kernel parameter Berth can set; supported are kernel.msgmax, kernel.msgmnb, kernel.msgmni, kernel.sem, kernel.shmall, kernel.shmmax, kernel.shmmni, kernel.shm_rmid_forced and fs.mqueue.*.", container, ns)
		case sc.GetValue() == "":
			return awserr.Clientf("Invalid 'systemControls' setting for container '%s'. value should not be null or empty.", container)
		}
	}
	return nil
}
