package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/berthhq/berth/services/agent/gpu"
	"github.com/berthhq/berth/services/agent/runtime"
)

// fakeGPUs is a gpu.Lister answering a fixed device list.
type fakeGPUs gpu.Host

func (f fakeGPUs) List(context.Context) (gpu.Host, error) { return gpu.Host(f), nil }

// TestRegistrationGPUs: the agent registers the GPU resource (a STRINGSET of the GPU ids,
// as the ECS agent does) only when its Lister finds GPUs; on this host's real devices
// (no NVIDIA GPU) it registers none.
func TestRegistrationGPUs(t *testing.T) {
	gpuRes := func(l gpu.Lister) []string {
		t.Helper()
		cfg := Config{ControlPlaneURL: "http://127.0.0.1:1", DataDir: t.TempDir(), LogAddr: "off", GPUs: l}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := &hostView{a: a, gate: runtime.NewGate(runtime.GateConfig{})}
		var ids []string
		n := 0
		for _, r := range h.Registration().GetResources() {
			if r.GetName() == "GPU" {
				n++
				if r.GetType() != "STRINGSET" {
					t.Fatalf("GPU resource type %q", r.GetType())
				}
				ids = r.GetStringSetValue()
			}
		}
		if n > 1 {
			t.Fatalf("%d GPU resources", n)
		}
		return ids
	}
	two := fakeGPUs{GPUs: []gpu.GPU{{ID: "GPU-a", Device: gpu.Device{Path: "/dev/nvidia0", Major: 195}}, {ID: "GPU-b", Device: gpu.Device{Path: "/dev/nvidia1", Major: 195, Minor: 1}}}}
	if ids := gpuRes(two); !slices.Equal(ids, []string{"GPU-a", "GPU-b"}) {
		t.Fatalf("two GPUs registered as %v", ids)
	}
	if ids := gpuRes(fakeGPUs{}); ids != nil {
		t.Fatalf("no GPUs registered as %v", ids)
	}
	if host, err := (gpu.NVIDIA{}).List(context.Background()); err == nil && len(host.GPUs) == 0 {
		if ids := gpuRes(nil); ids != nil {
			t.Fatalf("this host (no NVIDIA GPU) registered %v", ids)
		}
	}
}
