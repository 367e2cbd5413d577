// Package outbox is the agent's durable local state, a bbolt file under its
// data directory: task state changes numbered by sequence and kept until the
// control plane acknowledges them, each task's known status (which only moves
// forward), the deliveries already taken (so a redelivered assignment is
// acked and not run twice) and the assignments of the tasks the agent runs.
package outbox
