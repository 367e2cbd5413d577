// Package keys is the scheduler's etcd key layout: where each record and each secondary
// index lives under /berth/v1/. Every key that names an ECS resource is scoped by account
// first, so one account's lists and watches never see another's. Names are validated by
// the domain before they get here (cluster, family and service names have no '/').
//
// Records (values are berth.store.v1 messages):
//
//	accounts/{account}                                  AccountRecord
//	access-keys/{accessKeyId}                           AccessKeyRecord
//	clusters/{account}/{cluster}                        ClusterRecord
//	families/{account}/{family}                         FamilyRecord
//	task-definitions/{account}/{family}/{revision:010}  TaskDefinitionRecord
//	instances/{account}/{cluster}/{instanceId}          ContainerInstanceRecord
//	tasks/{account}/{cluster}/{taskId}                  TaskRecord
//	services/{account}/{cluster}/{service}              ServiceRecord
//	inbox/{instanceId}/{taskId}                         InboxEntry
//
// Secondary indexes (empty values unless noted) are written in the same transaction as
// their record:
//
//	idx/instance-by-host/{account}/{cluster}/{hostId}     value: wrapperspb.StringValue, the instance id
//	idx/client-token/{account}/{cluster}/{token}          value: wrapperspb.StringValue, task ids comma-separated
//	idx/task-list/{account}/{cluster}/{desired}/{dim}/{value}/{taskId}
//	    tasks by desiredStatus and one of: all ("-"), instance id, family, service name,
//	    startedBy. The tasks an agent should run are TaskList(a, c, "RUNNING", DimInstance, id, "").
//	idx/id-cluster/{account}/{kind}/{id}                  value: wrapperspb.StringValue, the cluster
//	    of a task or container instance id, for short-format ARNs that do not name it
//	idx/clusters-active/{account}/{cluster}
//	idx/families-by-status/{account}/{ACTIVE|INACTIVE}/{family}
//	idx/taskdefs-by-status/{account}/{status}/{family}/{revision:010}
//
// More records:
//
//	settings/{account}                                  ecsv1.ListAccountSettingsResponse (the account's settings)
//	protection/{account}/{cluster}/{taskId}             ecsv1.ProtectedTask
//
// Free-form values (host ids, client tokens, startedBy) go through Escape first, so a '/'
// in them cannot split a key.
package keys

import (
	"fmt"
	"strings"

	"github.com/berthhq/berth/services/scheduler/store"
)

// Account returns the key of an account record.
func Account(account string) string { return store.MustKey("accounts", account) }

// AccessKey returns the key of an access key record.
func AccessKey(id string) string { return store.MustKey("access-keys", id) }

// Cluster returns the key of a cluster record.
func Cluster(account, cluster string) string { return store.MustKey("clusters", account, cluster) }

// Clusters returns the prefix of an account's clusters.
func Clusters(account string) string { return store.MustKeyPrefix("clusters", account) }

// Family returns the key of a task definition family's revision counter.
func Family(account, family string) string { return store.MustKey("families", account, family) }

// Families returns the prefix of an account's families.
func Families(account string) string { return store.MustKeyPrefix("families", account) }

// TaskDefinition returns the key of one task definition revision. Revisions are padded
// to ten digits so key order is revision order.
func TaskDefinition(account, family string, revision int) string {
	return store.MustKey("task-definitions", account, family, fmt.Sprintf("%010d", revision))
}

// TaskDefinitions returns the prefix of a family's revisions, or of every family of the
// account when family is empty.
func TaskDefinitions(account, family string) string {
	if family == "" {
		return store.MustKeyPrefix("task-definitions", account)
	}
	return store.MustKeyPrefix("task-definitions", account, family)
}

// Instance returns the key of a container instance record.
func Instance(account, cluster, id string) string {
	return store.MustKey("instances", account, cluster, id)
}

// Instances returns the prefix of a cluster's container instances.
func Instances(account, cluster string) string {
	return store.MustKeyPrefix("instances", account, cluster)
}

// Task returns the key of a task record.
func Task(account, cluster, id string) string { return store.MustKey("tasks", account, cluster, id) }

// Tasks returns the prefix of a cluster's tasks.
func Tasks(account, cluster string) string { return store.MustKeyPrefix("tasks", account, cluster) }

// Service returns the key of a service record.
func Service(account, cluster, name string) string {
	return store.MustKey("services", account, cluster, name)
}

// Services returns the prefix of a cluster's services.
func Services(account, cluster string) string {
	return store.MustKeyPrefix("services", account, cluster)
}

// Inbox returns the key of a delivery to an instance's agent.
func Inbox(instanceID, taskID string) string { return store.MustKey("inbox", instanceID, taskID) }

// InboxOf returns the prefix of one instance's deliveries.
func InboxOf(instanceID string) string { return store.MustKeyPrefix("inbox", instanceID) }

// InstanceByHost returns the index key mapping a host id to its instance id.
// The host id is escaped.
func InstanceByHost(account, cluster, hostID string) string {
	return store.MustKey("idx", "instance-by-host", account, cluster, Escape(hostID))
}

// ClientToken returns the index key of a RunTask clientToken.
// The token is escaped.
func ClientToken(account, cluster, token string) string {
	return store.MustKey("idx", "client-token", account, cluster, Escape(token))
}

// Escape makes a free-form value usable as one key part: '%' becomes "%25" and '/'
// becomes "%2F"; an empty value becomes "%00" (key parts may not be empty).
func Escape(v string) string {
	if v == "" {
		return "%00"
	}
	v = strings.ReplaceAll(v, "%", "%25")
	return strings.ReplaceAll(v, "/", "%2F")
}

// Task list dimensions for TaskList: the filter ListTasks serves from the index.
const (
	DimAll       = "all"
	DimInstance  = "instance"
	DimFamily    = "family"
	DimService   = "service"
	DimStartedBy = "startedby"
)

// TaskList returns the ListTasks index key of a task: tasks of a cluster with a given
// desiredStatus and a given value of one dimension (Dim*; value is escaped here, use "-"
// for DimAll). With taskID empty it returns the prefix of that (desired, dim, value).
func TaskList(account, cluster, desired, dim, value, taskID string) string {
	if taskID == "" {
		return store.MustKeyPrefix("idx", "task-list", account, cluster, desired, dim, Escape(value))
	}
	return store.MustKey("idx", "task-list", account, cluster, desired, dim, Escape(value), taskID)
}

// ActiveCluster returns the index key of an ACTIVE cluster, or with cluster empty the
// prefix of the account's ACTIVE clusters (ListClusters).
func ActiveCluster(account, cluster string) string {
	if cluster == "" {
		return store.MustKeyPrefix("idx", "clusters-active", account)
	}
	return store.MustKey("idx", "clusters-active", account, cluster)
}

// FamilyByStatus returns the index key of a family by status (ACTIVE when it has an
// ACTIVE revision, else INACTIVE), or with family empty the status' prefix.
func FamilyByStatus(account, status, family string) string {
	if family == "" {
		return store.MustKeyPrefix("idx", "families-by-status", account, status)
	}
	return store.MustKey("idx", "families-by-status", account, status, family)
}

// TaskDefinitionByStatus returns the index key of a task definition revision by status,
// or with revision 0 the prefix of the family's revisions of that status, or with family
// empty too the prefix of every revision of that status.
func TaskDefinitionByStatus(account, status, family string, revision int) string {
	switch {
	case family == "":
		return store.MustKeyPrefix("idx", "taskdefs-by-status", account, status)
	case revision == 0:
		return store.MustKeyPrefix("idx", "taskdefs-by-status", account, status, family)
	}
	return store.MustKey("idx", "taskdefs-by-status", account, status, family, fmt.Sprintf("%010d", revision))
}

// IDCluster returns the key mapping a task or container instance id (kind is arn.Task or
// arn.ContainerInstance) to its cluster name.
func IDCluster(account, kind, id string) string {
	return store.MustKey("idx", "id-cluster", account, kind, id)
}

// Settings returns the key of an account's settings record.
func Settings(account string) string { return store.MustKey("settings", account) }

// Protection returns the key of a task's scale-in protection record.
func Protection(account, cluster, taskID string) string {
	return store.MustKey("protection", account, cluster, taskID)
}

// Accounts returns the prefix of every account record.
func Accounts() string { return store.MustKeyPrefix("accounts") }

// AccessKeys returns the prefix of every access key record.
func AccessKeys() string { return store.MustKeyPrefix("access-keys") }

// ECSStatePrefixes returns the top-level prefixes that hold ECS state of any account —
// everything AdminService.ResetState wipes. Accounts, access keys and the leader
// election are not among them. A new top-level prefix of ECS state belongs here.
func ECSStatePrefixes() []string {
	var out []string
	for _, p := range []string{"clusters", "families", "task-definitions", "instances", "tasks",
		"services", "inbox", "idx", "settings", "protection"} {
		out = append(out, store.MustKeyPrefix(p))
	}
	return out
}
