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
//	idx/tasks-by-instance/{account}/{cluster}/{instanceId}/{taskId}
//	idx/tasks-by-service/{account}/{cluster}/{service}/{taskId}
//	idx/tasks-by-family/{account}/{cluster}/{family}/{taskId}
//	idx/tasks-by-desired/{account}/{cluster}/{RUNNING|STOPPED}/{taskId}
//	idx/instance-by-host/{account}/{cluster}/{hostId}     value: instanceId
//	idx/client-token/{account}/{cluster}/{token}          value: task ids, comma-separated
package keys

import (
	"fmt"

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

// TasksByInstance returns the index key of a task on an instance; with taskID empty, the
// prefix of the instance's tasks.
func TasksByInstance(account, cluster, instanceID, taskID string) string {
	return index("tasks-by-instance", account, cluster, instanceID, taskID)
}

// TasksByService returns the index key of a service's task, or the service's prefix.
func TasksByService(account, cluster, service, taskID string) string {
	return index("tasks-by-service", account, cluster, service, taskID)
}

// TasksByFamily returns the index key of a task by family, or the family's prefix.
func TasksByFamily(account, cluster, family, taskID string) string {
	return index("tasks-by-family", account, cluster, family, taskID)
}

// TasksByDesired returns the index key of a task by desiredStatus, or the status' prefix.
func TasksByDesired(account, cluster, desired, taskID string) string {
	return index("tasks-by-desired", account, cluster, desired, taskID)
}

// InstanceByHost returns the index key mapping a host id to its instance id.
func InstanceByHost(account, cluster, hostID string) string {
	return store.MustKey("idx", "instance-by-host", account, cluster, hostID)
}

// ClientToken returns the index key of a RunTask clientToken.
func ClientToken(account, cluster, token string) string {
	return store.MustKey("idx", "client-token", account, cluster, token)
}

func index(name, account, cluster, group, taskID string) string {
	if taskID == "" {
		return store.MustKeyPrefix("idx", name, account, cluster, group)
	}
	return store.MustKey("idx", name, account, cluster, group, taskID)
}
