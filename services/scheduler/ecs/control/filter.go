package control

import (
	"strings"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/cql"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// parseExpr parses a cluster query language expression (ListContainerInstances' filter,
// a memberOf constraint) with cql.ParseExpr. A blank one is nil, which matches
// everything; one that does not parse is InvalidParameterException.
func parseExpr(s string) (*cql.Expr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	e, err := cql.ParseExpr(s)
	if err != nil {
		return nil, awserr.InvalidParameterf("%s", err.Error())
	}
	return e, nil
}

// instanceSubject is a stored container instance as a cql.Subject. It has no task
// groups: task:group has no values on it.
type instanceSubject struct{ ci *ecsv1.ContainerInstance }

// matches reports whether the container instance satisfies e (a nil e matches).
func matches(e *cql.Expr, ci *ecsv1.ContainerInstance) bool {
	return e.Match(instanceSubject{ci})
}

func (s instanceSubject) Attribute(name string) (string, bool) {
	for _, a := range s.ci.GetAttributes() {
		if a.GetName() == name {
			return a.GetValue(), true
		}
	}
	return "", false
}

func (s instanceSubject) Builtins() cql.Builtins {
	ci := s.ci
	b := cql.Builtins{
		InstanceID:        instanceID(ci.GetContainerInstanceArn()),
		EC2InstanceID:     ci.GetEc2InstanceId(),
		AgentConnected:    ci.GetAgentConnected(),
		AgentVersion:      ci.GetVersionInfo().GetAgentVersion(),
		RunningTasksCount: int(ci.GetRunningTasksCount()),
	}
	if ci.RegisteredAt != nil {
		sec := ci.GetRegisteredAt()
		b.RegisteredAt = time.Unix(int64(sec), int64((sec-float64(int64(sec)))*1e9)).UTC()
	}
	return b
}
