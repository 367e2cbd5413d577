package control

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/arn"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/placement"
	"github.com/berthhq/berth/services/scheduler/store"
)

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
// old is nil (with the id → cluster mapping when the task's ARN is in the short format,
// which does not name the cluster: the mapping is read only for such ARNs), else an
// update under old's ModRevision rev, deleting the index keys old had and rec has not.
// Counters are the caller's.
func WriteTaskTxn(txn *store.Txn, account keys.Scope, old *storev1.TaskRecord, rev int64, rec *storev1.TaskRecord) {
	key := keys.Task(account, rec.GetClusterName(), TaskID(rec))
	newKeys := TaskIndexKeys(account, rec)
	if old == nil {
		txn.Create(key, rec)
		if a, err := arn.Parse(rec.GetTask().GetTaskArn()); err != nil || a.Cluster == "" {
			txn.Put(keys.IDCluster(account, arn.Task, TaskID(rec)), wrapperspb.String(rec.GetClusterName()))
		}
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
	// TaskDefinition is the tasks' definition (their GPUs are split among its
	// containers). The inbox entries name it by the tasks' taskDefinitionArn only: the
	// agent session adds it to the assignment when it delivers.
	TaskDefinition *ecsv1.TaskDefinition
	// ClientToken, when set, maps RunTask's token to the tasks.
	ClientToken string
	// TraceParents, when set, holds for each of Tasks (same index) the W3C traceparent
	// of the call that placed it (TraceParent), sent to the agent with the assignment;
	// "" or a short slice means untraced.
	TraceParents []string
}

// TraceParent returns the W3C traceparent of ctx's span, or "" when ctx carries no
// sampled span (tracing off), for Placement.TraceParents.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}

// PlaceTxn adds to txn every write of a placement: each task (created, with its index
// keys and instance ARN set), its reservation on its instance (placement.Reserve of the
// demand stored on the task, with the GPU ids it is given: placement.PickGPUs, kept on
// the task record and split among its containers' gpuIds; instance
// pendingTasksCount/runningTasksCount and version updated), its inbox entry (an
// agentv1.Assignment with delivery id = task id and the task; not the task definition,
// which the agent session adds), the cluster's counters, and the client
// token; instance and cluster writes compare their ModRevisions. It fails (nothing to
// commit) when a task's instance is not in Instances or the task does not fit.
func PlaceTxn(txn *store.Txn, p Placement) error {
	touched := map[string]bool{}
	ids := make([]string, 0, len(p.Tasks))
	for i, t := range p.Tasks {
		st := p.Instances[t.GetContainerInstanceId()]
		if st == nil || st.Record == nil {
			return fmt.Errorf("control: place task %s: instance %q not given", TaskID(t), t.GetContainerInstanceId())
		}
		ci := st.Record.GetContainerInstance()
		if t.GetReservedGpus() > 0 && len(t.GetGpuIds()) == 0 {
			t.GpuIds = placement.PickGPUs(ci, t.GetReservedGpus())
			assignContainerGPUs(t, p.TaskDefinition)
		}
		if err := placement.Reserve(ci, placement.TaskDemand(t)); err != nil {
			return fmt.Errorf("control: place task %s on %s: %w", TaskID(t), t.GetContainerInstanceId(), err)
		}
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
		var traceParent string
		if i < len(p.TraceParents) {
			traceParent = p.TraceParents[i]
		}
		txn.Put(keys.Inbox(p.Account, t.GetContainerInstanceId(), TaskID(t)), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId: TaskID(t), Task: t.GetTask(), TraceParent: traceParent,
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

// assignContainerGPUs sets the gpuIds of t's containers (AWS's Container.gpuIds, what
// the agent exposes to each container) from the task's GPU ids, in container definition
// order, each container taking as many as its GPU resourceRequirements ask for (its
// container override's when it has one).
func assignContainerGPUs(t *storev1.TaskRecord, td *ecsv1.TaskDefinition) {
	ids := t.GetGpuIds()
	overrides := map[string]*ecsv1.ContainerOverride{}
	for _, o := range t.GetTask().GetOverrides().GetContainerOverrides() {
		overrides[o.GetName()] = o
	}
	for _, def := range td.GetContainerDefinitions() {
		reqs := def.GetResourceRequirements()
		if o := overrides[def.GetName()]; o != nil && o.ResourceRequirements != nil {
			reqs = o.GetResourceRequirements()
		}
		n, err := placement.GPUCount(reqs)
		if err != nil || n == 0 || int(n) > len(ids) {
			continue
		}
		for _, c := range t.GetTask().GetContainers() {
			if c.GetName() == def.GetName() {
				c.GpuIds = append([]string{}, ids[:n]...)
			}
		}
		ids = ids[n:]
	}
}
