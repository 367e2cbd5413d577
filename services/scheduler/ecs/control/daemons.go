package control

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// BuildTaskDefinition validates m exactly as RegisterTaskDefinition does (the request's
// rules, the field table of docs/task-definition-fields.md, log configurations) and
// returns the task definition it would register, without family revision, ARN, status or
// registration time. Its errors are ClientException naming the member, as
// RegisterTaskDefinition's. The managed daemons' RegisterDaemonTaskDefinition
// (ecs/daemon) builds the task definition its agents run through it, so a daemon task
// definition is held to the same rules as any other.
func BuildTaskDefinition(m *ecsv1.RegisterTaskDefinitionRequest) (*ecsv1.TaskDefinition, error) {
	td, err := buildTaskDefinition(m)
	if err != nil {
		return nil, err
	}
	if err := CheckFields(ClientErr, m); err != nil {
		return nil, err
	}
	for i, cd := range m.GetContainerDefinitions() {
		if err := checkLogConfiguration(i, cd.GetLogConfiguration()); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// RootARN is the principal Berth records as registeredBy: the account's root user.
func RootARN(account keys.Scope) string { return rootARN(account) }

// daemonFieldShapes are the managed daemons' request shapes in the field table. A daemon
// task definition's members are the task definition's of the same names (ecs/daemon
// builds the task definition through BuildTaskDefinition), so their rules are copied
// from those: daemonShapeOf names the shape each takes its rules from.
var daemonShapeOf = map[string]string{
	"RegisterDaemonTaskDefinitionRequest": "RegisterTaskDefinitionRequest",
	"DaemonContainerDefinition":           "ContainerDefinition",
	"DaemonVolume":                        "Volume",
	"DaemonLinuxParameters":               "LinuxParameters",
}

// daemonRules are the rules of the daemon members that have no task definition
// counterpart (AWS references: CreateDaemon, UpdateDaemon, DaemonDeploymentConfiguration).
var daemonRules = map[string]FieldRule{
	"CreateDaemonRequest.capacityProviderArns":        honoured("The daemon runs one task on every ACTIVE instance of these capacity providers' pools (docs/capacity-providers.md); each must be associated with the cluster; FARGATE and FARGATE_SPOT are refused."),
	"CreateDaemonRequest.clientToken":                 honoured("A repeated CreateDaemon with the same token returns the daemon it created."),
	"CreateDaemonRequest.clusterArn":                  honoured("The default cluster when left out."),
	"CreateDaemonRequest.daemonName":                  honoured(""),
	"CreateDaemonRequest.daemonTaskDefinitionArn":     honoured("An ACTIVE daemon task definition revision (ARN, family:revision or family)."),
	"CreateDaemonRequest.deploymentConfiguration":     honoured(""),
	"CreateDaemonRequest.enableECSManagedTags":        honoured("The daemon's tasks get the ECS managed tags a service's tasks get."),
	"CreateDaemonRequest.enableExecuteCommand":        refusedBut(0, supNoExec, isFalse),
	"CreateDaemonRequest.propagateTags":               honoured("DAEMON copies the daemon's tags to its tasks."),
	"CreateDaemonRequest.tags":                        honoured(""),
	"UpdateDaemonRequest.capacityProviderArns":        honoured("As CreateDaemon: hosts that leave the pools lose the daemon's task at once."),
	"UpdateDaemonRequest.daemonArn":                   honoured(""),
	"UpdateDaemonRequest.daemonTaskDefinitionArn":     honoured("Every UpdateDaemon starts a deployment to a new revision."),
	"UpdateDaemonRequest.deploymentConfiguration":     honoured(""),
	"UpdateDaemonRequest.enableECSManagedTags":        honoured(""),
	"UpdateDaemonRequest.enableExecuteCommand":        refusedBut(0, supNoExec, isFalse),
	"UpdateDaemonRequest.propagateTags":               honoured(""),
	"DaemonDeploymentConfiguration.alarms":            refused(0, supNoAlarms+" Daemon deployments roll back on their circuit breaker (failed tasks)."),
	"DaemonDeploymentConfiguration.bakeTimeInMinutes": honoured("A deployment turns SUCCESSFUL this long after every host runs the new revision (0 to 1440; default 0)."),
	"DaemonDeploymentConfiguration.drainPercent":      honoured("The share of hosts whose daemon task is replaced at a time (at least one host; 25 when left out)."),
	"DaemonAlarmConfiguration.alarmNames":             refused(0, supNoAlarms),
	"DaemonAlarmConfiguration.enable":                 refusedBut(0, supNoAlarms, isFalse),
}

func init() {
	for shape, from := range daemonShapeOf {
		fields := daemonDescriptor(shape)
		for i := range fields.Len() {
			m := fields.Get(i).JSONName()
			if r, ok := FieldRules[from+"."+m]; ok {
				FieldRules[shape+"."+m] = r
			}
		}
	}
	for k, r := range daemonRules {
		FieldRules[k] = r
	}
	for _, s := range []string{"RegisterDaemonTaskDefinitionRequest", "DaemonContainerDefinition", "DaemonVolume", "DaemonLinuxParameters",
		"CreateDaemonRequest", "UpdateDaemonRequest", "DaemonDeploymentConfiguration", "DaemonAlarmConfiguration"} {
		fieldShapes = append(fieldShapes, s)
		coveredShape[s] = true
	}
}

// daemonDescriptor returns the fields of a daemon request shape of the ECS model.
func daemonDescriptor(shape string) protoreflect.FieldDescriptors {
	var m proto.Message
	switch shape {
	case "RegisterDaemonTaskDefinitionRequest":
		m = &ecsv1.RegisterDaemonTaskDefinitionRequest{}
	case "DaemonContainerDefinition":
		m = &ecsv1.DaemonContainerDefinition{}
	case "DaemonVolume":
		m = &ecsv1.DaemonVolume{}
	default:
		m = &ecsv1.DaemonLinuxParameters{}
	}
	return m.ProtoReflect().Descriptor().Fields()
}

// supNoExec is why a daemon refuses enableExecuteCommand: ECS Exec (docs/exec.md)
// reaches the tasks of RunTask, StartTask and services, not yet a daemon's.
const supNoExec = "Berth's managed daemons do not take ECS Exec yet (tasks and services do); set enableExecuteCommand to false or leave it out."
