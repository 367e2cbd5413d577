package keys

import (
	"fmt"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// The keys of ECS managed daemons (values are berth.store.v1 records):
//
//	daemon-families/{account}/{region}/{family}                              FamilyRecord (the revision counter)
//	daemon-task-definitions/{account}/{region}/{family}/{revision:010}       DaemonTaskDefinitionRecord
//	daemons/{account}/{region}/{cluster}/{name}                              DaemonRecord
//	daemon-deployments/{account}/{region}/{cluster}/{daemon}/{id}            DaemonDeploymentRecord
//	daemon-revisions/{account}/{region}/{cluster}/{daemon}/{id}              DaemonRevisionRecord
//
// Daemon task definition families are a namespace of their own: a family may name a task
// definition and a daemon task definition at once, as on AWS.

// DaemonFamily returns the key of a daemon task definition family's revision counter.
func DaemonFamily(account Scope, family string) string {
	return store.MustKey("daemon-families", account.Account, account.Region, family)
}

// DaemonTaskDefinition returns the key of one daemon task definition revision (padded
// to ten digits so key order is revision order).
func DaemonTaskDefinition(account Scope, family string, revision int) string {
	return store.MustKey("daemon-task-definitions", account.Account, account.Region, family, fmt.Sprintf("%010d", revision))
}

// DaemonTaskDefinitions returns the prefix of a daemon family's revisions, or of every
// daemon task definition of the account when family is empty.
func DaemonTaskDefinitions(account Scope, family string) string {
	if family == "" {
		return store.MustKeyPrefix("daemon-task-definitions", account.Account, account.Region)
	}
	return store.MustKeyPrefix("daemon-task-definitions", account.Account, account.Region, family)
}

// Daemon returns the key of a daemon record.
func Daemon(account Scope, cluster, name string) string {
	return store.MustKey("daemons", account.Account, account.Region, cluster, name)
}

// Daemons returns the prefix of a cluster's daemons, or of every cluster's of the
// account when cluster is empty.
func Daemons(account Scope, cluster string) string {
	if cluster == "" {
		return store.MustKeyPrefix("daemons", account.Account, account.Region)
	}
	return store.MustKeyPrefix("daemons", account.Account, account.Region, cluster)
}

// AllDaemons returns the prefix of every daemon of every account (the leader's loop).
func AllDaemons() string { return store.MustKeyPrefix("daemons") }

// DaemonDeployment returns the key of a daemon deployment record.
func DaemonDeployment(account Scope, cluster, daemon, id string) string {
	return store.MustKey("daemon-deployments", account.Account, account.Region, cluster, daemon, id)
}

// DaemonDeployments returns the prefix of a daemon's deployments.
func DaemonDeployments(account Scope, cluster, daemon string) string {
	return store.MustKeyPrefix("daemon-deployments", account.Account, account.Region, cluster, daemon)
}

// DaemonRevision returns the key of a daemon revision record.
func DaemonRevision(account Scope, cluster, daemon, id string) string {
	return store.MustKey("daemon-revisions", account.Account, account.Region, cluster, daemon, id)
}

// DaemonRevisions returns the prefix of a daemon's revisions.
func DaemonRevisions(account Scope, cluster, daemon string) string {
	return store.MustKeyPrefix("daemon-revisions", account.Account, account.Region, cluster, daemon)
}

// ParseDaemon splits a Daemon key into its scope, cluster and name.
func ParseDaemon(key string) (Scope, string, string, bool) {
	p := store.MustKeyPrefix("daemons")
	if len(key) <= len(p) || key[:len(p)] != p {
		return Scope{}, "", "", false
	}
	var parts []string
	start := len(p)
	for i := start; i < len(key); i++ {
		if key[i] == '/' {
			parts = append(parts, key[start:i])
			start = i + 1
		}
	}
	parts = append(parts, key[start:])
	if len(parts) != 4 {
		return Scope{}, "", "", false
	}
	return Scope{Account: parts[0], Region: parts[1]}, parts[2], parts[3], true
}
