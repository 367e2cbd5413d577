// Package gateway is Berth's front door for AWS clients: an http.Handler that verifies
// SigV4, throttles per account and routes each request by its credential scope's service
// (Services: ECS, Secrets Manager, SSM, STS, CloudWatch Logs, ELBv2, Cloud Map; see
// docs/aws-services.md), speaking that service's protocol (AWS JSON 1.1, or query in and
// XML out), and relays every operation of its model to the scheduler over Connect with
// the caller's identity in the headers of pkg/identity. It also relays the agent's AgentService
// (SigV4 over headers, unsigned payload) and, in dev mode, serves /_berth/health and
// /_berth/reset. It holds no state besides short caches; any number can run.
package gateway
