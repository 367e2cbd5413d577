package keys

import (
	"strings"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ClusterRef names one cluster of one scope: the part a container instance, task or
// service key holds besides the record's own id or name. It is comparable, so it serves
// as a map key for per-cluster work (the service reconciler's change tracking).
type ClusterRef struct {
	// Scope is the cluster's account and region.
	Scope Scope
	// Cluster is the cluster name.
	Cluster string
}

// String returns "{account}/{region}/{cluster}", for logs and errors.
func (c ClusterRef) String() string { return c.Scope.String() + "/" + c.Cluster }

// AllServices returns the prefix of every service record of every scope, for the service
// reconciler's passes and watch (AllInstances and AllTasks are beside Presences).
func AllServices() string { return store.MustKeyPrefix("services") }

// ParseInstance splits a container instance key (Instance) into its cluster and the
// instance id; ok is false for a key of any other shape.
func ParseInstance(key string) (c ClusterRef, id string, ok bool) {
	return parseClusterKey("instances", key)
}

// ParseTask splits a task key (Task) into its cluster and the task id; ok is false for
// a key of any other shape.
func ParseTask(key string) (c ClusterRef, id string, ok bool) {
	return parseClusterKey("tasks", key)
}

// ParseService splits a service key (Service) into its cluster and the service name; ok
// is false for a key of any other shape.
func ParseService(key string) (c ClusterRef, name string, ok bool) {
	return parseClusterKey("services", key)
}

// parseClusterKey parses "{Prefix}{kind}/{account}/{region}/{cluster}/{last}".
func parseClusterKey(kind, key string) (ClusterRef, string, bool) {
	rest, ok := strings.CutPrefix(key, store.Prefix+kind+"/")
	if !ok {
		return ClusterRef{}, "", false
	}
	p := strings.Split(rest, "/")
	if len(p) != 4 || p[0] == "" || p[1] == "" || p[2] == "" || p[3] == "" {
		return ClusterRef{}, "", false
	}
	return ClusterRef{Scope: Scope{Account: p[0], Region: p[1]}, Cluster: p[2]}, p[3], true
}

// TaskListID returns the task id of a TaskList index key (with a task id); ok is false
// for a key of any other shape.
func TaskListID(key string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(key, store.Prefix+"idx/task-list/")
	if !ok {
		return "", false
	}
	// {account}/{region}/{cluster}/{desired}/{dim}/{value}/{taskId}
	p := strings.Split(rest, "/")
	if len(p) != 7 || p[6] == "" {
		return "", false
	}
	return p[6], true
}
