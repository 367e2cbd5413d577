package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Ulimit is one resource limit, named as in ECS ("nofile", "nproc", …).
type Ulimit struct {
	// Name is the limit without its RLIMIT_ prefix, lower case.
	Name string
	// Soft is the soft limit, in the resource's unit.
	Soft uint64
	// Hard is the hard limit, in the resource's unit.
	Hard uint64
}

// ContainerSpec is what the agent asks of one container, in Docker's
// terms (the ECS agent passes container definitions to Docker).
type ContainerSpec struct {
	// ID is the containerd container id; its snapshot is ID+"-rootfs".
	ID string
	// Image is the pulled image.
	Image containerd.Image
	// Snapshotter holds the container's root filesystem.
	Snapshotter string
	// RuncRoot is runc's state directory for the container (runc's --root); "" keeps
	// runc's default, /run/containerd/runc, shared by every containerd of the host.
	RuncRoot string
	// EntryPoint, when non-nil, replaces the image's ENTRYPOINT and drops
	// its CMD, as `docker run --entrypoint` does.
	EntryPoint []string
	// Command, when non-nil, replaces the image's CMD.
	Command []string
	// Env are KEY=VALUE pairs set over the image's environment.
	Env []string
	// WorkingDir, when set, replaces the image's working directory.
	WorkingDir string
	// User, when set, is "user", "uid", "user:group" or "uid:gid".
	User string
	// CPUShares is the cgroup cpu.shares; values below 2 become 2 as
	// Docker does.
	CPUShares uint64
	// MemoryMiB is the hard memory limit; 0 means none.
	MemoryMiB int64
	// MemoryReservationMiB is the soft memory limit; 0 means none.
	MemoryReservationMiB int64
	// Ulimits are resource limits for the container's processes.
	Ulimits []Ulimit
	// Labels go on the containerd container (dockerLabels plus the agent's).
	Labels map[string]string
	// ReadonlyRootfs mounts the root filesystem read-only.
	ReadonlyRootfs bool
	// Hostname, when set, is the container's host name.
	Hostname string
	// TTY gives the process a pseudo-terminal (ECS pseudoTerminal, Docker's -t); its
	// output, stdout and stderr merged, is the terminal's. The caller's cio must then be
	// a terminal one (cio.WithTerminal).
	TTY bool
	// Mounts are bind mounts of host directories (volumes), in order.
	Mounts []Mount
	// Linux are the linuxParameters Berth honours.
	Linux LinuxOptions
	// NetNS, when set, is the path of the network namespace the container joins (its own
	// or its task's, set up by package network); "" runs it in the host's (networkMode
	// host).
	NetNS string
	// HostsFile and ResolvConf, when set, are host files bind-mounted read-only as the
	// container's /etc/hosts and /etc/resolv.conf; "" mounts the host's own.
	HostsFile, ResolvConf string
	// CgroupParent, when set, is the task cgroup (EnsureTaskCgroup) the container's
	// cgroup is created in; else containerd's default /namespace/id.
	CgroupParent string
}

// Args returns the process arguments for an image's entrypoint and cmd
// under Docker's rules: an EntryPoint replaces both, a Command replaces
// the cmd only.
func Args(imageEntrypoint, imageCmd, entryPoint, command []string) []string {
	switch {
	case entryPoint != nil:
		return append(append([]string{}, entryPoint...), command...)
	case command != nil:
		return append(append([]string{}, imageEntrypoint...), command...)
	default:
		return append(append([]string{}, imageEntrypoint...), imageCmd...)
	}
}

// Create creates the container of spec, with a new snapshot of its image,
// in the network namespace spec.NetNS (the host's when ""). It returns the container or an error naming it.
func Create(ctx context.Context, client *containerd.Client, spec ContainerSpec) (containerd.Container, error) {
	imgSpec, err := spec.Image.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("create container %s: image config: %w", spec.ID, err)
	}
	args := Args(imgSpec.Config.Entrypoint, imgSpec.Config.Cmd, spec.EntryPoint, spec.Command)
	if len(args) == 0 {
		return nil, fmt.Errorf("create container %s: no command: the image has no entrypoint or cmd and none was given", spec.ID)
	}
	opts := append([]oci.SpecOpts{oci.WithImageConfig(spec.Image), oci.WithProcessArgs(args...)}, specOpts(spec)...)
	ctr, err := client.NewContainer(ctx, spec.ID,
		containerd.WithImage(spec.Image),
		containerd.WithSnapshotter(spec.Snapshotter),
		containerd.WithNewSnapshot(RootfsKey(spec.ID), spec.Image),
		containerd.WithContainerLabels(spec.Labels),
		containerd.WithImageStopSignal(spec.Image, "SIGTERM"),
		containerd.WithNewSpec(opts...),
		withRuncRoot(spec.RuncRoot),
	)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", spec.ID, err)
	}
	return ctr, nil
}

// RootfsKey returns the key of the snapshot holding the root filesystem of the container
// with id (Create makes it).
func RootfsKey(id string) string { return id + "-rootfs" }

// RemoveRootfs removes the root filesystem snapshot of the container with id from
// snapshotter, when one is left without its container (a create cut short between the
// snapshot and the container record, as when the agent was killed in between). Not
// there is not an error.
func RemoveRootfs(ctx context.Context, client *containerd.Client, snapshotter, id string) error {
	err := client.SnapshotService(snapshotter).Remove(ctx, RootfsKey(id))
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove snapshot %s: %w", RootfsKey(id), err)
	}
	return nil
}

// withRuncRoot runs the container with the io.containerd.runc.v2 shim and runc's state
// under root; "" leaves the runtime to containerd's default.
func withRuncRoot(root string) containerd.NewContainerOpts {
	if root == "" {
		return func(context.Context, *containerd.Client, *containers.Container) error { return nil }
	}
	return containerd.WithRuntime(plugins.RuntimeRuncV2, &options.Options{Root: root})
}

// specOpts returns the OCI spec options of spec after the image's own config (which
// they override): the network namespace (the host's unless spec.NetNS), hosts and
// resolv.conf files (the host's unless given), environment, working
// directory, user, host name (the host's when unset), CPU shares (at least 2, as Docker
// clamps them), memory limit and reservation, ulimits and a read-only root.
func specOpts(spec ContainerSpec) []oci.SpecOpts {
	var opts []oci.SpecOpts
	if spec.NetNS != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNS}))
	} else {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	if spec.HostsFile != "" {
		opts = append(opts, withEtcFile("/etc/hosts", spec.HostsFile))
	} else {
		opts = append(opts, oci.WithHostHostsFile)
	}
	if spec.ResolvConf != "" {
		opts = append(opts, withEtcFile("/etc/resolv.conf", spec.ResolvConf))
	} else {
		opts = append(opts, oci.WithHostResolvconf)
	}
	if len(spec.Env) > 0 {
		opts = append(opts, oci.WithEnv(spec.Env))
	}
	if spec.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(spec.WorkingDir))
	}
	if spec.User != "" {
		opts = append(opts, oci.WithUser(spec.User))
	}
	if spec.Hostname != "" {
		opts = append(opts, oci.WithHostname(spec.Hostname))
	} else if h, err := os.Hostname(); err == nil {
		opts = append(opts, oci.WithHostname(h))
	}
	opts = append(opts, oci.WithCPUShares(max(spec.CPUShares, 2)))
	if spec.MemoryMiB > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(spec.MemoryMiB)<<20))
	}
	if spec.MemoryReservationMiB > 0 {
		opts = append(opts, withMemoryReservation(spec.MemoryReservationMiB<<20))
	}
	if len(spec.Ulimits) > 0 {
		opts = append(opts, withUlimits(spec.Ulimits))
	}
	if spec.ReadonlyRootfs {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if spec.TTY {
		opts = append(opts, oci.WithTTY)
	}
	if len(spec.Mounts) > 0 {
		opts = append(opts, WithBindMounts(spec.Mounts))
	}
	opts = append(opts, linuxSpecOpts(spec.Linux)...)
	if spec.CgroupParent != "" {
		opts = append(opts, WithCgroupParent(spec.CgroupParent, spec.ID))
	}
	return opts
}

// withEtcFile bind-mounts the host file src read-only at dst (/etc/hosts, /etc/resolv.conf).
func withEtcFile(dst, src string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "ro"}})
		return nil
	}
}

// memoryOf returns s's memory resources, creating the Linux, Resources and Memory
// sections that are missing, for the options that set one memory field.
func memoryOf(s *oci.Spec) *specs.LinuxMemory {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
	if s.Linux.Resources.Memory == nil {
		s.Linux.Resources.Memory = &specs.LinuxMemory{}
	}
	return s.Linux.Resources.Memory
}

// withMemoryReservation sets the soft memory limit in bytes.
func withMemoryReservation(bytes int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		memoryOf(s).Reservation = &bytes
		return nil
	}
}

// withUlimits sets the process's rlimits, replacing any of the same type.
func withUlimits(limits []Ulimit) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		for _, u := range limits {
			typ := "RLIMIT_" + strings.ToUpper(u.Name)
			r := specs.POSIXRlimit{Type: typ, Soft: u.Soft, Hard: u.Hard}
			replaced := false
			for i := range s.Process.Rlimits {
				if s.Process.Rlimits[i].Type == typ {
					s.Process.Rlimits[i], replaced = r, true
				}
			}
			if !replaced {
				s.Process.Rlimits = append(s.Process.Rlimits, r)
			}
		}
		return nil
	}
}

// OOMKilled reports whether the kernel's OOM killer acted in the
// container's memory cgroup (namespace/id, containerd's default cgroup
// path), on cgroup v1 or v2. Read it after the task exits and before it is
// deleted; it returns false when the cgroup is gone.
func OOMKilled(namespace, id string) bool {
	for _, p := range []struct{ file, key string }{
		{filepath.Join("/sys/fs/cgroup/memory", namespace, id, "memory.oom_control"), "oom_kill"},
		{filepath.Join("/sys/fs/cgroup", namespace, id, "memory.events"), "oom_kill"},
	} {
		b, err := os.ReadFile(p.file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == p.key {
				if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
					return true
				}
			}
		}
	}
	return false
}
