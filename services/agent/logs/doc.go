// Package logs captures containers' stdout and stderr into files under the
// agent's data directory — one JSON line per output line with its stream and
// capture time, rotated by size — keeps them for a retention period after the
// container is removed, and serves them through the LogService ReadLogs RPC
// (tail, since, follow), as the ECS agent's json-file logging does.
package logs
