// Package reaper is the leader's liveness and garbage-collection loop. Each sweep:
//
//   - marks agentConnected false on instances whose agent holds no session on any replica
//     (no presence key; see package agentsession);
//   - stops the tasks of an instance disconnected for longer than LostAfter: they keep
//     their status until then, as on AWS, and afterwards are STOPPED so services may
//     replace them;
//   - stops tasks that did not reach RUNNING within PendingTimeout with stopCode
//     TaskFailedToStart, and sends the agent a stop order in case it is still starting them;
//   - deletes STOPPED tasks once they have been stopped for Retention (at least an hour
//     by default, as AWS keeps stopped tasks describable), with their index keys and inbox
//     entry.
//
// Nothing is reaped during Grace after this replica became leader, so agents have time to
// reconnect to surviving replicas. Time comes from Config.Now, so tests drive it.
package reaper
