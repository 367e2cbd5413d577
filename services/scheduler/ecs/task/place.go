package task

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

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
	// Cluster is the cluster record as read (PlaceTxn does not change it), and
	// ClusterRev its ModRevision.
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
	// of the call that placed it (control.TraceParent), sent to the agent with the
	// assignment; "" or a short slice means untraced.
	TraceParents []string
}

// PlaceTxn adds to txn every write of a placement: each task (created, with its index
// keys and instance ARN set), its reservation on its instance (placement.Reserve of the
// demand stored on the task, with the GPU ids it is given: placement.PickGPUs, kept on
// the task record and split among its containers' gpuIds; the instance's active_tasks
// (ApplyInstanceDelta) and version updated), its inbox entry (an
// agentv1.Assignment with delivery id = task id and the task; not the task definition,
// which the agent session adds) and the client token. Instance writes compare their
// ModRevisions; the cluster's ModRevision is compared, not written: a cluster's
// pendingTasksCount/runningTasksCount are the sums of its instances' (control's
// DescribeClusters), so a cluster's placements and its agents' state changes do not all
// write one key and take turns on it. It fails (nothing to
// commit) when a task's instance is not in Instances or the task does not fit (the
// error wraps placement.Reserve's).
func PlaceTxn(txn *store.Txn, p Placement) error {
	touched := map[string]bool{}
	ids := make([]string, 0, len(p.Tasks))
	for i, t := range p.Tasks {
		st := p.Instances[t.GetContainerInstanceId()]
		if st == nil || st.Record == nil {
			return fmt.Errorf("task: place task %s: instance %q not given", ID(t), t.GetContainerInstanceId())
		}
		ci := st.Record.GetContainerInstance()
		if t.GetReservedGpus() > 0 && len(t.GetGpuIds()) == 0 {
			t.GpuIds = placement.PickGPUs(ci, t.GetReservedGpus())
			assignContainerGPUs(t, p.TaskDefinition)
		}
		if err := placement.Reserve(ci, placement.TaskDemand(t)); err != nil {
			return fmt.Errorf("task: place task %s on %s: %w", ID(t), t.GetContainerInstanceId(), err)
		}
		ApplyInstanceDelta(st.Record, "", t.GetTask().GetLastStatus())
		t.Task.ContainerInstanceArn = proto.String(ci.GetContainerInstanceArn())
		for _, a := range ci.GetAttributes() {
			if a.GetName() == "ecs.cpu-architecture" {
				t.Task.Attributes = []*ecsv1.Attribute{{Name: proto.String("ecs.cpu-architecture"), Value: a.Value}}
			}
		}
		touched[t.GetContainerInstanceId()] = true
		WriteTxn(txn, p.Account, nil, 0, t)
		var traceParent string
		if i < len(p.TraceParents) {
			traceParent = p.TraceParents[i]
		}
		txn.Put(keys.Inbox(p.Account, t.GetContainerInstanceId(), ID(t)), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId: ID(t), Task: t.GetTask(), TraceParent: traceParent,
		}}})
		ids = append(ids, ID(t))
	}
	for id := range touched {
		st := p.Instances[id]
		st.Record.GetContainerInstance().Version++
		txn.Update(keys.Instance(p.Account, p.Cluster.GetCluster().GetClusterName(), id), st.Rev, st.Record)
	}
	txn.IfModRevision(keys.Cluster(p.Account, p.Cluster.GetCluster().GetClusterName()), p.ClusterRev)
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
