package events

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Runner is EventBridge's leader loop: it fires scheduled rules when their time comes and
// turns ECS task state changes into "ECS Task State Change" events delivered to the rules
// whose patterns match them. Only the leader runs it, so a slot or a change is delivered
// once.
type Runner struct {
	// Client reads rules and watches tasks; its writes (the rules' last_fired) must be
	// fenced by the leader's term (leader.Term.Client).
	Client store.Client
	// ECS runs the targets' tasks (through the leader's fenced ECS handler).
	ECS ECS
	// Logger receives failed invocations; nil discards them.
	Logger *slog.Logger
	// Interval is the time between schedule passes; default 1 s.
	Interval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	resynced func() // tests: called after the task watch's first listing

	// patterns holds, per scope, the enabled rules with an event pattern and targets as
	// the last schedule pass read them, so that a task change in a scope without such
	// rules costs no read (a rule takes effect within a pass, as AWS allows "a short
	// period" for it). Nil before the first pass.
	patterns atomic.Pointer[map[keys.Scope][]*storev1.EventRuleRecord]
}

func (r *Runner) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Runner) log() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Run runs the schedule passes and the task state feed until ctx ends; it returns ctx's
// error, or the task watch's when that fails.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := r.Interval
		if every <= 0 {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if err := r.SchedulePass(ctx); err != nil && ctx.Err() == nil {
				r.log().Warn("scheduled rules pass", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	err := r.watchTasks(ctx)
	cancel()
	wg.Wait()
	return err
}

// scopeOfRule returns the scope and name a rule's ARN names.
func scopeOfRule(arn string) (keys.Scope, string, bool) {
	rest, ok := strings.CutPrefix(arn, "arn:aws:events:")
	parts := strings.SplitN(rest, ":", 3)
	if !ok || len(parts) != 3 {
		return keys.Scope{}, "", false
	}
	name, ok := strings.CutPrefix(parts[2], "rule/")
	return keys.Scope{Region: parts[0], Account: parts[1]}, name, ok
}

func enabled(r *eventsv1.Rule) bool { return r.GetState() != StateDisabled }

// SchedulePass fires every enabled scheduled rule with targets whose next slot has come:
// it records the slot (the latest one due; slots missed while no leader ran are not
// caught up one by one, as EventBridge does not) with a CAS write, then runs the targets.
func (r *Runner) SchedulePass(ctx context.Context) error {
	items, err := store.ListAll[*storev1.EventRuleRecord](ctx, r.Client, keys.AllEventRules())
	if err != nil {
		return err
	}
	patterns := map[keys.Scope][]*storev1.EventRuleRecord{}
	for _, it := range items {
		rule := it.Value.GetRule()
		if s, _, ok := scopeOfRule(rule.GetArn()); ok && enabled(rule) && rule.GetEventPattern() != "" && len(it.Value.GetTargets()) > 0 {
			patterns[s] = append(patterns[s], it.Value)
		}
	}
	r.patterns.Store(&patterns)
	now := r.now()
	for _, it := range items {
		rec := it.Value
		rule := rec.GetRule()
		if !enabled(rule) || rule.GetScheduleExpression() == "" || len(rec.GetTargets()) == 0 {
			continue
		}
		s, name, ok := scopeOfRule(rule.GetArn())
		if !ok {
			continue
		}
		sched, err := ParseSchedule(rule.GetScheduleExpression(), fromEpoch(rec.GetScheduleBase()))
		if err != nil {
			continue
		}
		from := fromEpoch(max(rec.GetScheduleBase(), rec.GetLastFired()))
		slot := sched.Next(from)
		if slot.IsZero() || slot.After(now) {
			continue
		}
		for range 100_000 {
			n := sched.Next(slot)
			if n.IsZero() || n.After(now) {
				break
			}
			slot = n
		}
		next := proto.Clone(rec).(*storev1.EventRuleRecord)
		next.LastFired = epoch(slot)
		if _, err := store.Update(ctx, r.Client, it.Key, it.ModRevision, next); err != nil {
			if errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrConflict) {
				continue // changed meanwhile: the next pass reads it again
			}
			return err
		}
		r.invoke(ctx, s, name, rec.GetTargets(), "schedule "+slot.Format(time.RFC3339))
	}
	return nil
}

func fromEpoch(f float64) time.Time {
	return time.Unix(0, int64(f*1e9)).UTC()
}

// invoke runs each target's tasks; a failed invocation is logged (EventBridge counts it
// in FailedInvocations; Berth has no dead-letter queue).
func (r *Runner) invoke(ctx context.Context, s keys.Scope, rule string, targets []*eventsv1.Target, why string) {
	invoke(ctx, r.ECS, r.log(), s, rule, targets, why)
}

func invoke(ctx context.Context, ecs ECS, log *slog.Logger, s keys.Scope, rule string, targets []*eventsv1.Target, why string) {
	for _, t := range targets {
		req, err := runRequest(rule, t)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			out, rerr := ecs.RunTask(cctx, s, req)
			cancel()
			err = rerr
			if err == nil && len(out.GetFailures()) > 0 {
				f := out.GetFailures()[0]
				log.Warn("rule target placed no task", "scope", s.String(), "rule", rule, "target", t.GetId(),
					"reason", f.GetReason(), "detail", f.GetDetail(), "why", why)
				continue
			}
			if err == nil {
				log.Info("rule target invoked", "scope", s.String(), "rule", rule, "target", t.GetId(), "tasks", len(out.GetTasks()), "why", why)
				continue
			}
		}
		log.Warn("rule target invocation failed", "scope", s.String(), "rule", rule, "target", t.GetId(), "err", err, "why", why)
	}
}

// watchTasks delivers an "ECS Task State Change" event for every task whose lastStatus
// or desiredStatus changes (or that is created), from the leader's start on.
func (r *Runner) watchTasks(ctx context.Context) error {
	seen := map[string]string{}
	sem := make(chan struct{}, 8)
	return store.Watch(ctx, r.Client, keys.AllTasks(), 0, func(ev store.Event[*storev1.TaskRecord]) error {
		switch ev.Type {
		case store.EventResync:
			clear(seen)
			for _, it := range ev.Items {
				seen[it.Key] = statusOf(it.Value)
			}
			if r.resynced != nil {
				r.resynced()
			}
		case store.EventDelete:
			delete(seen, ev.Item.Key)
		case store.EventPut:
			st := statusOf(ev.Item.Value)
			if seen[ev.Item.Key] == st {
				return nil
			}
			seen[ev.Item.Key] = st
			ref, _, ok := keys.ParseTask(ev.Item.Key)
			if !ok {
				return nil
			}
			var rules []*storev1.EventRuleRecord
			cached := r.patterns.Load()
			if cached != nil {
				if rules = (*cached)[ref.Scope]; len(rules) == 0 {
					return nil
				}
			}
			event := TaskStateChange(ref.Scope, ev.Item.Value.GetTask(), ev.Item.ModRevision, r.now())
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			go func() {
				defer func() { <-sem }()
				if cached != nil {
					deliverTo(ctx, r.ECS, r.log(), ref.Scope, event, rules)
				} else if err := Deliver(ctx, r.Client, r.ECS, r.log(), ref.Scope, event); err != nil && ctx.Err() == nil {
					r.log().Warn("deliver task state change", "err", err)
				}
			}()
		}
		return nil
	})
}

func statusOf(t *storev1.TaskRecord) string {
	return t.GetTask().GetLastStatus() + "/" + t.GetTask().GetDesiredStatus()
}

// Deliver matches event against the enabled rules with an event pattern of s's default
// bus and invokes the targets of each that matches.
func Deliver(ctx context.Context, kv clientv3.KV, ecs ECS, log *slog.Logger, s keys.Scope, event Event) error {
	items, err := store.ListAll[*storev1.EventRuleRecord](ctx, kv, keys.EventRules(s, DefaultBus))
	if err != nil {
		return err
	}
	rules := make([]*storev1.EventRuleRecord, len(items))
	for i, it := range items {
		rules[i] = it.Value
	}
	deliverTo(ctx, ecs, log, s, event, rules)
	return nil
}

// deliverTo invokes the targets of each of rules (of scope s) that is enabled, has a
// pattern and targets, and matches event.
func deliverTo(ctx context.Context, ecs ECS, log *slog.Logger, s keys.Scope, event Event, rules []*storev1.EventRuleRecord) {
	// Match on the event as JSON decodes it, so numbers compare as they would on AWS.
	b, err := jsonMarshal(event)
	if err != nil {
		log.Warn("encode event", "err", err)
		return
	}
	decoded, err := decodeEvent(b)
	if err != nil {
		log.Warn("decode event", "err", err)
		return
	}
	for _, rec := range rules {
		rule := rec.GetRule()
		if !enabled(rule) || rule.GetEventPattern() == "" || len(rec.GetTargets()) == 0 {
			continue
		}
		p, err := CompilePattern(rule.GetEventPattern())
		if err != nil || !p.MatchValue(decoded) {
			continue
		}
		invoke(ctx, ecs, log, s, rule.GetName(), rec.GetTargets(), "event "+event["id"].(string))
	}
}
