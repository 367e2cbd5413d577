package agentsession

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/tasksecrets"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// StopDeliverySuffix is appended to a task id to form a stop order's default
// delivery_id, so an assignment and a stop order for the same task never share an id (the
// agent dedups by delivery id).
const StopDeliverySuffix = ":stop"

// delivery is an inbox entry sent on this session and not yet finished with.
type delivery struct {
	key   string
	rev   int64 // ModRevision of the entry as sent
	stop  bool
	acked bool
}

type session struct {
	srv      *Server
	id       string
	account  keys.Scope
	cluster  string
	instance string
	arn      string
	stream   stream
	cancel   context.CancelFunc
	log      *slog.Logger

	lastHeard  atomic.Int64 // unix nanos of the last message from the agent
	lastAssert time.Time    // recv goroutine only

	// Capacity as registered (recv goroutine only after Hello): a heartbeat that differs
	// re-registers the instance, so a runtime that goes away or comes back starts or ends
	// an involuntary drain.
	reg       *storev1.ContainerInstanceRecord
	regReady  bool
	regCPU    int32
	regMemory int32

	sendMu sync.Mutex
	closed bool

	mu      sync.Mutex
	pending map[string]*delivery // by delivery id
	byKey   map[string]string    // inbox key → delivery id
}

// run serves the session after Hello until it ends.
func (ss *session) run(ctx context.Context) error {
	s := ss.srv
	pkey := keys.Presence(ss.account, ss.cluster, ss.instance)
	if err := s.presence.put(ctx, pkey, s.cfg.Replica+" "+ss.id); err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("record presence: %w", err))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.presence.del(dctx, pkey, s.cfg.Replica+" "+ss.id); err != nil {
			ss.log.Warn("agentsession: remove presence", "err", err)
		}
	}()
	if err := s.cfg.Control.SetAgentConnected(ctx, ss.account, ss.arn, true); err != nil {
		return awserr.ToConnect(err)
	}
	ss.lastAssert = time.Now()

	expected, err := ss.expectedTasks(ctx)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("list expected tasks: %w", err))
	}
	if err := ss.send(&agentv1.SessionResponse{Message: &agentv1.SessionResponse_ExpectedTasks{ExpectedTasks: &agentv1.ExpectedTasks{TaskArns: expected}}}); err != nil {
		return err
	}
	ss.log.Debug("agentsession: session open", "session", ss.id, "expected", len(expected))

	// Heartbeat watchdog: no per-message timer reset, just a timestamp the check reads.
	timeout := s.cfg.HeartbeatTimeout
	var timer *time.Timer
	timer = time.AfterFunc(timeout, func() {
		idle := time.Since(time.Unix(0, ss.lastHeard.Load()))
		if idle >= timeout {
			ss.log.Info("agentsession: heartbeat timeout", "idle", idle)
			ss.cancel()
			return
		}
		timer.Reset(timeout - idle)
	})
	defer timer.Stop()

	// The cluster's task subnet routes: a failed watch or send ends only this goroutine
	// (the agent keeps the routes it has until its next session).
	go func() {
		if err := ss.watchRoutes(ctx); err != nil && ctx.Err() == nil {
			ss.log.Warn("agentsession: task subnet routes watch ended", "err", err)
		}
	}()

	recvErr := make(chan error, 1)
	go func() {
		err := ss.recvLoop(ctx)
		ss.log.Debug("agentsession: receive ended", "session", ss.id, "err", err)
		recvErr <- err
		ss.cancel()
	}()

	werr := store.WatchShared(ctx, s.inboxes, keys.InboxOf(ss.account, ss.instance), ss.onInbox)
	ss.log.Debug("agentsession: inbox watch ended", "session", ss.id, "err", werr)

	// No more sends once the handler returns.
	ss.sendMu.Lock()
	ss.closed = true
	ss.sendMu.Unlock()

	select {
	case err := <-recvErr:
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	default:
	}
	if werr != nil && !errors.Is(werr, context.Canceled) {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("inbox watch: %w", werr))
	}
	return nil // superseded, timed out or server closing: the agent reconnects
}

func (ss *session) send(msg *agentv1.SessionResponse) error {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	if ss.closed {
		return context.Canceled
	}
	return ss.stream.Send(msg)
}

// expectedTasks lists the ARNs of the instance's tasks whose desiredStatus is RUNNING.
func (ss *session) expectedTasks(ctx context.Context) ([]string, error) {
	kv := ss.srv.cfg.Etcd
	prefix := keys.TaskList(ss.account, ss.cluster, "RUNNING", keys.DimInstance, ss.instance, "")
	var out []string
	token := ""
	for {
		ks, next, err := store.ListKeys(ctx, kv, prefix, store.MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		// One multi-get a page rather than a Get a task: an agent restarting with a
		// hundred tasks would otherwise wait for a hundred round trips.
		tks := make([]string, len(ks))
		for i, k := range ks {
			tks[i] = keys.Task(ss.account, ss.cluster, k[len(prefix):])
		}
		items, err := store.GetMany[*storev1.TaskRecord](ctx, kv, tks)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if rec := it.Value; rec != nil && rec.GetTask().GetLastStatus() != "STOPPED" {
				out = append(out, rec.GetTask().GetTaskArn())
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// onInbox pushes inbox changes to the agent.
// The entries arrive as Empty (the encoding kept as unknown fields, unparsed): most
// assignments go to the agent as the bytes the inbox holds (deliver).
func (ss *session) onInbox(ev store.Event[*emptypb.Empty]) error {
	switch ev.Type {
	case store.EventResync:
		present := map[string]bool{}
		for _, it := range ev.Items {
			present[it.Key] = true
		}
		ss.mu.Lock()
		for k, id := range ss.byKey {
			if !present[k] {
				delete(ss.byKey, k)
				delete(ss.pending, id)
			}
		}
		ss.mu.Unlock()
		for _, it := range ev.Items {
			if err := ss.deliver(it); err != nil {
				return err
			}
		}
	case store.EventPut:
		return ss.deliver(ev.Item)
	case store.EventDelete:
		ss.mu.Lock()
		if id, ok := ss.byKey[ev.Item.Key]; ok {
			delete(ss.byKey, ev.Item.Key)
			delete(ss.pending, id)
		}
		ss.mu.Unlock()
	}
	return nil
}

// deliver sends one inbox entry, unless this session already sent it at this revision.
// An assignment that names its task definition by ARN (as PlaceTxn writes them) and
// whose task definition needs no secrets resolved goes out as the entry's own bytes with
// the task definition's cached encoding appended (sendRaw): decoding every entry and
// encoding it again was the session's largest cost under a RunTask burst. Anything else
// is decoded and built as a message (deliverEntry), as every entry used to be.
//
// The raw path checks the entry's framing down to the task, not every nested field or
// string: a corrupt entry (inbox entries are written only by the scheduler's own
// marshalling, which validates) then fails the agent's decode of the message, ending
// its session, where the scheduler's decode used to end the session's watch. Either way
// the entry is redelivered on the next session.
func (ss *session) deliver(it store.Item[*emptypb.Empty]) error {
	raw := it.Value.ProtoReflect().GetUnknown()
	var looked *taskDefLookup
	if a, ok := parseRawAssignment(raw); ok && !a.hasTaskDefinition && a.taskDefinitionArn != "" {
		id := a.deliveryID
		if id == "" {
			id = it.Key[len(keys.InboxOf(ss.account, ss.instance)):]
		}
		if ss.sent(id, it.ModRevision) {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		td, err := ss.srv.cachedTaskDefinition(ctx, ss.account, a.taskDefinitionArn)
		cancel()
		if err == nil && (ss.srv.cfg.Secrets == nil || !ss.srv.cfg.Secrets.Needs(td.td)) {
			ss.track(id, it.Key, it.ModRevision, false)
			return ss.sendRaw(a, id, td)
		}
		// deliverEntry reports the error, or resolves the secrets, as it always did.
		looked = &taskDefLookup{td: td.td, err: err}
	}
	entry := &storev1.InboxEntry{}
	if err := proto.Unmarshal(raw, entry); err != nil {
		return fmt.Errorf("agentsession: decode %s at revision %d: %w", it.Key, it.ModRevision, err)
	}
	return ss.deliverEntry(it.Key, it.ModRevision, entry, looked)
}

// taskDefLookup is deliver's read of an assignment's task definition, handed on to
// deliverEntry so that it is not read twice.
type taskDefLookup struct {
	td  *ecsv1.TaskDefinition
	err error
}

// sendRaw sends assignment a (an inbox entry's, see parseRawAssignment) with delivery id
// id, appending the id when the entry has none and the task definition's encoding.
//
// The message holds the assignment as an unknown field: it is meant for the wire
// (binary protobuf, as the agent's client speaks it). Read in process, GetAssignment is
// nil; protojson would write it as {}.
func (ss *session) sendRaw(a rawAssignment, id string, td cachedTaskDef) error {
	var extra []byte
	if a.deliveryID == "" {
		extra = protowire.AppendTag(extra, fieldAssignmentDeliveryID, protowire.BytesType)
		extra = protowire.AppendString(extra, id)
	}
	msg := &agentv1.SessionResponse{}
	msg.ProtoReflect().SetUnknown(appendAssignment(nil, a.fields, extra, td.field))
	return ss.send(msg)
}

// sent reports whether this session sent delivery id at revision rev already.
func (ss *session) sent(id string, rev int64) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	cur := ss.pending[id]
	return cur != nil && cur.rev == rev
}

// track records that the delivery id of the entry at key, revision rev, is being sent.
// It returns false when this session sent that entry at that revision already.
func (ss *session) track(id, key string, rev int64, stop bool) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if cur := ss.pending[id]; cur != nil && cur.rev == rev {
		return false
	}
	if old, ok := ss.byKey[key]; ok && old != id {
		delete(ss.pending, old)
	}
	ss.pending[id] = &delivery{key: key, rev: rev, stop: stop}
	ss.byKey[key] = id
	return true
}

// deliverEntry sends one decoded inbox entry, unless this session already sent it at
// this revision. looked, when not nil, is the read of the assignment's task definition
// that deliver made already.
func (ss *session) deliverEntry(key string, rev int64, entry *storev1.InboxEntry, looked *taskDefLookup) error {
	taskID := key[len(keys.InboxOf(ss.account, ss.instance)):]
	var msg *agentv1.SessionResponse
	var id string
	stop := false
	switch d := entry.GetDelivery().(type) {
	case *storev1.InboxEntry_Assignment:
		a := d.Assignment
		if a.GetDeliveryId() == "" {
			a.DeliveryId = taskID
		}
		id = a.GetDeliveryId()
		msg = &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: a}}
	case *storev1.InboxEntry_Stop:
		o := d.Stop
		if o.GetDeliveryId() == "" {
			o.DeliveryId = taskID + StopDeliverySuffix
		}
		id = o.GetDeliveryId()
		stop = true
		msg = &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Stop{Stop: o}}
	default:
		ss.log.Warn("agentsession: empty inbox entry", "key", key)
		return nil
	}
	if !ss.track(id, key, rev, stop) {
		return nil
	}
	if a := msg.GetAssignment(); a != nil && a.GetTaskDefinition() == nil && a.GetTask().GetTaskDefinitionArn() != "" {
		// The inbox entry names its task definition by the task's ARN for it
		// (PlaceTxn); an entry written before carries it.
		if looked == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			td, err := ss.srv.taskDefinition(ctx, ss.account, a.GetTask().GetTaskDefinitionArn())
			cancel()
			looked = &taskDefLookup{td: td, err: err}
		}
		td, err := looked.td, looked.err
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Revisions are never removed (DeleteTaskDefinitions only marks them
			// DELETE_IN_PROGRESS), so this is a damaged store: the agent gets the task as
			// it is.
			ss.log.Warn("agentsession: assignment's task definition is gone", "task", a.GetTask().GetTaskArn(), "err", err)
		case err != nil:
			ss.mu.Lock()
			delete(ss.pending, id)
			ss.mu.Unlock()
			return fmt.Errorf("agentsession: assignment of %s: %w", a.GetTask().GetTaskArn(), err)
		default:
			a.TaskDefinition = td
		}
	}
	if a := msg.GetAssignment(); a != nil && ss.srv.cfg.Secrets != nil && ss.srv.cfg.Secrets.Needs(a.GetTaskDefinition()) {
		// The values go on this message only; the inbox entry keeps the references.
		a = proto.Clone(a).(*agentv1.Assignment)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		vals, err := ss.srv.cfg.Secrets.Resolve(ctx, ss.account, a.GetTaskDefinition())
		cancel()
		var failure *tasksecrets.Failure
		switch {
		case errors.As(err, &failure):
			a.SecretsError = failure.Reason
		case err != nil:
			ss.mu.Lock()
			delete(ss.pending, id)
			ss.mu.Unlock()
			return fmt.Errorf("agentsession: resolve secrets of %s: %w", a.GetTask().GetTaskArn(), err)
		}
		a.ResolvedSecrets = vals
		msg = &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: a}}
	}
	if err := ss.send(msg); err != nil {
		return err
	}
	return nil
}

// recvLoop reads the agent's messages until the stream ends.
func (ss *session) recvLoop(ctx context.Context) error {
	for {
		req, err := ss.stream.Receive()
		if err != nil {
			return err
		}
		now := time.Now()
		ss.lastHeard.Store(now.UnixNano())
		if now.Sub(ss.lastAssert) >= ss.srv.cfg.ReassertEvery {
			ss.lastAssert = now
			if err := ss.srv.cfg.Control.SetAgentConnected(ctx, ss.account, ss.arn, true); err != nil {
				ss.log.Warn("agentsession: re-assert agentConnected", "err", err)
			}
		}
		switch m := req.GetMessage().(type) {
		case *agentv1.SessionRequest_Heartbeat:
			// Held in memory only (lastHeard above), unless capacity changed.
			ss.onCapacity(ctx, m.Heartbeat)
			if f := ss.srv.cfg.OnHeartbeat; f != nil && m.Heartbeat.GetSentAt() != nil {
				f(now.Sub(m.Heartbeat.GetSentAt().AsTime()))
			}
		case *agentv1.SessionRequest_Ack:
			ss.onAck(ctx, m.Ack.GetDeliveryIds())
		case *agentv1.SessionRequest_TaskState:
			if err := ss.onTaskState(ctx, m.TaskState); err != nil {
				return err
			}
		case *agentv1.SessionRequest_TaskStats:
			if f := ss.srv.cfg.OnTaskStats; f != nil {
				f(ss.account, ss.cluster, ss.arn, m.TaskStats)
			}
		case *agentv1.SessionRequest_Hello:
			return connect.NewError(connect.CodeInvalidArgument, errors.New("hello sent twice"))
		}
	}
}

// onAck finishes acknowledged deliveries: an assignment's inbox entry is deleted (if it
// still holds what was sent); a stop order's stays until the task is STOPPED, so a stop
// is redelivered after a reconnect until the agent confirms it.
func (ss *session) onAck(ctx context.Context, ids []string) {
	var items []store.KeyRevision
	for _, id := range ids {
		ss.mu.Lock()
		d := ss.pending[id]
		if d != nil {
			d.acked = true
		}
		ss.mu.Unlock()
		if d == nil || d.stop {
			continue
		}
		items = append(items, store.KeyRevision{Key: d.key, ModRevision: d.rev})
	}
	if len(items) == 0 {
		return
	}
	// Each entry is deleted only at the revision delivered, in a batch with other
	// sessions' acks (inboxAcks).
	errs, err := ss.srv.acks.delete(ctx, items)
	for i, it := range items {
		e := err
		if e == nil {
			e = errs[i]
		}
		switch {
		case e == nil, errors.Is(e, store.ErrNotFound), errors.Is(e, store.ErrConflict):
			// Gone or replaced (by a stop order, delivered on its own).
		default:
			ss.log.Warn("agentsession: delete acked inbox entry", "key", it.Key, "err", e)
		}
	}
}

// taskRef returns the cluster name and task id of a long-format task ARN (empty parts
// for anything else), for log lines about a task.
func taskRef(taskARN string) (cluster, task string) {
	a, err := arn.Parse(taskARN)
	if err != nil || a.Type != arn.Task {
		return "", ""
	}
	return a.Cluster, a.Name
}

// onTaskState records a task state change and acks it. A domain error (unknown task,
// invalid change) is acked and logged, since resending cannot fix it; any other error ends
// the session unacked, so the agent resends the change on its next session.
func (ss *session) onTaskState(ctx context.Context, ch *agentv1.TaskStateChange) error {
	err := ss.srv.cfg.Control.ApplyTaskStateChange(ctx, ss.account, ss.arn, ch)
	var domain *awserr.Error
	switch {
	case err == nil:
	case errors.As(err, &domain):
		cluster, task := taskRef(ch.GetTaskArn())
		ss.log.Warn("agentsession: task state change refused", "cluster", cluster, "task", task, "task_arn", ch.GetTaskArn(), "status", ch.GetLastStatus(), "err", err)
	default:
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("record task state: %w", err))
	}
	if ch.GetLastStatus() == "STOPPED" {
		if a, perr := arn.Parse(ch.GetTaskArn()); perr == nil && a.Type == arn.Task {
			if _, derr := store.Delete(ctx, ss.srv.cfg.Etcd, keys.Inbox(ss.account, ss.instance, a.Name), 0); derr != nil && !errors.Is(derr, store.ErrNotFound) {
				ss.log.Warn("agentsession: reclaim inbox entry", "cluster", a.Cluster, "task", a.Name, "err", derr)
			}
		}
	}
	return ss.send(&agentv1.SessionResponse{Message: &agentv1.SessionResponse_StateAck{StateAck: &agentv1.StateAck{Seqs: []uint64{ch.GetSeq()}}}})
}

// noteRegistration records the capacity the instance is registered with.
func (ss *session) noteRegistration(rec *storev1.ContainerInstanceRecord) {
	ss.reg = rec
	ss.regReady = !rec.GetInvoluntaryDrain()
	ss.regCPU, ss.regMemory = 0, 0
	for _, r := range rec.GetContainerInstance().GetRegisteredResources() {
		switch r.GetName() {
		case "CPU":
			ss.regCPU = r.GetIntegerValue()
		case "MEMORY":
			ss.regMemory = r.GetIntegerValue()
		}
	}
}

// onCapacity re-registers the instance through Control.RegisterInstance when a heartbeat
// reports a different runtime state or capacity than registered: zero capacity with the
// runtime down is an involuntary drain (no new placements), and capacity coming back ends
// it. The registration is rebuilt from the stored record (host id, ports, attributes,
// version) with the heartbeat's CPU, memory and runtime state.
func (ss *session) onCapacity(ctx context.Context, hb *agentv1.Heartbeat) {
	if ss.reg == nil || (hb.GetRuntimeReady() == ss.regReady && hb.GetCpu() == ss.regCPU && hb.GetMemory() == ss.regMemory) {
		return
	}
	ci := ss.reg.GetContainerInstance()
	req := &agentv1.RegisterRequest{
		Cluster:      ss.cluster,
		HostId:       ss.reg.GetHostId(),
		Attributes:   ci.GetAttributes(),
		VersionInfo:  ci.GetVersionInfo(),
		RuntimeReady: hb.GetRuntimeReady(),
		HostAddress:  ss.reg.GetHostAddress(),
		// What the agent reported missing stays reported.
		MissingAttributes: ss.reg.GetMissingAttributes(),
	}
	if !hb.GetRuntimeReady() {
		req.RuntimeReason = "the agent reports its container runtime unavailable"
	}
	for _, r := range ci.GetRegisteredResources() {
		switch r.GetName() {
		case "CPU":
			r = &ecsv1.Resource{Name: r.Name, Type: r.Type, IntegerValue: hb.GetCpu()}
		case "MEMORY":
			r = &ecsv1.Resource{Name: r.Name, Type: r.Type, IntegerValue: hb.GetMemory()}
		}
		req.Resources = append(req.Resources, r)
	}
	if _, err := ss.srv.cfg.Control.RegisterInstance(ctx, ss.account, req); err != nil {
		ss.log.Warn("agentsession: re-register on capacity change", "err", err)
		return
	}
	ss.log.Info("agentsession: capacity changed", "runtime_ready", hb.GetRuntimeReady(), "cpu", hb.GetCpu(), "memory", hb.GetMemory())
	ss.regReady, ss.regCPU, ss.regMemory = hb.GetRuntimeReady(), hb.GetCpu(), hb.GetMemory()
}
