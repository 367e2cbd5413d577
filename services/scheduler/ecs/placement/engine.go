package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/services/scheduler/ecs/cql"
)

// Failure reasons, as AWS reports them in RunTask's and StartTask's failures[]
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/api_failures_messages.html).
const (
	// ReasonCPU: the instance has too few CPU units left.
	ReasonCPU = "RESOURCE:CPU"
	// ReasonMemory: the instance has too little memory left.
	ReasonMemory = "RESOURCE:MEMORY"
	// ReasonGPU: the instance has fewer unassigned GPUs than the task asks for (none at
	// all on an instance whose agent advertises no GPU).
	ReasonGPU = "RESOURCE:GPU"
	// ReasonPorts: a host TCP port the task needs is taken on the instance.
	ReasonPorts = "RESOURCE:PORTS"
	// ReasonPortsUDP: a host UDP port the task needs is taken on the instance (the
	// resource is PORTS_UDP in registeredResources, hence the reason's name).
	ReasonPortsUDP = "RESOURCE:PORTS_UDP"
	// ReasonAgent: the instance's agent is disconnected.
	ReasonAgent = "AGENT"
	// ReasonAttribute: the instance fails a placement constraint.
	ReasonAttribute = "ATTRIBUTE"
	// ReasonMissing: a named container instance does not exist (StartTask).
	ReasonMissing = "MISSING"
	// ReasonInactive: the instance is not ACTIVE (DRAINING, or being deregistered).
	ReasonInactive = "INACTIVE"
)

// Constraint and strategy type names, as in the ECS API.
const (
	ConstraintDistinctInstance = "distinctInstance" // each task on a different instance
	ConstraintMemberOf         = "memberOf"         // instances matching an expression
	StrategyBinpack            = "binpack"          // least remaining cpu or memory first
	StrategySpread             = "spread"           // fewest tasks per value of a field first
	StrategyRandom             = "random"           // any feasible instance
)

// Instance is the placement view of one container instance: what feasibility and ranking
// read. The etcd-backed Placer builds it from a ContainerInstanceRecord with FromRecord;
// tests build it directly.
type Instance struct {
	// ID is the container instance id (the last segment of its ARN).
	ID string
	// ARN is the container instance ARN, reported in failures.
	ARN string
	// Status is ACTIVE, DRAINING, REGISTERING, DEREGISTERING or INACTIVE. Only ACTIVE
	// instances take new tasks.
	Status string
	// AgentConnected is false while the instance's agent holds no session.
	AgentConnected bool
	// Attributes are the instance's attributes by name (value "" for valueless ones).
	Attributes map[string]string
	// Missing are the capability attributes the instance's agent reported it cannot
	// register, each with what the host lacks (ContainerInstanceRecord
	// missing_attributes); never changed once built.
	Missing map[string]string
	// EC2InstanceID is the ec2InstanceId the agent reported, if any.
	EC2InstanceID string
	// AgentVersion is the agent's version, for agentVersion expressions.
	AgentVersion string
	// RegisteredAt is when the instance registered.
	RegisteredAt time.Time
	// CPU and Memory are the remaining CPU units and MiB.
	CPU, Memory int64
	// GPUs is the number of GPUs not yet assigned to a task (0 when the agent advertises
	// none: a host without NVIDIA GPUs).
	GPUs int64
	// Ports and UDPPorts are the host ports already taken (reserved by the host or by
	// tasks); nil when none is.
	Ports, UDPPorts map[int32]bool
	// RunningTasks counts the tasks on the instance (running and pending); spread by
	// instanceId balances this count.
	RunningTasks int
	// Groups counts the instance's tasks by task group ("family:x", "service:y"), when
	// known; task:group expressions and group-aware spread read it.
	Groups map[string]int
	// Revision is the instance record's ModRevision as read; for a Busy instance, that
	// of the record below the commit in flight (the Placer sets the commit's compare).
	Revision int64
	// Busy is set while a commit of this scheduler that writes the instance is in
	// flight. Where the strategy leaves a choice (random, and ties of the others), the
	// engine prefers an instance that is not busy: a commit on it need not wait for
	// another to land (see Placer).
	Busy bool
}

// clone returns a copy the engine can reserve on without touching the original.
func (in *Instance) clone() *Instance {
	c := *in
	c.Ports = cloneSet(in.Ports)
	c.UDPPorts = cloneSet(in.UDPPorts)
	if in.Groups != nil {
		c.Groups = make(map[string]int, len(in.Groups))
		for k, v := range in.Groups {
			c.Groups[k] = v
		}
	}
	return &c
}

// cloneSet copies s; nil when s is empty (reserve makes the set it adds to).
func cloneSet(s map[int32]bool) map[int32]bool {
	if len(s) == 0 {
		return nil
	}
	c := make(map[int32]bool, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// Constraint is one placement constraint (the ECS PlacementConstraint shape, also
// TaskDefinitionPlacementConstraint), or a requirement of the task's own (Require).
type Constraint struct {
	// Type is distinctInstance or memberOf; unused when Require is set.
	Type string
	// Expression is the cluster query language expression of a memberOf constraint.
	Expression string
	// Require, when set, is an attribute the task needs (RequiresAttributes makes these
	// from the task definition); no client's constraint sets it.
	Require *Requirement
}

// Requirement is an attribute a task needs of its container instance, as ECS matches a
// task definition's requiresAttributes: an instance that does not meet it fails the
// task with ReasonAttribute, the detail naming the attribute and, when the instance's
// agent said why it lacks it (Instance.Missing), the missing piece.
type Requirement struct {
	// Attribute is the attribute's name, e.g. "ecs.capability.task-eni".
	Attribute string
	// Value, when not "", is the value the attribute must have ("arm64").
	Value string
	// For names what in the task needs it, e.g. "networkMode awsvpc".
	For string
	// Capability marks an optional capability of the agent (ecs.capability.*,
	// com.amazonaws.ecs.capability.*): an instance fails it only when its agent reported
	// the attribute missing (Instance.Missing), so an instance registered by an agent
	// that does not report its capabilities is taken to have them. A platform
	// requirement (ecs.os-type, ecs.cpu-architecture) fails on any instance that does
	// not have the attribute with the value.
	Capability bool
}

// Met reports whether in meets r.
func (r *Requirement) Met(in *Instance) bool {
	v, ok := in.Attributes[r.Attribute]
	if r.Capability {
		if ok {
			return true
		}
		_, missing := in.Missing[r.Attribute]
		return !missing
	}
	return ok && (r.Value == "" || v == r.Value)
}

// Detail explains why in does not meet r, for failures[].
func (r *Requirement) Detail(in *Instance) string {
	v, ok := in.Attributes[r.Attribute]
	if !ok {
		d := fmt.Sprintf("Missing attribute %s, which %s needs", r.Attribute, r.For)
		if r.Value != "" {
			d = fmt.Sprintf("Missing attribute %s (%s), which %s needs", r.Attribute, r.Value, r.For)
		}
		if why := in.Missing[r.Attribute]; why != "" {
			d += ": " + why
		}
		return d
	}
	d := fmt.Sprintf("Attribute %s is %s; %s needs %s", r.Attribute, v, r.For, r.Value)
	if r.Attribute == AttrOSType && r.Value == "windows" {
		d += " (Berth's agents run Linux containers only: no instance registers ecs.os-type windows)"
	}
	return d
}

// Strategy is one placement strategy (the ECS PlacementStrategy shape).
type Strategy struct {
	// Type is binpack, spread or random.
	Type string
	// Field is cpu or memory for binpack, instanceId (or host) or attribute:{name} for
	// spread; unused for random.
	Field string
}

// Request asks for Count tasks of one shape to be placed.
type Request struct {
	// Demand is what one task needs.
	Demand Demand
	// Count is how many tasks to place (1 when < 1).
	Count int
	// Group is the task group ("family:x" by default in ECS); distinctInstance,
	// task:group and spread count tasks of this group.
	Group string
	// Constraints are RunTask's placementConstraints followed by the task definition's.
	Constraints []Constraint
	// Strategy is the placementStrategy chain, applied in order; ties fall to random.
	Strategy []Strategy
	// Instances, when not empty, restricts placement to these instance ids or ARNs, as
	// StartTask does (up to 10). Names that match no instance fail with MISSING.
	Instances []string
}

// Choice is one placed task: the instance it goes to.
type Choice struct {
	// Instance is the chosen instance as it was before this task's reservation.
	Instance *Instance
}

// Failure is one entry of failures[]: Arn is the instance (or the name asked for),
// Reason one of the Reason constants, Detail a human explanation.
type Failure struct {
	// Arn is the container instance ARN the failure is about.
	Arn string
	// Reason is one of ReasonCPU, ReasonMemory, ReasonGPU, ReasonPorts, ReasonPortsUDP, ReasonAgent,
	// ReasonAttribute, ReasonMissing, ReasonInactive; or, for a RunTask placement when
	// no instance is ACTIVE, the instance's status (e.g. "DRAINING").
	Reason string
	// Detail explains the reason.
	Detail string
}

// Plan is the engine's answer: where each placed task goes, and why the others could not
// be placed.
type Plan struct {
	// Choices has one entry per placed task, in order; len(Choices) <= Count.
	Choices []Choice
	// Failures explains, per instance, why the first task that could not be placed was
	// refused; empty when every task was placed.
	Failures []Failure
}

// Engine chooses instances for tasks over an in-memory snapshot. It never writes: the
// caller commits the plan (Placer does, with CAS on each chosen instance). The zero value
// is not usable; build it with NewEngine.
type Engine struct {
	rng *rand.Rand
	// feasible is the scan's scratch slice, reused between tasks and calls.
	feasible []*Instance
}

// NewEngine returns an engine whose random choices (the random strategy and tie-breaks)
// come from rng; pass a seeded rng for reproducible tests. rng is not safe for concurrent
// use, so neither is the Engine: use one per goroutine.
func NewEngine(rng *rand.Rand) *Engine { return &Engine{rng: rng} }

// compiled holds a request's parsed constraints.
type compiled struct {
	distinct bool
	memberOf []*cql.Expr
	requires []*Requirement
}

// Compile parses the request's constraints and checks its strategies. It returns an error
// wrapping ErrExpression or ErrInvalid (to be reported as InvalidParameterException).
func Compile(req Request) error {
	_, err := compile(req)
	return err
}

// ErrInvalid is returned (wrapped) for an unknown constraint or strategy type or field.
var ErrInvalid = fmt.Errorf("invalid placement parameter")

func compile(req Request) (compiled, error) {
	var c compiled
	for _, k := range req.Constraints {
		if k.Require != nil {
			c.requires = append(c.requires, k.Require)
			continue
		}
		switch k.Type {
		case ConstraintDistinctInstance:
			if k.Expression != "" {
				return c, fmt.Errorf("%w: distinctInstance takes no expression", ErrInvalid)
			}
			c.distinct = true
		case ConstraintMemberOf:
			e, err := cql.ParseExpr(k.Expression)
			if err != nil {
				return c, err
			}
			c.memberOf = append(c.memberOf, e)
		default:
			return c, fmt.Errorf("%w: unknown constraint type %q", ErrInvalid, k.Type)
		}
	}
	for _, s := range req.Strategy {
		switch s.Type {
		case StrategyBinpack:
			if f := strings.ToLower(s.Field); f != "cpu" && f != "memory" {
				return c, fmt.Errorf("%w: binpack field must be cpu or memory, got %q", ErrInvalid, s.Field)
			}
		case StrategySpread:
			if s.Field == "" {
				return c, fmt.Errorf("%w: spread needs a field", ErrInvalid)
			}
		case StrategyRandom:
		default:
			return c, fmt.Errorf("%w: unknown strategy type %q", ErrInvalid, s.Type)
		}
	}
	return c, nil
}

// Place chooses instances for req.Count tasks among snapshot. Each chosen task's demand is
// reserved on a private copy of the instance before the next task is placed, so a plan
// never exceeds what the snapshot offers. The snapshot itself is not modified. It returns
// an error only for an invalid request (see Compile).
func (e *Engine) Place(snapshot []*Instance, req Request) (Plan, error) {
	c, err := compile(req)
	if err != nil {
		return Plan{}, err
	}
	count := max(req.Count, 1)
	var plan Plan

	// Candidates: every instance, or the named ones for StartTask. An instance is cloned
	// (mine) the first time a task is reserved on it, so the snapshot stays untouched.
	// Every instance is the snapshot slice itself (shared) until a task after the first
	// needs the reserved copy in its place: most requests place one task, and copying a
	// thousand pointers per call was a tenth of the engine's cost.
	var cands []*Instance
	shared := false
	mine := map[*Instance]bool{}
	if len(req.Instances) > 0 {
		byID := make(map[string]*Instance, 2*len(snapshot))
		for _, in := range snapshot {
			byID[in.ID] = in
			byID[in.ARN] = in
		}
		seen := map[*Instance]bool{}
		for _, name := range req.Instances {
			in := byID[name]
			if in == nil {
				plan.Failures = append(plan.Failures, Failure{Arn: name, Reason: ReasonMissing, Detail: "container instance not found"})
				continue
			}
			if !seen[in] {
				seen[in] = true
				cands = append(cands, in)
			}
		}
	} else {
		cands, shared = snapshot, true
	}
	// groupsKnown is whether any candidate counts its tasks by group: only ranking reads
	// it, so it is found (a scan of every candidate) the first time a task is ranked.
	groupsKnown, groupsScanned := false, false
	usedInRequest := map[string]bool{}

	randomOnly := true
	for _, st := range req.Strategy {
		randomOnly = randomOnly && st.Type == StrategyRandom
	}
	// into returns the candidates that take is to record a reserved copy in: none for the
	// last task, else cands, first made private when it is the snapshot's.
	into := func(k int) []*Instance {
		if k == count-1 {
			return nil
		}
		if shared {
			cands, shared = slices.Clone(cands), false
		}
		return cands
	}
	for k := range count {
		// Random (the default) needs no ranking: rejection-sample a few instances, which
		// is uniform over the feasible ones and O(1) when most are feasible; fall back to
		// the full scan, which also collects the failure reasons.
		if randomOnly && len(cands) > 0 {
			// A busy instance is not taken here: when the samples find only busy ones, the
			// scan below prefers an idle one.
			var best *Instance
			for range 8 {
				in := cands[e.rng.IntN(len(cands))]
				if in.Busy {
					continue
				}
				if reason, _ := e.check(in, req, c, usedInRequest, false); reason == "" {
					best = in
					break
				}
			}
			if best != nil {
				best = e.take(&plan, into(k), mine, best, req)
				usedInRequest[best.ID] = true
				continue
			}
		}
		// Feasibility first without the failures' details (formatting one per refused
		// instance costs more than the check); they are collected only when no instance
		// is feasible, which is when they are reported.
		feasible := e.feasible[:0]
		for _, in := range cands {
			if reason, _ := e.check(in, req, c, usedInRequest, false); reason == "" {
				feasible = append(feasible, in)
			}
		}
		e.feasible = feasible[:0]
		if len(feasible) == 0 {
			var fails []Failure
			for _, in := range cands {
				if reason, detail := e.check(in, req, c, usedInRequest, true); reason != "" {
					fails = append(fails, Failure{Arn: in.ARN, Reason: reason, Detail: detail})
				}
			}
			if len(req.Instances) == 0 {
				// For RunTask AWS reports the instances that were considered; an instance
				// not ACTIVE is not considered at all. When no instance was (every one
				// DRAINING), each is reported with its status, so the answer never says
				// nothing about why the tasks were not placed.
				considered := slices.DeleteFunc(slices.Clone(fails), func(f Failure) bool { return f.Reason == ReasonInactive })
				if len(considered) == 0 {
					for i, f := range fails {
						if in := instanceByARN(cands, f.Arn); in != nil && in.Status != "" {
							fails[i].Reason = in.Status
						}
					}
				} else {
					fails = considered
				}
			}
			plan.Failures = append(plan.Failures, fails...)
			return plan, nil
		}
		if !groupsScanned {
			groupsScanned = true
			groupsKnown = slices.ContainsFunc(cands, func(in *Instance) bool { return in.Groups != nil })
		}
		best := e.rank(feasible, cands, req, groupsKnown)
		best = e.take(&plan, into(k), mine, best, req)
		usedInRequest[best.ID] = true
	}
	return plan, nil
}

// instanceByARN returns the instance of cands with ARN a, or nil.
func instanceByARN(cands []*Instance, a string) *Instance {
	for _, in := range cands {
		if in.ARN == a {
			return in
		}
	}
	return nil
}

// take records best as the next choice and reserves the demand on a private copy of it
// (replacing it in cands, unless cands is nil: no task follows), which it returns.
func (e *Engine) take(plan *Plan, cands []*Instance, mine map[*Instance]bool, best *Instance, req Request) *Instance {
	if !mine[best] {
		// A snapshot instance is never changed: the choice can name it as it is.
		plan.Choices = append(plan.Choices, Choice{Instance: best})
		if cands == nil {
			return best // nothing reads the reserved copy
		}
		cp := best.clone()
		mine[cp] = true
		i := slices.Index(cands, best)
		cands[i] = cp
		best = cp
	} else {
		plan.Choices = append(plan.Choices, Choice{Instance: best.clone()})
	}
	reserve(best, req.Demand, req.Group)
	return best
}

// reserve takes d (and a task of group) from in.
func reserve(in *Instance, d Demand, group string) {
	in.CPU -= int64(d.CPU)
	in.Memory -= int64(d.Memory)
	in.GPUs -= int64(d.GPUs)
	if len(d.Ports) > 0 && in.Ports == nil {
		in.Ports = make(map[int32]bool, len(d.Ports))
	}
	for _, p := range d.Ports {
		in.Ports[p] = true
	}
	if len(d.UDPPorts) > 0 && in.UDPPorts == nil {
		in.UDPPorts = make(map[int32]bool, len(d.UDPPorts))
	}
	for _, p := range d.UDPPorts {
		in.UDPPorts[p] = true
	}
	in.RunningTasks++
	if group != "" {
		if in.Groups == nil {
			in.Groups = map[string]int{}
		}
		in.Groups[group]++
	}
}

// eligible is instance eligibility, the one place it is written: the instance is ACTIVE
// (FromRecord reports a draining one DRAINING), its agent is connected unless
// ignoreAgent, it satisfies every memberOf expression and meets every requirement of
// the task (Requirement.Met). It returns the failing reason
// and a detail, or "" when the instance is eligible. The engine's feasibility starts
// with it; DaemonInstances uses it alone (a DAEMON service counts an instance whose
// agent is away, as AWS does, and its task waits for the agent).
func eligible(in *Instance, memberOf []*cql.Expr, requires []*Requirement, ignoreAgent bool) (string, string) {
	if in.Status != "ACTIVE" {
		return ReasonInactive, fmt.Sprintf("container instance is %s", in.Status)
	}
	if !ignoreAgent && !in.AgentConnected {
		return ReasonAgent, "the container instance's agent is disconnected"
	}
	for _, m := range memberOf {
		if !m.Match(in) {
			return ReasonAttribute, "MemberOf placement constraint unsatisfied: " + m.String()
		}
	}
	for _, r := range requires {
		if !r.Met(in) {
			return ReasonAttribute, r.Detail(in)
		}
	}
	return "", ""
}

// DaemonInstances returns, in id order, the ids of the instances of snapshot a DAEMON
// service runs one task on: ACTIVE and matching every memberOf constraint (pass the
// service's and task definition's constraints with RequiresAttributes appended). Other
// constraint types are ignored (distinctInstance is implied). It returns an error
// wrapping ErrExpression for a memberOf expression that does not parse.
func DaemonInstances(snapshot []*Instance, constraints []Constraint) ([]string, error) {
	var memberOf []*cql.Expr
	var requires []*Requirement
	for _, c := range constraints {
		if c.Require != nil {
			requires = append(requires, c.Require)
			continue
		}
		if c.Type != ConstraintMemberOf {
			continue
		}
		e, err := cql.ParseExpr(c.Expression)
		if err != nil {
			return nil, err
		}
		memberOf = append(memberOf, e)
	}
	var out []string
	for _, in := range snapshot {
		if reason, _ := eligible(in, memberOf, requires, true); reason == "" {
			out = append(out, in.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// check runs the feasibility checkers in AWS's order of reporting and returns the first
// failing reason, or "" when the instance can take the task; the detail explaining the
// reason is formatted only when withDetail is set.
func (e *Engine) check(in *Instance, req Request, c compiled, used map[string]bool, withDetail bool) (string, string) {
	if !withDetail {
		if in.Status != "ACTIVE" {
			return ReasonInactive, ""
		}
		if !in.AgentConnected {
			return ReasonAgent, ""
		}
		for _, m := range c.memberOf {
			if !m.Match(in) {
				return ReasonAttribute, ""
			}
		}
		for _, r := range c.requires {
			if !r.Met(in) {
				return ReasonAttribute, ""
			}
		}
	} else if reason, detail := eligible(in, c.memberOf, c.requires, false); reason != "" {
		return reason, detail
	}
	if c.distinct && (used[in.ID] || (req.Group != "" && in.Groups[req.Group] > 0)) {
		return ReasonAttribute, "distinctInstance placement constraint unsatisfied"
	}
	reason, a, b := "", int64(0), int64(0)
	switch {
	case int64(req.Demand.CPU) > in.CPU:
		reason, a, b = ReasonCPU, int64(req.Demand.CPU), in.CPU
	case int64(req.Demand.Memory) > in.Memory:
		reason, a, b = ReasonMemory, int64(req.Demand.Memory), in.Memory
	case int64(req.Demand.GPUs) > in.GPUs:
		reason, a, b = ReasonGPU, int64(req.Demand.GPUs), in.GPUs
	}
	if reason != "" {
		if !withDetail {
			return reason, ""
		}
		switch reason {
		case ReasonCPU:
			return reason, fmt.Sprintf("needs %d CPU units, %d remain", a, b)
		case ReasonMemory:
			return reason, fmt.Sprintf("needs %d MiB, %d remain", a, b)
		default:
			return reason, fmt.Sprintf("needs %d GPUs, %d remain", a, b)
		}
	}
	for _, p := range req.Demand.Ports {
		if in.Ports[p] {
			if !withDetail {
				return ReasonPorts, ""
			}
			return ReasonPorts, fmt.Sprintf("tcp port %d is taken", p)
		}
	}
	for _, p := range req.Demand.UDPPorts {
		if in.UDPPorts[p] {
			if !withDetail {
				return ReasonPortsUDP, ""
			}
			return ReasonPortsUDP, fmt.Sprintf("udp port %d is taken", p)
		}
	}
	return "", ""
}

// rank orders feasible instances by the strategy chain and returns the best. all is
// every candidate (for spread over an attribute, which counts tasks on every instance
// sharing a value).
func (e *Engine) rank(feasible, all []*Instance, req Request, groupsKnown bool) *Instance {
	if len(feasible) == 1 {
		return feasible[0]
	}
	spreadCounts := make([]map[string]int, len(req.Strategy))
	attrs := make([]string, len(req.Strategy))
	cpu := make([]bool, len(req.Strategy))
	for i, s := range req.Strategy {
		cpu[i] = strings.EqualFold(s.Field, "cpu")
		if s.Type == StrategySpread && !isInstanceField(s.Field) {
			attrs[i], _ = strings.CutPrefix(s.Field, "attribute:")
			m := map[string]int{}
			for _, in := range all {
				m[in.Attributes[attrs[i]]] += tasksOf(in, req.Group, groupsKnown)
			}
			spreadCounts[i] = m
		}
	}
	// Lexicographic minimum over (strategy keys..., random tie-break), streaming so no
	// per-instance allocation.
	n := len(req.Strategy) + 1
	bestKeys, keys := make([]float64, n), make([]float64, n)
	var best *Instance
	for _, in := range feasible {
		for i, s := range req.Strategy {
			switch s.Type {
			case StrategyBinpack:
				// Least remaining of the field wins.
				if cpu[i] {
					keys[i] = float64(in.CPU)
				} else {
					keys[i] = float64(in.Memory)
				}
			case StrategySpread:
				if isInstanceField(s.Field) {
					keys[i] = float64(tasksOf(in, req.Group, groupsKnown))
				} else {
					keys[i] = float64(spreadCounts[i][in.Attributes[attrs[i]]])
				}
			case StrategyRandom:
				keys[i] = e.rng.Float64() // in [0, 1): a busy instance comes after every idle one
				if in.Busy {
					keys[i]++
				}
			}
		}
		keys[n-1] = e.rng.Float64() // in [0, 1): a busy instance loses every tie
		if in.Busy {
			keys[n-1]++
		}
		if best == nil || less(keys, bestKeys) {
			best = in
			copy(bestKeys, keys)
		}
	}
	return best
}

// less orders score vectors lexicographically.
func less(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func isInstanceField(f string) bool {
	return f == "instanceId" || f == "host" || f == "containerInstanceId"
}

// tasksOf is the task count spread balances: the group's tasks when the snapshot knows
// groups, else every task on the instance.
func tasksOf(in *Instance, group string, groupsKnown bool) int {
	if group != "" && groupsKnown {
		return in.Groups[group]
	}
	return in.RunningTasks
}
