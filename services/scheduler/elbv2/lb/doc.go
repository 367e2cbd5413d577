// Package lb is the data plane of Berth's Elastic Load Balancing v2: the `berth lb`
// role. It reads the load balancers, listeners, rules, target groups and targets the
// ELBv2 API keeps in etcd (keys.ElbConfig), binds each listener of an active load
// balancer on its host, and forwards to healthy targets only: HTTP listeners through
// net/http/httputil's ReverseProxy (path-pattern and host-header rules, weighted
// forward), TCP listeners by splicing the connection to a target.
//
// It owns the targets' health: active checks with the group's protocol, path, port,
// interval, timeout, thresholds and matcher, reported with ELB's states and reasons
// (initial, healthy, unhealthy, unused/Target.NotInUse, draining, unavailable) into
// elb-health records that DescribeTargetHealth and the ECS service scheduler read. A
// deregistered target drains: it gets no new requests, those in flight finish, and its
// record is removed once nothing is in flight or the group's
// deregistration_delay.timeout_seconds has passed.
//
// One lb role writes the health records; running several at once makes them write the
// same keys (the last write wins), which is harmless for routing but not coordinated.
package lb
