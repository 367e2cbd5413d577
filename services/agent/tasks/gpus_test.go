package tasks

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/gpu"
	"github.com/berthhq/berth/services/agent/runtime"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// TestContainerGPUs: a container is given exactly the GPUs of its gpuIds in the
// assignment (another container's are not), one without gpuIds none, and an id the host
// lacks is an error.
func TestContainerGPUs(t *testing.T) {
	host := gpu.Host{GPUs: []gpu.GPU{
		{ID: "GPU-a", Device: gpu.Device{Path: "/dev/nvidia0", Major: 195}},
		{ID: "GPU-b", Device: gpu.Device{Path: "/dev/nvidia1", Major: 195, Minor: 1}},
	}}
	tk := &task{m: &Manager{cfg: Config{GPUs: host}}, a: &agentv1.Assignment{Task: &ecsv1.Task{Containers: []*ecsv1.Container{
		{Name: proto.String("x"), GpuIds: []string{"GPU-b"}},
		{Name: proto.String("y")},
		{Name: proto.String("z"), GpuIds: []string{"GPU-zzz"}},
	}}}}
	spec := func(name string) (*oci.Spec, error) {
		var l runtime.LinuxOptions
		c := &ctrState{Container: &state.Container{Def: &ecsv1.ContainerDefinition{Name: proto.String(name)}}}
		if err := tk.gpus(c, &l); err != nil {
			return nil, err
		}
		s := &oci.Spec{}
		for _, o := range l.Extra {
			if err := o(context.Background(), nil, nil, s); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	s, err := spec("x")
	if err != nil || len(s.Linux.Devices) != 1 || s.Linux.Devices[0].Path != "/dev/nvidia1" || !slices.Equal(s.Process.Env, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b"}) {
		t.Fatalf("container x: %+v %v", s, err)
	}
	if s, err := spec("y"); err != nil || s.Linux != nil || s.Process != nil {
		t.Fatalf("container y without gpuIds: %+v %v", s, err)
	}
	if _, err := spec("z"); !errors.Is(err, gpu.ErrUnknownID) {
		t.Fatalf("container z: %v", err)
	}
}
