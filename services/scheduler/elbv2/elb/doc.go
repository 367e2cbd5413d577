// Package elb is the model of Elastic Load Balancing v2 (API version
// 2015-12-01) as Berth serves it: load balancers (application and network), target
// groups (instance and ip targets, HTTP and TCP), listeners (HTTP and TCP, forward and
// weighted forward), listener rules (path-pattern and host-header), target registration
// and health, target group attributes and tags. It validates requests with AWS's limits,
// defaults and error codes (*Error carries the query protocol's code) and keeps the
// records under keys.ElbConfig that the lb role (package lb) serves; target health is
// what the lb role observed, read from the elb-health records.
//
// The target health states and reasons (State*, Reason*) are ELBv2's vocabulary and live
// here; the lb role imports them. The wire protocol (query in, XML out) is the gateway's,
// and the Connect handler is package elbapi; this package knows neither.
package elb
