// Package arn builds and parses the ARNs of ECS resources as AWS formats them:
//
//	arn:aws:ecs:{region}:{account}:cluster/{name}
//	arn:aws:ecs:{region}:{account}:task-definition/{family}:{revision}
//	arn:aws:ecs:{region}:{account}:task/{cluster}/{id}                 (long format)
//	arn:aws:ecs:{region}:{account}:task/{id}                           (short format)
//	arn:aws:ecs:{region}:{account}:container-instance/{cluster}/{id}   (long format)
//	arn:aws:ecs:{region}:{account}:service/{cluster}/{name}            (long format)
//
// See https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs-account-settings.html
// for the long and short ARN formats.
package arn

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Resource types, as they appear after the account in an ARN.
const (
	Cluster           = "cluster"
	TaskDefinition    = "task-definition"
	Task              = "task"
	ContainerInstance = "container-instance"
	Service           = "service"
	CapacityProvider  = "capacity-provider"
	TaskSet           = "task-set"
	// The managed daemon types: daemon-task-definition/{family}:{revision},
	// daemon/{cluster}/{name}, daemon-deployment/{cluster}/{daemon}/{id} and
	// daemon-revision/{cluster}/{daemon}/{id} (Name is "{daemon}/{id}" for the last two).
	DaemonTaskDefinition = "daemon-task-definition"
	Daemon               = "daemon"
	DaemonDeployment     = "daemon-deployment"
	DaemonRevision       = "daemon-revision"
)

// ErrInvalid is returned (wrapped) for a string that is not an ECS ARN of the expected form.
var ErrInvalid = errors.New("invalid ARN")

// ARN is a parsed ECS ARN.
type ARN struct {
	// Partition is "aws" for every ARN Berth issues.
	Partition string
	// Region is the region in the ARN, e.g. "us-east-1".
	Region string
	// Account is the 12-digit account id.
	Account string
	// Type is the resource type (Cluster, Task, ...).
	Type string
	// Cluster is the cluster name for long-format task, container-instance and service
	// ARNs; empty for short-format ARNs and for other types.
	Cluster string
	// Name is the resource's own name or id: the cluster name, the task id, the service
	// name, or the task definition family.
	Name string
	// Revision is the task definition revision; 0 for other types.
	Revision int
}

// String formats the ARN as AWS does.
func (a ARN) String() string {
	var res string
	switch {
	case a.Type == TaskDefinition || a.Type == DaemonTaskDefinition:
		res = fmt.Sprintf("%s/%s:%d", a.Type, a.Name, a.Revision)
	case a.Cluster != "":
		res = a.Type + "/" + a.Cluster + "/" + a.Name
	default:
		res = a.Type + "/" + a.Name
	}
	part := a.Partition
	if part == "" {
		part = "aws"
	}
	return fmt.Sprintf("arn:%s:ecs:%s:%s:%s", part, a.Region, a.Account, res)
}

// ClusterARN returns the ARN of cluster name.
func ClusterARN(region, account, name string) string {
	return ARN{Region: region, Account: account, Type: Cluster, Name: name}.String()
}

// TaskDefinitionARN returns the ARN of family:revision.
func TaskDefinitionARN(region, account, family string, revision int) string {
	return ARN{Region: region, Account: account, Type: TaskDefinition, Name: family, Revision: revision}.String()
}

// TaskARN returns a task ARN; long selects the long format (with the cluster name).
func TaskARN(region, account, cluster, id string, long bool) string {
	a := ARN{Region: region, Account: account, Type: Task, Name: id}
	if long {
		a.Cluster = cluster
	}
	return a.String()
}

// ContainerInstanceARN returns a container instance ARN; long selects the long format.
func ContainerInstanceARN(region, account, cluster, id string, long bool) string {
	a := ARN{Region: region, Account: account, Type: ContainerInstance, Name: id}
	if long {
		a.Cluster = cluster
	}
	return a.String()
}

// ServiceARN returns a service ARN; long selects the long format.
func ServiceARN(region, account, cluster, name string, long bool) string {
	a := ARN{Region: region, Account: account, Type: Service, Name: name}
	if long {
		a.Cluster = cluster
	}
	return a.String()
}

// IsARN reports whether s looks like an ARN (starts with "arn:"), the test AWS applies
// before treating an identifier as a name.
func IsARN(s string) bool { return strings.HasPrefix(s, "arn:") }

// Parse parses an ECS ARN. It returns an error wrapping ErrInvalid when s is not
// "arn:{partition}:ecs:{region}:{account}:{type}/{...}" with a resource of a known shape.
func Parse(s string) (ARN, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "ecs" || parts[1] == "" {
		return ARN{}, fmt.Errorf("%w: %q", ErrInvalid, s)
	}
	a := ARN{Partition: parts[1], Region: parts[3], Account: parts[4]}
	typ, rest, ok := strings.Cut(parts[5], "/")
	if !ok || rest == "" {
		return ARN{}, fmt.Errorf("%w: %q has no resource", ErrInvalid, s)
	}
	a.Type = typ
	switch typ {
	case TaskDefinition, DaemonTaskDefinition:
		family, rev, ok := strings.Cut(rest, ":")
		n, err := strconv.Atoi(rev)
		if !ok || err != nil || n < 1 || family == "" {
			return ARN{}, fmt.Errorf("%w: %q is not family:revision", ErrInvalid, s)
		}
		a.Name, a.Revision = family, n
	case Cluster, CapacityProvider:
		if strings.Contains(rest, "/") {
			return ARN{}, fmt.Errorf("%w: %q", ErrInvalid, s)
		}
		a.Name = rest
	case Task, ContainerInstance, Service, TaskSet:
		segs := strings.Split(rest, "/")
		switch {
		case len(segs) == 1:
			a.Name = segs[0]
		case len(segs) == 2 && segs[0] != "" && segs[1] != "":
			a.Cluster, a.Name = segs[0], segs[1]
		case typ == TaskSet && len(segs) == 3:
			a.Cluster, a.Name = segs[0], segs[1]+"/"+segs[2]
		case typ == TaskSet && len(segs) == 4 && segs[0] != "" && segs[1] != "" && segs[2] == "ecs-svc" && segs[3] != "":
			// task-set/{cluster}/{service}/ecs-svc/{digits}: AWS's task set ids hold a slash.
			a.Cluster, a.Name = segs[0], segs[1]+"/"+segs[2]+"/"+segs[3]
		default:
			return ARN{}, fmt.Errorf("%w: %q", ErrInvalid, s)
		}
	case Daemon:
		segs := strings.Split(rest, "/")
		if len(segs) != 2 || segs[0] == "" || segs[1] == "" {
			return ARN{}, fmt.Errorf("%w: %q is not daemon/{cluster}/{name}", ErrInvalid, s)
		}
		a.Cluster, a.Name = segs[0], segs[1]
	case DaemonDeployment, DaemonRevision:
		segs := strings.Split(rest, "/")
		if len(segs) != 3 || segs[0] == "" || segs[1] == "" || segs[2] == "" {
			return ARN{}, fmt.Errorf("%w: %q is not %s/{cluster}/{daemon}/{id}", ErrInvalid, s, typ)
		}
		a.Cluster, a.Name = segs[0], segs[1]+"/"+segs[2]
	default:
		return ARN{}, fmt.Errorf("%w: %q has unknown resource type %q", ErrInvalid, s, typ)
	}
	return a, nil
}
