// Package gateway is Berth's front door for ECS clients: an http.Handler that speaks the
// AWS JSON 1.1 protocol of Amazon ECS (POST / with X-Amz-Target
// AmazonEC2ContainerServiceV20141113.<Action>), verifies SigV4, throttles per account,
// and relays every operation of the ECS model to the scheduler's EcsService over Connect
// with the caller's identity in Berth-* headers. It also relays the agent's AgentService
// (SigV4 over headers, unsigned payload) and, in dev mode, serves /_berth/health and
// /_berth/reset. It holds no state besides short caches; any number can run.
package gateway
