// Package control is the scheduler's ECS domain: clusters, task definitions, container
// instances, tasks, tags, attributes, account settings and task protection, kept in etcd
// (through package store, under the key layout of package keys) with the semantics the
// Amazon ECS API reference documents for each action
// (https://docs.aws.amazon.com/AmazonECS/latest/APIReference/).
//
// Server implements ecsv1connect.EcsServiceHandler: every handler runs through
// awsapi.Handle, which gives it the caller's (account, region) scope from package caller
// and converts the awserr exceptions it returns; it validates its request as AWS does.
// NewHandler serves it (with package service's actions) over Connect, the actions Berth
// lacks answering UnsupportedFeatureException (UnsupportedMessage). Each region is
// served on its own, as on AWS: keys and ARNs are the scope's, and an ARN naming another
// account or region names a resource that does not exist here. Server also exports the entry points
// the agent session server calls (RegisterInstance, ApplyTaskStateChange,
// SetAgentConnected).
//
// Placement: the placement package decides (a task's demand, Fits/Reserve/Release, the
// engine's feasibility and ranking over its Placer's instance cache); control writes. A
// task's demand is computed once, by placement.DemandOf in task.NewRecord, and stored on
// its record. RunTask and StartTask commit the placed tasks, the instances'
// reservations and the agents' inbox entries in one transaction built with task.PlaceTxn,
// which compares the cluster record's ModRevision without writing it; concurrent RunTask
// calls share one (group commit, place.go).
//
// Every write another writer can touch is a compare-and-swap transaction retried on
// conflict; instance counters are written in the same transaction as the records they
// count (a cluster's pendingTasksCount/runningTasksCount are its instances' sums, read
// by DescribeClusters, so a cluster's placements and state changes do not all write one
// key), and secondary index keys in the same transaction as their record.
//
// Notes for the packages built on this one:
//   - A task's inbox key (keys.Inbox(scope, instance, task)) holds its Assignment until
//     the task stops; StopTask overwrites it with a StopOrder (delivery id "{task}-stop") when the
//     task is placed and not yet STOPPED, so an agent may get a StopOrder for a task
//     whose assignment it never took: it should report the task STOPPED.
//     ApplyTaskStateChange deletes the key when the task reaches STOPPED.
//   - The tasks an agent should run are the keys under
//     keys.TaskList(account, cluster, "RUNNING", keys.DimInstance, instanceID, "").
//   - etcd answers a limited range only after visiting every later key of the range (to
//     count them), so a limited range over a large prefix is not O(page). Lists over
//     id-keyed indexes here read id-space windows instead (see firstKeys).
package control
