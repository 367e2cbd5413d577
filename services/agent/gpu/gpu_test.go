package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
)

// fakeHost is a fake device list: two GPUs and the control node.
var fakeHost = Host{
	GPUs: []GPU{
		{ID: "GPU-aaa", Device: Device{Path: "/dev/nvidia0", Major: 195, Minor: 0}},
		{ID: "GPU-bbb", Device: Device{Path: "/dev/nvidia1", Major: 195, Minor: 1}},
	},
	Control: []Device{{Path: "/dev/nvidiactl", Major: 195, Minor: 255}},
}

// TestSpecOpts: on an empty spec the option adds exactly the assigned GPU's node plus
// the control nodes (created and allowed in the device cgroup) and NVIDIA_VISIBLE_DEVICES;
// no ids adds nothing; an unknown id is refused.
func TestSpecOpts(t *testing.T) {
	opt, err := SpecOpts(fakeHost, []string{"GPU-bbb"})
	if err != nil {
		t.Fatal(err)
	}
	s := &oci.Spec{}
	if err := opt(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range s.Linux.Devices {
		paths = append(paths, d.Path)
		if d.Type != "c" || d.FileMode == nil || *d.FileMode != 0o666 {
			t.Errorf("device %+v", d)
		}
	}
	if !slices.Equal(paths, []string{"/dev/nvidia1", "/dev/nvidiactl"}) {
		t.Fatalf("devices %v, want nvidia1 and nvidiactl only", paths)
	}
	rules := s.Linux.Resources.Devices
	if len(rules) != 2 || !rules[0].Allow || *rules[0].Major != 195 || *rules[0].Minor != 1 || rules[0].Access != "rwm" || *rules[1].Minor != 255 {
		t.Fatalf("cgroup rules %+v", rules)
	}
	if !slices.Equal(s.Process.Env, []string{"NVIDIA_VISIBLE_DEVICES=GPU-bbb"}) {
		t.Fatalf("env %v", s.Process.Env)
	}

	opt, err = SpecOpts(fakeHost, []string{"GPU-aaa", "GPU-bbb"})
	if err != nil {
		t.Fatal(err)
	}
	s = &oci.Spec{}
	if err := opt(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Linux.Devices) != 3 || !slices.Equal(s.Process.Env, []string{"NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"}) {
		t.Fatalf("two GPUs: %v %v", s.Linux.Devices, s.Process.Env)
	}
	if opt, err := SpecOpts(fakeHost, nil); opt != nil || err != nil {
		t.Fatalf("no ids: %v %v", opt, err)
	}
	if _, err := SpecOpts(fakeHost, []string{"GPU-zzz"}); !errors.Is(err, ErrUnknownID) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestNVIDIANone: this host's /dev, and a directory without nvidia nodes, have no GPUs
// (nvidia-smi is not even asked: SMI names a command that does not exist).
func TestNVIDIANone(t *testing.T) {
	if m, _ := filepath.Glob("/dev/nvidia[0-9]*"); len(m) > 0 {
		t.Logf("this host has NVIDIA nodes %v; checking an empty directory only", m)
	} else {
		h, err := NVIDIA{SMI: "/nonexistent/nvidia-smi"}.List(context.Background())
		if err != nil || len(h.GPUs) != 0 {
			t.Fatalf("host /dev: %+v, %v", h, err)
		}
	}
	h, err := NVIDIA{DevDir: t.TempDir(), SMI: "/nonexistent/nvidia-smi"}.List(context.Background())
	if err != nil || len(h.GPUs) != 0 || len(h.IDs()) != 0 {
		t.Fatalf("empty dir: %+v, %v", h, err)
	}
}

// TestNVIDIANodesWithoutSMI: a node named like a GPU but no working nvidia-smi is an
// error, not a silent zero.
func TestNVIDIANodesWithoutSMI(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia0"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (NVIDIA{DevDir: dir, SMI: "/nonexistent/nvidia-smi"}).List(context.Background()); err == nil {
		t.Fatal("no error without nvidia-smi")
	}
}

// TestParseSMI reads nvidia-smi's CSV and refuses what it does not understand.
func TestParseSMI(t *testing.T) {
	g, err := parseSMI([]byte("0, GPU-aaa\n1, GPU-bbb\n\n"))
	if err != nil || len(g) != 2 || g[1] != (smiGPU{"1", "GPU-bbb"}) {
		t.Fatalf("%v %v", g, err)
	}
	if _, err := parseSMI([]byte("No devices were found\n")); err == nil {
		t.Fatal("bad line accepted")
	}
}
