package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Control is what the reaper needs from the ECS domain (package control's *Server
// satisfies it).
type Control interface {
	// SetAgentConnected sets the instance's agentConnected.
	SetAgentConnected(ctx context.Context, account keys.Scope, instanceARN string, connected bool) error
	// ApplyTaskStateChange records a task state change on instanceARN; the reaper reports
	// STOPPED for lost and timed-out tasks through it, so reservations and counters are
	// released exactly as when an agent reports the stop.
	ApplyTaskStateChange(ctx context.Context, account keys.Scope, instanceARN string, change *agentv1.TaskStateChange) error
}

// Stop codes and reasons the reaper writes.
const (
	// StopCodeFailedToStart is AWS's stopCode for a task that never reached RUNNING.
	StopCodeFailedToStart = "TaskFailedToStart"
	// StopCodeLost is the stopCode of a task whose instance was lost. AWS has no code for
	// it; TerminationNotice is the code ECS uses when the host goes away under a task.
	StopCodeLost = "TerminationNotice"
)

// Defaults for Config.
const (
	DefaultInterval       = 5 * time.Second  // between sweeps
	DefaultGrace          = 30 * time.Second // after a leader change, before reaping
	DefaultLostAfter      = 10 * time.Minute // disconnection before an instance's tasks stop
	DefaultPendingTimeout = 10 * time.Minute // to reach RUNNING
	DefaultRetention      = time.Hour        // stopped tasks stay describable
	DefaultTaskSweepEvery = 30 * time.Second // between scans of every task
)

// Config configures a Reaper.
type Config struct {
	// KV is the etcd client. Required.
	KV clientv3.KV
	// Control returns the ECS domain writing through kv. Each term's sweeps pass the
	// term's fenced KV (leader.Term.KV), so what the reaper writes through control —
	// SetAgentConnected, ApplyTaskStateChange — fails once it is deposed, as its own
	// writes do. For control's *Server: func(kv clientv3.KV) reaper.Control { return
	// srv.Fenced(kv) }. Required.
	Control func(kv clientv3.KV) Control
	// Interval is the time between sweeps. Default 5s.
	Interval time.Duration
	// Grace is how long after becoming leader the reaper waits before reaping. Default
	// 30s.
	Grace time.Duration
	// LostAfter is how long an instance stays disconnected before its tasks are stopped.
	// Default 10 minutes.
	LostAfter time.Duration
	// PendingTimeout is how long a task may take to reach RUNNING. Default 10 minutes.
	PendingTimeout time.Duration
	// Retention is how long a STOPPED task stays describable. Default 1 hour.
	Retention time.Duration
	// TaskSweepEvery is how often a sweep also scans every task (PENDING timeouts and
	// garbage collection); that scan is O(tasks), the instance scan O(instances). Default
	// 30s.
	TaskSweepEvery time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what the reaper does; nil discards it.
	Logger *slog.Logger
}

// Reaper runs the sweeps. Use it only on the leader, with the leader's context and
// term; it keeps per-term memory (when it first saw each instance disconnected).
type Reaper struct {
	cfg Config
	log *slog.Logger

	term         leader.Term
	kv           clientv3.KV // cfg.KV fenced by term: every write of the term goes through it
	ctl          Control     // cfg.Control(kv)
	termStart    time.Time
	lastTasks    time.Time            // last task scan
	disconnected map[string]time.Time // instance key → first seen disconnected
}

// Stats counts what one sweep did.
type Stats struct {
	// Disconnected is how many instances were marked agentConnected false.
	Disconnected int
	// Lost is how many tasks were stopped because their instance was lost.
	Lost int
	// TimedOut is how many tasks were stopped for not starting in time.
	TimedOut int
	// Collected is how many stopped tasks were deleted.
	Collected int
	// InGrace is true when the sweep skipped reaping because of the grace period.
	InGrace bool
}

// New returns a Reaper for cfg.
func New(cfg Config) *Reaper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Grace < 0 {
		cfg.Grace = 0
	} else if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.LostAfter <= 0 {
		cfg.LostAfter = DefaultLostAfter
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = DefaultPendingTimeout
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.TaskSweepEvery <= 0 {
		cfg.TaskSweepEvery = DefaultTaskSweepEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{cfg: cfg, log: log, disconnected: map[string]time.Time{}}
}

// Run sweeps every Interval until ctx ends (the leader's context: cancelled when
// leadership is lost) and returns ctx's error. Sweep errors are logged and retried next
// interval.
func (r *Reaper) Run(ctx context.Context, term leader.Term) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := r.Sweep(ctx, term); err != nil && ctx.Err() == nil {
			r.log.Warn("reaper: sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sweep runs one sweep for term and returns what it did. Every write, its own and those
// through Control, goes through cfg.KV fenced by term (leader.Term.KV), so a deposed
// leader's sweep writes nothing and fails with store.ErrFenced. The first sweep of a new
// term starts the grace period.
func (r *Reaper) Sweep(ctx context.Context, term leader.Term) (Stats, error) {
	var st Stats
	now := r.cfg.Now()
	if term.Key != r.term.Key || term.Rev != r.term.Rev {
		r.term, r.termStart = term, now
		r.kv = term.KV(r.cfg.KV)
		r.ctl = r.cfg.Control(r.kv)
		clear(r.disconnected)
	}
	if now.Sub(r.termStart) < r.cfg.Grace {
		st.InGrace = true
		return st, nil
	}
	if err := r.sweepInstances(ctx, now, &st); err != nil {
		return st, err
	}
	if now.Sub(r.lastTasks) < r.cfg.TaskSweepEvery {
		return st, nil
	}
	if err := r.sweepTasks(ctx, now, &st); err != nil {
		return st, err
	}
	r.lastTasks = now
	return st, nil
}

func (r *Reaper) sweepInstances(ctx context.Context, now time.Time, st *Stats) error {
	// Instances first, then presence: an instance seen connected whose presence key is
	// absent at the later read had no session at that time.
	var insts []store.Item[*storev1.ContainerInstanceRecord]
	if err := each(ctx, r.cfg.KV, keys.AllInstances(), func(it store.Item[*storev1.ContainerInstanceRecord]) error {
		insts = append(insts, it)
		return nil
	}); err != nil {
		return err
	}
	present := map[string]bool{}
	token := ""
	for {
		ks, next, err := store.ListKeys(ctx, r.cfg.KV, keys.Presences(), store.MaxListLimit, token)
		if err != nil {
			return fmt.Errorf("reaper: list presence: %w", err)
		}
		for _, k := range ks {
			present[strings.TrimPrefix(k, keys.Presences())] = true
		}
		if next == "" {
			break
		}
		token = next
	}
	seen := map[string]bool{}
	for _, it := range insts {
		rel := strings.TrimPrefix(it.Key, keys.AllInstances()) // account/region/cluster/id
		parts := strings.Split(rel, "/")
		if len(parts) != 4 {
			continue
		}
		account, cluster, id := keys.Scope{Account: parts[0], Region: parts[1]}, parts[2], parts[3]
		seen[rel] = true
		ci := it.Value.GetContainerInstance()
		if ci.GetStatus() == "INACTIVE" {
			continue
		}
		instARN := ci.GetContainerInstanceArn()
		connected := ci.GetAgentConnected()
		if connected && !present[rel] {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.ctl.SetAgentConnected(ctx, account, instARN, false); err != nil {
				return fmt.Errorf("reaper: mark %s disconnected: %w", id, err)
			}
			r.log.Info("reaper: agent disconnected", "account", account, "cluster", cluster, "instance", id)
			st.Disconnected++
			connected = false
		}
		if connected || present[rel] {
			delete(r.disconnected, rel)
			continue
		}
		since, ok := r.disconnected[rel]
		if !ok {
			r.disconnected[rel] = now
			continue
		}
		if now.Sub(since) < r.cfg.LostAfter {
			continue
		}
		n, err := r.stopInstanceTasks(ctx, now, account, cluster, id, instARN)
		st.Lost += n
		if err != nil {
			return err
		}
	}
	for k := range r.disconnected {
		if !seen[k] {
			delete(r.disconnected, k)
		}
	}
	return nil
}

// stopInstanceTasks marks every unstopped task of a lost instance STOPPED.
func (r *Reaper) stopInstanceTasks(ctx context.Context, now time.Time, account keys.Scope, cluster, id, instARN string) (int, error) {
	n := 0
	for _, desired := range []string{"RUNNING", "STOPPED"} {
		prefix := keys.TaskList(account, cluster, desired, keys.DimInstance, id, "")
		ids, err := listIDs(ctx, r.cfg.KV, prefix)
		if err != nil {
			return n, err
		}
		for _, taskID := range ids {
			rec, _, err := store.Get[*storev1.TaskRecord](ctx, r.cfg.KV, keys.Task(account, cluster, taskID))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("reaper: read task %s: %w", taskID, err)
			}
			if rec.GetTask().GetLastStatus() == "STOPPED" {
				continue
			}
			reason := fmt.Sprintf("Task stopped because container instance %s was lost: its agent was disconnected for more than %s.", id, r.cfg.LostAfter)
			if err := r.stop(ctx, now, account, instARN, rec, StopCodeLost, reason); err != nil {
				return n, err
			}
			r.log.Info("reaper: task lost with its instance", "account", account, "cluster", cluster, "task", taskID, "instance", id)
			n++
		}
	}
	return n, nil
}

func (r *Reaper) stop(ctx context.Context, now time.Time, account keys.Scope, instARN string, rec *storev1.TaskRecord, code, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ts := timestamppb.New(now)
	err := r.ctl.ApplyTaskStateChange(ctx, account, instARN, &agentv1.TaskStateChange{
		TaskArn: rec.GetTask().GetTaskArn(), LastStatus: "STOPPED", StopCode: code, StoppedReason: reason,
		ExecutionStoppedAt: ts, StoppedAt: ts,
	})
	if err != nil {
		return fmt.Errorf("reaper: stop task %s: %w", rec.GetTask().GetTaskArn(), err)
	}
	return nil
}

func (r *Reaper) sweepTasks(ctx context.Context, now time.Time, st *Stats) error {
	return each(ctx, r.cfg.KV, keys.AllTasks(), func(it store.Item[*storev1.TaskRecord]) error {
		rel := strings.TrimPrefix(it.Key, keys.AllTasks())
		parts := strings.Split(rel, "/") // account/region/cluster/id
		if len(parts) != 4 {
			return nil
		}
		account, taskID := keys.Scope{Account: parts[0], Region: parts[1]}, parts[3]
		rec := it.Value
		t := rec.GetTask()
		switch t.GetLastStatus() {
		case "PROVISIONING", "PENDING", "ACTIVATING":
			if t.CreatedAt == nil || now.Sub(awsapi.FromEpoch(t.GetCreatedAt())) < r.cfg.PendingTimeout {
				return nil
			}
			reason := fmt.Sprintf("Task did not reach RUNNING within %s.", r.cfg.PendingTimeout)
			if err := r.stop(ctx, now, account, t.GetContainerInstanceArn(), rec, StopCodeFailedToStart, reason); err != nil {
				return err
			}
			// The agent may still be starting it: tell it to stop. The entry is reclaimed
			// when the agent reports STOPPED, or with the task at garbage collection.
			if id := rec.GetContainerInstanceId(); id != "" {
				entry := &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Stop{Stop: &agentv1.StopOrder{
					TaskArn: t.GetTaskArn(), Reason: reason, StopCode: StopCodeFailedToStart,
				}}}
				if _, err := store.NewTxn(r.kv).Put(keys.Inbox(account, id, taskID), entry).Commit(ctx); err != nil {
					return fmt.Errorf("reaper: stop order for %s: %w", taskID, err)
				}
			}
			r.log.Info("reaper: task failed to start in time", "account", account, "cluster", rec.GetClusterName(), "task", taskID)
			st.TimedOut++
		case "STOPPED":
			at := t.GetStoppedAt()
			if at == 0 {
				at = t.GetExecutionStoppedAt()
			}
			if at == 0 || now.Sub(awsapi.FromEpoch(at)) < r.cfg.Retention {
				return nil
			}
			txn := store.NewTxn(r.kv).IfModRevision(it.Key, it.ModRevision).Delete(it.Key)
			for _, k := range task.IndexKeys(account, rec) {
				txn.Delete(k)
			}
			txn.Delete(keys.IDCluster(account, "task", taskID))
			txn.Delete(keys.Protection(account, rec.GetClusterName(), taskID))
			if id := rec.GetContainerInstanceId(); id != "" {
				txn.Delete(keys.Inbox(account, id, taskID))
			}
			if _, err := txn.Commit(ctx); err != nil {
				if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
					return nil // changed since read; next sweep
				}
				return fmt.Errorf("reaper: collect task %s: %w", taskID, err)
			}
			st.Collected++
		}
		return nil
	})
}

// each calls fn for every record under prefix, page by page.
func each[T interface {
	*storev1.ContainerInstanceRecord | *storev1.TaskRecord
	proto.Message
}](ctx context.Context, kv clientv3.KV, prefix string, fn func(store.Item[T]) error) error {
	token := ""
	for {
		items, next, err := store.List[T](ctx, kv, prefix, store.MaxListLimit, token)
		if err != nil {
			return fmt.Errorf("reaper: list %s: %w", prefix, err)
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		token = next
	}
}

func listIDs(ctx context.Context, kv clientv3.KV, prefix string) ([]string, error) {
	var ids []string
	token := ""
	for {
		ks, next, err := store.ListKeys(ctx, kv, prefix, store.MaxListLimit, token)
		if err != nil {
			return nil, fmt.Errorf("reaper: list %s: %w", prefix, err)
		}
		for _, k := range ks {
			ids = append(ids, strings.TrimPrefix(k, prefix))
		}
		if next == "" {
			return ids, nil
		}
		token = next
	}
}
