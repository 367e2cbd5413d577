package placement

import (
	"errors"
	"fmt"
	"math"
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
	ResourceGPU      = "GPU"       // STRINGSET, ids of the GPUs not yet assigned (as the ECS agent registers them)
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
	// GPUs is the number of physical GPUs the task reserves: the sum of its containers'
	// GPU resourceRequirements (AWS: "The number of GPUs that's reserved for all
	// containers in a task can't exceed the number of available GPUs on the container
	// instance").
	GPUs int32
	// GPUIDs are the ids of the instance's GPUs given to the task (len GPUs once placed;
	// picked by PickGPUs, kept on the task record), taken from and given back to the
	// instance's remaining GPU set by Reserve and Release.
	GPUIDs []string
}

// ErrInsufficient is returned by Reserve when the instance cannot hold the demand.
var ErrInsufficient = errors.New("insufficient resources on container instance")

// DemandOf computes what a task of td with overrides reserves, as ECS does for the EC2
// launch type: the task-level cpu and memory when set (after the task override), else the
// sum of the containers' cpu and memory (hard limit, or memoryReservation when only that
// is set), after container overrides; host ports are the containers' hostPort (or
// containerPort in host mode), split by protocol. A bridge mapping with hostPort 0 or
// absent reserves nothing: the agent gives it a dynamic host port of its own (AWS: "dynamic
// host port mapping"); no port of an awsvpc task is reserved (its own network interface binds it). It returns an error wrapping ErrInvalid for a task-level cpu or
// memory that does not parse.
//
// This is the one computation of a task's demand: RunTask, StartTask and the service
// scheduler store its result on the task record (SetDemand) when the task is created,
// and every later Fits, Reserve and Release reads it back from there (TaskDemand).
func DemandOf(td *ecsv1.TaskDefinition, ov *ecsv1.TaskOverride) (Demand, error) {
	var d Demand
	byName := map[string]*ecsv1.ContainerOverride{}
	for _, co := range ov.GetContainerOverrides() {
		byName[co.GetName()] = co
	}
	// A host-mode mapping binds its containerPort on the instance; a bridge mapping
	// binds its hostPort, or a dynamic port the agent allocates when it has none.
	hostMode := td.GetNetworkMode() == "host"
	// An awsvpc task has its own network interface: its ports are bound there, not on the
	// instance, so it takes no host port (AWS: "Task networking for tasks on Amazon EC2
	// instances"; the registered hostPort equals the containerPort but names the ENI's).
	ownENI := td.GetNetworkMode() == "awsvpc"
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
		reqs := c.GetResourceRequirements()
		if co := byName[c.GetName()]; co != nil && co.ResourceRequirements != nil {
			reqs = co.GetResourceRequirements()
		}
		gpus, err := GPUCount(reqs)
		if err != nil {
			return Demand{}, err
		}
		d.GPUs += gpus
		sumCPU += cpu
		if mem > 0 {
			sumMem += mem
		} else {
			sumMem += memRes
		}
		for _, pm := range c.GetPortMappings() {
			if ownENI {
				break
			}
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

// GPUCount returns the GPUs a container's resourceRequirements ask for: the sum of the
// values of type GPU, each a whole positive number. It returns an error wrapping
// ErrInvalid for a GPU value that is not one; other types count nothing (control refuses
// them at registration).
func GPUCount(reqs []*ecsv1.ResourceRequirement) (int32, error) {
	var n int32
	for _, r := range reqs {
		if r.GetType() != ResourceGPU {
			continue
		}
		v, err := strconv.ParseInt(r.GetValue(), 10, 32)
		if err != nil || v < 1 || strings.HasPrefix(r.GetValue(), "+") || int64(n)+v > math.MaxInt32 {
			return 0, fmt.Errorf("placement: GPU resourceRequirement %q: %w", r.GetValue(), ErrInvalid)
		}
		n += int32(v)
	}
	return n, nil
}

// ParseCPU parses a task-level cpu: CPU units ("1024") or vCPUs ("1 vCPU", "0.5 vcpu",
// any case), returning CPU units (1024 per vCPU, fractions truncated). It is the one
// parser of task cpu: RegisterTaskDefinition and RunTask's overrides validate with it
// (control adds AWS's bounds) and DemandOf reads with it. It returns an error wrapping
// ErrInvalid for anything else or a negative value.
func ParseCPU(s string) (int32, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if v, ok := strings.CutSuffix(t, "vcpu"); ok {
		return parseScaled(s, v, "cpu")
	}
	return parseUnits(s, t, "cpu")
}

// ParseMemory parses a task-level memory: MiB ("512", "512 MiB", "512 mb") or GB ("1 GB",
// "0.5gb"), returning MiB (1024 per GB, fractions truncated). Like ParseCPU it is the one
// parser of task memory. It returns an error wrapping ErrInvalid for anything else or a
// negative value.
func ParseMemory(s string) (int32, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if v, ok := strings.CutSuffix(t, "gb"); ok {
		return parseScaled(s, v, "memory")
	}
	if v, ok := strings.CutSuffix(t, "mib"); ok {
		t = v
	} else if v, ok := strings.CutSuffix(t, "mb"); ok {
		t = v
	}
	return parseUnits(s, strings.TrimSpace(t), "memory")
}

// parseScaled parses a decimal count of 1024 units (digits with an optional fraction,
// no sign or exponent) as ParseCPU and ParseMemory take them.
func parseScaled(orig, v, what string) (int32, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.Trim(v, "0123456789.") != "" || strings.Count(v, ".") > 1 || strings.HasSuffix(v, ".") {
		return 0, fmt.Errorf("placement: %s %q: %w", what, orig, ErrInvalid)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f*1024 > math.MaxInt32 {
		return 0, fmt.Errorf("placement: %s %q: %w", what, orig, ErrInvalid)
	}
	return int32(f * 1024), nil
}

// parseUnits parses a whole non-negative count of units.
func parseUnits(orig, v, what string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 || strings.HasPrefix(v, "+") {
		return 0, fmt.Errorf("placement: %s %q: %w", what, orig, ErrInvalid)
	}
	return int32(n), nil
}

// Fits returns "" when ci's remainingResources can take d, else the failure reason
// RunTask reports for it: ReasonCPU, ReasonMemory, ReasonGPU (fewer unassigned GPU ids
// than the task's GPUs), ReasonPorts (a TCP host port is taken) or ReasonPortsUDP,
// checked in that order.
func Fits(ci *ecsv1.ContainerInstance, d Demand) string {
	rem := ci.GetRemainingResources()
	if d.CPU > findResource(rem, ResourceCPU).GetIntegerValue() {
		return ReasonCPU
	}
	if d.Memory > findResource(rem, ResourceMemory).GetIntegerValue() {
		return ReasonMemory
	}
	free := findResource(rem, ResourceGPU).GetStringSetValue()
	if int(d.GPUs) > len(free) {
		return ReasonGPU
	}
	for _, id := range d.GPUIDs {
		if !slices.Contains(free, id) {
			return ReasonGPU
		}
	}
	if anyTaken(findResource(rem, ResourcePorts).GetStringSetValue(), d.Ports) {
		return ReasonPorts
	}
	if anyTaken(findResource(rem, ResourcePortsUDP).GetStringSetValue(), d.UDPPorts) {
		return ReasonPortsUDP
	}
	return ""
}

// anyTaken reports whether one of ports is in taken (decimal strings, as the STRINGSET
// resources hold them).
func anyTaken(taken []string, ports []int32) bool {
	for _, p := range ports {
		if slices.Contains(taken, strconv.Itoa(int(p))) {
			return true
		}
	}
	return false
}

// Reserve takes d from ci's remainingResources: CPU and MEMORY decrease, the ports join
// the PORTS and PORTS_UDP sets. When d does not fit (Fits) it changes nothing and
// returns an error wrapping ErrInsufficient that names the reason. Task counters are the
// caller's (a placement counts a pending task; see task.PlaceTxn). The GPU ids of d
// (PickGPUs) leave the remaining GPU set, so no other task is given them; a demand
// with GPUs but not that many ids is refused with ReasonGPU.
func Reserve(ci *ecsv1.ContainerInstance, d Demand) error {
	if reason := Fits(ci, d); reason != "" {
		return fmt.Errorf("%w: %s", ErrInsufficient, reason)
	}
	if len(d.GPUIDs) != int(d.GPUs) {
		return fmt.Errorf("%w: %s (%d GPUs but %d ids picked)", ErrInsufficient, ReasonGPU, d.GPUs, len(d.GPUIDs))
	}
	if len(d.GPUIDs) > 0 {
		g := resource(ci, ResourceGPU)
		g.StringSetValue = slices.DeleteFunc(g.StringSetValue, func(id string) bool { return slices.Contains(d.GPUIDs, id) })
	}
	cpu, mem := resource(ci, ResourceCPU), resource(ci, ResourceMemory)
	ports, udp := resource(ci, ResourcePorts), resource(ci, ResourcePortsUDP)
	cpu.IntegerValue -= d.CPU
	mem.IntegerValue -= d.Memory
	for _, p := range d.Ports {
		ports.StringSetValue = append(ports.StringSetValue, strconv.Itoa(int(p)))
	}
	for _, p := range d.UDPPorts {
		udp.StringSetValue = append(udp.StringSetValue, strconv.Itoa(int(p)))
	}
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
	if g := findResource(ci.GetRemainingResources(), ResourceGPU); g != nil && len(d.GPUIDs) > 0 {
		// Back in the instance's registered order, only ids it still registers (an
		// instance that re-registered without GPUs has no GPU set to return them to).
		var out []string
		for _, id := range findResource(ci.GetRegisteredResources(), ResourceGPU).GetStringSetValue() {
			if slices.Contains(g.StringSetValue, id) || slices.Contains(d.GPUIDs, id) {
				out = append(out, id)
			}
		}
		g.StringSetValue = out
	}
}

// PickGPUs returns the ids of n GPUs for a task from ci's remaining (unassigned) GPU
// set, the first n in the instance's registered order; nil when n is 0 or fewer than n
// remain (Reserve then fails with ReasonGPU).
func PickGPUs(ci *ecsv1.ContainerInstance, n int32) []string {
	free := findResource(ci.GetRemainingResources(), ResourceGPU).GetStringSetValue()
	if n <= 0 || int(n) > len(free) {
		return nil
	}
	return append([]string{}, free[:n]...)
}

// TaskDemand returns the demand stored on a task record when it was created (SetDemand).
func TaskDemand(rec *storev1.TaskRecord) Demand {
	return Demand{CPU: rec.GetReservedCpu(), Memory: rec.GetReservedMemory(), Ports: rec.GetReservedPorts(), UDPPorts: rec.GetReservedUdpPorts(), GPUs: rec.GetReservedGpus(), GPUIDs: rec.GetGpuIds()}
}

// SetDemand stores d on a task record (reserved_cpu, reserved_memory, reserved_ports,
// reserved_udp_ports, reserved_gpus, gpu_ids), where TaskDemand reads it for the life of
// the task.
func SetDemand(rec *storev1.TaskRecord, d Demand) {
	rec.ReservedCpu, rec.ReservedMemory, rec.ReservedPorts, rec.ReservedUdpPorts = d.CPU, d.Memory, d.Ports, d.UDPPorts
	rec.ReservedGpus, rec.GpuIds = d.GPUs, d.GPUIDs
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
// Ports and UDPPorts are nil when no port of the kind is taken.
func FromRecord(id string, rec *storev1.ContainerInstanceRecord, rev int64) *Instance {
	return fromRecord(id, rec, rev, nil)
}

// fromRecord is FromRecord; when attrs is not nil it is the view's Attributes as is (a
// view's maps are never changed: the caller passes those of a view of a record whose
// attributes rec shares).
func fromRecord(id string, rec *storev1.ContainerInstanceRecord, rev int64, attrs map[string]string) *Instance {
	ci := rec.GetContainerInstance()
	in := &Instance{
		ID:             id,
		ARN:            ci.GetContainerInstanceArn(),
		Status:         ci.GetStatus(),
		AgentConnected: ci.GetAgentConnected(),
		EC2InstanceID:  ci.GetEc2InstanceId(),
		AgentVersion:   ci.GetVersionInfo().GetAgentVersion(),
		RunningTasks:   int(rec.GetActiveTasks()),
		Attributes:     attrs,
		Missing:        rec.GetMissingAttributes(),
		Revision:       rev,
	}
	if rec.GetOperatorDrain() || rec.GetInvoluntaryDrain() {
		in.Status = "DRAINING"
	}
	if ci.RegisteredAt != nil {
		sec := ci.GetRegisteredAt()
		in.RegisteredAt = time.Unix(int64(sec), int64((sec-float64(int64(sec)))*1e9)).UTC()
	}
	if attrs == nil {
		in.Attributes = make(map[string]string, len(ci.GetAttributes()))
		for _, a := range ci.GetAttributes() {
			in.Attributes[a.GetName()] = a.GetValue()
		}
	}
	for _, r := range ci.GetRemainingResources() {
		switch r.GetName() {
		case ResourceCPU:
			in.CPU = int64(r.GetIntegerValue())
		case ResourceMemory:
			in.Memory = int64(r.GetIntegerValue())
		case ResourceGPU:
			in.GPUs = int64(len(r.GetStringSetValue()))
		case ResourcePorts:
			in.Ports = portSet(in.Ports, r.GetStringSetValue())
		case ResourcePortsUDP:
			in.UDPPorts = portSet(in.UDPPorts, r.GetStringSetValue())
		}
	}
	return in
}

// portSet adds the ports of a STRINGSET resource (numbers as strings; others skipped) to
// set, made when there are any.
func portSet(set map[int32]bool, ports []string) map[int32]bool {
	for _, s := range ports {
		if n, err := strconv.Atoi(s); err == nil {
			if set == nil {
				set = make(map[int32]bool, len(ports))
			}
			set[int32(n)] = true
		}
	}
	return set
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

// RequiresAttributes turns the task definition's requiresAttributes into memberOf
// constraints, and what the task needs of its host (PlatformRequirements) into
// requirements, so RunTask, StartTask, service launches and DAEMON eligibility check
// them as the engine checks any other constraint.
func RequiresAttributes(td *ecsv1.TaskDefinition) []Constraint {
	var out []Constraint
	for _, r := range PlatformRequirements(td) {
		out = append(out, Constraint{Require: &r})
	}
	for _, a := range td.GetRequiresAttributes() {
		expr := "attribute:" + a.GetName() + " exists"
		if a.Value != nil {
			expr = "attribute:" + a.GetName() + " == '" + a.GetValue() + "'"
		}
		out = append(out, Constraint{Type: ConstraintMemberOf, Expression: expr})
	}
	return out
}

// Attributes a container instance's agent registers, with the names the ECS agent gives
// them (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs-agent-versions.html
// and task-placement-constraints.html), which PlatformRequirements matches tasks against.
const (
	// AttrOSType is the instance's operating system: "linux" (AWS: also "windows").
	AttrOSType = "ecs.os-type"
	// AttrCPUArchitecture is the instance's CPU architecture: "x86_64" or "arm64".
	AttrCPUArchitecture = "ecs.cpu-architecture"
	// AttrCNIPluginVersion says the host has the CNI plugins Berth sets up networkMode
	// bridge and none with (value: the plugins' version); the ECS agent registers it for
	// its own CNI plugins.
	AttrCNIPluginVersion = "ecs.capability.cni-plugin-version"
	// AttrTaskENI says the instance can give a task its own network interface
	// (networkMode awsvpc): the CNI plugins and a task subnet.
	AttrTaskENI = "ecs.capability.task-eni"
	// AttrLoggingDriverPrefix is followed by the log driver's name (json-file,
	// awslogs).
	AttrLoggingDriverPrefix = "com.amazonaws.ecs.capability.logging-driver."
	// AttrTaskIAMRole says the agent serves task role credentials.
	AttrTaskIAMRole = "com.amazonaws.ecs.capability.task-iam-role"
	// AttrTaskIAMRoleNetworkHost says it serves them to networkMode host tasks too.
	AttrTaskIAMRoleNetworkHost = "com.amazonaws.ecs.capability.task-iam-role-network-host"
	// AttrDockerAPI125 is the Docker remote API level AWS requires of
	// linuxParameters.initProcessEnabled; a Berth agent registers it when the host has
	// a static init (docker-init or tini-static) to run.
	AttrDockerAPI125 = "com.amazonaws.ecs.capability.docker-remote-api.1.25"
)

// PlatformRequirements returns what a task of td needs its container instance to have,
// as ECS derives a task definition's required attributes from its fields:
//   - runtimePlatform.cpuArchitecture X86_64 or ARM64: ecs.cpu-architecture x86_64 or
//     arm64; runtimePlatform.operatingSystemFamily LINUX: ecs.os-type linux, WINDOWS_*:
//     ecs.os-type windows (which no Berth agent registers);
//   - networkMode bridge (the default) and none: ecs.capability.cni-plugin-version (Berth
//     sets both up with the CNI plugins); awsvpc: ecs.capability.task-eni; host: nothing;
//   - a container's logDriver: com.amazonaws.ecs.capability.logging-driver.{driver};
//     linuxParameters.initProcessEnabled: com.amazonaws.ecs.capability.docker-remote-api.1.25;
//   - taskRoleArn: com.amazonaws.ecs.capability.task-iam-role, and with networkMode host
//     com.amazonaws.ecs.capability.task-iam-role-network-host.
//
// The platform requirements match positively; the others are capabilities
// (Requirement.Capability).
func PlatformRequirements(td *ecsv1.TaskDefinition) []Requirement {
	var out []Requirement
	rp := td.GetRuntimePlatform()
	if a := rp.GetCpuArchitecture(); a != "" {
		out = append(out, Requirement{Attribute: AttrCPUArchitecture, Value: strings.ToLower(a), For: "runtimePlatform cpuArchitecture " + a})
	}
	if f := rp.GetOperatingSystemFamily(); f != "" {
		v := "linux"
		if strings.HasPrefix(f, "WINDOWS") {
			v = "windows"
		}
		out = append(out, Requirement{Attribute: AttrOSType, Value: v, For: "runtimePlatform operatingSystemFamily " + f})
	}
	capability := func(attr, what string) {
		for _, r := range out {
			if r.Attribute == attr {
				return
			}
		}
		out = append(out, Requirement{Attribute: attr, For: what, Capability: true})
	}
	mode := td.GetNetworkMode()
	switch mode {
	case "", "bridge", "none":
		if mode == "" {
			mode = "bridge"
		}
		capability(AttrCNIPluginVersion, "networkMode "+mode)
	case "awsvpc":
		capability(AttrTaskENI, "networkMode awsvpc")
	}
	for _, c := range td.GetContainerDefinitions() {
		if d := c.GetLogConfiguration().GetLogDriver(); d != "" {
			capability(AttrLoggingDriverPrefix+d, "logDriver "+d)
		}
		if c.GetLinuxParameters().GetInitProcessEnabled() {
			capability(AttrDockerAPI125, "linuxParameters initProcessEnabled")
		}
	}
	if td.GetTaskRoleArn() != "" {
		capability(AttrTaskIAMRole, "taskRoleArn")
		if mode == "host" {
			capability(AttrTaskIAMRoleNetworkHost, "taskRoleArn with networkMode host")
		}
	}
	return out
}
