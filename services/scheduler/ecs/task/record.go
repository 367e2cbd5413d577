package task

import (
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
)

// Template is what NewRecord builds a task from: RunTask's and StartTask's request
// (control) or a service's launch (service), resolved and validated by the caller. What
// tells the two apart is ServiceName: set for a service's task.
type Template struct {
	// Region, Account and Cluster name where the task runs (its ARNs').
	Region, Account, Cluster string
	// LongARN writes the task ARN in the long format (with the cluster name).
	LongARN bool
	// NewID returns the task id, then one id per container.
	NewID func() string
	// Now is the task's createdAt.
	Now time.Time
	// TaskDefinition is the task's definition, ACTIVE and validated.
	TaskDefinition *ecsv1.TaskDefinition
	// Overrides are the task's overrides (cloned); nil for none.
	Overrides *ecsv1.TaskOverride
	// Group is the task's group; "" gives ECS's default, "service:<ServiceName>" for a
	// service's task and "family:<family>" for another.
	Group string
	// LaunchType and StartedBy ("" for none) are written as given.
	LaunchType, StartedBy string
	// Tags are the task's own tags (RunTask's and StartTask's tags; a service's task has
	// none), put over the propagated ones; PropagateTags, TaskDefinitionTags, ServiceTags
	// and ManagedTags say which others it gets (tags.go).
	Tags []*ecsv1.Tag
	// PropagateTags is the propagateTags in force: TASK_DEFINITION copies
	// TaskDefinitionTags, SERVICE (a service's task) ServiceTags; NONE or "" none.
	PropagateTags                   string
	TaskDefinitionTags, ServiceTags []*ecsv1.Tag
	// ManagedTags is enableECSManagedTags: the task gets aws:ecs:clusterName and
	// aws:ecs:serviceName (a service's task) or aws:ecs:taskDefinitionFamily.
	ManagedTags bool
	// ServiceName and DeploymentID name the service and the deployment or task set that
	// launch the task ("" for RunTask's and StartTask's), written on the record.
	ServiceName, DeploymentID string
	// ClientToken is RunTask's clientToken, written on the record ("" for none).
	ClientToken string
	// EnableExecuteCommand is written as given (AWS's enableExecuteCommand).
	EnableExecuteCommand bool
	// CapacityProviderName is the provider the task is placed through ("" for none).
	CapacityProviderName string
	// PlatformVersion, for a FARGATE task, is its resolved platform version (nil means
	// FargateLatest); the task then shows it with platformFamily Linux.
	PlatformVersion *string
	// NetworkConfiguration is the task's (awsvpc: its subnets name the PRECREATED ENI
	// attachment's subnetId); nil for none.
	NetworkConfiguration *ecsv1.NetworkConfiguration
}

// containerOverridesOf returns one override per container of td, in the task definition's
// order: the given override of that container, or one holding only its name. AWS answers
// so ("overrides": {"containerOverrides": [{"name": "sleep"}]} in the RunTask and
// DescribeTasks examples of the API reference), and deploy tools index the list by
// container. Overrides naming no container of td were refused by the caller (control's
// validateOverrides).
func containerOverridesOf(td *ecsv1.TaskDefinition, given []*ecsv1.ContainerOverride) []*ecsv1.ContainerOverride {
	byName := make(map[string]*ecsv1.ContainerOverride, len(given))
	for _, o := range given {
		byName[o.GetName()] = o
	}
	out := make([]*ecsv1.ContainerOverride, 0, len(td.GetContainerDefinitions()))
	for _, c := range td.GetContainerDefinitions() {
		if o := byName[c.GetName()]; o != nil {
			out = append(out, o)
			continue
		}
		out = append(out, &ecsv1.ContainerOverride{Name: proto.String(c.GetName())})
	}
	return out
}

// NewRecord builds a PENDING task record, not yet placed, as RunTask and StartTask write
// it and the service scheduler launches it (AWS's Task shape): its ARN and its
// containers' from tt.NewID, its group and tags (Tags), its containers PENDING with the
// task definition's cpu and memory (overridden per container), one containerOverrides
// entry per container, a FARGATE task's platform version and family, an awsvpc task's
// PRECREATED ENI attachment, the service, deployment and client token it was started
// with, and its demand from placement.DemandOf stored on it. It cannot fail: tt is the
// caller's to validate.
func NewRecord(tt Template) *storev1.TaskRecord {
	td := tt.TaskDefinition
	ov := tt.Overrides
	if ov == nil {
		ov = &ecsv1.TaskOverride{}
	}
	ov = proto.Clone(ov).(*ecsv1.TaskOverride)
	ov.ContainerOverrides = containerOverridesOf(td, ov.GetContainerOverrides())
	if ov.InferenceAcceleratorOverrides == nil {
		ov.InferenceAcceleratorOverrides = []*ecsv1.InferenceAcceleratorOverride{}
	}
	tags := Tags(tt)
	group := tt.Group
	switch {
	case group != "":
	case tt.ServiceName != "":
		group = "service:" + tt.ServiceName
	default:
		group = "family:" + td.GetFamily()
	}
	// The one demand computation (placement.DemandOf), stored on the record for the
	// task's life. Callers validated the definition and the overrides (control's checkSpec, or
	// registration for the service scheduler), which is all DemandOf can refuse; a
	// refusal here would leave the task-level values unparsed, so the sums stand.
	demand, _ := placement.DemandOf(td, ov)
	cpu, mem := demand.CPU, demand.Memory
	id := tt.NewID()
	taskARN := arn.TaskARN(tt.Region, tt.Account, tt.Cluster, id, tt.LongARN)
	t := &ecsv1.Task{
		TaskArn:               proto.String(taskARN),
		ClusterArn:            proto.String(arn.ClusterARN(tt.Region, tt.Account, tt.Cluster)),
		TaskDefinitionArn:     td.TaskDefinitionArn,
		Overrides:             ov,
		LastStatus:            proto.String("PENDING"),
		DesiredStatus:         proto.String(DesiredRunning),
		CreatedAt:             proto.Float64(awsapi.Epoch(tt.Now)),
		Group:                 proto.String(group),
		LaunchType:            proto.String(tt.LaunchType),
		Version:               1,
		Tags:                  tags,
		EnableExecuteCommand:  tt.EnableExecuteCommand,
		Cpu:                   proto.String(itoa(cpu)),
		Memory:                proto.String(itoa(mem)),
		Attachments:           []*ecsv1.Attachment{},
		Attributes:            []*ecsv1.Attribute{},
		InferenceAccelerators: []*ecsv1.InferenceAccelerator{},
	}
	if tt.StartedBy != "" {
		t.StartedBy = proto.String(tt.StartedBy)
	}
	if tt.CapacityProviderName != "" {
		t.CapacityProviderName = proto.String(tt.CapacityProviderName)
	}
	if tt.LaunchType == "FARGATE" {
		v := FargateLatest
		if tt.PlatformVersion != nil {
			v = *tt.PlatformVersion
		}
		markFargate(t, v)
	}
	if td.GetNetworkMode() == "awsvpc" {
		t.Attachments = append(t.Attachments, precreatedENI(taskARN, tt.NetworkConfiguration))
	}
	byName := map[string]*ecsv1.ContainerOverride{}
	for _, o := range ov.GetContainerOverrides() {
		byName[o.GetName()] = o
	}
	for _, c := range td.GetContainerDefinitions() {
		ct := &ecsv1.Container{
			ContainerArn:      proto.String(containerARN(taskARN, tt.LongARN, tt.NewID())),
			TaskArn:           proto.String(taskARN),
			Name:              c.Name,
			Image:             c.Image,
			LastStatus:        proto.String("PENDING"),
			Cpu:               proto.String(itoa(c.GetCpu())),
			NetworkBindings:   []*ecsv1.NetworkBinding{},
			NetworkInterfaces: []*ecsv1.NetworkInterface{},
		}
		if c.Memory != nil {
			ct.Memory = proto.String(itoa(c.GetMemory()))
		}
		if c.MemoryReservation != nil {
			ct.MemoryReservation = proto.String(itoa(c.GetMemoryReservation()))
		}
		if o := byName[c.GetName()]; o != nil {
			if o.Cpu != nil {
				ct.Cpu = proto.String(itoa(o.GetCpu()))
			}
			if o.Memory != nil {
				ct.Memory = proto.String(itoa(o.GetMemory()))
			}
			if o.MemoryReservation != nil {
				ct.MemoryReservation = proto.String(itoa(o.GetMemoryReservation()))
			}
		}
		t.Containers = append(t.Containers, ct)
	}
	rec := &storev1.TaskRecord{Task: t, ClusterName: tt.Cluster, ClientToken: tt.ClientToken,
		ServiceName: tt.ServiceName, DeploymentId: tt.DeploymentID}
	placement.SetDemand(rec, demand)
	return rec
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Fargate platform versions Berth answers for: LATEST resolves to FargateLatest, the
// version AWS resolves LATEST to for Linux; Berth emulates no other.
const (
	FargateLatest         = "1.4.0"
	FargatePlatformFamily = "Linux"
)

// markFargate sets what a Fargate task shows: its platform version and family.
func markFargate(t *ecsv1.Task, platformVersion string) {
	t.PlatformVersion = proto.String(platformVersion)
	t.PlatformFamily = proto.String(FargatePlatformFamily)
}
