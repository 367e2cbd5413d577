// Package agentsession serves the agent side of the control plane
// (agentv1connect.AgentServiceHandler): Register, relayed to the ECS domain; one
// bidirectional Session stream per agent that carries heartbeats, task state changes and
// acks up, and expected-task lists, assignments, stop orders and state acks down;
// EnsureLogStream and ShipLogs, which put the agents' awslogs output into the CloudWatch
// Logs model (logs/logstore; docs/logs.md); and GetTaskCredentials (taskcreds).
//
// Heartbeats stay in memory on the replica that holds the stream: each message from the
// agent stamps the session, and a watchdog drops a session silent for HeartbeatTimeout.
// No heartbeat is written to etcd.
//
// Presence — which agents hold a session somewhere — is a key per instance,
// presence/{account}/{region}/{cluster}/{instance}, written when a session opens and
// deleted when it ends, attached to one etcd lease per replica (PresenceTTL, kept alive in the
// background). We chose a lease per replica over coarse last-seen writes because it costs
// one keep-alive per replica whatever the number of agents (last-seen writes cost
// O(agents) writes per interval, each a raft round and a revision), and because a crashed
// replica's agents disappear on their own when its lease expires, within PresenceTTL, with
// no survivor having to notice the crash. The leader's reaper (package reaper) reads the
// presence keys: an instance marked agentConnected with no presence key is disconnected.
// A live session re-asserts agentConnected every ReassertEvery, healing the rare reaper
// write that races a reconnect.
//
// Deliveries: placing or stopping a task writes inbox/{account}/{region}/{instance}/{task}
// (an InboxEntry), in the region the agent signs for (its session's scope, so an agent
// never sees another region's deliveries). The session lists that prefix and follows it
// from the list's revision through the replica's one watch of every inbox
// (store.WatchShared: resumes by revision after a disconnect, re-lists after compaction)
// and pushes each entry. Every replica's watch receives every inbox write and drops, by
// key and undecoded, those of instances whose sessions it does not hold.
// An acked assignment's entry is deleted (compare-and-delete on the revision sent, so a
// stop order that replaced it survives); an acked stop order stays until the agent reports
// the task STOPPED, which reclaims the entry. Whatever is not finished is delivered again
// on the next session; the agent dedups by delivery_id, acks again and does not run a task
// twice. Task state changes go to Control.ApplyTaskStateChange and are acked with their
// seq once recorded.
package agentsession
