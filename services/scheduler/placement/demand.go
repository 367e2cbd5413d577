package placement

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// Resource names in registeredResources and remainingResources, as ECS uses them.
const (
	ResourceCPU      = "CPU"       // INTEGER, CPU units (1024 per core)
	ResourceMemory   = "MEMORY"    // INTEGER, MiB
	ResourcePorts    = "PORTS"     // STRINGSET, taken host TCP ports
	ResourcePortsUDP = "PORTS_UDP" // STRINGSET, taken host UDP ports
)

// Demand is what one task reserves on its instance.
type Demand struct {
	// CPU is in CPU units (1024 per core).
	CPU int32
	// Memory is in MiB.
	Memory int32
	// Ports are the host TCP ports the task binds.
	Ports []int32
	// UDPPorts are the host UDP ports the task binds.
	UDPPorts []int32
}

// ErrInsufficient is returned by Reserve when the instance cannot hold the demand.
var ErrInsufficient = errors.New("insufficient resources on container instance")

// DemandOf computes what a task of td with overrides reserves, as ECS does for the EC2
// launch type: the task-level cpu and memory when set (after the task override), else the
// sum of the containers' cpu and memory (hard limit, or memoryReservation when only that
// is set), after container overrides; host ports are the containers' hostPort (or
// containerPort in host network mode), split by protocol. A dynamic host port (hostPort 0
// in bridge mode) reserves nothing. It returns an error for a task-level cpu or memory
// that does not parse.
func DemandOf(td *ecsv1.TaskDefinition, ov *ecsv1.TaskOverride) (Demand, error) {
	var d Demand
	byName := map[string]*ecsv1.ContainerOverride{}
	for _, co := range ov.GetContainerOverrides() {
		byName[co.GetName()] = co
	}
	hostMode := td.GetNetworkMode() == "host"
	var sumCPU, sumMem int32
	for _, c := range td.GetContainerDefinitions() {
		cpu, mem, memRes := c.GetCpu(), c.GetMemory(), c.GetMemoryReservation()
		if co := byName[c.GetName()]; co != nil {
			if co.Cpu != nil {
				cpu = co.GetCpu()
			}
			if co.Memory != nil {
				mem = co.GetMemory()
			}
			if co.MemoryReservation != nil {
				memRes = co.GetMemoryReservation()
			}
		}
		sumCPU += cpu
		if mem > 0 {
			sumMem += mem
		} else {
			sumMem += memRes
		}
		for _, pm := range c.GetPortMappings() {
			port := pm.GetHostPort()
			if hostMode && port == 0 {
				port = pm.GetContainerPort()
			}
			if port <= 0 {
				continue
			}
			if strings.EqualFold(pm.GetProtocol(), "udp") {
				d.UDPPorts = append(d.UDPPorts, port)
			} else {
				d.Ports = append(d.Ports, port)
			}
		}
	}
	d.CPU, d.Memory = sumCPU, sumMem
	cpuStr, memStr := td.GetCpu(), td.GetMemory()
	if ov.GetCpu() != "" {
		cpuStr = ov.GetCpu()
	}
	if ov.GetMemory() != "" {
		memStr = ov.GetMemory()
	}
	if cpuStr != "" {
		v, err := ParseCPU(cpuStr)
		if err != nil {
			return Demand{}, err
		}
		d.CPU = v
	}
	if memStr != "" {
		v, err := ParseMemory(memStr)
		if err != nil {
			return Demand{}, err
		}
		d.Memory = v
	}
	slices.Sort(d.Ports)
	d.Ports = slices.Compact(d.Ports)
	slices.Sort(d.UDPPorts)
	d.UDPPorts = slices.Compact(d.UDPPorts)
	return d, nil
}

// ParseCPU parses a task-level cpu: CPU units ("1024") or vCPUs ("1 vCPU", "0.5 vcpu").
func ParseCPU(s string) (int32, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if v, ok := strings.CutSuffix(t, "vcpu"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("placement: cpu %q: %w", s, ErrInvalid)
		}
		return int32(f * 1024), nil
	}
	n, err := strconv.ParseInt(t, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("placement: cpu %q: %w", s, ErrInvalid)
	}
	return int32(n), nil
}

// ParseMemory parses a task-level memory: MiB ("512") or GB ("1 GB", "0.5gb").
func ParseMemory(s string) (int32, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if v, ok := strings.CutSuffix(t, "gb"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("placement: memory %q: %w", s, ErrInvalid)
		}
		return int32(f * 1024), nil
	}
	n, err := strconv.ParseInt(t, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("placement: memory %q: %w", s, ErrInvalid)
	}
	return int32(n), nil
}

// Reserve takes d from ci's remainingResources (CPU and MEMORY decrease, the ports join
// the PORTS and PORTS_UDP sets) and counts one more pending task. It returns
// ErrInsufficient, changing nothing, when CPU or memory would go negative or a port is
// taken. Control's release of a stopped task is Release.
func Reserve(ci *ecsv1.ContainerInstance, d Demand) error {
	cpu, mem := resource(ci, ResourceCPU), resource(ci, ResourceMemory)
	if cpu.GetIntegerValue() < d.CPU || mem.GetIntegerValue() < d.Memory {
		return ErrInsufficient
	}
	ports, udp := resource(ci, ResourcePorts), resource(ci, ResourcePortsUDP)
	for _, p := range d.Ports {
		if slices.Contains(ports.GetStringSetValue(), strconv.Itoa(int(p))) {
			return ErrInsufficient
		}
	}
	for _, p := range d.UDPPorts {
		if slices.Contains(udp.GetStringSetValue(), strconv.Itoa(int(p))) {
			return ErrInsufficient
		}
	}
	cpu.IntegerValue -= d.CPU
	mem.IntegerValue -= d.Memory
	for _, p := range d.Ports {
		ports.StringSetValue = append(ports.StringSetValue, strconv.Itoa(int(p)))
	}
	for _, p := range d.UDPPorts {
		udp.StringSetValue = append(udp.StringSetValue, strconv.Itoa(int(p)))
	}
	ci.PendingTasksCount++
	return nil
}

// Release gives d back to ci's remainingResources (never above registeredResources) and
// removes the ports from the taken sets, except ports the instance registered as
// reserved. It does not touch the task counters; the caller adjusts pending or running.
func Release(ci *ecsv1.ContainerInstance, d Demand) {
	cpu, mem := resource(ci, ResourceCPU), resource(ci, ResourceMemory)
	cpu.IntegerValue += d.CPU
	mem.IntegerValue += d.Memory
	if reg := findResource(ci.GetRegisteredResources(), ResourceCPU); reg != nil {
		cpu.IntegerValue = min(cpu.IntegerValue, reg.GetIntegerValue())
	}
	if reg := findResource(ci.GetRegisteredResources(), ResourceMemory); reg != nil {
		mem.IntegerValue = min(mem.IntegerValue, reg.GetIntegerValue())
	}
	drop := func(name string, ports []int32) {
		if len(ports) == 0 {
			return
		}
		r := resource(ci, name)
		keep := findResource(ci.GetRegisteredResources(), name).GetStringSetValue()
		r.StringSetValue = slices.DeleteFunc(r.StringSetValue, func(s string) bool {
			n, err := strconv.Atoi(s)
			return err == nil && slices.Contains(ports, int32(n)) && !slices.Contains(keep, s)
		})
	}
	drop(ResourcePorts, d.Ports)
	drop(ResourcePortsUDP, d.UDPPorts)
}

// resource returns ci's remaining resource name, adding an empty one if absent.
func resource(ci *ecsv1.ContainerInstance, name string) *ecsv1.Resource {
	if r := findResource(ci.GetRemainingResources(), name); r != nil {
		return r
	}
	typ := "INTEGER"
	if name == ResourcePorts || name == ResourcePortsUDP {
		typ = "STRINGSET"
	}
	r := &ecsv1.Resource{Name: &name, Type: &typ}
	ci.RemainingResources = append(ci.RemainingResources, r)
	return r
}

func findResource(rs []*ecsv1.Resource, name string) *ecsv1.Resource {
	for _, r := range rs {
		if r.GetName() == name {
			return r
		}
	}
	return nil
}

// FromRecord builds the placement view of a stored container instance. id is the
// instance id (its key's last segment) and rev the record's ModRevision. An instance
// that is draining (operator or involuntary) is reported DRAINING whatever its status.
func FromRecord(id string, rec *storev1.ContainerInstanceRecord, rev int64) *Instance {
	ci := rec.GetContainerInstance()
	in := &Instance{
		ID:             id,
		ARN:            ci.GetContainerInstanceArn(),
		Status:         ci.GetStatus(),
		AgentConnected: ci.GetAgentConnected(),
		EC2InstanceID:  ci.GetEc2InstanceId(),
		AgentVersion:   ci.GetVersionInfo().GetAgentVersion(),
		RunningTasks:   int(ci.GetRunningTasksCount() + ci.GetPendingTasksCount()),
		Attributes:     make(map[string]string, len(ci.GetAttributes())),
		Ports:          map[int32]bool{},
		UDPPorts:       map[int32]bool{},
		Revision:       rev,
	}
	if rec.GetOperatorDrain() || rec.GetInvoluntaryDrain() {
		in.Status = "DRAINING"
	}
	if ci.RegisteredAt != nil {
		sec := ci.GetRegisteredAt()
		in.RegisteredAt = time.Unix(int64(sec), int64((sec-float64(int64(sec)))*1e9)).UTC()
	}
	for _, a := range ci.GetAttributes() {
		in.Attributes[a.GetName()] = a.GetValue()
	}
	for _, r := range ci.GetRemainingResources() {
		switch r.GetName() {
		case ResourceCPU:
			in.CPU = int64(r.GetIntegerValue())
		case ResourceMemory:
			in.Memory = int64(r.GetIntegerValue())
		case ResourcePorts, ResourcePortsUDP:
			set := in.Ports
			if r.GetName() == ResourcePortsUDP {
				set = in.UDPPorts
			}
			for _, s := range r.GetStringSetValue() {
				if n, err := strconv.Atoi(s); err == nil {
					set[int32(n)] = true
				}
			}
		}
	}
	return in
}

// ConstraintsFrom converts RunTask's placementConstraints and the task definition's into
// the engine's form, request constraints first.
func ConstraintsFrom(req []*ecsv1.PlacementConstraint, td []*ecsv1.TaskDefinitionPlacementConstraint) []Constraint {
	out := make([]Constraint, 0, len(req)+len(td))
	for _, c := range req {
		out = append(out, Constraint{Type: c.GetType(), Expression: c.GetExpression()})
	}
	for _, c := range td {
		out = append(out, Constraint{Type: c.GetType(), Expression: c.GetExpression()})
	}
	return out
}

// StrategiesFrom converts RunTask's placementStrategy chain.
func StrategiesFrom(req []*ecsv1.PlacementStrategy) []Strategy {
	out := make([]Strategy, 0, len(req))
	for _, s := range req {
		out = append(out, Strategy{Type: s.GetType(), Field: s.GetField()})
	}
	return out
}
