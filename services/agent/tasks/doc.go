// Package tasks runs ECS tasks on containerd and owns their lifecycle on the
// host, following the ECS agent: pull, create and start containers in
// dependsOn order, health checks, essential-container semantics, stop with
// the stop signal then SIGKILL after stopTimeout, OOM and exit reporting,
// every transition reported through the outbox; on start it re-adopts the
// containers its labels say it runs, and it removes stopped containers after
// a wait.
package tasks
