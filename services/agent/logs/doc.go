// Package logs captures containers' stdout and stderr into files under the
// agent's data directory — one JSON line per output line with its stream and
// capture time, rotated by size — keeps them for a retention period after the
// container is removed, and serves them through the LogService ReadLogs RPC
// (tail, since, follow), as the ECS agent's json-file logging does. For containers with
// the awslogs driver it also ships those lines to CloudWatch Logs through the agent's
// session (Destination, Shipper: awslogs.go, ship.go; docs/logs.md).
package logs
