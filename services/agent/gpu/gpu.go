// Package gpu finds the host's NVIDIA GPUs and exposes assigned ones to a container.
//
// The ECS agent registers a container instance's GPUs as the resource "GPU", a STRINGSET
// of GPU ids (NVIDIA UUIDs, as nvidia-smi and NVML name them), and gives a container
// its assigned GPUs through NVIDIA_VISIBLE_DEVICES. Berth's agent does the same, and
// since it runs containers on plain containerd (no NVIDIA container runtime), it also
// adds the device nodes itself: the GPUs' /dev/nvidiaN and the driver's control nodes
// (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools) when present.
//
// The device lister is an interface (Lister) so the assignment logic is tested with a
// fake list; NVIDIA is the real one.
package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// EnvVisibleDevices is the variable the ECS agent sets to a container's GPU ids (comma
// separated), read by NVIDIA's container tooling and CUDA images.
const EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

// Device is a character device node of the host.
type Device struct {
	// Path is the node's absolute path, the same on the host and in the container.
	Path string
	// Major and Minor are the node's device numbers.
	Major, Minor int64
}

// GPU is one NVIDIA GPU of the host.
type GPU struct {
	// ID is the GPU's UUID ("GPU-…"), the id registered and assigned.
	ID string
	// Device is its /dev/nvidiaN node.
	Device Device
}

// Host is what a Lister finds.
type Host struct {
	// GPUs are the host's GPUs in nvidia-smi's order; none on a host without them.
	GPUs []GPU
	// Control are the driver's shared nodes every GPU container needs (nvidiactl,
	// nvidia-uvm, nvidia-uvm-tools), those present.
	Control []Device
}

// IDs returns the GPUs' ids in order.
func (h Host) IDs() []string {
	ids := make([]string, len(h.GPUs))
	for i, g := range h.GPUs {
		ids[i] = g.ID
	}
	return ids
}

// Lister finds the host's GPUs.
type Lister interface {
	// List returns the host's GPUs (an empty Host when it has none) or an error when
	// GPU nodes exist but cannot be identified.
	List(ctx context.Context) (Host, error)
}

// NVIDIA is the real Lister: GPUs are the /dev/nvidia[0-9]* nodes, identified by
// `nvidia-smi --query-gpu=index,uuid --format=csv,noheader` (GPU index N is the node
// /dev/nvidiaN, NVIDIA's numbering outside MIG).
type NVIDIA struct {
	// DevDir is where the nodes are looked for; "" is /dev.
	DevDir string
	// SMI is the nvidia-smi command; "" finds nvidia-smi in PATH.
	SMI string
}

// List implements Lister. With no /dev/nvidia[0-9]* node it returns an empty Host
// without running nvidia-smi; with nodes it returns an error when nvidia-smi is missing
// or fails, or names a GPU whose node is not there.
func (n NVIDIA) List(ctx context.Context) (Host, error) {
	dir := n.DevDir
	if dir == "" {
		dir = "/dev"
	}
	nodes, _ := filepath.Glob(filepath.Join(dir, "nvidia[0-9]*"))
	if len(nodes) == 0 {
		return Host{}, nil
	}
	smi := n.SMI
	if smi == "" {
		smi = "nvidia-smi"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, smi, "--query-gpu=index,uuid", "--format=csv,noheader").Output()
	if err != nil {
		return Host{}, fmt.Errorf("gpu: %d NVIDIA device nodes but %s failed: %w", len(nodes), smi, err)
	}
	gpus, err := parseSMI(out)
	if err != nil {
		return Host{}, err
	}
	var h Host
	for _, g := range gpus {
		d, err := stat(filepath.Join(dir, "nvidia"+g.index))
		if err != nil {
			return Host{}, err
		}
		h.GPUs = append(h.GPUs, GPU{ID: g.uuid, Device: d})
	}
	for _, name := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} {
		if d, err := stat(filepath.Join(dir, name)); err == nil {
			h.Control = append(h.Control, d)
		}
	}
	return h, nil
}

type smiGPU struct{ index, uuid string }

// parseSMI reads nvidia-smi's "index, uuid" CSV lines.
func parseSMI(out []byte) ([]smiGPU, error) {
	var gpus []smiGPU
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		idx, uuid, ok := strings.Cut(line, ",")
		idx, uuid = strings.TrimSpace(idx), strings.TrimSpace(uuid)
		if _, err := strconv.Atoi(idx); !ok || err != nil || uuid == "" {
			return nil, fmt.Errorf("gpu: unexpected nvidia-smi line %q", line)
		}
		gpus = append(gpus, smiGPU{idx, uuid})
	}
	return gpus, nil
}

// stat returns the character device at path.
func stat(path string) (Device, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Device{}, fmt.Errorf("gpu: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return Device{}, fmt.Errorf("gpu: %s is not a character device", path)
	}
	return Device{Path: path, Major: int64(unix.Major(uint64(st.Rdev))), Minor: int64(unix.Minor(uint64(st.Rdev)))}, nil
}

// ErrUnknownID is returned by SpecOpts for an assigned id the host does not have.
var ErrUnknownID = errors.New("gpu: assigned GPU not on this host")

// SpecOpts returns the spec option that gives a container exactly the GPUs ids of h:
// their /dev/nvidiaN nodes and h's control nodes (created in the container and allowed
// in its device cgroup, read-write-mknod as Docker's --device) and NVIDIA_VISIBLE_DEVICES
// set to the ids, comma separated, as the ECS agent sets it. No ids: nil (nothing to
// add). An id h does not have is an error wrapping ErrUnknownID.
func SpecOpts(h Host, ids []string) (oci.SpecOpts, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var devs []Device
	for _, id := range ids {
		i := slices.IndexFunc(h.GPUs, func(g GPU) bool { return g.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s", ErrUnknownID, id)
		}
		devs = append(devs, h.GPUs[i].Device)
	}
	devs = append(devs, h.Control...)
	env := EnvVisibleDevices + "=" + strings.Join(ids, ",")
	return func(ctx context.Context, c oci.Client, ctr *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Resources == nil {
			s.Linux.Resources = &specs.LinuxResources{}
		}
		mode := os.FileMode(0o666)
		var zero uint32
		for _, d := range devs {
			major, minor := d.Major, d.Minor
			s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{Path: d.Path, Type: "c", Major: major, Minor: minor, FileMode: &mode, UID: &zero, GID: &zero})
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
		}
		return oci.WithEnv([]string{env})(ctx, c, ctr, s)
	}, nil
}
