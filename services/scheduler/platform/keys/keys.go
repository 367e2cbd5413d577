// Package keys is the scheduler's etcd key layout: where each record and each secondary
// index lives under /berth/v1/. Every key that names an ECS resource is scoped by account
// and then region (a Scope) first, so one account's lists and watches never see
// another's, and one region's never see another region's: AWS serves every region of an
// account independently, with the same names allowed in each. Names are validated by the
// domain before they get here (cluster, family and service names have no '/').
//
// Records (values are berth.store.v1 messages):
//
//	accounts/{account}                                           AccountRecord (global, as IAM)
//	access-keys/{accessKeyId}                                    AccessKeyRecord (global)
//	clusters/{account}/{region}/{cluster}                        ClusterRecord
//	families/{account}/{region}/{family}                         FamilyRecord (the revision counter)
//	task-definitions/{account}/{region}/{family}/{revision:010}  TaskDefinitionRecord
//	instances/{account}/{region}/{cluster}/{instanceId}          ContainerInstanceRecord
//	tasks/{account}/{region}/{cluster}/{taskId}                  TaskRecord
//	services/{account}/{region}/{cluster}/{service}              ServiceRecord
//	inbox/{account}/{region}/{instanceId}/{taskId}               InboxEntry
//
// Secondary indexes (empty values unless noted) are written in the same transaction as
// their record:
//
//	idx/instance-by-host/{account}/{region}/{cluster}/{hostId}   value: wrapperspb.StringValue, the instance id
//	idx/client-token/{account}/{region}/{cluster}/{token}        value: wrapperspb.StringValue, task ids comma-separated
//	idx/task-list/{account}/{region}/{cluster}/{desired}/{dim}/{value}/{taskId}
//	    tasks by desiredStatus and one of: all ("-"), instance id, family, service name,
//	    startedBy. The tasks an agent should run are TaskList(s, c, "RUNNING", DimInstance, id, "").
//	idx/instance-running/{account}/{region}/{cluster}/{instanceId}/{taskId}
//	    the tasks whose lastStatus is RUNNING, by instance: an instance's and a cluster's
//	    runningTasksCount (the instance record keeps only their sum with the pending ones)
//	idx/id-cluster/{account}/{region}/{kind}/{id}                value: wrapperspb.StringValue, the cluster
//	    of a task or container instance id, for short-format ARNs that do not name it (a task
//	    has one only when its ARN is short)
//	idx/clusters-active/{account}/{region}/{cluster}
//	idx/families-by-status/{account}/{region}/{ACTIVE|INACTIVE}/{family}
//	idx/taskdefs-by-status/{account}/{region}/{status}/{family}/{revision:010}
//
// More records:
//
//	settings/{account}/{region}                         ecsv1.ListAccountSettingsResponse (account settings are per region on AWS)
//	protection/{account}/{region}/{cluster}/{taskId}    ecsv1.ProtectedTask
//	layout                                              wrapperspb.StringValue, LayoutVersion once MigrateLayout ran
//
// Tags and attributes live inside their resource's record, so they follow its scope.
//
// Before layout 2 (builds without regions) the same keys had no {region} part; the
// scheduler's MigrateLayout moves such data into its default region once at start.
//
// Free-form values (host ids, client tokens, startedBy) go through Escape first, so a '/'
// in them cannot split a key.
package keys

import (
	"fmt"
	"strings"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Account returns the key of an account record.
func Account(account string) string { return store.MustKey("accounts", account) }

// AccessKey returns the key of an access key record.
func AccessKey(id string) string { return store.MustKey("access-keys", id) }

// AdminToken is the key of the admin bootstrap token's SHA-256 (a BytesValue): the
// token itself is never stored.
func AdminToken() string { return store.MustKey("admin", "bootstrap-token") }

// Cluster returns the key of a cluster record.
func Cluster(account Scope, cluster string) string {
	return store.MustKey("clusters", account.Account, account.Region, cluster)
}

// Clusters returns the prefix of an account's clusters.
func Clusters(account Scope) string {
	return store.MustKeyPrefix("clusters", account.Account, account.Region)
}

// Family returns the key of a task definition family's revision counter.
func Family(account Scope, family string) string {
	return store.MustKey("families", account.Account, account.Region, family)
}

// Families returns the prefix of an account's families.
func Families(account Scope) string {
	return store.MustKeyPrefix("families", account.Account, account.Region)
}

// TaskDefinition returns the key of one task definition revision. Revisions are padded
// to ten digits so key order is revision order.
func TaskDefinition(account Scope, family string, revision int) string {
	return store.MustKey("task-definitions", account.Account, account.Region, family, fmt.Sprintf("%010d", revision))
}

// TaskDefinitions returns the prefix of a family's revisions, or of every family of the
// account when family is empty.
func TaskDefinitions(account Scope, family string) string {
	if family == "" {
		return store.MustKeyPrefix("task-definitions", account.Account, account.Region)
	}
	return store.MustKeyPrefix("task-definitions", account.Account, account.Region, family)
}

// Instance returns the key of a container instance record.
func Instance(account Scope, cluster, id string) string {
	return store.MustKey("instances", account.Account, account.Region, cluster, id)
}

// Instances returns the prefix of a cluster's container instances.
func Instances(account Scope, cluster string) string {
	return store.MustKeyPrefix("instances", account.Account, account.Region, cluster)
}

// Task returns the key of a task record.
func Task(account Scope, cluster, id string) string {
	return store.MustKey("tasks", account.Account, account.Region, cluster, id)
}

// Tasks returns the prefix of a cluster's tasks.
func Tasks(account Scope, cluster string) string {
	return store.MustKeyPrefix("tasks", account.Account, account.Region, cluster)
}

// Service returns the key of a service record.
func Service(account Scope, cluster, name string) string {
	return store.MustKey("services", account.Account, account.Region, cluster, name)
}

// Services returns the prefix of a cluster's services.
func Services(account Scope, cluster string) string {
	return store.MustKeyPrefix("services", account.Account, account.Region, cluster)
}

// Inbox returns the key of a delivery to an instance's agent.
func Inbox(account Scope, instanceID, taskID string) string {
	return store.MustKey("inbox", account.Account, account.Region, instanceID, taskID)
}

// InboxOf returns the prefix of one instance's deliveries.
func InboxOf(account Scope, instanceID string) string {
	return store.MustKeyPrefix("inbox", account.Account, account.Region, instanceID)
}

// Inboxes returns the prefix of every instance's deliveries.
func Inboxes() string { return store.MustKeyPrefix("inbox") }

// InboxPart returns the InboxOf prefix an inbox key is under: the key up to its task
// id (ids hold no '/').
func InboxPart(key string) string { return key[:strings.LastIndexByte(key, '/')+1] }

// InstanceByHost returns the index key mapping a host id to its instance id.
// The host id is escaped.
func InstanceByHost(account Scope, cluster, hostID string) string {
	return store.MustKey("idx", "instance-by-host", account.Account, account.Region, cluster, Escape(hostID))
}

// ClientToken returns the index key of a RunTask clientToken.
// The token is escaped.
func ClientToken(account Scope, cluster, token string) string {
	return store.MustKey("idx", "client-token", account.Account, account.Region, cluster, Escape(token))
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
func TaskList(account Scope, cluster, desired, dim, value, taskID string) string {
	if taskID == "" {
		return store.MustKeyPrefix("idx", "task-list", account.Account, account.Region, cluster, desired, dim, Escape(value))
	}
	return store.MustKey("idx", "task-list", account.Account, account.Region, cluster, desired, dim, Escape(value), taskID)
}

// InstanceRunning returns the index key of a task whose lastStatus is RUNNING on an
// instance of a cluster; with taskID empty the prefix of the instance's, and with
// instanceID empty too the prefix of the cluster's. Counting them gives
// runningTasksCount.
func InstanceRunning(account Scope, cluster, instanceID, taskID string) string {
	switch {
	case instanceID == "":
		return store.MustKeyPrefix("idx", "instance-running", account.Account, account.Region, cluster)
	case taskID == "":
		return store.MustKeyPrefix("idx", "instance-running", account.Account, account.Region, cluster, instanceID)
	}
	return store.MustKey("idx", "instance-running", account.Account, account.Region, cluster, instanceID, taskID)
}

// AllInstanceRunning returns the prefix of every InstanceRunning key.
func AllInstanceRunning() string { return store.MustKeyPrefix("idx", "instance-running") }

// ActiveCluster returns the index key of an ACTIVE cluster, or with cluster empty the
// prefix of the account's ACTIVE clusters (ListClusters).
func ActiveCluster(account Scope, cluster string) string {
	if cluster == "" {
		return store.MustKeyPrefix("idx", "clusters-active", account.Account, account.Region)
	}
	return store.MustKey("idx", "clusters-active", account.Account, account.Region, cluster)
}

// FamilyByStatus returns the index key of a family by status (ACTIVE when it has an
// ACTIVE revision, else INACTIVE), or with family empty the status' prefix.
func FamilyByStatus(account Scope, status, family string) string {
	if family == "" {
		return store.MustKeyPrefix("idx", "families-by-status", account.Account, account.Region, status)
	}
	return store.MustKey("idx", "families-by-status", account.Account, account.Region, status, family)
}

// TaskDefinitionByStatus returns the index key of a task definition revision by status,
// or with revision 0 the prefix of the family's revisions of that status, or with family
// empty too the prefix of every revision of that status.
func TaskDefinitionByStatus(account Scope, status, family string, revision int) string {
	switch {
	case family == "":
		return store.MustKeyPrefix("idx", "taskdefs-by-status", account.Account, account.Region, status)
	case revision == 0:
		return store.MustKeyPrefix("idx", "taskdefs-by-status", account.Account, account.Region, status, family)
	}
	return store.MustKey("idx", "taskdefs-by-status", account.Account, account.Region, status, family, fmt.Sprintf("%010d", revision))
}

// IDCluster returns the key mapping a task or container instance id (kind is arn.Task or
// arn.ContainerInstance) to its cluster name.
func IDCluster(account Scope, kind, id string) string {
	return store.MustKey("idx", "id-cluster", account.Account, account.Region, kind, id)
}

// Settings returns the key of an account's settings record.
func Settings(account Scope) string {
	return store.MustKey("settings", account.Account, account.Region)
}

// Protection returns the key of a task's scale-in protection record.
func Protection(account Scope, cluster, taskID string) string {
	return store.MustKey("protection", account.Account, account.Region, cluster, taskID)
}

// CapacityProvider returns the key of an account's capacity provider record (an
// ecsv1.CapacityProvider; the built-in FARGATE and FARGATE_SPOT are not stored).
func CapacityProvider(account Scope, name string) string {
	return store.MustKey("capacity-providers", account.Account, account.Region, name)
}

// CapacityProviders returns the prefix of an account's capacity provider records.
func CapacityProviders(account Scope) string {
	return store.MustKeyPrefix("capacity-providers", account.Account, account.Region)
}

// Protections returns the prefix of a cluster's task scale-in protection records.
func Protections(account Scope, cluster string) string {
	return store.MustKeyPrefix("protection", account.Account, account.Region, cluster)
}

// TaskSubnet returns the key claiming the awsvpc task subnet cidr for one container
// instance (its value is the instance ARN). Subnets are unique across accounts and
// regions: every instance's tasks share one routed network.
func TaskSubnet(cidr string) string { return store.MustKey("task-subnets", Escape(cidr)) }

// TaskSubnets returns the prefix of every task subnet claim.
func TaskSubnets() string { return store.MustKeyPrefix("task-subnets") }

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
		"services", "inbox", "idx", "settings", "protection", "capacity-providers", "task-subnets", "elb", "elb-health",
		"daemon-families", "daemon-task-definitions", "daemons", "daemon-deployments", "daemon-revisions"} {
		out = append(out, store.MustKeyPrefix(p))
	}
	return out
}
