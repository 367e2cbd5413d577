package tasks

import (
	"context"
	"errors"

	containerd "github.com/containerd/containerd/v2/client"
)

// A task's features — its trace, secrets, images, log streams, network, credentials and
// metadata endpoints, stats — are hooks into its life, each in its feature's file, in
// the manner of Nomad's task runner hooks: task.run creates the containers, watches them
// and reports; at each phase it calls the hooks that take part in it, in the order of
// taskHooks.
//
//	prestart   before the containers are created: each readies its feature, or fails
//	           the task's start (startFailure) through run's one fail path
//	poststart  once the task's start is over and reported (RUNNING, or STOPPED first)
//	stop       when the task is STOPPED, before that is reported: each releases what
//	           the stopped task must no longer hold
//	exit       when run returns, however it ends: each drops what it kept for the task

// taskHook is one feature of a task's life on this host.
type taskHook interface {
	name() string
}

// prestartHook readies its feature before the task's containers are created. A
// *startFailure fails the task's start; errAgentStopping ends run (the agent stops and
// the task is left to the next one). Hooks after a failure are not called: the task
// starts no container.
type prestartHook interface {
	taskHook
	prestart(ctx context.Context, ts *taskStart) error
}

// poststartHook learns, once, that the task's start is over: it reached status (RUNNING,
// or STOPPED without running) and that was reported.
type poststartHook interface {
	taskHook
	poststart(status string)
}

// stopHook releases what the task no longer holds once it is STOPPED; run calls it before
// the STOPPED report, so whoever sees STOPPED finds it released.
type stopHook interface {
	taskHook
	stop(ctx context.Context)
}

// exitHook drops what its feature kept for the task when run returns: after STOPPED, or
// when the agent stops first (ctx ended).
type exitHook interface {
	taskHook
	exit()
}

// taskStart is what run's prestart hooks share.
type taskStart struct {
	// adopted holds the containers found at agent start (nil for a new task).
	adopted map[string]containerd.Container
	// missing are the containers to create: all of a new task's; an adopted task's that
	// no agent started yet.
	missing []*ctrState
	// images holds the pulled image of each container in missing, by name (imagesHook).
	images map[string]containerd.Image
}

// startFailure is a prestart hook's reason the task cannot start: the task stops with
// stopCode TaskFailedToStart and reason, and so do its containers still to create (the
// hook's or earlier hooks' failures mean they never run). all extends that to every
// container not yet STOPPED, adopted ones included, for a failure of what they all share.
type startFailure struct {
	reason string
	all    bool
}

func (f *startFailure) Error() string { return f.reason }

// errAgentStopping is a prestart hook's answer when ctx ended while it worked: run ends
// without failing the task.
var errAgentStopping = errors.New("agent stopping")

// taskHooks returns the task's hooks in the order their phases run them (exit hooks run
// backwards).
func (t *task) taskHooks() []taskHook {
	tr := &traceHook{t: t}
	return []taskHook{
		tr,
		&secretsHook{t: t},
		&efsHook{t: t},
		&imagesHook{t: t, trace: tr},
		&logsHook{t: t},
		&networkHook{t: t},
		&endpointsHook{t: t},
		&statsHook{t: t},
	}
}

// prestart runs the prestart hooks in order until one fails, and fails the task's start
// then (failStart). It returns false when run must end: the agent is stopping.
func (t *task) prestart(ctx context.Context, hooks []taskHook, ts *taskStart) bool {
	for _, h := range hooks {
		pre, ok := h.(prestartHook)
		if !ok {
			continue
		}
		err := pre.prestart(ctx, ts)
		if err == nil {
			continue
		}
		if errors.Is(err, errAgentStopping) {
			return false
		}
		t.failStart(h.name(), ts, err)
		return true
	}
	return true
}

// failStart is the one path by which a task fails to start: the containers err names
// (startFailure) stop without having run, with its reason, and the task stops with
// TaskFailedToStart and that reason, unless it was stopping already.
func (t *task) failStart(hook string, ts *taskStart, err error) {
	f, ok := errors.AsType[*startFailure](err)
	if !ok {
		f = &startFailure{reason: err.Error()}
	}
	t.m.log.Warn("task failed to start", "task", t.arn, "hook", hook, "reason", f.reason)
	ctrs := ts.missing
	if f.all {
		ctrs = t.ctrs
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range ctrs {
		t.st.MarkStopped(c.Container, nil, f.reason, true) // c.done is closed by startContainers
	}
	t.beginStopLocked(StopCodeTaskFailedToStart, f.reason)
}

// poststart runs the poststart hooks in order.
func poststart(hooks []taskHook, status string) {
	for _, h := range hooks {
		if p, ok := h.(poststartHook); ok {
			p.poststart(status)
		}
	}
}

// stop runs the stop hooks in order.
func stop(ctx context.Context, hooks []taskHook) {
	for _, h := range hooks {
		if s, ok := h.(stopHook); ok {
			s.stop(ctx)
		}
	}
}

// exit runs the exit hooks backwards, the last hook's first, as defers would.
func exit(hooks []taskHook) {
	for i := len(hooks) - 1; i >= 0; i-- {
		if e, ok := hooks[i].(exitHook); ok {
			e.exit()
		}
	}
}
