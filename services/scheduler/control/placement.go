package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/arn"
	"github.com/berthhq/berth/services/scheduler/cql"
	"github.com/berthhq/berth/services/scheduler/ecserr"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
)

// Placement failure reasons, as RunTask and StartTask report them in failures[].
const (
	ReasonCPU       = "RESOURCE:CPU"
	ReasonMemory    = "RESOURCE:MEMORY"
	ReasonPorts     = "RESOURCE:PORTS"
	ReasonPortsUDP  = "RESOURCE:PORTS_UDP"
	ReasonAgent     = "AGENT"
	ReasonAttribute = "ATTRIBUTE"
	ReasonMissing   = "MISSING"
	ReasonInactive  = "INACTIVE"
)

// ErrClientTokenUsed is returned (wrapped) by a Placer when PlaceRequest.ClientToken is
// already recorded, for instance by a concurrent RunTask with the same token; RunTask
// then answers with the tasks the token started.
var ErrClientTokenUsed = errors.New("control: client token already used")

// Placer places pending tasks on container instances. Place must write every placed task
// together with its instance's reservation, the agent's inbox entry, the cluster's
// counters and the task's index keys in one transaction (build it with PlaceTxn), and
// return the placed tasks as written. Tasks it cannot place are not written; they are
// reported in failures with an AWS reason (RESOURCE:CPU, RESOURCE:MEMORY, RESOURCE:PORTS,
// AGENT, ATTRIBUTE, MISSING, or the status of a DRAINING instance when no other reason
// applies). An error means nothing was written.
type Placer interface {
	Place(ctx context.Context, req PlaceRequest) (PlaceResult, error)
}

// PlaceRequest is what RunTask and StartTask ask a Placer to place.
type PlaceRequest struct {
	// Account is the (account, region) scope that owns the cluster.
	Account keys.Scope
	// Cluster is the cluster name.
	Cluster string
	// Tasks are the tasks to place (the RunTask count is len(Tasks)), not yet stored:
	// lastStatus PENDING, desiredStatus RUNNING, no container instance.
	Tasks []*storev1.TaskRecord
	// TaskDefinition is the tasks' task definition.
	TaskDefinition *ecsv1.TaskDefinition
	// PlacementConstraints are RunTask's constraints (distinctInstance, memberOf);
	// the task definition's own are in TaskDefinition.
	PlacementConstraints []*ecsv1.PlacementConstraint
	// PlacementStrategy is RunTask's strategy (binpack, spread, random), in order.
	PlacementStrategy []*ecsv1.PlacementStrategy
	// ContainerInstanceIDs, for StartTask, names the instance of each task:
	// Tasks[i] goes on ContainerInstanceIDs[i] or fails.
	ContainerInstanceIDs []string
	// ClientToken, when set, is recorded with the placed tasks (RunTask idempotency).
	ClientToken string
}

// PlaceResult is what a Placer placed and what it could not.
type PlaceResult struct {
	// Placed are the tasks written, with their container instance.
	Placed []*storev1.TaskRecord
	// Failures explain the tasks not placed.
	Failures []*ecsv1.Failure
}

// TaskCounts returns how a task with this lastStatus counts in a cluster's and an
// instance's pendingTasksCount (PROVISIONING, PENDING, ACTIVATING) and runningTasksCount
// (RUNNING).
func TaskCounts(lastStatus string) (pending, running int32) {
	switch lastStatus {
	case "PROVISIONING", "PENDING", "ACTIVATING":
		return 1, 0
	case "RUNNING":
		return 0, 1
	}
	return 0, 0
}

// statusRank orders task statuses; status only moves forward.
var statusRank = map[string]int{
	"PROVISIONING": 0, "PENDING": 1, "ACTIVATING": 2, "RUNNING": 3,
	"DEACTIVATING": 4, "STOPPING": 5, "DEPROVISIONING": 6, "STOPPED": 7,
}

// countDelta returns the change in (pending, running) when a task moves from old to new.
func countDelta(old, new string) (int32, int32) {
	op, or := TaskCounts(old)
	np, nr := TaskCounts(new)
	return np - op, nr - or
}

// ApplyCountDelta adjusts a cluster's pending and running task counters for a task moving
// from lastStatus old to new ("" for a task that did not exist).
func ApplyCountDelta(c *ecsv1.Cluster, old, new string) {
	dp, dr := countDelta(old, new)
	c.PendingTasksCount = max(c.PendingTasksCount+dp, 0)
	c.RunningTasksCount = max(c.RunningTasksCount+dr, 0)
}

// applyInstanceDelta is ApplyCountDelta for a container instance.
func applyInstanceDelta(ci *ecsv1.ContainerInstance, old, new string) {
	dp, dr := countDelta(old, new)
	ci.PendingTasksCount = max(ci.PendingTasksCount+dp, 0)
	ci.RunningTasksCount = max(ci.RunningTasksCount+dr, 0)
}

// TaskID returns the id of a task record (the last part of its ARN).
func TaskID(rec *storev1.TaskRecord) string {
	a := rec.GetTask().GetTaskArn()
	return a[strings.LastIndexByte(a, '/')+1:]
}

// taskFamily returns the family of the task's task definition ARN.
func taskFamily(rec *storev1.TaskRecord) string {
	a, err := arn.Parse(rec.GetTask().GetTaskDefinitionArn())
	if err != nil {
		return ""
	}
	return a.Name
}

// TaskIndexKeys returns the index keys of a task in its current state (see keys.TaskList:
// by desiredStatus and all / instance / family / service / startedBy).
func TaskIndexKeys(account keys.Scope, rec *storev1.TaskRecord) []string {
	c, id, desired := rec.GetClusterName(), TaskID(rec), rec.GetTask().GetDesiredStatus()
	ks := []string{keys.TaskList(account, c, desired, keys.DimAll, "-", id)}
	if v := rec.GetContainerInstanceId(); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimInstance, v, id))
	}
	if v := taskFamily(rec); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimFamily, v, id))
	}
	if v := rec.GetServiceName(); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimService, v, id))
	}
	if v := rec.GetTask().GetStartedBy(); v != "" {
		ks = append(ks, keys.TaskList(account, c, desired, keys.DimStartedBy, v, id))
	}
	return ks
}

// WriteTaskTxn adds to txn the write of a task record and its index keys: a create when
// old is nil (with the id → cluster mapping), else an update under old's ModRevision rev,
// deleting the index keys old had and rec has not. Counters are the caller's.
func WriteTaskTxn(txn *store.Txn, account keys.Scope, old *storev1.TaskRecord, rev int64, rec *storev1.TaskRecord) {
	key := keys.Task(account, rec.GetClusterName(), TaskID(rec))
	newKeys := TaskIndexKeys(account, rec)
	if old == nil {
		txn.Create(key, rec)
		txn.Put(keys.IDCluster(account, arn.Task, TaskID(rec)), wrapperspb.String(rec.GetClusterName()))
	} else {
		txn.Update(key, rev, rec)
		for _, k := range TaskIndexKeys(account, old) {
			if !slices.Contains(newKeys, k) {
				txn.Delete(k)
			}
		}
	}
	oldKeys := []string(nil)
	if old != nil {
		oldKeys = TaskIndexKeys(account, old)
	}
	for _, k := range newKeys {
		if !slices.Contains(oldKeys, k) {
			txn.PutIndex(k)
		}
	}
}

// TaskReservation returns what a task reserves on its instance: CPU units and MiB (the
// task-level values when the definition or overrides set them, else the sum over
// containers, overrides applied, memory counting memory or else memoryReservation), and
// the fixed host TCP and UDP ports of its port mappings (awsvpc tasks reserve no host
// ports; dynamic host port 0 is chosen by the agent).
func TaskReservation(td *ecsv1.TaskDefinition, ov *ecsv1.TaskOverride) (cpu, memory int32, tcp, udp []int32) {
	byName := map[string]*ecsv1.ContainerOverride{}
	for _, o := range ov.GetContainerOverrides() {
		byName[o.GetName()] = o
	}
	var sumCPU, sumMem int32
	for _, c := range td.GetContainerDefinitions() {
		o := byName[c.GetName()]
		cc := c.GetCpu()
		if o.GetCpu() > 0 {
			cc = o.GetCpu()
		}
		m := c.GetMemory()
		if m == 0 {
			m = c.GetMemoryReservation()
		}
		if o != nil && o.Memory != nil {
			m = o.GetMemory()
		} else if o != nil && o.MemoryReservation != nil && c.Memory == nil {
			m = o.GetMemoryReservation()
		}
		sumCPU += cc
		sumMem += m
		if td.GetNetworkMode() == "awsvpc" {
			continue
		}
		for _, pm := range c.GetPortMappings() {
			if hp := pm.GetHostPort(); hp > 0 {
				if pm.GetProtocol() == "udp" {
					udp = append(udp, hp)
				} else {
					tcp = append(tcp, hp)
				}
			}
		}
	}
	cpu, memory = sumCPU, sumMem
	if v, err := strconv.Atoi(td.GetCpu()); err == nil {
		cpu = int32(v)
	}
	if v, err := strconv.Atoi(td.GetMemory()); err == nil {
		memory = int32(v)
	}
	if v, ok := normalizeCPU(ov.GetCpu()); ok && ov.GetCpu() != "" {
		n, _ := strconv.Atoi(v)
		cpu = int32(n)
	}
	if v, ok := normalizeMemory(ov.GetMemory()); ok && ov.GetMemory() != "" {
		n, _ := strconv.Atoi(v)
		memory = int32(n)
	}
	return cpu, memory, tcp, udp
}

func portStrings(ps []int32) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strconv.Itoa(int(p))
	}
	return out
}

// Fits returns "" when the instance's remaining resources can take the task's
// reservation (TaskRecord reserved_* fields), else the AWS reason: RESOURCE:CPU,
// RESOURCE:MEMORY, RESOURCE:PORTS or RESOURCE:PORTS_UDP.
func Fits(ci *ecsv1.ContainerInstance, t *storev1.TaskRecord) string {
	rem := ci.GetRemainingResources()
	if t.GetReservedCpu() > ResourceInt(rem, ResourceCPU) {
		return ReasonCPU
	}
	if t.GetReservedMemory() > ResourceInt(rem, ResourceMemory) {
		return ReasonMemory
	}
	used := ResourcePortSet(rem, ResourcePorts)
	for _, p := range portStrings(t.GetReservedPorts()) {
		if slices.Contains(used, p) {
			return ReasonPorts
		}
	}
	usedUDP := ResourcePortSet(rem, ResourcePortsUDP)
	for _, p := range portStrings(t.GetReservedUdpPorts()) {
		if slices.Contains(usedUDP, p) {
			return ReasonPortsUDP
		}
	}
	return ""
}

// Reserve takes the task's reservation from the instance's remaining resources.
func Reserve(ci *ecsv1.ContainerInstance, t *storev1.TaskRecord) {
	adjust(ci, t, -1)
}

// Release gives the task's reservation back to the instance's remaining resources.
func Release(ci *ecsv1.ContainerInstance, t *storev1.TaskRecord) {
	adjust(ci, t, 1)
}

func adjust(ci *ecsv1.ContainerInstance, t *storev1.TaskRecord, sign int32) {
	rem := ci.GetRemainingResources()
	cpu := ResourceInt(rem, ResourceCPU) + sign*t.GetReservedCpu()
	mem := ResourceInt(rem, ResourceMemory) + sign*t.GetReservedMemory()
	ports, udp := ResourcePortSet(rem, ResourcePorts), ResourcePortSet(rem, ResourcePortsUDP)
	if sign < 0 {
		ports = append(append([]string{}, ports...), portStrings(t.GetReservedPorts())...)
		udp = append(append([]string{}, udp...), portStrings(t.GetReservedUdpPorts())...)
	} else {
		reg := ci.GetRegisteredResources()
		ports = removePorts(ports, portStrings(t.GetReservedPorts()), ResourcePortSet(reg, ResourcePorts))
		udp = removePorts(udp, portStrings(t.GetReservedUdpPorts()), ResourcePortSet(reg, ResourcePortsUDP))
	}
	ci.RemainingResources = Resources(cpu, mem, ports, udp)
}

// removePorts drops the task's ports from used, keeping those the instance registered as
// reserved for itself.
func removePorts(used, task, registered []string) []string {
	var out []string
	for _, p := range used {
		if slices.Contains(task, p) && !slices.Contains(registered, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// InstanceState is a container instance record as read, with its ModRevision.
type InstanceState struct {
	// Record is the instance record as read (PlaceTxn changes it).
	Record *storev1.ContainerInstanceRecord
	// Rev is its ModRevision.
	Rev int64
}

// Placement is a set of placement decisions to commit in one transaction.
type Placement struct {
	// Account is the (account, region) scope that owns the cluster.
	Account keys.Scope
	// Cluster is the cluster record as read, and ClusterRev its ModRevision.
	Cluster    *storev1.ClusterRecord
	ClusterRev int64
	// Instances are the instances the tasks go to, by instance id, as read (without
	// these tasks' reservations; PlaceTxn reserves).
	Instances map[string]*InstanceState
	// Tasks are the new tasks, each with ContainerInstanceId set to a key of Instances.
	Tasks []*storev1.TaskRecord
	// TaskDefinition is the tasks' definition, sent to the agents with the assignment.
	TaskDefinition *ecsv1.TaskDefinition
	// ClientToken, when set, maps RunTask's token to the tasks.
	ClientToken string
}

// PlaceTxn adds to txn every write of a placement: each task (created, with its index
// keys and instance ARN set), its reservation on its instance (Reserve; instance
// pendingTasksCount/runningTasksCount and version updated), its inbox entry (an
// agentv1.Assignment with delivery id = task id), the cluster's counters, and the client
// token; instance and cluster writes compare their ModRevisions. It fails (nothing to
// commit) when a task's instance is not in Instances or the task does not fit.
func PlaceTxn(txn *store.Txn, p Placement) error {
	touched := map[string]bool{}
	ids := make([]string, 0, len(p.Tasks))
	for _, t := range p.Tasks {
		st := p.Instances[t.GetContainerInstanceId()]
		if st == nil || st.Record == nil {
			return fmt.Errorf("control: place task %s: instance %q not given", TaskID(t), t.GetContainerInstanceId())
		}
		ci := st.Record.GetContainerInstance()
		if reason := Fits(ci, t); reason != "" {
			return fmt.Errorf("control: place task %s on %s: %s", TaskID(t), t.GetContainerInstanceId(), reason)
		}
		Reserve(ci, t)
		applyInstanceDelta(ci, "", t.GetTask().GetLastStatus())
		ApplyCountDelta(p.Cluster.GetCluster(), "", t.GetTask().GetLastStatus())
		t.Task.ContainerInstanceArn = proto.String(ci.GetContainerInstanceArn())
		for _, a := range ci.GetAttributes() {
			if a.GetName() == "ecs.cpu-architecture" {
				t.Task.Attributes = []*ecsv1.Attribute{{Name: proto.String("ecs.cpu-architecture"), Value: a.Value}}
			}
		}
		touched[t.GetContainerInstanceId()] = true
		WriteTaskTxn(txn, p.Account, nil, 0, t)
		txn.Put(keys.Inbox(p.Account, t.GetContainerInstanceId(), TaskID(t)), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId: TaskID(t), Task: t.GetTask(), TaskDefinition: p.TaskDefinition,
		}}})
		ids = append(ids, TaskID(t))
	}
	for id := range touched {
		st := p.Instances[id]
		st.Record.GetContainerInstance().Version++
		txn.Update(keys.Instance(p.Account, p.Cluster.GetCluster().GetClusterName(), id), st.Rev, st.Record)
	}
	txn.Update(keys.Cluster(p.Account, p.Cluster.GetCluster().GetClusterName()), p.ClusterRev, p.Cluster)
	if p.ClientToken != "" && len(ids) > 0 {
		txn.Create(keys.ClientToken(p.Account, p.Cluster.GetCluster().GetClusterName(), p.ClientToken), wrapperspb.String(strings.Join(ids, ",")))
	}
	return nil
}

// FirstFitPlacer is a small, correct Placer: each task goes on the first instance (in id
// order) that is ACTIVE, connected, satisfies the constraints and has room; StartTask
// tasks go on their named instance or fail. Strategies are ignored. It reads the cluster
// and its instances and commits with PlaceTxn, retrying the whole decision on a
// conflicting write.
type FirstFitPlacer struct {
	// KV is the etcd client.
	KV clientv3.KV
}

// Place implements Placer.
func (p *FirstFitPlacer) Place(ctx context.Context, req PlaceRequest) (PlaceResult, error) {
	var res PlaceResult
	err := retry(ctx, func() error {
		var err error
		res, err = p.attempt(ctx, req)
		return err
	})
	return res, err
}

func (p *FirstFitPlacer) attempt(ctx context.Context, req PlaceRequest) (PlaceResult, error) {
	var res PlaceResult
	if req.ClientToken != "" {
		v, _, err := get[*wrapperspb.StringValue](ctx, p.KV, keys.ClientToken(req.Account, req.Cluster, req.ClientToken))
		if err != nil {
			return res, err
		}
		if v != nil {
			return res, ErrClientTokenUsed
		}
	}
	crec, crev, err := get[*storev1.ClusterRecord](ctx, p.KV, keys.Cluster(req.Account, req.Cluster))
	if err != nil {
		return res, err
	}
	if crec == nil || crec.GetCluster().GetStatus() != statusActive {
		return res, ecserr.ClusterNotFoundError()
	}
	var insts []*InstanceState
	token := ""
	for {
		items, next, err := store.List[*storev1.ContainerInstanceRecord](ctx, p.KV, keys.Instances(req.Account, req.Cluster), store.MaxListLimit, token)
		if err != nil {
			return res, err
		}
		for _, it := range items {
			insts = append(insts, &InstanceState{Record: it.Value, Rev: it.ModRevision})
		}
		if next == "" {
			break
		}
		token = next
	}
	byID := map[string]*InstanceState{}
	scratch := map[string]*ecsv1.ContainerInstance{}
	for _, st := range insts {
		id := instanceID(st.Record.GetContainerInstance().GetContainerInstanceArn())
		byID[id] = st
		scratch[id] = proto.Clone(st.Record.GetContainerInstance()).(*ecsv1.ContainerInstance)
	}
	var exprs []*cql.Expr
	distinct := false
	for _, c := range req.PlacementConstraints {
		switch c.GetType() {
		case "distinctInstance":
			distinct = true
		case "memberOf":
			e, err := parseExpr(c.GetExpression())
			if err != nil {
				return res, err
			}
			exprs = append(exprs, e)
		}
	}
	for _, c := range req.TaskDefinition.GetPlacementConstraints() {
		if c.GetType() == "memberOf" {
			e, err := parseExpr(c.GetExpression())
			if err != nil {
				return res, err
			}
			exprs = append(exprs, e)
		}
	}
	eligible := func(ci *ecsv1.ContainerInstance) string {
		if ci.GetStatus() != statusActive {
			return ReasonInactive
		}
		if !ci.GetAgentConnected() {
			return ReasonAgent
		}
		for _, e := range exprs {
			if !matches(e, ci) {
				return ReasonAttribute
			}
		}
		for _, ra := range req.TaskDefinition.GetRequiresAttributes() {
			found := false
			for _, a := range ci.GetAttributes() {
				found = found || (a.GetName() == ra.GetName() && (ra.Value == nil || a.GetValue() == ra.GetValue()))
			}
			if !found {
				return ReasonAttribute
			}
		}
		return ""
	}
	used := map[string]bool{}
	seenFailure := map[string]bool{}
	fail := func(a, reason string) {
		if !seenFailure[a+reason] {
			seenFailure[a+reason] = true
			res.Failures = append(res.Failures, &ecsv1.Failure{Arn: proto.String(a), Reason: proto.String(reason)})
		}
	}
	var placed []*storev1.TaskRecord
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, in := range req.Tasks {
		t := proto.Clone(in).(*storev1.TaskRecord)
		candidates := ids
		if req.ContainerInstanceIDs != nil {
			if i >= len(req.ContainerInstanceIDs) {
				break
			}
			id := req.ContainerInstanceIDs[i]
			if byID[id] == nil {
				fail(id, ReasonMissing)
				continue
			}
			candidates = []string{id}
		}
		chosen := ""
		var skipped []*ecsv1.ContainerInstance // not ACTIVE: reported only if nothing else is
		failuresBefore := len(res.Failures)
		for _, id := range candidates {
			ci := scratch[id]
			if r := eligible(ci); r != "" {
				if r != ReasonInactive || req.ContainerInstanceIDs != nil {
					fail(ci.GetContainerInstanceArn(), r)
				} else {
					skipped = append(skipped, ci)
				}
				continue
			}
			if distinct && used[id] {
				continue
			}
			if r := Fits(ci, t); r != "" {
				fail(ci.GetContainerInstanceArn(), r)
				continue
			}
			chosen = id
			break
		}
		if chosen == "" {
			if len(res.Failures) == failuresBefore {
				for _, ci := range skipped {
					fail(ci.GetContainerInstanceArn(), ci.GetStatus())
				}
			}
			continue
		}
		Reserve(scratch[chosen], t)
		used[chosen] = true
		t.ContainerInstanceId = chosen
		placed = append(placed, t)
	}
	if len(placed) == 0 {
		return res, nil
	}
	txn := store.NewTxn(p.KV)
	if err := PlaceTxn(txn, Placement{
		Account: req.Account, Cluster: crec, ClusterRev: crev, Instances: byID,
		Tasks: placed, TaskDefinition: req.TaskDefinition, ClientToken: req.ClientToken,
	}); err != nil {
		return res, err
	}
	if _, err := txn.Commit(ctx); err != nil {
		return res, err
	}
	if len(placed) == len(req.Tasks) {
		res.Failures = nil
	}
	res.Placed = placed
	return res, nil
}
