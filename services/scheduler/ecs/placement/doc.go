// Package placement decides which container instance runs a task and commits that
// decision without ever over-committing an instance.
//
// It is split Nomad-style: Engine is pure (feasibility checks — ACTIVE, agent connected,
// distinctInstance and memberOf constraints in ECS's cluster query language (package cql),
// CPU, memory, host ports — then ranking by the placementStrategy chain: binpack, spread,
// random) over an in-memory []*Instance, so it is table-tested without a cluster. Placer
// is the etcd side: a watch-fed snapshot of a cluster's instances, the engine, then one
// txn in which the caller's hook (CommitFunc) writes each chosen instance's reduced
// remainingResources under the ModRevision it was read at, together with its task
// writes, retried on conflict; PlaceGroup does the same for several requests in one txn.
// Placer writes nothing itself: there is one way to commit a placement, the one
// production uses.
//
// It is the one owner of a task's placement arithmetic: DemandOf computes a task's
// demand (stored on the task record, SetDemand/TaskDemand), Fits/Reserve/Release apply it
// to an instance, and eligibility (ACTIVE, agent, memberOf) is written once, for the
// engine and for DAEMON services (DaemonInstances). It sits below the domain packages:
// it imports no control, service or other domain package (a test checks), and callers
// build their own transactions in the commit hooks.
//
// Failure reasons follow AWS's API failure reasons (RESOURCE:CPU, RESOURCE:MEMORY,
// RESOURCE:PORTS, RESOURCE:PORTS_UDP, AGENT, ATTRIBUTE, MISSING):
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/api_failures_messages.html;
// strategies and constraints follow
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-placement.html.
package placement
