package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent/endpoints"
	"github.com/berthhq/berth/services/agent/gpu"
	"github.com/berthhq/berth/services/agent/logs"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/outbox"
	"github.com/berthhq/berth/services/agent/runtime"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// Stop codes, as ECS reports them on a stopped task.
const (
	StopCodeTaskFailedToStart        = state.StopCodeTaskFailedToStart
	StopCodeEssentialContainerExited = state.StopCodeEssentialContainerExited
	StopCodeUserInitiated            = state.StopCodeUserInitiated
)

// Reasons the agent reports, worded as the ECS agent words them.
const (
	ReasonOOM               = "OutOfMemoryError: Container killed due to memory usage"
	ReasonEssentialExited   = state.ReasonEssentialExited
	reasonCannotPull        = "CannotPullContainerError: "
	reasonCannotCreate      = "CannotCreateContainerError: "
	reasonCannotStart       = "CannotStartContainerError: "
	reasonNotExpected       = "Task not expected on this instance by the control plane"
	defaultStopTimeout      = 30 * time.Second
	defaultCleanupWait      = 3 * time.Hour
	runtimeRetryInterval    = 500 * time.Millisecond
	defaultHealthInterval   = 30 * time.Second
	defaultHealthTimeout    = 5 * time.Second
	defaultHealthRetries    = 3
	expectedMissingStopCode = "ServiceSchedulerInitiated"
)

// Config configures a Manager.
type Config struct {
	// Gate gives access to containerd.
	Gate *runtime.Gate
	// Outbox stores state changes, deliveries and assignments.
	Outbox *outbox.Outbox
	// Logs captures container output.
	Logs *logs.Store
	// Reports is signalled (non-blocking) after each change appended.
	Reports chan<- struct{}
	// Pull says how images are pulled; Pull.Snapshotter is also the
	// snapshotter of containers.
	Pull runtime.PullConfig
	// RuncRoot is runc's state directory for the agent's containers; "" keeps runc's
	// default (/run/containerd/runc). See runtime.ContainerSpec.RuncRoot.
	RuncRoot string
	// Cluster is the cluster name, set on container labels.
	Cluster string
	// HostID is the agent's host id, set on container labels.
	HostID string
	// FIFODir holds the containers' stdio FIFOs; it must survive agent
	// restarts so adopted containers' output can be re-attached.
	FIFODir string
	// VolumeDir holds the tasks' scratch volumes (host volumes without sourcePath), one
	// directory per task; it must survive agent restarts. Default: FIFODir's sibling
	// "volumes".
	VolumeDir string
	// EFS maps EFS file system ids to what the agent mounts for a task's
	// efsVolumeConfiguration volumes: "HOST:/EXPORT" (an NFS export) or "/PATH" (a local
	// directory, bind-mounted); see ParseEFSMappings. A file system not in it fails the
	// task's start with ResourceInitializationError.
	EFS map[string]string
	// StopTimeout is the time between the stop signal and SIGKILL for
	// containers without stopTimeout; default 30 s (ECS_CONTAINER_STOP_TIMEOUT).
	StopTimeout time.Duration
	// CleanupWait is how long a stopped task's containers and snapshots
	// are kept; default 3 h (ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION).
	CleanupWait time.Duration
	// Network sets up the namespaces of networkMode bridge, awsvpc and none tasks; nil
	// when the host cannot (NetworkError says why), and such tasks then fail to start
	// saying so.
	Network *network.Network
	// NetworkError is why Network is nil.
	NetworkError string
	// GPUs are the host's GPUs (gpu.Lister's answer); a container is given those of its
	// assigned gpuIds.
	GPUs gpu.Host
	// LogStreams creates the CloudWatch Logs streams of awslogs containers before they
	// start; nil fails such tasks (no control plane to ship to).
	LogStreams LogStreams
	// Endpoints readies each task's credentials and metadata endpoints (package
	// endpoints); nil serves none, and a task with a taskRoleArn then fails to start.
	Endpoints Endpoints
	// Log receives task events; nil discards them.
	Log *slog.Logger
	// OnContainer, when set, is called on each container lifecycle event: "start" (a
	// process started, restarts included), "start_failed", "exit" (a process exited) and
	// "oom" (it exited killed for memory). The agent counts them as metrics.
	OnContainer func(event string)
}

// containerEvent reports a container lifecycle event to Config.OnContainer.
func (m *Manager) containerEvent(event string) {
	if m.cfg.OnContainer != nil {
		m.cfg.OnContainer(event)
	}
}

// LogStreams creates the log stream of a container with the awslogs driver (and its
// group with create_group). It returns an error whose text starts with the AWS error
// type, e.g. "ResourceNotFoundException: The specified log group does not exist.".
type LogStreams interface {
	EnsureLogStream(ctx context.Context, region, group, stream string, createGroup bool) error
}

// Manager runs the tasks assigned to this host. Create it with New, start
// Run, then hand it assignments and stop orders.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu          sync.Mutex
	tasks       map[string]*task
	instanceARN string
	registered  chan struct{} // closed once the instance ARN is known
	reconciled  chan struct{} // closed once reconcile is done
	queue       chan *task    // tasks to start once reconciled
	pullLocks   map[string]*sync.Mutex

	statsMu   sync.Mutex
	lastStats map[string]*endpoints.Stats // by container id: the previous stats sample

	// nw is the task network: Config.Network until SetNetwork replaces it; nwErr is why
	// it is nil (Config.NetworkError until then).
	nw    atomic.Pointer[network.Network]
	nwErr atomic.Pointer[string]
}

// network returns the task network, nil when the host has none.
func (m *Manager) network() *network.Network { return m.nw.Load() }

// networkError returns why the manager has no task network.
func (m *Manager) networkError() string {
	if p := m.nwErr.Load(); p != nil {
		return *p
	}
	return ""
}

// SetNetwork gives the manager the task network the agent could set up after it
// started (the CNI plugins installed since): tasks started from then on use it.
func (m *Manager) SetNetwork(nw *network.Network) {
	m.nw.Store(nw)
	empty := ""
	m.nwErr.Store(&empty)
}

// forgetStats drops the stats samples of t's containers.
func (m *Manager) forgetStats(t *task) {
	m.statsMu.Lock()
	defer m.statsMu.Unlock()
	for _, c := range t.ctrs {
		delete(m.lastStats, c.ID)
	}
}

// statsHook drops the task's stats samples when run returns.
type statsHook struct{ t *task }

func (h *statsHook) name() string { return "stats" }

func (h *statsHook) exit() { h.t.m.forgetStats(h.t) }

// pullLock returns the lock that serialises pulls of one image reference:
// concurrent tasks of the same image wait for one pull and unpack instead
// of racing (as the ECS agent's image manager serialises them).
func (m *Manager) pullLock(ref string) *sync.Mutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.pullLocks[ref]
	if !ok {
		l = new(sync.Mutex)
		m.pullLocks[ref] = l
	}
	return l
}

// New returns a manager for cfg.
func New(cfg Config) *Manager {
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = defaultStopTimeout
	}
	if cfg.CleanupWait <= 0 {
		cfg.CleanupWait = defaultCleanupWait
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Pull.Snapshotter = cmpOr(cfg.Pull.Snapshotter, "overlayfs")
	m := &Manager{
		cfg: cfg, log: cfg.Log,
		tasks:      map[string]*task{},
		registered: make(chan struct{}),
		reconciled: make(chan struct{}),
		queue:      make(chan *task, 1024),
		pullLocks:  map[string]*sync.Mutex{},
	}
	m.nw.Store(cfg.Network)
	m.nwErr.Store(&cfg.NetworkError)
	return m
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// SetInstance records the container instance ARN the host registered as;
// the first call lets Run reconcile and start tasks.
func (m *Manager) SetInstance(arn string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.instanceARN = arn
	select {
	case <-m.registered:
	default:
		close(m.registered)
	}
}

// SetTaskSubnet hands the awsvpc task subnet the control plane allocated to the instance
// to the network (a subnet set in the agent's configuration wins). It returns an error
// when another agent of the host holds that subnet (network.ErrSubnetTaken): the agent
// then registers again, reporting it taken, and is given another.
func (m *Manager) SetTaskSubnet(cidr string) error {
	if m.network() == nil {
		return nil
	}
	used, err := m.network().SetTaskSubnet(cidr)
	if errors.Is(err, network.ErrSubnetTaken) {
		return err
	}
	if err != nil {
		m.log.Warn("awsvpc task subnet not set up", "subnet", cidr, "err", err)
		return nil
	}
	if used != cidr && cidr != "" {
		m.log.Info("awsvpc task subnet from the configuration kept", "configured", used, "allocated", cidr)
	}
	return nil
}

// SyncPeerRoutes hands the control plane's list of the other instances' task subnets to
// the network (network.Network.SyncPeerRoutes); failures are logged, the peers that could
// be routed are.
func (m *Manager) SyncPeerRoutes(peers []network.PeerRoute) {
	if m.network() == nil {
		return
	}
	if err := m.network().SyncPeerRoutes(peers); err != nil {
		m.log.Warn("task subnet routes to peer hosts", "peers", len(peers), "err", err)
		return
	}
	m.log.Info("task subnet routes to peer hosts", "peers", peers)
}

func (m *Manager) instance() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.instanceARN
}

// WaitReconciled waits up to timeout for the start-up reconcile, so the
// first Hello lists adopted tasks; it returns at once when the runtime is
// not ready (reconcile waits for it) or ctx is done.
func (m *Manager) WaitReconciled(ctx context.Context, timeout time.Duration) {
	if ready, _, _ := m.cfg.Gate.State(); !ready {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-m.reconciled:
	case <-ctx.Done():
	case <-t.C:
	}
}

// RunningTasks returns the ARNs of tasks not yet STOPPED, sorted.
func (m *Manager) RunningTasks() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for arn, t := range m.tasks {
		if !t.isStopped() {
			out = append(out, arn)
		}
	}
	slices.Sort(out)
	return out
}

// Assign takes an assignment: a redelivery (same delivery id, or a task
// the agent already knows) is recognised and not run again; a new one is
// stored durably and queued to start. It returns an error only when the
// assignment could not be stored, in which case it must not be acked.
func (m *Manager) Assign(_ context.Context, a *agentv1.Assignment) error {
	arn := a.GetTask().GetTaskArn()
	if arn == "" || a.GetTaskDefinition() == nil {
		return fmt.Errorf("assignment %s: missing task ARN or task definition", a.GetDeliveryId())
	}
	m.mu.Lock()
	_, known := m.tasks[arn]
	m.mu.Unlock()
	fresh := false
	if !known {
		var err error
		// The state file keeps the assignment without its resolved secret values.
		stored := a
		if len(a.GetResolvedSecrets()) > 0 {
			stored = cloneAssignment(a)
			stored.ResolvedSecrets = nil
		}
		if fresh, err = m.cfg.Outbox.TakeAssignment(stored); err != nil {
			return err
		}
	}
	if !fresh {
		m.log.Info("assignment redelivered; not run again", "task", arn, "delivery", a.GetDeliveryId())
		return nil
	}
	t := newTask(m, a)
	m.log.Debug("assignment taken", "task", arn)
	m.mu.Lock()
	m.tasks[arn] = t
	m.mu.Unlock()
	m.queue <- t
	return nil
}

// Stop takes a stop order: the task's containers get their stop signal,
// then SIGKILL after their stopTimeout; the task reports STOPPED with the
// order's stop code and reason. A task the agent does not know is ignored.
func (m *Manager) Stop(_ context.Context, o *agentv1.StopOrder) error {
	m.mu.Lock()
	t := m.tasks[o.GetTaskArn()]
	m.mu.Unlock()
	if t == nil {
		m.log.Info("stop order for unknown task", "task", o.GetTaskArn())
		return nil
	}
	t.requestStop(cmpOr(o.GetStopCode(), StopCodeUserInitiated), cmpOr(o.GetReason(), "Task stopped by user"))
	return nil
}

// Expected stops every task not in e that the agent runs, except tasks
// assigned after the list was made (still PENDING and unreported).
func (m *Manager) Expected(_ context.Context, e *agentv1.ExpectedTasks) {
	want := map[string]bool{}
	for _, a := range e.GetTaskArns() {
		want[a] = true
	}
	m.mu.Lock()
	var stop []*task
	for arn, t := range m.tasks {
		if !want[arn] && t.reportedRunning() {
			stop = append(stop, t)
		}
	}
	m.mu.Unlock()
	for _, t := range stop {
		t.requestStop(expectedMissingStopCode, reasonNotExpected)
	}
}

// Run reconciles once the instance is registered and containerd answers,
// then starts assigned tasks until ctx is done. On return every task
// goroutine has ended; containers keep running (an agent stop never stops
// tasks).
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-m.registered:
	}
	if _, err := m.cfg.Gate.Wait(ctx); err != nil {
		return err
	}
	m.reconcile(ctx, &wg)
	close(m.reconciled)
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case t := <-m.queue:
			wg.Go(func() { t.run(ctx, nil) })
		case <-sweep.C:
			if _, err := m.cfg.Logs.Sweep(time.Now()); err != nil {
				m.log.Warn("log retention sweep", "err", err)
			}
		}
	}
}

// report appends the task's current state to the outbox and signals the
// session. A change that would move the known status backward is dropped.
func (m *Manager) report(c *agentv1.TaskStateChange) {
	if _, err := m.cfg.Outbox.Append(c); err != nil {
		if errors.Is(err, outbox.ErrBackward) {
			m.log.Debug("state change dropped", "err", err)
			return
		}
		m.log.Error("state change not stored", "task", c.GetTaskArn(), "err", err)
		return
	}
	select {
	case m.cfg.Reports <- struct{}{}:
	default:
	}
}

func (m *Manager) forget(arn string) {
	m.mu.Lock()
	delete(m.tasks, arn)
	m.mu.Unlock()
}

// fifoDir returns the FIFO directory of one container.
func (m *Manager) fifoDir(id string) string {
	return filepath.Join(m.cfg.FIFODir, id)
}

func (m *Manager) removeFIFOs(id string) {
	_ = os.RemoveAll(m.fifoDir(id))
}

// familyRevision returns "family:revision" of a task definition.
func familyRevision(a *agentv1.Assignment) string {
	td := a.GetTaskDefinition()
	if td.GetFamily() != "" {
		return fmt.Sprintf("%s:%d", td.GetFamily(), td.GetRevision())
	}
	arn := td.GetTaskDefinitionArn()
	return arn[strings.LastIndex(arn, "/")+1:]
}

func cloneAssignment(a *agentv1.Assignment) *agentv1.Assignment {
	return proto.Clone(a).(*agentv1.Assignment)
}
