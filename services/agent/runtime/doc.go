// Package runtime is the agent's side of containerd: a Gate that holds the
// client while containerd answers and is empty while it does not (a watch
// loop dials and probes), image pulls with the ECS agent's pull behaviours,
// and the translation of a container's settings into a containerd container
// with Docker's semantics.
package runtime
