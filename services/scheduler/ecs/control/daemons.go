package control

import (
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
