package tasks

import (
	"context"
	"fmt"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// reconcile re-adopts what a previous agent left: containers in the
// namespace whose labels name this cluster and this instance (or host), and
// assignments stored but not yet STOPPED. Running containers are watched
// again, dead ones reported STOPPED with their exit code; none is started
// again, not even one the runtime no longer has (state.MarkVanished), once the
// runtime's list of containers was read. Errors are logged and reconcile degrades to starting empty.
func (m *Manager) reconcile(ctx context.Context, wg *sync.WaitGroup) {
	found := map[string]map[string]containerd.Container{} // task ARN → id → container
	names := map[string]map[string]string{}               // task ARN → id → container name
	listed := false                                       // found is the runtime's whole answer
	if client, err := m.cfg.Gate.Client(); err != nil {
		m.log.Warn("reconcile: no runtime; starting without adopting", "err", err)
	} else if ctrs, err := client.Containers(ctx, fmt.Sprintf(`labels.%q==%q`, LabelCluster, m.cfg.Cluster)); err != nil {
		m.log.Warn("reconcile: list containers failed; starting without adopting", "err", err)
	} else {
		listed = true
		inst := m.instance()
		for _, c := range ctrs {
			labels, err := c.Labels(ctx)
			if err != nil {
				continue
			}
			if labels[LabelInstance] != inst && labels[LabelHostID] != m.cfg.HostID {
				continue
			}
			arn := labels[LabelTaskARN]
			if arn == "" {
				continue
			}
			if found[arn] == nil {
				found[arn], names[arn] = map[string]containerd.Container{}, map[string]string{}
			}
			found[arn][c.ID()] = c
			names[arn][c.ID()] = labels[LabelContainerName]
		}
	}
	stored, err := m.cfg.Outbox.Assignments()
	if err != nil {
		m.log.Warn("reconcile: stored assignments unreadable", "err", err)
	}
	arns := map[string]bool{}
	for _, a := range stored {
		arns[a] = true
	}
	for a := range found {
		arns[a] = true
	}
	for arn := range arns {
		m.mu.Lock()
		_, running := m.tasks[arn]
		m.mu.Unlock()
		if running {
			continue
		}
		known, _ := m.cfg.Outbox.KnownStatus(arn)
		if known == state.Stopped {
			ids := make([]string, 0, len(found[arn]))
			for id := range found[arn] {
				ids = append(ids, id)
			}
			wg.Go(func() {
				sleepCtx(ctx, m.cfg.CleanupWait)
				if ctx.Err() == nil {
					m.cleanup(ctx, arn, ids)
				}
			})
			continue
		}
		a, err := m.cfg.Outbox.Assignment(arn)
		if err != nil || a == nil {
			a = syntheticAssignment(arn, names[arn])
		}
		t := newTask(m, a)
		t.runtimeListed = listed
		if last, err := m.cfg.Outbox.Last(arn); err == nil && last != nil {
			t.restore(last)
		}
		m.mu.Lock()
		m.tasks[arn] = t
		m.mu.Unlock()
		adopted := found[arn]
		if adopted == nil {
			adopted = map[string]containerd.Container{}
		}
		m.log.Info("reconcile: adopting task", "task", arn, "containers", len(adopted), "knownStatus", known)
		t.mu.Lock()
		t.lastReport = "" // report the adopted state afresh
		t.mu.Unlock()
		wg.Go(func() { t.run(ctx, adopted) })
	}
	// Networks a previous agent left for tasks it no longer runs (stopped, or killed
	// between STOPPED and teardown) are released now; adopted tasks keep theirs.
	if nw := m.network(); nw != nil {
		m.mu.Lock()
		keep := map[string]bool{}
		for arn, t := range m.tasks {
			if !t.isStopped() {
				keep[taskIDOf(arn)] = true
			}
		}
		m.mu.Unlock()
		if err := nw.Sweep(ctx, func(task string) bool { return keep[task] }); err != nil {
			m.log.Warn("reconcile: releasing left networks", "err", err)
		}
		// What no recorded network names: this agent's namespaces, leases, rules and host
		// port reservations whose state was lost (killed mid set-up), and those of agents
		// of this host whose data dir is gone (a removed `berth dev` temp dir).
		if n, err := nw.Reap(ctx); err != nil {
			m.log.Warn("reconcile: reaping left network resources", "released", n, "err", err)
		} else if n > 0 {
			m.log.Info("reconcile: reaped left network resources", "released", n)
		}
	}
}

// syntheticAssignment describes a task known only from its containers'
// labels (its stored assignment is lost): every container essential.
func syntheticAssignment(arn string, names map[string]string) *agentv1.Assignment {
	td := &ecsv1.TaskDefinition{}
	for _, n := range names {
		td.ContainerDefinitions = append(td.ContainerDefinitions, &ecsv1.ContainerDefinition{Name: proto.String(n), Essential: proto.Bool(true)})
	}
	return &agentv1.Assignment{Task: &ecsv1.Task{TaskArn: proto.String(arn)}, TaskDefinition: td}
}
