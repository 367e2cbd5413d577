package tasks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

// ctrState is one container of a task. Fields are guarded by task.mu.
type ctrState struct {
	def       *ecsv1.ContainerDefinition
	name, id  string
	essential bool

	status      string // PENDING, RUNNING, STOPPED
	started     bool
	exitCode    *int32
	reason      string
	health      string // "" without a health check
	imageDigest string
	neverRan    bool // stopped without having started

	// Set by the container goroutine once the containerd task exists.
	ctr       containerd.Container
	proc      containerd.Task
	done      chan struct{} // closed when the container is STOPPED
	closeLogs func() error
}

// task is one ECS task on this host.
type task struct {
	m   *Manager
	arn string
	a   *agentv1.Assignment

	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every change
	ctrs          []*ctrState
	status        string
	stopping      bool
	stopCode      string
	stoppedReason string
	health        string
	pullStarted   time.Time
	pullStopped   time.Time
	startedAt     time.Time
	stoppingAt    time.Time
	execStoppedAt time.Time
	stoppedAt     time.Time
	lastReport    string // fingerprint of the last report
	reportedRun   bool
}

func newTask(m *Manager, a *agentv1.Assignment) *task {
	t := &task{m: m, arn: a.GetTask().GetTaskArn(), a: cloneAssignment(a), changed: make(chan struct{}), status: statusPending, health: healthUnknown}
	for _, def := range a.GetTaskDefinition().GetContainerDefinitions() {
		c := &ctrState{
			def:       def,
			name:      def.GetName(),
			id:        ContainerID(t.arn, def.GetName()),
			essential: def.Essential == nil || def.GetEssential(),
			status:    statusPending,
			done:      make(chan struct{}),
		}
		if def.GetHealthCheck() != nil && len(def.GetHealthCheck().GetCommand()) > 0 {
			c.health = healthUnknown
		}
		t.ctrs = append(t.ctrs, c)
	}
	return t
}

// restore carries timestamps and health over from the last state a
// previous agent reported for the task.
func (t *task) restore(last *agentv1.TaskStateChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := func(p interface {
		AsTime() time.Time
		IsValid() bool
	}) time.Time {
		if !p.IsValid() {
			return time.Time{}
		}
		return p.AsTime()
	}
	t.pullStarted, t.pullStopped = at(last.GetPullStartedAt()), at(last.GetPullStoppedAt())
	t.startedAt, t.stoppingAt = at(last.GetStartedAt()), at(last.GetStoppingAt())
	for _, cs := range last.GetContainers() {
		if c := t.container(cs.GetName()); c != nil {
			c.imageDigest = cs.GetImageDigest()
			if c.health != "" && cs.GetHealthStatus() != "" {
				c.health = cs.GetHealthStatus()
			}
		}
	}
}

// broadcastLocked wakes everyone waiting for a change. Call with t.mu held.
func (t *task) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *task) isStopped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status == statusStopped
}

func (t *task) reportedRunning() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reportedRun
}

func (t *task) container(name string) *ctrState {
	for _, c := range t.ctrs {
		if c.name == name {
			return c
		}
	}
	return nil
}

// requestStop makes the task stop with code and reason, unless it is
// already stopping.
func (t *task) requestStop(code, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.beginStopLocked(code, reason)
}

func (t *task) beginStopLocked(code, reason string) {
	if t.stopping || t.status == statusStopped {
		return
	}
	t.stopping, t.stopCode, t.stoppedReason = true, code, reason
	t.stoppingAt = time.Now()
	t.broadcastLocked()
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
	if adopted == nil {
		t.report()
	}
	var missing []*ctrState
	for _, c := range t.ctrs {
		if _, ok := adopted[c.id]; !ok {
			missing = append(missing, c)
		}
	}
	images := map[string]containerd.Image{}
	if len(missing) > 0 {
		var err error
		images, err = t.pull(ctx, missing)
		log.Debug("images ready", "err", err)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("image pull failed", "err", err)
			t.mu.Lock()
			reason := reasonCannotPull + err.Error()
			for _, c := range missing {
				c.status, c.neverRan = statusStopped, true
				c.reason = reason
			}
			t.beginStopLocked(StopCodeTaskFailedToStart, reason)
			t.mu.Unlock()
		}
	}

	var wg sync.WaitGroup
	for _, c := range t.ctrs {
		if c.status == statusStopped {
			close(c.done)
			continue
		}
		wg.Go(func() { t.runContainer(ctx, c, images[c.name], adopted[c.id]) })
	}
	defer wg.Wait()

	stopSent := false
	for {
		t.mu.Lock()
		ch := t.changed
		t.evaluateLocked()
		stopping, status := t.stopping, t.status
		t.mu.Unlock()
		t.report()
		if status == statusStopped {
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

// evaluateLocked derives the task's status, stop and health from its
// containers. Call with t.mu held.
func (t *task) evaluateLocked() {
	allStopped, anyPending := true, false
	for _, c := range t.ctrs {
		if c.status != statusStopped {
			allStopped = false
		}
		if c.status == statusPending {
			anyPending = true
		}
		if c.essential && c.status == statusStopped && !t.stopping {
			if c.neverRan {
				t.beginStopLocked(StopCodeTaskFailedToStart, cmpOr(c.reason, "Essential container in task did not start"))
			} else {
				t.beginStopLocked(StopCodeEssentialContainerExited, ReasonEssentialExited)
			}
		}
	}
	if !anyPending && !t.stopping && t.status == statusPending {
		t.status = statusRunning
		if t.startedAt.IsZero() {
			t.startedAt = time.Now()
		}
	}
	if allStopped && t.status != statusStopped {
		now := time.Now()
		if t.stoppingAt.IsZero() {
			t.stoppingAt = now
		}
		t.execStoppedAt, t.stoppedAt = now, now
		t.status = statusStopped
		if !t.stopping {
			t.stopping, t.stopCode, t.stoppedReason = true, StopCodeEssentialContainerExited, ReasonEssentialExited
		}
	}
	// Task health follows the essential containers with health checks.
	health, checked := healthHealthy, false
	for _, c := range t.ctrs {
		if !c.essential || c.health == "" {
			continue
		}
		checked = true
		switch {
		case c.health == healthUnhealthy:
			health = healthUnhealthy
		case c.health != healthHealthy && health != healthUnhealthy:
			health = healthUnknown
		}
	}
	if !checked {
		health = healthUnknown
	}
	t.health = health
}

// report stores the task's state in the outbox when it differs from the
// last report.
func (t *task) report() {
	t.mu.Lock()
	c := t.stateLocked()
	fp := fingerprint(c)
	if fp == t.lastReport {
		t.mu.Unlock()
		return
	}
	t.lastReport = fp
	if t.status == statusRunning {
		t.reportedRun = true
	}
	t.mu.Unlock()
	t.m.report(c)
}

func fingerprint(c *agentv1.TaskStateChange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%s|%v", c.GetLastStatus(), c.GetHealthStatus(), c.GetStopCode(), c.GetStoppedReason(), c.GetPullStoppedAt() != nil)
	for _, ct := range c.GetContainers() {
		fmt.Fprintf(&b, "|%s:%s:%s:%v:%s", ct.GetName(), ct.GetLastStatus(), ct.GetHealthStatus(), ct.ExitCode, ct.GetReason())
	}
	return b.String()
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func (t *task) stateLocked() *agentv1.TaskStateChange {
	c := &agentv1.TaskStateChange{
		TaskArn:            t.arn,
		LastStatus:         t.status,
		HealthStatus:       t.health,
		PullStartedAt:      ts(t.pullStarted),
		PullStoppedAt:      ts(t.pullStopped),
		StartedAt:          ts(t.startedAt),
		StoppingAt:         ts(t.stoppingAt),
		ExecutionStoppedAt: ts(t.execStoppedAt),
		StoppedAt:          ts(t.stoppedAt),
	}
	if t.status == statusStopped {
		c.StopCode, c.StoppedReason = t.stopCode, t.stoppedReason
	}
	for _, ct := range t.ctrs {
		cs := &agentv1.ContainerState{
			Name: ct.name, RuntimeId: ct.id, LastStatus: ct.status, Reason: ct.reason,
			HealthStatus: cmpOr(ct.health, healthUnknown), ImageDigest: ct.imageDigest,
		}
		if ct.exitCode != nil {
			cs.ExitCode = new(*ct.exitCode)
		}
		if ct.status == statusRunning {
			cs.NetworkBindings = hostBindings(ct.def)
		}
		c.Containers = append(c.Containers, cs)
	}
	return c
}

// hostBindings returns the network bindings of a container in host
// network mode: each port mapping binds its container port on the host, as
// the ECS agent reports for networkMode host.
func hostBindings(def *ecsv1.ContainerDefinition) []*ecsv1.NetworkBinding {
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

// pull makes every container's image available.
func (t *task) pull(ctx context.Context, ctrs []*ctrState) (map[string]containerd.Image, error) {
	t.mu.Lock()
	t.pullStarted = time.Now()
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.pullStopped = time.Now()
		t.mu.Unlock()
	}()
	images := map[string]containerd.Image{}
	for _, c := range ctrs {
		client, err := t.m.cfg.Gate.Wait(ctx)
		if err != nil {
			return nil, err
		}
		ref, err := runtime.NormalizeRef(c.def.GetImage())
		if err != nil {
			return nil, err
		}
		lock := t.m.pullLock(ref)
		lock.Lock()
		img, _, err := runtime.Pull(ctx, client, ref, t.m.cfg.Pull)
		lock.Unlock()
		if err != nil {
			return nil, err
		}
		images[c.name] = img
		t.mu.Lock()
		c.imageDigest = img.Target().Digest.String()
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
	if secs := c.def.GetStartTimeout(); secs > 0 && len(c.def.GetDependsOn()) > 0 {
		tm := time.NewTimer(time.Duration(secs) * time.Second)
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		t.mu.Lock()
		ch := t.changed
		if t.stopping {
			t.mu.Unlock()
			return false, ""
		}
		ok, reason := true, ""
		for _, d := range c.def.GetDependsOn() {
			dep := t.container(d.GetContainerName())
			if dep == nil {
				ok, reason = false, fmt.Sprintf("%scontainer %s depends on unknown container %s", reasonDependency, c.name, d.GetContainerName())
				break
			}
			exited := dep.status == statusStopped
			switch d.GetCondition() {
			case dependencyStart:
				if dep.neverRan {
					reason = fmt.Sprintf("%s%s never started", reasonDependency, dep.name)
				}
				ok = ok && dep.started
			case dependencyComplete:
				ok = ok && exited
			case dependencySuccess:
				if exited && (dep.exitCode == nil || *dep.exitCode != 0) {
					reason = fmt.Sprintf("%s%s did not exit successfully", reasonDependency, dep.name)
				}
				ok = ok && exited && dep.exitCode != nil && *dep.exitCode == 0
			case dependencyHealthy:
				if exited || dep.health == healthUnhealthy || dep.health == "" {
					reason = fmt.Sprintf("%s%s did not become healthy", reasonDependency, dep.name)
				}
				ok = ok && dep.health == healthHealthy
			}
			if reason != "" {
				ok = false
				break
			}
		}
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
			return false, fmt.Sprintf("%scontainer %s: dependencies not resolved within its startTimeout of %d s", reasonDependency, c.name, c.def.GetStartTimeout())
		case <-ch:
		}
	}
}

// markStopped records that c stopped (or never started) and wakes the task.
func (t *task) markStopped(c *ctrState, code *int32, reason string, neverRan bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.status == statusStopped {
		return
	}
	c.status, c.exitCode, c.neverRan = statusStopped, code, neverRan
	if reason != "" {
		c.reason = reason
	}
	if c.health != "" && c.health != healthUnhealthy {
		c.health = healthUnknown
	}
	close(c.done)
	t.broadcastLocked()
}

// runContainer starts c once its dependencies hold (or adopts the existing
// container) and waits for it to exit.
func (t *task) runContainer(ctx context.Context, c *ctrState, img containerd.Image, existing containerd.Container) {
	log := t.m.log.With("task", t.arn, "container", c.name)
	if existing == nil {
		ok, reason := t.waitDependencies(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			t.markStopped(c, nil, reason, true)
			return
		}
		var err error
		existing, err = t.create(ctx, c, img)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("container not started", "err", err)
			t.markStopped(c, nil, err.Error(), true)
			return
		}
	}
	t.watch(ctx, c, existing)
}

// create creates and starts the container of c and its containerd task,
// with stdout and stderr going to the log store.
func (t *task) create(ctx context.Context, c *ctrState, img containerd.Image) (containerd.Container, error) {
	client, err := t.m.cfg.Gate.Wait(ctx)
	if err != nil {
		return nil, err
	}
	spec := t.containerSpec(c, img)
	if err := t.prepareSpec(c, &spec); err != nil {
		return nil, fmt.Errorf("%s%w", reasonCannotCreate, err)
	}
	ctr, err := runtime.Create(ctx, client, spec)
	if errdefs.IsAlreadyExists(err) {
		// Left by an attempt that failed part way: start afresh.
		if old, lerr := client.LoadContainer(ctx, spec.ID); lerr == nil {
			_ = deleteContainer(context.WithoutCancel(ctx), old)
		}
		ctr, err = runtime.Create(ctx, client, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", reasonCannotCreate, err)
	}
	stdout, stderr, closeLogs, err := t.m.cfg.Logs.Open(t.arn, c.name)
	if err != nil {
		return nil, fmt.Errorf("%s%w", reasonCannotStart, err)
	}
	proc, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, stdout, stderr), cio.WithFIFODir(t.m.fifoDir(c.id))))
	if err != nil {
		closeLogs()
		return nil, fmt.Errorf("%screate task: %w", reasonCannotStart, err)
	}
	if err := proc.Start(ctx); err != nil {
		_, _ = proc.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill)
		closeLogs()
		return nil, fmt.Errorf("%s%w", reasonCannotStart, err)
	}
	t.m.log.Debug("container started", "task", t.arn, "container", c.name, "id", c.id, "pid", proc.Pid())
	t.mu.Lock()
	c.ctr, c.proc = ctr, proc
	c.closeLogs = closeLogs
	c.status, c.started = statusRunning, true
	t.broadcastLocked()
	t.mu.Unlock()
	return ctr, nil
}

// containerSpec translates c's definition (with the task's overrides) to
// a runtime spec.
func (t *task) containerSpec(c *ctrState, img containerd.Image) runtime.ContainerSpec {
	def := c.def
	spec := runtime.ContainerSpec{
		ID:                   c.id,
		Image:                img,
		Snapshotter:          t.m.cfg.Pull.Snapshotter,
		EntryPoint:           def.GetEntryPoint(),
		Command:              def.GetCommand(),
		WorkingDir:           def.GetWorkingDirectory(),
		User:                 def.GetUser(),
		CPUShares:            uint64(max(def.GetCpu(), 0)),
		MemoryMiB:            int64(def.GetMemory()),
		MemoryReservationMiB: int64(def.GetMemoryReservation()),
		ReadonlyRootfs:       def.GetReadonlyRootFilesystem(),
		Hostname:             def.GetHostname(),
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
	if o := t.override(c.name); o != nil {
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
	for _, k := range order {
		spec.Env = append(spec.Env, k+"="+env[k])
	}
	for _, u := range def.GetUlimits() {
		spec.Ulimits = append(spec.Ulimits, runtime.Ulimit{Name: u.GetName(), Soft: uint64(max(u.GetSoftLimit(), 0)), Hard: uint64(max(u.GetHardLimit(), 0))})
	}
	labels := map[string]string{}
	for k, v := range def.GetDockerLabels() {
		labels[k] = v
	}
	labels[LabelTaskARN] = t.arn
	labels[LabelContainerName] = c.name
	labels[LabelCluster] = t.m.cfg.Cluster
	labels[LabelInstance] = t.m.instance()
	labels[LabelTaskDefinition] = familyRevision(t.a)
	labels[LabelHostID] = t.m.cfg.HostID
	spec.Labels = labels
	return spec
}

// watch waits for c's containerd task to exit, re-attaching through the
// gate when containerd goes away and comes back, then records the exit.
func (t *task) watch(ctx context.Context, c *ctrState, ctr containerd.Container) {
	log := t.m.log.With("task", t.arn, "container", c.name)
	t.mu.Lock()
	proc := c.proc
	t.mu.Unlock()
	healthCtx, stopHealth := context.WithCancel(ctx)
	defer stopHealth()
	if hc := c.def.GetHealthCheck(); hc != nil && len(hc.GetCommand()) > 0 {
		go t.healthLoop(healthCtx, c, hc)
	}
	for {
		if proc == nil {
			var err error
			proc, err = t.attach(ctx, c, ctr)
			if ctx.Err() != nil {
				return
			}
			if errdefs.IsNotFound(err) {
				// The task is gone: the container never ran or was
				// cleaned up behind our back.
				t.markStopped(c, nil, "container task not found in containerd", !c.started)
				return
			}
			if err != nil {
				log.Debug("re-attach failed; retrying", "err", err)
				sleepCtx(ctx, runtimeRetryInterval)
				continue
			}
		}
		exitC, err := proc.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.detach(c)
				return
			}
			proc = nil
			sleepCtx(ctx, runtimeRetryInterval)
			continue
		}
		var st containerd.ExitStatus
		select {
		case <-ctx.Done():
			t.detach(c)
			return
		case st = <-exitC:
		}
		if st.Error() != nil {
			// The wait broke (containerd went away), not the process.
			if ctx.Err() != nil {
				t.detach(c)
				return
			}
			log.Info("lost containerd while waiting; re-attaching", "err", st.Error())
			proc = nil
			sleepCtx(ctx, runtimeRetryInterval)
			continue
		}
		t.exited(ctx, c, proc, st.ExitCode())
		return
	}
}

// attach loads c's containerd task, re-attaching its output to the logs.
func (t *task) attach(ctx context.Context, c *ctrState, ctr containerd.Container) (containerd.Task, error) {
	client, err := t.m.cfg.Gate.Wait(ctx)
	if err != nil {
		return nil, err
	}
	ctr, err = client.LoadContainer(ctx, c.id)
	if err != nil {
		return nil, err
	}
	proc, err := ctr.Task(ctx, nil)
	if err != nil {
		return nil, err
	}
	st, err := proc.Status(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	haveLogs := c.closeLogs != nil
	t.mu.Unlock()
	if !haveLogs && (st.Status == containerd.Running || st.Status == containerd.Paused) {
		// Re-attach the output FIFOs (they live under the data dir).
		stdout, stderr, closeLogs, lerr := t.m.cfg.Logs.Open(t.arn, c.name)
		if lerr != nil {
			return nil, lerr
		}
		proc, err = ctr.Task(ctx, cio.NewAttach(cio.WithStreams(nil, stdout, stderr)))
		if err != nil {
			closeLogs()
			return nil, err
		}
		t.mu.Lock()
		c.closeLogs = closeLogs
		t.mu.Unlock()
	}
	t.mu.Lock()
	c.ctr, c.proc = ctr, proc
	if c.status == statusPending {
		c.status, c.started = statusRunning, true
		t.broadcastLocked()
	}
	t.mu.Unlock()
	return proc, nil
}

// detach lets go of c's output without touching the container: the agent
// is stopping, and a new agent will re-attach.
func (t *task) detach(c *ctrState) {
	t.mu.Lock()
	proc, closeLogs := c.proc, c.closeLogs
	c.closeLogs = nil
	t.mu.Unlock()
	if proc != nil && proc.IO() != nil {
		proc.IO().Cancel()
	}
	if closeLogs != nil {
		_ = closeLogs()
	}
}

// exited records c's exit: OOM check, task delete (which waits for the
// output to drain), logs closed.
func (t *task) exited(ctx context.Context, c *ctrState, proc containerd.Task, code uint32) {
	reason := ""
	if runtime.OOMKilledIn(t.cgroupPath(c)) {
		reason = ReasonOOM
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := proc.Delete(dctx); err != nil && !errdefs.IsNotFound(err) {
		t.m.log.Warn("delete exited task", "task", t.arn, "container", c.name, "err", err)
	}
	t.mu.Lock()
	closeLogs := c.closeLogs
	c.closeLogs = nil
	t.mu.Unlock()
	if closeLogs != nil {
		_ = closeLogs()
	}
	t.m.removeFIFOs(c.id)
	exit := int32(code)
	t.markStopped(c, &exit, reason, false)
}

// stopContainer sends c its stop signal (the image's StopSignal, else
// SIGTERM), then SIGKILL after its stopTimeout.
func (t *task) stopContainer(ctx context.Context, c *ctrState) {
	timeout := t.m.cfg.StopTimeout
	if s := c.def.GetStopTimeout(); s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	kill := func(sig syscall.Signal) bool {
		t.mu.Lock()
		proc, ctr := c.proc, c.ctr
		t.mu.Unlock()
		if proc == nil {
			return false
		}
		if sig != syscall.SIGKILL && ctr != nil {
			if s, err := containerd.GetStopSignal(ctx, ctr, syscall.SIGTERM); err == nil {
				sig = s
			}
		}
		if err := proc.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
			t.m.log.Debug("kill", "task", t.arn, "container", c.name, "signal", sig, "err", err)
			return false
		}
		return true
	}
	// Wait for a container still starting to come up (or give up).
	for {
		t.mu.Lock()
		started, stopped, ch := c.proc != nil, c.status == statusStopped, t.changed
		t.mu.Unlock()
		if started || stopped {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	retry := time.NewTicker(250 * time.Millisecond)
	defer retry.Stop()
	// Signals are retried: while containerd restarts, the container's
	// handle is stale until the watcher re-attaches.
	termSent, timedOut := kill(syscall.SIGTERM), false
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			timedOut = true
			if kill(syscall.SIGKILL) {
				return
			}
		case <-retry.C:
			switch {
			case timedOut:
				if kill(syscall.SIGKILL) {
					return
				}
			case !termSent:
				termSent = kill(syscall.SIGTERM)
			}
		}
	}
}

// scheduleCleanup removes the task's containers and snapshots after the
// cleanup wait and starts its logs' retention.
func (t *task) scheduleCleanup(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(t.m.cfg.CleanupWait):
	}
	t.m.cleanup(ctx, t.arn, slices.Collect(func(yield func(string) bool) {
		for _, c := range t.ctrs {
			if !yield(c.id) {
				return
			}
		}
	}))
}

// cleanup deletes the given containers with their snapshots, then forgets
// the task.
func (m *Manager) cleanup(ctx context.Context, arn string, ids []string) {
	client, err := m.cfg.Gate.Wait(ctx)
	if err != nil {
		return
	}
	for _, id := range ids {
		ctr, err := client.LoadContainer(ctx, id)
		if err == nil {
			err = deleteContainer(context.WithoutCancel(ctx), ctr)
		}
		if err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("remove stopped container", "task", arn, "id", id, "err", err)
		}
		m.removeFIFOs(id)
	}
	if err := m.removeTaskResources(arn); err != nil {
		m.log.Warn("remove task volumes and cgroup", "task", arn, "err", err)
	}
	if err := m.cfg.Logs.MarkRemoved(arn); err != nil {
		m.log.Warn("mark logs removed", "task", arn, "err", err)
	}
	if err := m.cfg.Outbox.DeleteAssignment(arn); err != nil {
		m.log.Warn("forget assignment", "task", arn, "err", err)
	}
	m.forget(arn)
}

// deleteContainer kills and deletes a container's task, if any, and the
// container with its snapshot.
func deleteContainer(ctx context.Context, ctr containerd.Container) error {
	if proc, err := ctr.Task(ctx, nil); err == nil {
		if _, err := proc.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task of %s: %w", ctr.ID(), err)
		}
	}
	if err := ctr.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", ctr.ID(), err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
