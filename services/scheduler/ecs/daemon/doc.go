// Package daemon serves ECS managed daemons (the daemon API of ECS Managed Instances):
// daemon task definitions (RegisterDaemonTaskDefinition, DescribeDaemonTaskDefinition,
// ListDaemonTaskDefinitions, DeleteDaemonTaskDefinition), daemons (CreateDaemon,
// UpdateDaemon, DeleteDaemon, DescribeDaemon, ListDaemons) and their deployments and
// revisions (DescribeDaemonDeployments, ListDaemonDeployments, DescribeDaemonRevisions)
// on Daemons, and the leader's loop that runs them on Reconciler, as the Amazon ECS API
// reference and the developer guide's "Amazon ECS Managed Daemons" pages describe them.
//
// # Daemon task definitions
//
// A daemon task definition is its own resource with its own family namespace
// (daemon-task-definition/{family}:{revision}); registering builds the task definition
// the agents run through control.BuildTaskDefinition, so every member is held to
// RegisterTaskDefinition's rules and Berth's field table (docs/task-definition-fields.md)
// and a member Berth cannot honour is refused by name. Daemon tasks use the host's
// network (networkMode host): a daemon task definition has no network mode and no port
// mappings, and a host agent shares the host's network.
//
// # Daemons
//
// A daemon runs exactly one task on every ACTIVE container instance of the cluster that
// belongs to one of its capacity providers (Berth's capacity provider pools: the
// instances whose attribute berth.capacity-provider names it). It is reconciled by the
// service reconciler's machinery: the DaemonRecord holds a DAEMON-strategy ServiceRecord
// (never written at the service keys) that service.Compute decides from the daemon's
// tasks and the cluster's instances, and service.Reconciler.Execute places and stops the
// tasks through the Placer, as for a DAEMON service. So a new host gets the daemon's task
// on the next pass, a task that stops is replaced, and a host that leaves the daemon's
// capacity providers loses it. A draining host keeps its daemon task until every other
// task on it has stopped: AWS starts daemon tasks first and stops them last.
//
// # Deployments and revisions
//
// CreateDaemon and each UpdateDaemon create a daemon revision (a snapshot of the task
// definition, images and tag settings: daemon-revision/{cluster}/{daemon}/{id}) and a
// deployment (daemon-deployment/{cluster}/{daemon}/{id}) that rolls the daemon's hosts to
// it: at most drainPercent of the hosts (at least one; 25% when not given) have their old
// task stopped at a time, and the new task starts on a host once the old one has
// stopped. A deployment is IN_PROGRESS until every host runs the target revision, then
// SUCCESSFUL after bakeTimeInMinutes. The service reconciler's circuit breaker watches
// it: once its failed tasks reach the breaker's threshold the deployment rolls back to the
// last successful revision (ROLLBACK_IN_PROGRESS, then ROLLBACK_SUCCESSFUL), or is
// ROLLBACK_FAILED when there is none. A deployment superseded by a newer UpdateDaemon is
// STOPPED.
//
// # Records
//
// Keys are in platform/keys (daemons.go); every multi-key change (a revision counter and
// its revision, a daemon with its revision and deployment) is one transaction.
package daemon
