package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Tmpfs is a tmpfs mount of ECS linuxParameters.tmpfs.
type Tmpfs struct {
	// Path is the absolute mount point in the container.
	Path string
	// SizeMiB is the file system's maximum size in MiB.
	SizeMiB int64
	// Options are extra mount options ("noexec", "mode=1777", …).
	Options []string
}

// Device is a host device given to a container (ECS linuxParameters.devices).
type Device struct {
	// HostPath is the device (or a directory of devices) on the host.
	HostPath string
	// ContainerPath is where it appears; "" for HostPath.
	ContainerPath string
	// Permissions are cgroup device permissions, "r", "w" and "m" letters; "" for all.
	Permissions string
}

// LinuxOptions are the Linux-specific settings of ECS linuxParameters that Berth honours.
type LinuxOptions struct {
	// CapAdd and CapDrop are kernel capabilities as ECS names them (no CAP_ prefix; "ALL"
	// for all), applied to containerd's default set as Docker's --cap-add/--cap-drop are:
	// dropping ALL starts from none, adding ALL from every known capability.
	CapAdd, CapDrop []string
	// Devices are host devices the container may use.
	Devices []Device
	// Extra are spec options of other packages applied last (the GPUs assigned to the
	// container: gpu.SpecOpts).
	Extra []oci.SpecOpts
	// Tmpfs are tmpfs mounts, after the volumes.
	Tmpfs []Tmpfs
	// ShmSizeMiB, when above 0, is the size of /dev/shm in MiB.
	ShmSizeMiB int64
	// Privileged gives the container every capability and the host's devices, without
	// masked paths, seccomp or AppArmor, as Docker's --privileged.
	Privileged bool
	// HostPID puts the container in the host's PID namespace (ECS pidMode host).
	HostPID bool
	// IPC is ECS ipcMode: "host" joins the host's IPC namespace, "none" keeps a private
	// one without /dev/shm (Docker's --ipc none); "" a private one with /dev/shm.
	IPC string
	// JoinPID, when set, is the /proc/<pid>/ns/pid path of another container's process
	// whose PID namespace this container joins (ECS pidMode task).
	JoinPID string
	// JoinIPC, when set, is the /proc/<pid>/ns/ipc path of the IPC namespace to join
	// (ECS ipcMode task).
	JoinIPC string
	// ShmFrom, when set, is a host directory (the task's shm tmpfs, EnsureShmTmpfs)
	// bind-mounted as /dev/shm in place of a private one, so the containers of an
	// ipcMode task share POSIX shared memory too, as Docker's --ipc shareable does.
	ShmFrom string
	// MaxSwapMiB, when not nil, is the swap the container may use besides its hard
	// memory limit (ECS maxSwap; 0: none), which it needs.
	MaxSwapMiB *int64
	// Swappiness, when not nil, is the container's memory.swappiness (0–100).
	Swappiness *uint64
	// Init, when set, is the host path of a static init (docker-init, tini-static) run as
	// the container's PID 1 in front of its command, as Docker's --init (ECS
	// initProcessEnabled): it reaps zombies and forwards signals.
	Init string
	// Sysctls are namespaced kernel parameters (ECS systemControls) set in the
	// container's namespaces.
	Sysctls map[string]string
}

// capName turns an ECS capability name into the kernel's ("SYS_ADMIN" → "CAP_SYS_ADMIN").
func capName(c string) string {
	return "CAP_" + strings.ToUpper(strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
}

func capNames(cs []string) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		if !strings.EqualFold(c, "ALL") {
			out = append(out, capName(c))
		}
	}
	return out
}

func hasAll(cs []string) bool {
	return slices.ContainsFunc(cs, func(c string) bool { return strings.EqualFold(c, "ALL") })
}

// linuxSpecOpts returns the spec options of l, in the order Docker applies them.
func linuxSpecOpts(l LinuxOptions) []oci.SpecOpts {
	var opts []oci.SpecOpts
	if l.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	}
	if l.HostPID {
		opts = append(opts, oci.WithHostNamespace(specs.PIDNamespace))
	}
	if l.JoinPID != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace, Path: l.JoinPID}))
	}
	if l.JoinIPC != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.IPCNamespace, Path: l.JoinIPC}))
	}
	if l.ShmFrom != "" {
		opts = append(opts, oci.WithoutMounts("/dev/shm"), oci.WithMounts([]specs.Mount{{Type: "bind", Source: l.ShmFrom, Destination: "/dev/shm", Options: []string{"rbind", "rw"}}}))
	}
	if l.Init != "" {
		opts = append(opts, withInit(l.Init))
	}
	if l.MaxSwapMiB != nil || l.Swappiness != nil {
		opts = append(opts, withSwap(l.MaxSwapMiB, l.Swappiness))
	}
	switch l.IPC {
	case "host":
		opts = append(opts, oci.WithHostNamespace(specs.IPCNamespace))
	case "none":
		opts = append(opts, oci.WithoutMounts("/dev/shm"))
	}
	if len(l.Sysctls) > 0 {
		opts = append(opts, withSysctls(l.Sysctls))
	}
	switch {
	case hasAll(l.CapDrop):
		opts = append(opts, oci.WithCapabilities(nil), oci.WithAddedCapabilities(capNames(l.CapAdd)))
	case hasAll(l.CapAdd):
		opts = append(opts, oci.WithAllKnownCapabilities, oci.WithDroppedCapabilities(capNames(l.CapDrop)))
	default:
		if len(l.CapAdd) > 0 {
			opts = append(opts, oci.WithAddedCapabilities(capNames(l.CapAdd)))
		}
		if len(l.CapDrop) > 0 {
			opts = append(opts, oci.WithDroppedCapabilities(capNames(l.CapDrop)))
		}
	}
	for _, d := range l.Devices {
		perms := d.Permissions
		if perms == "" {
			perms = "rwm"
		}
		opts = append(opts, oci.WithDevices(d.HostPath, d.ContainerPath, perms))
	}
	if len(l.Tmpfs) > 0 {
		var ms []specs.Mount
		for _, t := range l.Tmpfs {
			options := append([]string{"nosuid", "nodev"}, t.Options...)
			options = append(options, fmt.Sprintf("size=%dm", t.SizeMiB))
			ms = append(ms, specs.Mount{Type: "tmpfs", Source: "tmpfs", Destination: t.Path, Options: options})
		}
		opts = append(opts, oci.WithMounts(ms))
	}
	if l.ShmSizeMiB > 0 && l.IPC != "none" && l.ShmFrom == "" {
		opts = append(opts, oci.WithDevShmSize(l.ShmSizeMiB<<10))
	}
	return append(opts, l.Extra...)
}

// withSysctls sets kernel parameters in the container's namespaces.
func withSysctls(kv map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for k, v := range kv {
			s.Linux.Sysctl[k] = v
		}
		return nil
	}
}

// initPath is where the init binary is mounted in the container, as Docker mounts it.
const initPath = "/sbin/docker-init"

// withInit mounts the init binary read-only and runs it as PID 1 with the process's
// arguments after "--". It must follow the options that set the arguments.
func withInit(hostPath string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil || len(s.Process.Args) == 0 {
			return fmt.Errorf("init: the container has no command to run under it")
		}
		s.Mounts = append(s.Mounts, specs.Mount{Type: "bind", Source: hostPath, Destination: initPath, Options: []string{"rbind", "ro"}})
		s.Process.Args = append([]string{initPath, "--"}, s.Process.Args...)
		return nil
	}
}

// withSwap sets the memory+swap limit to the hard memory limit plus maxSwap MiB, as the
// ECS agent asks Docker (--memory-swap), and the swappiness. It must follow the option
// that sets the memory limit; without one, maxSwap is an error.
func withSwap(maxSwapMiB *int64, swappiness *uint64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		m := memoryOf(s)
		if maxSwapMiB != nil {
			if m.Limit == nil || *m.Limit <= 0 {
				return fmt.Errorf("maxSwap needs the container's memory limit")
			}
			total := *m.Limit + *maxSwapMiB<<20
			m.Swap = &total
		}
		if swappiness != nil {
			v := *swappiness
			m.Swappiness = &v
		}
		return nil
	}
}
