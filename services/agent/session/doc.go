// Package session is the agent's link to the control plane: it registers the
// host (AgentService.Register), then holds one bidi Session stream — hello,
// heartbeats and outbox state changes up; assignments, stop orders, expected
// tasks and state acks down — and reconnects with capped exponential backoff
// and jitter when the stream or registration fails, as the ECS agent does
// with its ACS session.
package session
