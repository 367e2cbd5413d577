// Package logstore is the CloudWatch Logs model of the scheduler tier, and its storage: log groups,
// log streams and their events, kept on the scheduler's disk in bbolt files (never in
// etcd), sharded by log group. It applies CloudWatch Logs' rules — names, PutLogEvents
// batch limits and ordering, rejected too-old/too-new events, retention honoured by
// deletion — and answers reads as GetLogEvents and FilterLogEvents do, with their
// paging tokens. Agents ship awslogs output into it; the gateway's logs API and
// `berth logs` read it. See docs/logs.md for the design.
package logstore
