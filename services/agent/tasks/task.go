package tasks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/endpoints"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/runtime"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// This file drives a task through its lifecycle: it holds the task's state (package
// state, pure) under t.mu, wakes waiters on every change and reports what changed.
// container.go does the containerd I/O of each container.

// ctrState is one container of a task: its pure state (guarded by task.mu) and the
// containerd handles the container goroutine sets once the containerd task exists.
type ctrState struct {
	*state.Container

	ctr   containerd.Container
	proc  containerd.Task
	exitC <-chan containerd.ExitStatus // from proc.Wait, taken before proc.Start
	done  chan struct{}                // closed when the container is STOPPED
	// closeLogs closes the container's log files; nil when none are open.
	closeLogs func() error
}

// task is one ECS task on this host.
type task struct {
	m   *Manager
	arn string
	a   *agentv1.Assignment

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every change
	st          *state.Task
	ctrs        []*ctrState // one per st.Containers, same order
	lastReport  string      // fingerprint of the last report
	reportedRun bool
	// runtimeListed is set, for a task adopted at agent start, when the runtime's list of
	// containers was read: a container missing from it is then gone, not unknown.
	runtimeListed bool
	// reportMu orders reports: held from computing a change until the outbox has it, so
	// changes reach the outbox in the order they were computed (report, reportAsync).
	reportMu sync.Mutex
	net      *network.TaskNetwork // set by setupNetwork; nil for host mode
	// endpointEnv is the environment the credentials and metadata endpoints give each
	// container, by name (endpoints.go).
	endpointEnv map[string][]string
}

// TracerName is the instrumentation scope of the agent's task spans.
const TracerName = "github.com/berthhq/berth/services/agent/tasks"

// startSpan starts "agent StartTask" under the assignment's trace_parent, or returns nil
// when the assignment was not traced.
func (t *task) startSpan(ctx context.Context) trace.Span {
	tp := t.a.GetTraceParent()
	if tp == "" {
		return nil
	}
	pctx := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
	if !trace.SpanContextFromContext(pctx).IsValid() {
		return nil
	}
	_, span := otel.Tracer(TracerName).Start(pctx, "agent StartTask", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("aws.ecs.task.arn", t.arn), attribute.String("aws.ecs.cluster", t.m.cfg.Cluster)))
	return span
}

func newTask(m *Manager, a *agentv1.Assignment) *task {
	a = cloneAssignment(a)
	t := &task{m: m, arn: a.GetTask().GetTaskArn(), a: a, changed: make(chan struct{}), st: state.New(a, ContainerID)}
	for _, c := range t.st.Containers {
		t.ctrs = append(t.ctrs, &ctrState{Container: c, done: make(chan struct{})})
	}
	return t
}

// restore carries timestamps and health over from the last state a
// previous agent reported for the task.
func (t *task) restore(last *agentv1.TaskStateChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Restore(last)
}

// broadcastLocked wakes everyone waiting for a change. Call with t.mu held.
func (t *task) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *task) isStopped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Status == state.Stopped
}

// isStopping reports whether the task must stop (or stopped).
func (t *task) isStopping() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Stopping || t.st.Status == state.Stopped
}

func (t *task) reportedRunning() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reportedRun
}

// requestStop makes the task stop with code and reason, unless it is
// already stopping.
func (t *task) requestStop(code, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.beginStopLocked(code, reason)
}

func (t *task) beginStopLocked(code, reason string) {
	if t.st.BeginStop(code, reason, time.Now()) {
		t.broadcastLocked()
	}
}

// override returns the container override for name, or nil.
func (t *task) override(name string) *ecsv1.ContainerOverride {
	for _, o := range t.a.GetTask().GetOverrides().GetContainerOverrides() {
		if o.GetName() == name {
			return o
		}
	}
	return nil
}

// run drives the task to STOPPED. adopted holds containers found running
// or stopped at agent start (nil for a new task).
func (t *task) run(ctx context.Context, adopted map[string]containerd.Container) {
	log := t.m.log.With("task", t.arn)
	// run's end waits for a report still being stored, so none outlives the manager.
	defer func() { t.reportMu.Lock(); t.reportMu.Unlock() }() //nolint:staticcheck // a barrier
	if adopted == nil {
		// Stored (a durable write) while the images resolve and the containers are
		// created, not before: the first report is off the path to RUNNING.
		t.reportAsync()
	}
	var missing []*ctrState
	for _, c := range t.ctrs {
		if _, ok := adopted[c.ID]; !ok {
			missing = append(missing, c)
		}
	}
	if adopted != nil && t.runtimeListed {
		// At agent start, a container an earlier agent ran that the runtime no longer has
		// is settled from its stored report, never created again: a task must not run
		// twice. Only containers no agent started yet are still to be created.
		t.mu.Lock()
		toCreate := missing[:0]
		for _, c := range missing {
			if t.st.MarkVanished(c.Container) {
				log.Warn("reconcile: container gone from the runtime; not starting it again", "container", c.Name)
				continue
			}
			toCreate = append(toCreate, c)
		}
		missing = toCreate
		t.mu.Unlock()
	}
	// A fresh assignment's start is traced under the RunTask that placed it, when that
	// was traced (Assignment.trace_parent): "agent StartTask" until the task is RUNNING
	// or STOPPED, with the image pulls as a child span.
	var span trace.Span
	if adopted == nil {
		span = t.startSpan(ctx)
	}
	defer func() {
		if span != nil {
			span.End()
		}
	}()
	images := map[string]containerd.Image{}
	if reason := t.secretsFailure(len(missing) > 0); reason != "" {
		log.Warn("task secrets unavailable", "reason", reason)
		t.mu.Lock()
		for _, c := range missing {
			t.st.MarkStopped(c.Container, nil, reason, true) // c.done is closed below
		}
		t.beginStopLocked(StopCodeTaskFailedToStart, reason)
		t.mu.Unlock()
		missing = nil
	}
	if len(missing) > 0 {
		var err error
		pctx := ctx
		var pull trace.Span
		if span != nil {
			pctx, pull = otel.Tracer(TracerName).Start(trace.ContextWithSpan(ctx, span), "agent pull images",
				trace.WithAttributes(attribute.Int("berth.containers", len(missing))))
		}
		images, err = t.pull(pctx, missing)
		if pull != nil {
			if err != nil {
				pull.SetStatus(codes.Error, err.Error())
			}
			pull.End()
		}
		log.Debug("images ready", "err", err)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("image pull failed", "err", err)
			t.mu.Lock()
			reason := reasonCannotPull + err.Error()
			for _, c := range missing {
				t.st.MarkStopped(c.Container, nil, reason, true) // c.done is closed below
			}
			t.beginStopLocked(StopCodeTaskFailedToStart, reason)
			t.mu.Unlock()
		}
	}

	if len(missing) > 0 && ctx.Err() == nil {
		t.ensureLogStreams(ctx, missing)
	}
	if !t.isStopping() {
		if err := t.setupNetwork(ctx, len(missing) == 0); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("network set-up failed", "err", err)
			t.mu.Lock()
			reason := reasonNetwork + err.Error()
			for _, c := range t.ctrs {
				if c.Status != state.Stopped {
					t.st.MarkStopped(c.Container, nil, reason, true)
				}
			}
			t.beginStopLocked(StopCodeTaskFailedToStart, reason)
			t.mu.Unlock()
		}
	}
	t.mu.Lock()
	stopping := t.st.Stopping
	t.mu.Unlock()
	if stopping {
		// the task failed before its start: no credentials to fetch
	} else if err := t.prepareEndpoints(ctx); err != nil && ctx.Err() == nil {
		if adopted == nil || len(missing) > 0 {
			log.Warn("task endpoints failed", "err", err)
			t.mu.Lock()
			reason := reasonCredentials + err.Error()
			for _, c := range missing {
				if c.Status != state.Stopped {
					t.st.MarkStopped(c.Container, nil, reason, true) // c.done is closed below
				}
			}
			t.beginStopLocked(StopCodeTaskFailedToStart, reason)
			t.mu.Unlock()
		} else {
			log.Warn("adopted task: its endpoints failed", "err", err)
		}
	}
	if ep := t.m.cfg.Endpoints; ep != nil {
		defer ep.Release(t.arn)
	}
	defer t.m.forgetStats(t)

	var wg sync.WaitGroup
	for _, c := range t.ctrs {
		if c.Status == state.Stopped {
			close(c.done)
			continue
		}
		wg.Go(func() { t.runContainer(ctx, c, images[c.Name], adopted[c.ID]) })
	}
	defer wg.Wait()

	stopSent := false
	for {
		t.mu.Lock()
		ch := t.changed
		t.st.Evaluate(time.Now())
		stopping, status := t.st.Stopping, t.st.Status
		t.mu.Unlock()
		if status == state.Stopped {
			// Released before STOPPED is reported, so the report carries the ENI DELETED
			// and whoever sees STOPPED finds the task's credentials gone.
			t.teardownNetwork(ctx)
			if ep := t.m.cfg.Endpoints; ep != nil {
				ep.Release(t.arn)
			}
		}
		t.report()
		if span != nil && (status == state.Running || status == state.Stopped) {
			span.SetAttributes(attribute.String("ecs.task.last_status", string(status)))
			if status == state.Stopped {
				span.SetStatus(codes.Error, "task stopped before RUNNING")
			}
			span.End()
			span = nil
		}
		if status == state.Stopped {
			break
		}
		if stopping && !stopSent {
			stopSent = true
			for _, c := range t.ctrs {
				wg.Go(func() { t.stopContainer(ctx, c) })
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
	log.Info("task stopped")
	wg.Wait()
	t.scheduleCleanup(ctx)
}

// report stores the task's state in the outbox when it differs from the
// last report.
func (t *task) report() {
	t.reportMu.Lock()
	defer t.reportMu.Unlock()
	if c := t.change(); c != nil {
		t.m.report(c)
	}
}

// reportAsync is report with the outbox write done by another goroutine: the change is
// computed now and reportMu stays held until it is stored, so a later report waits for
// it and the outbox keeps their order.
func (t *task) reportAsync() {
	t.reportMu.Lock()
	c := t.change()
	if c == nil {
		t.reportMu.Unlock()
		return
	}
	go func() {
		defer t.reportMu.Unlock()
		t.m.report(c)
	}()
}

// change returns the task's state change when it differs from the last one reported
// (which it then becomes), nil otherwise. Call with reportMu held.
func (t *task) change() *agentv1.TaskStateChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.st.Change()
	fp := state.Fingerprint(c)
	if fp == t.lastReport {
		return nil
	}
	t.lastReport = fp
	if t.st.Status == state.Running {
		t.reportedRun = true
	}
	return c
}

// pull makes every container's image available.
func (t *task) pull(ctx context.Context, ctrs []*ctrState) (map[string]containerd.Image, error) {
	t.mu.Lock()
	t.st.PullStarted = time.Now()
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.st.PullStopped = time.Now()
		t.mu.Unlock()
	}()
	images := map[string]containerd.Image{}
	for _, c := range ctrs {
		client, err := t.m.cfg.Gate.Wait(ctx)
		if err != nil {
			return nil, err
		}
		ref, err := runtime.NormalizeRef(c.Def.GetImage())
		if err != nil {
			return nil, err
		}
		lock := t.m.pullLock(ref)
		lock.Lock()
		img, _, err := runtime.Pull(ctx, client, ref, t.pullConfig(c.Name, ref))
		lock.Unlock()
		if err != nil {
			return nil, err
		}
		images[c.Name] = img
		t.mu.Lock()
		c.ImageDigest = img.Target().Digest.String()
		t.mu.Unlock()
	}
	return images, nil
}

// waitDependencies blocks until c's dependsOn conditions hold. It returns
// false, with a reason when a condition can no longer hold, when the
// container must not start.
func (t *task) waitDependencies(ctx context.Context, c *ctrState) (bool, string) {
	// startTimeout bounds the wait (ECS: the container is not started after it).
	var timeout <-chan time.Time
	if secs := c.Def.GetStartTimeout(); secs > 0 && len(c.Def.GetDependsOn()) > 0 {
		tm := time.NewTimer(time.Duration(secs) * time.Second)
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		t.mu.Lock()
		ch := t.changed
		if t.st.Stopping {
			t.mu.Unlock()
			return false, ""
		}
		ok, reason := t.st.Dependencies(c.Container)
		t.mu.Unlock()
		if reason != "" {
			return false, reason
		}
		if ok {
			return true, ""
		}
		select {
		case <-ctx.Done():
			return false, ""
		case <-timeout:
			return false, fmt.Sprintf("%scontainer %s: dependencies not resolved within its startTimeout of %d s", state.ReasonDependency, c.Name, c.Def.GetStartTimeout())
		case <-ch:
		}
	}
}

// markStopped records that c stopped (or never started) and wakes the task.
func (t *task) markStopped(c *ctrState, code *int32, reason string, neverRan bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.st.MarkStopped(c.Container, code, reason, neverRan) {
		return
	}
	close(c.done)
	t.broadcastLocked()
}

// containerSpec translates c's definition (with the task's overrides) to
// a runtime spec.
func (t *task) containerSpec(c *ctrState, img containerd.Image) runtime.ContainerSpec {
	def := c.Def
	spec := runtime.ContainerSpec{
		ID:                   c.ID,
		Image:                img,
		Snapshotter:          t.m.cfg.Pull.Snapshotter,
		RuncRoot:             t.m.cfg.RuncRoot,
		EntryPoint:           def.GetEntryPoint(),
		Command:              def.GetCommand(),
		WorkingDir:           def.GetWorkingDirectory(),
		User:                 def.GetUser(),
		CPUShares:            uint64(max(def.GetCpu(), 0)),
		MemoryMiB:            int64(def.GetMemory()),
		MemoryReservationMiB: int64(def.GetMemoryReservation()),
		ReadonlyRootfs:       def.GetReadonlyRootFilesystem(),
		Hostname:             def.GetHostname(),
		TTY:                  def.GetPseudoTerminal(),
	}
	env := map[string]string{}
	var order []string
	addEnv := func(kvs []*ecsv1.KeyValuePair) {
		for _, kv := range kvs {
			if _, ok := env[kv.GetName()]; !ok {
				order = append(order, kv.GetName())
			}
			env[kv.GetName()] = kv.GetValue()
		}
	}
	addEnv(def.GetEnvironment())
	addEnv(t.secretEnv(c.Name))
	if o := t.override(c.Name); o != nil {
		if o.Command != nil {
			spec.Command = o.GetCommand()
		}
		addEnv(o.GetEnvironment())
		if o.Cpu != nil {
			spec.CPUShares = uint64(max(o.GetCpu(), 0))
		}
		if o.Memory != nil {
			spec.MemoryMiB = int64(o.GetMemory())
		}
		if o.MemoryReservation != nil {
			spec.MemoryReservationMiB = int64(o.GetMemoryReservation())
		}
	}
	t.mu.Lock()
	for _, kv := range t.endpointEnv[c.Name] {
		k, v, _ := strings.Cut(kv, "=")
		if _, set := env[k]; set && k == endpoints.EnvEndpointURL {
			continue // the task definition's own endpoint wins
		}
		addEnv([]*ecsv1.KeyValuePair{{Name: &k, Value: &v}})
	}
	t.mu.Unlock()
	for _, k := range order {
		spec.Env = append(spec.Env, k+"="+env[k])
	}
	for _, u := range def.GetUlimits() {
		spec.Ulimits = append(spec.Ulimits, runtime.Ulimit{Name: u.GetName(), Soft: uint64(max(u.GetSoftLimit(), 0)), Hard: uint64(max(u.GetHardLimit(), 0))})
	}
	spec.Labels = t.labels(c)
	return spec
}

// labels returns the labels of c's container: its dockerLabels and Berth's own.
func (t *task) labels(c *ctrState) map[string]string {
	labels := map[string]string{}
	for k, v := range c.Def.GetDockerLabels() {
		labels[k] = v
	}
	labels[LabelTaskARN] = t.arn
	labels[LabelContainerName] = c.Name
	labels[LabelCluster] = t.m.cfg.Cluster
	labels[LabelInstance] = t.m.instance()
	labels[LabelTaskDefinition] = familyRevision(t.a)
	labels[LabelHostID] = t.m.cfg.HostID
	return labels
}
