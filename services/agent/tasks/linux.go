package tasks

import (
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

// linuxOptions returns the Linux settings Berth honours of a container definition
// (privileged, systemControls, linuxParameters capabilities, devices, tmpfs and
// sharedMemorySize)
// and of its task (pidMode host, ipcMode host and none); the scheduler refuses the others
// (docs/task-definition-fields.md).
func linuxOptions(td *ecsv1.TaskDefinition, def *ecsv1.ContainerDefinition) runtime.LinuxOptions {
	l := runtime.LinuxOptions{Privileged: def.GetPrivileged(), HostPID: td.GetPidMode() == "host", IPC: td.GetIpcMode()}
	for _, sc := range def.GetSystemControls() {
		if l.Sysctls == nil {
			l.Sysctls = map[string]string{}
		}
		l.Sysctls[sc.GetNamespace()] = sc.GetValue()
	}
	lp := def.GetLinuxParameters()
	if lp == nil {
		return l
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
	return l
}
