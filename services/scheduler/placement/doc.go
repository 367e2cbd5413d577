// Package placement decides which container instance runs a task and commits that
// decision without ever over-committing an instance.
//
// It is split Nomad-style: Engine is pure (feasibility checks — ACTIVE, agent connected,
// distinctInstance and memberOf constraints in ECS's cluster query language (package cql),
// CPU, memory, host ports — then ranking by the placementStrategy chain: binpack, spread,
// random) over an in-memory []*Instance, so it is table-tested without a cluster. Placer
// is the etcd side: a watch-fed snapshot of a cluster's instances, the engine, then one
// txn that CASes each chosen instance's ModRevision while writing its reduced
// remainingResources together with the caller's task writes (CommitFunc), retried on
// conflict. Demand, Reserve and Release are the resource arithmetic control shares with
// it, so placing and releasing a task agree on what an instance has left.
//
// Failure reasons follow AWS's API failure reasons (RESOURCE:CPU, RESOURCE:MEMORY,
// RESOURCE:PORTS, AGENT, ATTRIBUTE, MISSING):
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/api_failures_messages.html;
// strategies and constraints follow
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-placement.html.
package placement
