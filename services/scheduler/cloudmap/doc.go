// Package cloudmap is AWS Cloud Map (servicediscovery, API version 2017-03-14) as Berth
// serves it: private DNS and HTTP namespaces, services with DNS A/SRV records, TTLs,
// routing policy and custom health checks, registered instances and their health,
// DiscoverInstances, the operations every mutating call returns the id of, and tags.
// State lives in etcd under keys.CloudMapAll (one txn per change, names claimed by
// index keys); the DNS role (package cloudmapdns) serves the DNS names from the same
// records, and the ECS service scheduler registers tasks through Registry.
//
// Operations complete within the call (Berth has no Route 53 to wait for), so every
// OperationId names an operation already in SUCCESS. Public DNS namespaces and Route 53
// health checks (HealthCheckConfig) are refused with InvalidInput.
package cloudmap
