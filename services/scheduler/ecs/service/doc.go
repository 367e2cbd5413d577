// Package service is the scheduler's service controller: the ECS service actions
// (CreateService, UpdateService, DeleteService, DescribeServices, ListServices,
// ListServicesByNamespace, ListServiceDeployments, DescribeServiceDeployments,
// DescribeServiceRevisions, StopServiceDeployment, ContinueServiceDeployment, and the task
// set actions of the EXTERNAL deployment controller: CreateTaskSet, DescribeTaskSets,
// UpdateTaskSet, UpdateServicePrimaryTaskSet, DeleteTaskSet) on Handler, and the leader's reconcile loop on Reconciler,
// which keeps every service's tasks at its desired count through rolling deployments,
// crashes, drains and host loss, as the Amazon ECS developer guide describes services
// (ecs_services.html, deployment-type-ecs.html, deployment-circuit-breaker.html,
// service-event-messages.html under https://docs.aws.amazon.com/AmazonECS/latest/developerguide/).
//
// # Records
//
// The package owns the ServiceRecord at keys.Service: the ECS Service shape — deployments[]
// with the PRIMARY and ACTIVE deployments plus up to 20 finished (INACTIVE) ones kept for
// ListServiceDeployments and rollbacks and hidden from DescribeServices; events[] newest
// first, at most 100 — and one DeploymentRecord per deployment (launch backoff, rollback
// flag, finish time). Task records stay control's: the reconciler creates service tasks
// (startedBy and deployment_id = the deployment id "ecs-svc/<19 digits>", group
// "service:<name>", service_name set) through the placement package's Placer with
// task.PlaceTxn — the instance reservation, the agent's inbox entry and the cluster's
// counters in the same transaction, exactly as RunTask — and stops them like StopTask
// with stopCode ServiceSchedulerInitiated. Every reconciler write carries the leader's
// fence.
//
// # Task sets
//
// A service created with deploymentController EXTERNAL has no deployments: its tasks
// belong to task sets, kept in the record's service.taskSets with a DeploymentRecord each
// (launch backoff). Each task set's tasks carry its id ("ecs-svc/<19 digits>") as
// startedBy and deployment_id and are reconciled like a deployment's toward its
// computedDesiredCount (ceil(desiredCount × scale%)), the excess stopped at once; a
// DRAINING (deleted) task set's tasks are stopped and it leaves the list once none is
// left (computeExternal).
//
// # Counters
//
// runningCount and pendingCount of the service and of each deployment (by lastStatus, as
// the instances' counters count) are counted from the service's task records: by
// DescribeServices at the time of the call (through the ListTasks index, O(tasks of the
// service)), and by every reconcile pass, which stores them in the record. Counting in the
// task records' own transactions is not possible: control and the agent session write
// them and do not know services. The cluster's activeServicesCount changes in the same
// transaction as the service status (CreateService, DeleteService).
//
// # Passes
//
// Pass reads every service, task and instance record and reconciles everything; the
// leader's Run does that once a minute and otherwise reconciles only what its watches saw
// change (see Run), so an idle pass over 1,000 services costs one keys-only listing.
//
// # Decide, then write
//
// Each service is reconciled in two steps, as Nomad's scheduler splits its reconciler
// from the plan applier: Compute is a pure function from a State (the service record, its
// task records, the cluster's instances, the task definitions it needs, the DAEMON
// eligible instances and the time) to a Plan (tasks to stop with their reasons, tasks to
// launch for the PRIMARY deployment, the service record with its new counts, deployment
// states, backoff and breaker decisions, and the events); Reconciler.Apply writes the
// plan. Compute is table-tested without etcd (compute_test.go).
//
// # Reconciling a service
//
// A task is healthy when RUNNING and, when its essential containers have health checks,
// those are HEALTHY; an UNHEALTHY one is stopped and replaced. The reconciler keeps up to
// desiredCount live PRIMARY tasks on ACTIVE instances (one per eligible instance for
// DAEMON); the rest — tasks of older deployments, tasks on DRAINING instances, excess
// tasks — are surplus. Missing tasks are launched while the service's non-stopped tasks
// stay within maximumPercent of desired (rounded down); surplus tasks are stopped, those
// not healthy at once and healthy ones only while the healthy count stays at or above
// minimumHealthyPercent of desired (rounded up). A task counts toward that minimum, as on
// AWS, once its health-checked essential containers are HEALTHY or, without health checks,
// once it has been RUNNING for ReconcilerConfig.StableAfter (40 s by default: a task
// RUNNING for an instant in a crash loop does not count). A RUNNING task that does not
// count yet is stopped only while the tasks that do count reach the minimum, so however
// many deployments an update supersedes, the running count never falls below the minimum
// because of a deployment. A deployment is COMPLETED (and the service in steady state)
// when its tasks all count, nothing is pending and no other deployment has tasks left.
//
// A task that stopped without being asked to (TaskFailedToStart,
// EssentialContainerExited, no stop code) or was stopped for failing health checks is a
// failed task of its deployment. The circuit breaker (when enabled) marks the PRIMARY
// deployment FAILED once its failed tasks reach min(max(10, ceil(desired/2)), 200) and,
// with rollback, starts a new deployment of the last COMPLETED deployment's task
// definition. Independently of the breaker, n failed tasks since the deployment's last
// successful one delay its next launch by min(BackoffBase × 2^(n-1), BackoffCap) (27
// minutes by default, AWS's cap); a task that stays healthy for StableAfter resets the
// count.
package service
