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
	// starting is set while startProcess runs: the process may already be running and
	// asking the task's endpoints about itself before its start is recorded.
	starting bool
	// closeLogs closes the container's log files; nil when none are open.
	closeLogs func() error
	// argv0 is the process's program as the runtime was given it, and outHead the first
	// bytes of its output, for telling a process the runtime could not execute
	// (execFailure) from one that ran and failed. Set by startProcess; nil and "" for an
	// adopted process.
	argv0   string
	outHead *headWriter
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
//
// Its features are hooks (hooks.go): run settles what adoption found, lets the prestart
// hooks ready the task (one failing fails its start), starts the containers, then
// supervises the task until it is STOPPED, calling the poststart, stop and exit hooks on
// the way.
func (t *task) run(ctx context.Context, adopted map[string]containerd.Container) {
	// run's end waits for a report still being stored, so none outlives the manager.
	defer func() { t.reportMu.Lock(); t.reportMu.Unlock() }() //nolint:staticcheck // a barrier
	if adopted == nil {
		// Stored (a durable write) while the images resolve and the containers are
		// created, not before: the first report is off the path to RUNNING.
		t.reportAsync()
	}
	ts := &taskStart{adopted: adopted, missing: t.toCreate(adopted), images: map[string]containerd.Image{}}
	hooks := t.taskHooks()
	defer exit(hooks)
	if !t.prestart(ctx, hooks, ts) {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	t.startContainers(ctx, &wg, ts)
	if !t.supervise(ctx, hooks, &wg) {
		return
	}
	t.m.log.Info("task stopped", "task", t.arn)
	wg.Wait()
	t.scheduleCleanup(ctx)
}

// toCreate returns the containers run must create: every container of a new task; of an
// adopted task, those the runtime does not have. At agent start, a container an earlier
// agent ran that the runtime no longer has is settled from its stored report, never
// created again: a task must not run twice. Only containers no agent started yet are
// still to be created.
func (t *task) toCreate(adopted map[string]containerd.Container) []*ctrState {
	var missing []*ctrState
	for _, c := range t.ctrs {
		if _, ok := adopted[c.ID]; !ok {
			missing = append(missing, c)
		}
	}
	if adopted == nil || !t.runtimeListed {
		return missing
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	toCreate := missing[:0]
	for _, c := range missing {
		if t.st.MarkVanished(c.Container) {
			t.m.log.Warn("reconcile: container gone from the runtime; not starting it again", "task", t.arn, "container", c.Name)
			continue
		}
		toCreate = append(toCreate, c)
	}
	return toCreate
}

// startContainers starts one goroutine per container not STOPPED (created, or adopted and
// watched again: runContainer); a STOPPED one, which never ran or was settled at
// adoption, is done.
func (t *task) startContainers(ctx context.Context, wg *sync.WaitGroup, ts *taskStart) {
	for _, c := range t.ctrs {
		if c.Status == state.Stopped {
			close(c.done)
			continue
		}
		wg.Go(func() { t.runContainer(ctx, c, ts.images[c.Name], ts.adopted[c.ID]) })
	}
}

// supervise follows the task until it is STOPPED, reporting each change: it derives the
// task's status from its containers, runs the poststart hooks once its start is over and
// the stop hooks once it is STOPPED, and stops every container once the task is
// stopping. It returns false when ctx ended first.
func (t *task) supervise(ctx context.Context, hooks []taskHook, wg *sync.WaitGroup) bool {
	stopSent, started := false, false
	for {
		t.mu.Lock()
		ch := t.changed
		t.st.Evaluate(time.Now())
		stopping, status := t.st.Stopping, t.st.Status
		t.mu.Unlock()
		if status == state.Stopped {
			stop(ctx, hooks)
		}
		t.report()
		if !started && (status == state.Running || status == state.Stopped) {
			started = true
			poststart(hooks, status)
		}
		if status == state.Stopped {
			return true
		}
		if stopping && !stopSent {
			stopSent = true
			for _, c := range t.ctrs {
				wg.Go(func() { t.stopContainer(ctx, c) })
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// traceHook traces a fresh assignment's start under the RunTask that placed it, when
// that was traced (Assignment.trace_parent): "agent StartTask" until the task is RUNNING
// or STOPPED, with the image pulls as a child span (imagesHook). An adopted task's start
// is not traced again.
type traceHook struct {
	t    *task
	span trace.Span // nil when not traced, or ended
}

func (h *traceHook) name() string { return "trace" }

func (h *traceHook) prestart(ctx context.Context, ts *taskStart) error {
	if ts.adopted == nil {
		h.span = h.t.startSpan(ctx)
	}
	return nil
}

func (h *traceHook) poststart(status string) {
	if h.span == nil {
		return
	}
	h.span.SetAttributes(attribute.String("ecs.task.last_status", status))
	if status == state.Stopped {
		h.span.SetStatus(codes.Error, "task stopped before RUNNING")
	}
	h.span.End()
	h.span = nil
}

func (h *traceHook) exit() {
	if h.span != nil {
		h.span.End()
	}
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

// imagesHook pulls the images of the containers to create. A failed pull fails the
// task's start with CannotPullContainerError.
type imagesHook struct {
	t     *task
	trace *traceHook // the pulls' span is a child of its span
}

func (h *imagesHook) name() string { return "images" }

func (h *imagesHook) prestart(ctx context.Context, ts *taskStart) error {
	if len(ts.missing) == 0 {
		return nil
	}
	pctx := ctx
	var pull trace.Span
	if span := h.trace.span; span != nil {
		pctx, pull = otel.Tracer(TracerName).Start(trace.ContextWithSpan(ctx, span), "agent pull images",
			trace.WithAttributes(attribute.Int("berth.containers", len(ts.missing))))
	}
	images, err := h.t.pull(pctx, ts.missing)
	if pull != nil {
		if err != nil {
			pull.SetStatus(codes.Error, err.Error())
		}
		pull.End()
	}
	h.t.m.log.Debug("images ready", "task", h.t.arn, "err", err)
	if ctx.Err() != nil {
		return errAgentStopping
	}
	if err != nil {
		return &startFailure{reason: reasonCannotPull + err.Error()}
	}
	ts.images = images
	return nil
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
	// The task's region, as Fargate gives every container, so an AWS SDK in the task
	// finds it; a value the definition or an override sets wins.
	if region := regionOf(t.arn); region != "" {
		for _, k := range []string{endpoints.EnvRegion, endpoints.EnvDefaultRegion} {
			if _, set := env[k]; !set {
				addEnv([]*ecsv1.KeyValuePair{{Name: &k, Value: &region}})
			}
		}
	}
	for _, k := range order {
		spec.Env = append(spec.Env, k+"="+env[k])
	}
	for _, u := range def.GetUlimits() {
		spec.Ulimits = append(spec.Ulimits, runtime.Ulimit{Name: u.GetName(), Soft: uint64(max(u.GetSoftLimit(), 0)), Hard: uint64(max(u.GetHardLimit(), 0))})
	}
	spec.Labels = t.labels(c)
	return spec
}

// regionOf returns the region of an ARN (arn:partition:service:region:…), "" when it has
// none.
func regionOf(arn string) string {
	parts := strings.SplitN(arn, ":", 5)
	if len(parts) < 5 || parts[0] != "arn" {
		return ""
	}
	return parts[3]
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
