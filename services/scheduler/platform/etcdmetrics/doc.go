// Package etcdmetrics wraps the etcd client's KV in one that records Prometheus metrics:
// the latency of every request by operation, transaction commits, and transactions whose
// compares failed (CAS conflicts, create-if-absent of an existing key, a lost fence). The
// scheduler app hands the wrapped KV to every component, so the figures cover the whole
// replica without the components knowing.
package etcdmetrics
