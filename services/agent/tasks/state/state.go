// Package state is the pure half of the agent's task lifecycle: a task's and its
// containers' states, how they evolve (essential-container semantics, dependsOn
// conditions, task health) and the state change the agent reports. It does no I/O and
// imports no containerd package, so every rule is table-tested on plain values; the
// tasks package drives it from containerd events under its own lock.
//
// The rules follow the ECS agent: a task is RUNNING once no container is PENDING; an
// essential container that stops stops the task (TaskFailedToStart when it never ran,
// EssentialContainerExited otherwise); the task's health is the worst of its essential
// containers' health checks
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task_definition_parameters.html#container_definition_healthcheck).
package state

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// Statuses of tasks and containers, as ECS names them.
const (
	Pending = "PENDING"
	Running = "RUNNING"
	Stopped = "STOPPED"
)

// Health statuses, as ECS names them.
const (
	Healthy   = "HEALTHY"
	Unhealthy = "UNHEALTHY"
	Unknown   = "UNKNOWN"
)

// Stop codes, as ECS reports them on a stopped task.
const (
	StopCodeTaskFailedToStart        = "TaskFailedToStart"
	StopCodeEssentialContainerExited = "EssentialContainerExited"
	StopCodeUserInitiated            = "UserInitiated"
)

// Reasons, worded as the ECS agent words them.
const (
	// ReasonEssentialExited is a task's stoppedReason when an essential container exited.
	ReasonEssentialExited = "Essential container in task exited"
	// ReasonDependency prefixes a container's reason when its dependsOn condition can no
	// longer hold.
	ReasonDependency = "DependencyConditionUnsatisfied: "
	// reasonNeverStarted is the task's stoppedReason when an essential container never
	// started and recorded no reason of its own.
	reasonNeverStarted = "Essential container in task did not start"
	// ReasonVanished is a container's reason when an earlier agent had started it and the
	// runtime no longer has it at agent start (its state was wiped or it was removed by
	// hand). The ECS agent likewise stops, and never re-creates, a container it cannot
	// find after a restart; the error name is the ECS agent's for a container it cannot
	// inspect.
	ReasonVanished = "CannotInspectContainerError: the container was not found in the runtime after the agent restarted"
)

// dependsOn conditions (ContainerDependency.condition).
const (
	dependencyStart    = "START"
	dependencyComplete = "COMPLETE"
	dependencySuccess  = "SUCCESS"
	dependencyHealthy  = "HEALTHY"
)

// Container is one container of a task.
type Container struct {
	// Def is the container's definition from the task definition.
	Def *ecsv1.ContainerDefinition
	// Name is the definition's name; ID the containerd container id.
	Name, ID string
	// Essential is the definition's essential flag (default true).
	Essential bool
	// Status is Pending, Running or Stopped.
	Status string
	// Started is set once the container's process was started (or found running).
	Started bool
	// ExitCode is the process's exit code once it exited; nil otherwise.
	ExitCode *int32
	// Reason is why the container stopped or did not start ("" when it just exited).
	Reason string
	// Health is "" for a container without a health check, else Healthy, Unhealthy or
	// Unknown.
	Health string
	// ImageDigest is the digest of the pulled image, once known.
	ImageDigest string
	// NeverRan is set when the container stopped without having started.
	NeverRan bool
	// RestartCount is how many times the container was restarted in place under its
	// restartPolicy (AWS: "Restart individual containers in Amazon ECS tasks with
	// container restart policies"; the task metadata endpoint's RestartCount).
	RestartCount int32
	// RunningSince is when the container's current process started (zero when it was
	// adopted from an earlier agent); restartPolicy's restartAttemptPeriod counts from it.
	RunningSince time.Time
	// Bindings, when not nil, are the container's network bindings (its mode's: bridge
	// host ports, awsvpc ports on the task's address, none); nil means networkMode host
	// (HostBindings).
	Bindings []*ecsv1.NetworkBinding
	// Interfaces are the container's network interfaces (awsvpc: the task's ENI).
	Interfaces []*ecsv1.NetworkInterface
	// Reported is the container's state in the last report an earlier agent stored
	// (Restore); nil for a new task. MarkVanished reads it.
	Reported *agentv1.ContainerState
}

// DefaultRestartAttemptPeriod is how long a container must have run before the agent
// restarts it when its restartPolicy sets no restartAttemptPeriod (AWS: 300 seconds).
const DefaultRestartAttemptPeriod = 300 * time.Second

// ShouldRestart reports whether c, whose process just exited with code at now, is to
// be restarted in place, as the ECS agent's restart tracker decides: its restartPolicy
// is enabled, the task is not stopping, code is not one of ignoredExitCodes, and the
// process ran at least restartAttemptPeriod (default DefaultRestartAttemptPeriod) —
// so a container is restarted at most once per period and one that exits early is not.
// An essential container being restarted does not stop the task.
func (t *Task) ShouldRestart(c *Container, code int32, now time.Time) bool {
	rp := c.Def.GetRestartPolicy()
	if !rp.GetEnabled() || t.Stopping {
		return false
	}
	for _, ignored := range rp.GetIgnoredExitCodes() {
		if ignored == code {
			return false
		}
	}
	period := DefaultRestartAttemptPeriod
	if rp.RestartAttemptPeriod != nil {
		period = time.Duration(rp.GetRestartAttemptPeriod()) * time.Second
	}
	return c.RunningSince.IsZero() || now.Sub(c.RunningSince) >= period
}

// Task is one ECS task on this host and its containers.
type Task struct {
	// ARN is the task's ARN.
	ARN string
	// Containers are in task definition order.
	Containers []*Container
	// Status is Pending, Running or Stopped.
	Status string
	// Stopping is set once the task must stop; StopCode and StoppedReason say why.
	Stopping                bool
	StopCode, StoppedReason string
	// Health is the task's health: Healthy, Unhealthy or Unknown.
	Health string
	// Timestamps of the ECS task lifecycle; zero until they happen.
	PullStarted, PullStopped, StartedAt, StoppingAt, ExecStoppedAt, StoppedAt time.Time
	// Attachments are the task's network attachments (the ENI of an awsvpc task).
	Attachments []*ecsv1.Attachment
}

// New returns the PENDING state of the task a assigns, with container ids from id(task
// ARN, container name).
func New(a *agentv1.Assignment, id func(arn, name string) string) *Task {
	t := &Task{ARN: a.GetTask().GetTaskArn(), Status: Pending, Health: Unknown}
	for _, def := range a.GetTaskDefinition().GetContainerDefinitions() {
		c := &Container{
			Def:       def,
			Name:      def.GetName(),
			ID:        id(t.ARN, def.GetName()),
			Essential: def.Essential == nil || def.GetEssential(),
			Status:    Pending,
		}
		if def.GetHealthCheck() != nil && len(def.GetHealthCheck().GetCommand()) > 0 {
			c.Health = Unknown
		}
		t.Containers = append(t.Containers, c)
	}
	return t
}

// Restore carries timestamps, image digests and health over from the last state a
// previous agent reported for the task (last may be nil).
func (t *Task) Restore(last *agentv1.TaskStateChange) {
	at := func(p *timestamppb.Timestamp) time.Time {
		if !p.IsValid() {
			return time.Time{}
		}
		return p.AsTime()
	}
	t.PullStarted, t.PullStopped = at(last.GetPullStartedAt()), at(last.GetPullStoppedAt())
	t.StartedAt, t.StoppingAt = at(last.GetStartedAt()), at(last.GetStoppingAt())
	for _, cs := range last.GetContainers() {
		if c := t.Container(cs.GetName()); c != nil {
			c.Reported = cs
			c.ImageDigest = cs.GetImageDigest()
			c.RestartCount = cs.GetRestartCount()
			if c.Health != "" && cs.GetHealthStatus() != "" {
				c.Health = cs.GetHealthStatus()
			}
		}
	}
}

// Container returns the container named name, or nil.
func (t *Task) Container(name string) *Container {
	for _, c := range t.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// BeginStop makes the task stop with code and reason at now, unless it is already
// stopping or stopped. It reports whether it changed anything.
func (t *Task) BeginStop(code, reason string, now time.Time) bool {
	if t.Stopping || t.Status == Stopped {
		return false
	}
	t.Stopping, t.StopCode, t.StoppedReason = true, code, reason
	t.StoppingAt = now
	return true
}

// MarkStopped records that c stopped at exit code code (nil when it has none), with
// reason (kept from before when ""), neverRan when it never started. A health-checked
// container's health becomes Unknown unless it was Unhealthy. It reports false when c
// was already stopped.
func (t *Task) MarkStopped(c *Container, code *int32, reason string, neverRan bool) bool {
	if c.Status == Stopped {
		return false
	}
	c.Status, c.ExitCode, c.NeverRan = Stopped, code, neverRan
	if reason != "" {
		c.Reason = reason
	}
	if c.Health != "" && c.Health != Unhealthy {
		c.Health = Unknown
	}
	return true
}

// MarkVanished settles c, a container missing from the runtime at agent start, when an
// earlier agent had run it (its last stored report, kept by Restore, says RUNNING or
// STOPPED): it is marked STOPPED and is not created again, for a task must never
// run twice. A container reported STOPPED keeps that report's exit code and reason; one
// reported RUNNING stops with no exit code and ReasonVanished. It returns false, changing
// nothing, for a container no earlier agent started (PENDING or no report), which the
// agent then creates as for a new task.
func (t *Task) MarkVanished(c *Container) bool {
	switch c.Reported.GetLastStatus() {
	case Stopped:
		var code *int32
		if c.Reported.ExitCode != nil {
			v := c.Reported.GetExitCode()
			code = &v
		}
		t.MarkStopped(c, code, c.Reported.GetReason(), false)
		return true
	case Running:
		t.MarkStopped(c, nil, ReasonVanished, false)
		return true
	}
	return false
}

// Evaluate derives the task's status, stop and health from its containers at now: a
// stopped essential container stops the task; no container PENDING makes it RUNNING;
// every container STOPPED makes it STOPPED; health is the worst of the essential
// containers' health checks (Unknown without any).
func (t *Task) Evaluate(now time.Time) {
	allStopped, anyPending := true, false
	for _, c := range t.Containers {
		if c.Status != Stopped {
			allStopped = false
		}
		if c.Status == Pending {
			anyPending = true
		}
		if c.Essential && c.Status == Stopped && !t.Stopping {
			if c.NeverRan {
				t.BeginStop(StopCodeTaskFailedToStart, cmpOr(c.Reason, reasonNeverStarted), now)
			} else {
				t.BeginStop(StopCodeEssentialContainerExited, ReasonEssentialExited, now)
			}
		}
	}
	if !anyPending && !t.Stopping && t.Status == Pending {
		t.Status = Running
		if t.StartedAt.IsZero() {
			t.StartedAt = now
		}
	}
	if allStopped && t.Status != Stopped {
		if t.StoppingAt.IsZero() {
			t.StoppingAt = now
		}
		t.ExecStoppedAt, t.StoppedAt = now, now
		t.Status = Stopped
		if !t.Stopping {
			t.Stopping, t.StopCode, t.StoppedReason = true, StopCodeEssentialContainerExited, ReasonEssentialExited
		}
	}
	health, checked := Healthy, false
	for _, c := range t.Containers {
		if !c.Essential || c.Health == "" {
			continue
		}
		checked = true
		switch {
		case c.Health == Unhealthy:
			health = Unhealthy
		case c.Health != Healthy && health != Unhealthy:
			health = Unknown
		}
	}
	if !checked {
		health = Unknown
	}
	t.Health = health
}

// Dependencies evaluates c's dependsOn conditions. It returns ready when all hold, and a
// reason (prefixed ReasonDependency) when one can no longer hold, so c must not start;
// neither means wait for the next change.
func (t *Task) Dependencies(c *Container) (ready bool, reason string) {
	ok := true
	for _, d := range c.Def.GetDependsOn() {
		dep := t.Container(d.GetContainerName())
		if dep == nil {
			return false, fmt.Sprintf("%scontainer %s depends on unknown container %s", ReasonDependency, c.Name, d.GetContainerName())
		}
		exited := dep.Status == Stopped
		switch d.GetCondition() {
		case dependencyStart:
			if dep.NeverRan {
				reason = fmt.Sprintf("%s%s never started", ReasonDependency, dep.Name)
			}
			ok = ok && dep.Started
		case dependencyComplete:
			ok = ok && exited
		case dependencySuccess:
			if exited && (dep.ExitCode == nil || *dep.ExitCode != 0) {
				reason = fmt.Sprintf("%s%s did not exit successfully", ReasonDependency, dep.Name)
			}
			ok = ok && exited && dep.ExitCode != nil && *dep.ExitCode == 0
		case dependencyHealthy:
			if exited || dep.Health == Unhealthy || dep.Health == "" {
				reason = fmt.Sprintf("%s%s did not become healthy", ReasonDependency, dep.Name)
			}
			ok = ok && dep.Health == Healthy
		}
		if reason != "" {
			return false, reason
		}
	}
	return ok, ""
}

// Change returns the task's state as the agent reports it. The stop code and reason are
// set only once the task is STOPPED; network bindings only for RUNNING containers.
func (t *Task) Change() *agentv1.TaskStateChange {
	c := &agentv1.TaskStateChange{
		TaskArn:            t.ARN,
		LastStatus:         t.Status,
		HealthStatus:       t.Health,
		PullStartedAt:      ts(t.PullStarted),
		PullStoppedAt:      ts(t.PullStopped),
		StartedAt:          ts(t.StartedAt),
		StoppingAt:         ts(t.StoppingAt),
		ExecutionStoppedAt: ts(t.ExecStoppedAt),
		StoppedAt:          ts(t.StoppedAt),
	}
	if t.Status == Stopped {
		c.StopCode, c.StoppedReason = t.StopCode, t.StoppedReason
	}
	c.Attachments = t.Attachments
	for _, ct := range t.Containers {
		cs := &agentv1.ContainerState{
			Name: ct.Name, RuntimeId: ct.ID, LastStatus: ct.Status, Reason: ct.Reason,
			HealthStatus: cmpOr(ct.Health, Unknown), ImageDigest: ct.ImageDigest,
			RestartCount: ct.RestartCount,
		}
		if ct.ExitCode != nil {
			cs.ExitCode = new(*ct.ExitCode)
		}
		if ct.Status == Running {
			cs.NetworkBindings = ct.Bindings
			if ct.Bindings == nil {
				cs.NetworkBindings = HostBindings(ct.Def)
			}
			cs.NetworkInterfaces = ct.Interfaces
		}
		c.Containers = append(c.Containers, cs)
	}
	return c
}

// Fingerprint returns a string that differs between two state changes exactly when the
// control plane must hear of the second: statuses, health, stop code and reason, whether
// the pull finished, and each container's status, health, exit code, reason and restart
// count, and each attachment's status.
// Timestamps alone do not count (they are set together with a status change).
func Fingerprint(c *agentv1.TaskStateChange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%s|%v", c.GetLastStatus(), c.GetHealthStatus(), c.GetStopCode(), c.GetStoppedReason(), c.GetPullStoppedAt() != nil)
	for _, a := range c.GetAttachments() {
		fmt.Fprintf(&b, "|%s:%s", a.GetId(), a.GetStatus())
	}
	for _, ct := range c.GetContainers() {
		// The exit code by value: two reports of one exit carry equal codes in
		// different allocations.
		exit := "-"
		if ct.ExitCode != nil {
			exit = fmt.Sprint(ct.GetExitCode())
		}
		fmt.Fprintf(&b, "|%s:%s:%s:%s:%s:%d", ct.GetName(), ct.GetLastStatus(), ct.GetHealthStatus(), exit, ct.GetReason(), ct.GetRestartCount())
	}
	return b.String()
}

// HostBindings returns the network bindings of a container in host network mode: each
// port mapping binds its container port (else its host port) on the host, as the ECS
// agent reports for networkMode host; mappings without a port are skipped.
func HostBindings(def *ecsv1.ContainerDefinition) []*ecsv1.NetworkBinding {
	var out []*ecsv1.NetworkBinding
	for _, pm := range def.GetPortMappings() {
		port := pm.GetContainerPort()
		if port == 0 {
			port = pm.GetHostPort()
		}
		if port == 0 {
			continue
		}
		protocol := cmpOr(pm.GetProtocol(), "tcp")
		out = append(out, &ecsv1.NetworkBinding{
			BindIp: new("0.0.0.0"), ContainerPort: new(port), HostPort: new(port), Protocol: new(protocol),
		})
	}
	return out
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
