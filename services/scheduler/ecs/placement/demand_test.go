package placement

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

func pm(container, host int32, proto_ string) *ecsv1.PortMapping {
	m := &ecsv1.PortMapping{ContainerPort: proto.Int32(container), Protocol: proto.String(proto_)}
	if host >= 0 {
		m.HostPort = proto.Int32(host)
	}
	return m
}

// DemandOf is the one demand computation: network modes, overrides and task-level sizes.
func TestDemandOf(t *testing.T) {
	app := func(cpu int32, mem, memRes *int32, ports ...*ecsv1.PortMapping) *ecsv1.ContainerDefinition {
		return &ecsv1.ContainerDefinition{Name: proto.String("app"), Cpu: cpu, Memory: mem, MemoryReservation: memRes, PortMappings: ports}
	}
	for _, c := range []struct {
		name string
		td   *ecsv1.TaskDefinition
		ov   *ecsv1.TaskOverride
		want Demand
	}{
		// A bridge mapping without a hostPort gets a dynamic port from the agent: it
		// reserves nothing.
		{"bridge fixed ports and dynamic ports", &ecsv1.TaskDefinition{NetworkMode: proto.String("bridge"), ContainerDefinitions: []*ecsv1.ContainerDefinition{
			app(256, proto.Int32(512), nil, pm(80, 8080, "tcp"), pm(53, 5353, "udp"), pm(81, 0, "tcp"))}}, nil,
			Demand{CPU: 256, Memory: 512, Ports: []int32{8080}, UDPPorts: []int32{5353}}},
		{"default network mode is bridge", &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{
			app(0, proto.Int32(32), nil, pm(18088, -1, "tcp"))}}, nil,
			Demand{Memory: 32}},
		{"host mode binds the container port", &ecsv1.TaskDefinition{NetworkMode: proto.String("host"), ContainerDefinitions: []*ecsv1.ContainerDefinition{
			app(0, nil, proto.Int32(64), pm(80, -1, "tcp"))}}, nil,
			Demand{Memory: 64, Ports: []int32{80}}},
		// The registered awsvpc hostPort equals the containerPort, but it is the task's
		// own interface that binds it, not the instance.
		{"awsvpc binds no host port", &ecsv1.TaskDefinition{NetworkMode: proto.String("awsvpc"), ContainerDefinitions: []*ecsv1.ContainerDefinition{
			app(128, proto.Int32(128), nil, pm(80, 80, "tcp"), pm(53, 53, "udp"))}}, nil,
			Demand{CPU: 128, Memory: 128}},
		{"task-level sizes and overrides win", &ecsv1.TaskDefinition{Cpu: proto.String("1 vCPU"), Memory: proto.String("1GB"), ContainerDefinitions: []*ecsv1.ContainerDefinition{
			app(128, proto.Int32(128), nil)}}, &ecsv1.TaskOverride{Memory: proto.String("512 MiB")},
			Demand{CPU: 1024, Memory: 512}},
		{"container overrides", &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{app(128, nil, proto.Int32(128))}},
			&ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("app"), Cpu: proto.Int32(0), MemoryReservation: proto.Int32(300)}}},
			Demand{CPU: 0, Memory: 300}},
	} {
		got, err := DemandOf(c.td, c.ov)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.CPU != c.want.CPU || got.Memory != c.want.Memory || !slices.Equal(got.Ports, c.want.Ports) || !slices.Equal(got.UDPPorts, c.want.UDPPorts) {
			t.Errorf("%s: DemandOf = %+v, want %+v", c.name, got, c.want)
		}
	}
	if _, err := DemandOf(&ecsv1.TaskDefinition{Cpu: proto.String("lots")}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad task cpu: %v, want ErrInvalid", err)
	}
}

func TestParseSizes(t *testing.T) {
	for in, want := range map[string]int32{"1024": 1024, "1 vCPU": 1024, "0.5 vcpu": 512, ".25vCPU": 256, " 2 VCPU ": 2048} {
		if got, err := ParseCPU(in); err != nil || got != want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]int32{"512": 512, "512 MiB": 512, "512mb": 512, "1 GB": 1024, "0.5gb": 512} {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "vcpu", "-1", "+5", "1e3 vcpu", "NaN vcpu", "5. vcpu", "1.2.3 vcpu", "one"} {
		if _, err := ParseCPU(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCPU(%q): %v, want ErrInvalid", in, err)
		}
	}
	for _, in := range []string{"", "gb", "-1", "inf gb", "1 TB"} {
		if _, err := ParseMemory(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseMemory(%q): %v, want ErrInvalid", in, err)
		}
	}
}

func setRes(name string, ports ...string) *ecsv1.Resource {
	return &ecsv1.Resource{Name: proto.String(name), Type: proto.String("STRINGSET"), StringSetValue: ports}
}

// Fits names AWS's reason per resource; Reserve refuses what does not fit and changes
// nothing; Release gives back all but the ports the instance keeps for itself.
func TestFitsReserveRelease(t *testing.T) {
	newCI := func() *ecsv1.ContainerInstance {
		return &ecsv1.ContainerInstance{
			RegisteredResources: []*ecsv1.Resource{intRes(ResourceCPU, 1024), intRes(ResourceMemory, 1024), setRes(ResourcePorts, "22"), setRes(ResourcePortsUDP)},
			RemainingResources:  []*ecsv1.Resource{intRes(ResourceCPU, 1024), intRes(ResourceMemory, 1024), setRes(ResourcePorts, "22"), setRes(ResourcePortsUDP)},
		}
	}
	for _, c := range []struct {
		d    Demand
		want string
	}{
		{Demand{CPU: 2048}, ReasonCPU},
		{Demand{Memory: 2048}, ReasonMemory},
		{Demand{Ports: []int32{22}}, ReasonPorts},
		{Demand{GPUs: 1}, ReasonGPU},
		{Demand{CPU: 1024, Memory: 1024, Ports: []int32{80}, UDPPorts: []int32{53}}, ""},
	} {
		if got := Fits(newCI(), c.d); got != c.want {
			t.Errorf("Fits(%+v) = %q, want %q", c.d, got, c.want)
		}
	}
	ci := newCI()
	d := Demand{CPU: 512, Memory: 256, Ports: []int32{80}, UDPPorts: []int32{53}}
	if err := Reserve(ci, d); err != nil {
		t.Fatal(err)
	}
	if got := Fits(ci, Demand{UDPPorts: []int32{53}}); got != ReasonPortsUDP {
		t.Errorf("after Reserve, udp 53: %q, want %s", got, ReasonPortsUDP)
	}
	before := proto.Clone(ci).(*ecsv1.ContainerInstance)
	if err := Reserve(ci, Demand{CPU: 600}); !errors.Is(err, ErrInsufficient) || !proto.Equal(ci, before) {
		t.Errorf("Reserve beyond capacity: %v, instance changed %v", err, !proto.Equal(ci, before))
	}
	Release(ci, Demand{CPU: 512, Memory: 256, Ports: []int32{80, 22}, UDPPorts: []int32{53}})
	if !proto.Equal(ci, newCI()) {
		t.Errorf("after Release: %v, want the registered state back", ci.GetRemainingResources())
	}
	// The demand lives on the task record.
	rec := &storev1.TaskRecord{}
	SetDemand(rec, d)
	if got := TaskDemand(rec); got.CPU != 512 || got.Memory != 256 || !slices.Equal(got.Ports, d.Ports) || !slices.Equal(got.UDPPorts, d.UDPPorts) {
		t.Errorf("TaskDemand(SetDemand(%+v)) = %+v", d, got)
	}
}

// DAEMON eligibility: ACTIVE and matching memberOf, whatever the agent; bad expressions
// are errors.
func TestDaemonInstances(t *testing.T) {
	snap := []*Instance{
		inst("c", 0, 0, attr("zone", "a")),
		inst("a", 0, 0, attr("zone", "a"), disconnected()),
		inst("b", 0, 0, attr("zone", "b")),
		inst("d", 0, 0, attr("zone", "a"), status("DRAINING")),
	}
	got, err := DaemonInstances(snap, []Constraint{{Type: ConstraintMemberOf, Expression: "attribute:zone == a"}, {Type: ConstraintDistinctInstance}})
	if err != nil || !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("DaemonInstances = %v, %v; want [a c]", got, err)
	}
	td := &ecsv1.TaskDefinition{RequiresAttributes: []*ecsv1.Attribute{{Name: proto.String("zone"), Value: proto.String("b")}}}
	if got, _ := DaemonInstances(snap, RequiresAttributes(td)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("DaemonInstances(requiresAttributes zone=b) = %v, want [b]", got)
	}
	if _, err := DaemonInstances(snap, []Constraint{{Type: ConstraintMemberOf, Expression: "attribute:zone =="}}); !errors.Is(err, ErrExpression) {
		t.Fatalf("bad expression: %v, want ErrExpression", err)
	}
}

// The engine reports a taken UDP port as RESOURCE:PORTS_UDP, as Fits does.
func TestEngineUDPReason(t *testing.T) {
	in := inst("a", 1024, 1024)
	in.UDPPorts[53] = true
	plan, err := NewEngine(rand.New(rand.NewPCG(1, 2))).Place([]*Instance{in}, Request{Demand: Demand{UDPPorts: []int32{53}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := reasons(plan); len(plan.Choices) != 0 || r["a"] != ReasonPortsUDP {
		t.Fatalf("choices %v failures %v, want %s", chosen(plan), r, ReasonPortsUDP)
	}
}

// TestGPUDemand: the GPUs of a task are the sum of its containers' GPU requirements, a
// container override replacing the container's; bad values are ErrInvalid; an instance
// is judged on its unassigned GPU ids.
func TestGPUDemand(t *testing.T) {
	gpu := func(v string) []*ecsv1.ResourceRequirement {
		return []*ecsv1.ResourceRequirement{{Type: proto.String("GPU"), Value: proto.String(v)}}
	}
	td := &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{
		{Name: proto.String("a"), ResourceRequirements: gpu("2")},
		{Name: proto.String("b"), ResourceRequirements: gpu("1")},
		{Name: proto.String("c")},
	}}
	d, err := DemandOf(td, nil)
	if err != nil || d.GPUs != 3 {
		t.Fatalf("DemandOf: %d, %v; want 3 GPUs", d.GPUs, err)
	}
	d, err = DemandOf(td, &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("a"), ResourceRequirements: gpu("1")}, {Name: proto.String("c"), ResourceRequirements: gpu("4")}}})
	if err != nil || d.GPUs != 6 {
		t.Fatalf("DemandOf with overrides: %d, %v; want 6 GPUs", d.GPUs, err)
	}
	for _, v := range []string{"0", "-2", "x", "1.0", "+1", "99999999999"} {
		if _, err := GPUCount(gpu(v)); !errors.Is(err, ErrInvalid) {
			t.Errorf("GPUCount(%q) = %v, want ErrInvalid", v, err)
		}
	}
	rec := &storev1.TaskRecord{}
	SetDemand(rec, Demand{GPUs: 2})
	if TaskDemand(rec).GPUs != 2 {
		t.Fatalf("GPUs not kept on the task record: %v", rec)
	}
	ci := &ecsv1.ContainerInstance{RemainingResources: []*ecsv1.Resource{intRes(ResourceCPU, 1024), intRes(ResourceMemory, 1024), setRes(ResourceGPU, "GPU-a", "GPU-b")}}
	if got := Fits(ci, Demand{GPUs: 2}); got != "" {
		t.Errorf("2 GPUs on an instance with 2 free: %q", got)
	}
	if got := Fits(ci, Demand{GPUs: 3}); got != ReasonGPU {
		t.Errorf("3 GPUs on an instance with 2 free: %q, want %s", got, ReasonGPU)
	}
	if in := FromRecord("i", &storev1.ContainerInstanceRecord{ContainerInstance: ci}, 1); in.GPUs != 2 {
		t.Errorf("FromRecord GPUs = %d, want 2", in.GPUs)
	}
}

// TestGPUAssignment: PickGPUs and Reserve give GPU ids exclusively (a held id is not
// picked again), too few free ids is ReasonGPU, Release gives the ids back in the
// instance's order.
func TestGPUAssignment(t *testing.T) {
	ci := &ecsv1.ContainerInstance{
		RegisteredResources: []*ecsv1.Resource{intRes(ResourceCPU, 1024), intRes(ResourceMemory, 1024), setRes(ResourceGPU, "GPU-a", "GPU-b", "GPU-c")},
		RemainingResources:  []*ecsv1.Resource{intRes(ResourceCPU, 1024), intRes(ResourceMemory, 1024), setRes(ResourceGPU, "GPU-a", "GPU-b", "GPU-c")},
	}
	free := func() []string { return findResource(ci.GetRemainingResources(), ResourceGPU).GetStringSetValue() }
	d1 := Demand{GPUs: 2, GPUIDs: PickGPUs(ci, 2)}
	if err := Reserve(ci, d1); err != nil || !slices.Equal(d1.GPUIDs, []string{"GPU-a", "GPU-b"}) {
		t.Fatalf("first task: %v %v", d1.GPUIDs, err)
	}
	d2 := Demand{GPUs: 1, GPUIDs: PickGPUs(ci, 1)}
	if err := Reserve(ci, d2); err != nil || !slices.Equal(d2.GPUIDs, []string{"GPU-c"}) {
		t.Fatalf("second task: %v %v", d2.GPUIDs, err)
	}
	if ids := PickGPUs(ci, 1); ids != nil {
		t.Fatalf("picked %v with none free", ids)
	}
	if err := Reserve(ci, Demand{GPUs: 1}); !errors.Is(err, ErrInsufficient) || !strings.Contains(err.Error(), ReasonGPU) {
		t.Fatalf("third task: %v", err)
	}
	// An id already held cannot be reserved again, even when named.
	if err := Reserve(ci, Demand{GPUs: 1, GPUIDs: []string{"GPU-a"}}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("held id reserved again: %v", err)
	}
	Release(ci, d1)
	if !slices.Equal(free(), []string{"GPU-a", "GPU-b"}) {
		t.Fatalf("after release: %v", free())
	}
	if ids := PickGPUs(ci, 1); !slices.Equal(ids, []string{"GPU-a"}) {
		t.Fatalf("picked %v after release", ids)
	}
	Release(ci, d2)
	Release(ci, d2) // twice: no duplicate
	if !slices.Equal(free(), []string{"GPU-a", "GPU-b", "GPU-c"}) {
		t.Fatalf("after all released: %v", free())
	}
	rec := &storev1.TaskRecord{}
	SetDemand(rec, d1)
	if got := TaskDemand(rec); !slices.Equal(got.GPUIDs, d1.GPUIDs) || got.GPUs != 2 {
		t.Fatalf("ids not kept on the task record: %v", rec)
	}
}
