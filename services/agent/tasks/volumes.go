package tasks

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/gpu"
	"github.com/berthhq/berth/services/agent/runtime"
)

// taskIDOf returns the task id of an ARN (its last path element), made safe for a file
// or cgroup name.
func taskIDOf(arn string) string {
	id := unsafeID.ReplaceAllString(arn[strings.LastIndex(arn, "/")+1:], "_")
	if id == "" || id == "." || id == ".." {
		id = "_"
	}
	return id
}

// volumeDir returns the directory of the task's scratch volumes (empty host volumes):
// Config.VolumeDir/<task id>. It is kept across agent restarts and removed with the
// task.
func (m *Manager) volumeDir(arn string) string {
	base := m.cfg.VolumeDir
	if base == "" {
		base = filepath.Join(filepath.Dir(m.cfg.FIFODir), "volumes")
	}
	return filepath.Join(base, taskIDOf(arn))
}

// taskLimits returns the task-level memory (MiB) and cpu (units) of the task, the
// overrides' over the task definition's; 0 where there is none.
func (t *task) taskLimits() (memMiB int64, cpu uint64) {
	td, ov := t.a.GetTaskDefinition(), t.a.GetTask().GetOverrides()
	mem, c := td.GetMemory(), td.GetCpu()
	if ov != nil && ov.Memory != nil {
		mem = ov.GetMemory()
	}
	if ov != nil && ov.Cpu != nil {
		c = ov.GetCpu()
	}
	return parseTaskSize(mem, "gb", 1024), uint64(parseTaskSize(c, "vcpu", 1024))
}

// parseTaskSize reads a task size as RegisterTaskDefinition accepts it: a number of
// units ("512") or of unit×scale ("0.5 GB", "1 vCPU"). Anything else is 0.
func parseTaskSize(v, unit string, scale float64) int64 {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSuffix(v, "mib"), "mb"), 10, 64); err == nil && n > 0 {
		return n
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, unit)), 64); err == nil && f > 0 {
		return int64(f * scale)
	}
	return 0
}

// cgroupParent is the task cgroup its containers are created in when it has task-level
// cpu or memory: /<namespace>/task-<task id>, beside containerd's default
// /<namespace>/<container id>. "" when it has neither.
func (t *task) cgroupParent() string {
	if mem, cpu := t.taskLimits(); mem == 0 && cpu == 0 {
		return ""
	}
	return path.Join("/", t.m.cfg.Gate.Namespace(), "task-"+taskIDOf(t.arn))
}

// cgroupPath returns the cgroupfs path of c's container.
func (t *task) cgroupPath(c *ctrState) string {
	if p := t.cgroupParent(); p != "" {
		return path.Join(p, c.ID)
	}
	return path.Join("/", t.m.cfg.Gate.Namespace(), c.ID)
}

// prepareSpec adds what the task as a whole gives c's container: its volumes as bind
// mounts (mountPoints and volumesFrom), its Linux settings (linuxOptions) and its task
// cgroup, made here with the task's limits.
func (t *task) prepareSpec(c *ctrState, spec *runtime.ContainerSpec) error {
	mounts, err := t.mounts(c)
	if err != nil {
		return err
	}
	spec.Mounts = mounts
	if spec.Linux, err = linuxOptions(t.a.GetTaskDefinition(), c.Def); err != nil {
		return err
	}
	if err := t.taskShm(&spec.Linux); err != nil {
		return err
	}
	if err := t.gpus(c, &spec.Linux); err != nil {
		return err
	}
	if parent := t.cgroupParent(); parent != "" {
		mem, cpu := t.taskLimits()
		if err := runtime.EnsureTaskCgroup(parent, mem, cpu); err != nil {
			return err
		}
		spec.CgroupParent = parent
	}
	return nil
}

// gpus gives c's container the GPUs the scheduler assigned it (its gpuIds in the task):
// their device nodes and NVIDIA_VISIBLE_DEVICES (gpu.SpecOpts). An id this host does
// not have fails the container.
func (t *task) gpus(c *ctrState, l *runtime.LinuxOptions) error {
	for _, tc := range t.a.GetTask().GetContainers() {
		if tc.GetName() != c.Def.GetName() || len(tc.GetGpuIds()) == 0 {
			continue
		}
		opt, err := gpu.SpecOpts(t.m.cfg.GPUs, tc.GetGpuIds())
		if err != nil {
			return err
		}
		l.Extra = append(l.Extra, opt)
	}
	return nil
}

// mounts returns c's bind mounts: its mountPoints, then the mounts of each volumesFrom
// source container (read-only when volumesFrom or the source's mount point says so).
// Host volumes bind their sourcePath (created if missing, as Docker does); a host volume
// without sourcePath is a scratch directory of the task, shared by its containers.
func (t *task) mounts(c *ctrState) ([]runtime.Mount, error) {
	volumes := map[string]*ecsv1.Volume{}
	for _, v := range t.a.GetTaskDefinition().GetVolumes() {
		volumes[v.GetName()] = v
	}
	defs := map[string]*ecsv1.ContainerDefinition{}
	for _, x := range t.ctrs {
		defs[x.Name] = x.Def
	}
	var out []runtime.Mount
	seen := map[string]bool{}
	var add func(def *ecsv1.ContainerDefinition, forceRO bool) error
	add = func(def *ecsv1.ContainerDefinition, forceRO bool) error {
		if seen[def.GetName()] {
			return nil // volumesFrom cycles add nothing more
		}
		seen[def.GetName()] = true
		for _, mp := range def.GetMountPoints() {
			v := volumes[mp.GetSourceVolume()]
			if v == nil {
				return fmt.Errorf("mount point %s of container %s: volume %q is not declared", mp.GetContainerPath(), def.GetName(), mp.GetSourceVolume())
			}
			src, err := t.volumeSource(v)
			if err != nil {
				return err
			}
			out = append(out, runtime.Mount{Source: src, Destination: mp.GetContainerPath(), ReadOnly: forceRO || mp.GetReadOnly()})
		}
		for _, vf := range def.GetVolumesFrom() {
			src := defs[vf.GetSourceContainer()]
			if src == nil {
				return fmt.Errorf("volumesFrom of container %s: no container %q in the task", def.GetName(), vf.GetSourceContainer())
			}
			if err := add(src, forceRO || vf.GetReadOnly()); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(c.Def, false); err != nil {
		return nil, err
	}
	return out, nil
}

// sharedVolumeDir returns the directory of a shared Docker volume (scope shared): it
// outlives tasks and every task naming it uses the same one. Task ids are hex, so
// "_shared" is no task's directory.
func (m *Manager) sharedVolumeDir(name string) string {
	return filepath.Join(filepath.Dir(m.volumeDir("_")), "_shared", taskIDOf(name))
}

// volumeSource returns (creating it) the host directory of a volume: the mounted file
// system of an EFS volume (efsSource); sourcePath for a host bind; the task's own directory for an empty host or a task-scoped Docker volume;
// the named shared directory for a shared one, created only with autoprovision (without,
// a missing one fails the container, as ECS does).
func (t *task) volumeSource(v *ecsv1.Volume) (string, error) {
	if v.GetEfsVolumeConfiguration() != nil {
		return t.efsSource(v)
	}
	dir := filepath.Join(t.m.volumeDir(t.arn), taskIDOf(v.GetName()))
	if p := v.GetHost().GetSourcePath(); p != "" {
		dir = p
	}
	if dv := v.GetDockerVolumeConfiguration(); dv.GetScope() == "shared" {
		dir = t.m.sharedVolumeDir(v.GetName())
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && !dv.GetAutoprovision() {
			return "", fmt.Errorf("volume %s: shared volume not found on this instance and autoprovision is false", v.GetName())
		}
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("volume %s: sourcePath %q is not absolute", v.GetName(), dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("volume %s: %w", v.GetName(), err)
	}
	if o := v.GetDockerVolumeConfiguration().GetDriverOpts(); len(o) > 0 {
		// Docker's local driver with options: the volume is that mount (a task-scoped one
		// is unmounted with the task; a shared one stays mounted for the next task).
		if err := runtime.MountLocalVolume(dir, o["type"], o["device"], o["o"]); err != nil {
			return "", fmt.Errorf("volume %s: %w", v.GetName(), err)
		}
	}
	return dir, nil
}

// removeTaskResources removes what the task held besides its containers: its scratch
// volumes (unmounting those with driverOpts), its shared /dev/shm (ipcMode task), its
// containers' hosts and resolv.conf files and its task cgroup. Host sourcePath directories are the host's and stay.
func (m *Manager) removeTaskResources(arn string) error {
	var errs []error
	if err := runtime.UnmountUnder(m.volumeDir(arn)); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(m.volumeDir(arn)); err != nil {
		errs = append(errs, err)
	}
	if err := runtime.RemoveShmTmpfs(m.shmDir(arn)); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(m.netDir(arn)); err != nil {
		errs = append(errs, err)
	}
	if err := runtime.RemoveTaskCgroup(path.Join("/", m.cfg.Gate.Namespace(), "task-"+taskIDOf(arn))); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
