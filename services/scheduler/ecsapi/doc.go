// Package ecsapi holds what every ECS action of the scheduler shares, whichever package
// serves it (control for clusters, task definitions, instances and tasks; service for
// services and task sets): Handle, which runs an action for the caller's (account,
// region) scope and converts its error; Retry, the CAS retry loop of multi-record
// writes; the name and tag rules of the ECS API reference; and ECS timestamps (Epoch,
// FromEpoch). It imports neither control nor service, so both use one copy.
package ecsapi
