package tasks

import (
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

// linuxOptions returns the linuxParameters Berth honours (capabilities, tmpfs,
// sharedMemorySize); the scheduler refuses the others (docs/task-definition-fields.md).
func linuxOptions(lp *ecsv1.LinuxParameters) runtime.LinuxOptions {
	if lp == nil {
		return runtime.LinuxOptions{}
	}
	l := runtime.LinuxOptions{
		CapAdd:     lp.GetCapabilities().GetAdd(),
		CapDrop:    lp.GetCapabilities().GetDrop(),
		ShmSizeMiB: int64(lp.GetSharedMemorySize()),
	}
	for _, t := range lp.GetTmpfs() {
		l.Tmpfs = append(l.Tmpfs, runtime.Tmpfs{Path: t.GetContainerPath(), SizeMiB: int64(t.GetSize()), Options: t.GetMountOptions()})
	}
	return l
}
