package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// Agent presence and leadership (package agentsession and package leader):
//
//	presence/{account}/{region}/{cluster}/{instanceId} value: "{replica} {session}" (raw string), on the
//	    holding replica's lease, so it vanishes when that replica dies
//	leader/{name}/                              concurrency.Election prefix

// Presence returns the key that says an instance's agent holds a session on some
// replica.
func Presence(account Scope, cluster, instanceID string) string {
	return store.MustKey("presence", account.Account, account.Region, cluster, instanceID)
}

// Presences returns the prefix of every presence key.
func Presences() string { return store.MustKeyPrefix("presence") }

// Election returns the prefix concurrency.Election campaigns under for the named
// leadership ("scheduler" for the scheduler's loops).
func Election(name string) string { return store.MustKeyPrefix("leader", name) }

// AllInstances returns the prefix of every container instance of every account, for the
// leader's sweeps.
func AllInstances() string { return store.MustKeyPrefix("instances") }

// AllTasks returns the prefix of every task of every account, for the leader's sweeps.
func AllTasks() string { return store.MustKeyPrefix("tasks") }
