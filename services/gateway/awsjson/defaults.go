package awsjson

import (
	"fmt"
	"sync"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Default is what Marshal writes for a member that is unset (an empty list, an absent
// structure or an absent boxed scalar) where AWS still returns the member.
type Default uint8

// The defaults a member can have.
const (
	// Omit leaves the unset member out of the response (the zero value: AWS's rule for
	// optional members).
	Omit Default = iota
	// EmptyList writes [] for an empty list member.
	EmptyList
	// EmptyStructure writes an unset structure member as an object holding only its own
	// defaults (for example a task's "overrides": {"containerOverrides": [],
	// "inferenceAcceleratorOverrides": []}).
	EmptyStructure
	// True writes true for an unset boxed Boolean member.
	True
	// OmitEmpty leaves an empty list out even at the top level of a response, where lists
	// are otherwise always written (a DescribeTaskDefinition response's "tags", which AWS
	// returns only when include asks for TAGS).
	OmitEmpty
)

// MemberDefault is one row of Defaults: the member Member of the ECS shape Shape (the
// model's names, which are the berth.ecs.v1 message name and the field's JSON name) is
// written as Default when unset. Source names the AWS document the row follows.
type MemberDefault struct {
	// Shape is the ECS model shape (berth.ecs.v1 message) name, e.g. "TaskDefinition".
	Shape string
	// Member is the AWS member name (the field's JSON name), e.g. "volumes".
	Member string
	// Default is what an unset member is written as.
	Default Default
	// Source is the AWS document showing the member present when empty.
	Source string
}

// The AWS documents the rows of Defaults follow.
const (
	srcExamples  = "AWS example response (aws-models/ecs-examples-2014-11-13.json)"
	srcCLI       = "AWS CLI reference example output"
	srcIssue     = "AWS response quoted in issue 12"
	srcRequired  = "required member in the ECS model"
	srcEssential = "ContainerDefinition.essential: defaults to true when omitted (API reference)"
)

// Defaults is the table of members AWS returns even when they are empty, read by Marshal.
// Every other empty list, absent structure and absent boxed scalar is left out, as AWS
// leaves out optional members it has nothing for (a resource's "tags" unless the request's
// include asks for TAGS, for example). Besides these rows, every list member the ECS model
// marks required (berth.ecs.v1.required, e.g. DeploymentAlarms.alarmNames) is always
// written, so a response never lacks a required member.
var Defaults = []MemberDefault{
	// DescribeTaskDefinition / RegisterTaskDefinition.
	{"TaskDefinition", "containerDefinitions", EmptyList, srcExamples},
	{"TaskDefinition", "volumes", EmptyList, srcExamples},
	{"TaskDefinition", "placementConstraints", EmptyList, srcIssue},
	{"TaskDefinition", "requiresAttributes", EmptyList, srcIssue},
	{"TaskDefinition", "compatibilities", EmptyList, srcIssue},
	{"ContainerDefinition", "portMappings", EmptyList, srcExamples},
	{"ContainerDefinition", "environment", EmptyList, srcExamples},
	{"ContainerDefinition", "mountPoints", EmptyList, srcExamples},
	{"ContainerDefinition", "volumesFrom", EmptyList, srcExamples},
	{"ContainerDefinition", "essential", True, srcEssential},
	{"DescribeTaskDefinitionResponse", "tags", OmitEmpty, srcExamples},
	{"RegisterTaskDefinitionResponse", "tags", OmitEmpty, srcExamples},
	// DescribeServices / CreateService / UpdateService / DeleteService.
	{"Service", "loadBalancers", EmptyList, srcExamples},
	{"Service", "serviceRegistries", EmptyList, srcIssue},
	{"Service", "placementConstraints", EmptyList, srcIssue},
	{"Service", "placementStrategy", EmptyList, srcIssue},
	{"Service", "events", EmptyList, srcExamples},
	{"Service", "deployments", EmptyList, srcExamples},
	// DescribeTasks / RunTask / StartTask / StopTask.
	{"Task", "attachments", EmptyList, srcIssue},
	{"Task", "containers", EmptyList, srcExamples},
	{"Task", "overrides", EmptyStructure, srcExamples},
	{"TaskOverride", "containerOverrides", EmptyList, srcExamples},
	{"TaskOverride", "inferenceAcceleratorOverrides", EmptyList, srcIssue},
	{"Container", "networkBindings", EmptyList, srcIssue},
	{"Container", "networkInterfaces", EmptyList, srcIssue},
	// DescribeClusters / CreateCluster.
	{"Cluster", "statistics", EmptyList, srcCLI},
	{"Cluster", "capacityProviders", EmptyList, srcCLI},
	{"Cluster", "defaultCapacityProviderStrategy", EmptyList, srcCLI},
	// DescribeContainerInstances / RegisterContainerInstance.
	{"ContainerInstance", "registeredResources", EmptyList, srcExamples},
	{"ContainerInstance", "remainingResources", EmptyList, srcExamples},
	{"ContainerInstance", "attributes", EmptyList, srcCLI},
}

// defaults is Defaults (plus the required list members) indexed by message full name, then
// by field number: defaults[name][fd.Index()].
var (
	defaultsOnce  sync.Once
	defaultsIndex map[protoreflect.FullName][]Default
	defaultsErr   error
)

// CheckDefaults resolves every row of Defaults against the berth.ecs.v1 descriptors and
// returns an error naming the first row whose shape or member does not exist or whose
// default does not fit the member's type (for example EmptyList on a string).
func CheckDefaults() error {
	loadDefaults()
	return defaultsErr
}

func loadDefaults() {
	defaultsOnce.Do(func() {
		defaultsIndex, defaultsErr = buildDefaults(Defaults)
	})
}

func buildDefaults(rows []MemberDefault) (map[protoreflect.FullName][]Default, error) {
	idx := map[protoreflect.FullName][]Default{}
	set := func(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, d Default) {
		ds := idx[md.FullName()]
		if ds == nil {
			ds = make([]Default, md.Fields().Len())
			idx[md.FullName()] = ds
		}
		ds[fd.Index()] = d
	}
	// Required list members first, so an explicit row can still say something else.
	msgs := ecsv1.File_berth_ecs_v1_shapes_proto.Messages()
	for i := 0; i < msgs.Len(); i++ {
		md := msgs.Get(i)
		fields := md.Fields()
		for j := 0; j < fields.Len(); j++ {
			fd := fields.Get(j)
			if fd.IsList() && proto.GetExtension(fd.Options(), ecsv1.E_Required).(bool) {
				set(md, fd, EmptyList)
			}
		}
	}
	var firstErr error
	for _, r := range rows {
		md := msgs.ByName(protoreflect.Name(r.Shape))
		if md == nil {
			firstErr = firstNonNil(firstErr, fmt.Errorf("awsjson: default %s.%s: no shape %s", r.Shape, r.Member, r.Shape))
			continue
		}
		fd := md.Fields().ByJSONName(r.Member)
		if fd == nil {
			firstErr = firstNonNil(firstErr, fmt.Errorf("awsjson: default %s.%s: no member %s", r.Shape, r.Member, r.Member))
			continue
		}
		ok := false
		switch r.Default {
		case EmptyList, OmitEmpty:
			ok = fd.IsList()
		case EmptyStructure:
			ok = !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind
		case True:
			ok = !fd.IsList() && fd.Kind() == protoreflect.BoolKind && fd.HasPresence()
		}
		if !ok {
			firstErr = firstNonNil(firstErr, fmt.Errorf("awsjson: default %s.%s: default %d does not fit the member's type", r.Shape, r.Member, r.Default))
			continue
		}
		set(md, fd, r.Default)
	}
	return idx, firstErr
}

func firstNonNil(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// defaultsOff makes Marshal ignore the table, as the encoder did before it; only the
// package's benchmarks set it, to measure the table's cost in the same run.
var defaultsOff bool

// memberDefaults returns the defaults of md's fields indexed by field index, or nil when
// none of its members has one.
func memberDefaults(md protoreflect.MessageDescriptor) []Default {
	loadDefaults()
	return defaultsIndex[md.FullName()]
}
