package tasks

import (
	"errors"
	"os/exec"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

// linuxOptions returns the Linux settings Berth honours of a container definition
// (privileged, systemControls, linuxParameters capabilities, devices, initProcessEnabled,
// maxSwap, swappiness, tmpfs and sharedMemorySize)
// and of its task (pidMode host, ipcMode host and none; pidMode and ipcMode task are
// joinNamespaces'); the scheduler refuses the others (docs/task-definition-fields.md).
func linuxOptions(td *ecsv1.TaskDefinition, def *ecsv1.ContainerDefinition) (runtime.LinuxOptions, error) {
	l := runtime.LinuxOptions{Privileged: def.GetPrivileged(), HostPID: td.GetPidMode() == "host", IPC: td.GetIpcMode()}
	for _, sc := range def.GetSystemControls() {
		if l.Sysctls == nil {
			l.Sysctls = map[string]string{}
		}
		l.Sysctls[sc.GetNamespace()] = sc.GetValue()
	}
	lp := def.GetLinuxParameters()
	if lp == nil {
		return l, nil
	}
	if lp.GetInitProcessEnabled() {
		p, err := initBinary()
		if err != nil {
			return l, err
		}
		l.Init = p
	}
	if lp.MaxSwap != nil {
		v := int64(lp.GetMaxSwap())
		l.MaxSwapMiB = &v
	}
	if lp.Swappiness != nil {
		v := uint64(lp.GetSwappiness())
		l.Swappiness = &v
	}
	l.CapAdd, l.CapDrop = lp.GetCapabilities().GetAdd(), lp.GetCapabilities().GetDrop()
	l.ShmSizeMiB = int64(lp.GetSharedMemorySize())
	for _, d := range lp.GetDevices() {
		perms := ""
		for _, p := range d.GetPermissions() {
			perms += map[string]string{"read": "r", "write": "w", "mknod": "m"}[p]
		}
		l.Devices = append(l.Devices, runtime.Device{HostPath: d.GetHostPath(), ContainerPath: d.GetContainerPath(), Permissions: perms})
	}
	for _, t := range lp.GetTmpfs() {
		l.Tmpfs = append(l.Tmpfs, runtime.Tmpfs{Path: t.GetContainerPath(), SizeMiB: int64(t.GetSize()), Options: t.GetMountOptions()})
	}
	return l, nil
}

// InitBinary finds a static init for initProcessEnabled on this host: docker-init (as
// Docker ships it) or tini-static, looked up in PATH at each call (one installed while
// the agent runs is found). A dynamic tini is not used: images need not have a libc. The
// error says neither is in PATH.
func InitBinary() (string, error) {
	for _, name := range []string{"docker-init", "tini-static"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("initProcessEnabled needs docker-init or tini-static on the container instance; neither is in PATH")
}

// initBinary is InitBinary (a seam for tests).
var initBinary = InitBinary
