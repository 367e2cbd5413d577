// Package agent is Berth's per-host agent, the counterpart of the Amazon ECS
// container agent: it registers the host as a container instance, holds a
// session with the control plane, runs assigned tasks through containerd and
// reports their state durably, and serves the containers' logs. Build one
// with New and run it with Run.
package agent
