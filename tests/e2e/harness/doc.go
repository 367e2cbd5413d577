// Package harness runs Berth as real processes for end-to-end tests: a three-member etcd
// cluster (the real etcd server, built from go.etcd.io/etcd/server/v3 by cmd/berth-etcd),
// two `berth scheduler` replicas behind an in-test TCP load balancer, one `berth gateway`,
// and agents (the agent-only `berth-agent` binary) on one private containerd (each with its own namespace and data dir),
// seeded with `berth admin` and driven through the AWS SDK for Go v2. It also checks the
// invariants faults must not break: no task lost or run twice, no instance over-committed.
package harness
