// Package service is the scheduler's service controller: the ECS service actions
// (CreateService, UpdateService, DeleteService, DescribeServices, ListServices,
// ListServiceDeployments, DescribeServiceDeployments, DescribeServiceRevisions) on
// Handler, and the leader's reconcile loop on Reconciler, which keeps every service's
// tasks at its desired count through rolling deployments, crashes, drains and host
// loss, with the semantics of the Amazon ECS developer guide
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs_services.html,
// deployment-type-ecs.html, deployment-circuit-breaker.html, service-event-messages.html).
//
// It owns the ServiceRecord at keys.Service: the ECS Service shape (deployments[] with
// PRIMARY, ACTIVE and, kept as history and hidden from DescribeServices, INACTIVE
// entries; events[] newest first, at most 100) plus one DeploymentRecord per deployment
// for the launch backoff. The task records stay control's: the reconciler creates
// service tasks (startedBy = deployment id "ecs-svc/<19 digits>", group
// "service:<name>") through the placement package's Placer, in the same transaction as
// the instance reservation, the agent's inbox entry and the cluster's counters, and stops
// them with stopCode ServiceSchedulerInitiated. Every reconciler write carries the
// leader's fence.
//
// Counters: the reconciler recomputes runningCount, pendingCount and each deployment's
// counts from the service's task records on every pass (the task records are written by
// control and the agent session, which do not know services), and writes the service
// record only when something changed; the cluster's activeServicesCount changes in the
// same transaction as the service's status.
package service
