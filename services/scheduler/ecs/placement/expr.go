package placement

import "github.com/berthhq/berth/services/scheduler/ecs/cql"

// ErrExpression is returned (wrapped, with the position and what was expected) for a
// memberOf expression that does not parse; it is cql.ErrExpression.
var ErrExpression = cql.ErrExpression

// Attribute returns the named attribute's value and whether the instance has it; with
// Builtins it makes Instance a cql.Subject, what memberOf expressions are evaluated on.
func (in *Instance) Attribute(name string) (string, bool) {
	v, ok := in.Attributes[name]
	return v, ok
}

// Builtins returns the instance's values for the cluster query language's built-in
// subjects (ec2InstanceId, instanceId, agentConnected, ...).
func (in *Instance) Builtins() cql.Builtins {
	return cql.Builtins{
		InstanceID:        in.ID,
		EC2InstanceID:     in.EC2InstanceID,
		AgentConnected:    in.AgentConnected,
		AgentVersion:      in.AgentVersion,
		RegisteredAt:      in.RegisteredAt,
		RunningTasksCount: in.RunningTasks,
		TaskGroups:        in.Groups,
	}
}
