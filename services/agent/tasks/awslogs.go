package tasks

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/berthhq/berth/services/agent/logs"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// reasonLogger prefixes a task's stoppedReason when its awslogs stream cannot be
// created, in the words of the ECS agent's Docker awslogs driver.
const reasonLogger = "ResourceInitializationError: failed to validate logger args: create stream has been retried 1 times: failed to create Cloudwatch log stream: "

// logsHook creates the awslogs streams of the containers to create before they are
// (ensureLogStreams). A stream that cannot be created fails the task's start, as ECS
// stops a task whose log group is missing without awslogs-create-group.
type logsHook struct{ t *task }

func (h *logsHook) name() string { return "logs" }

func (h *logsHook) prestart(ctx context.Context, ts *taskStart) error {
	if len(ts.missing) == 0 || ctx.Err() != nil {
		return nil
	}
	return h.t.ensureLogStreams(ctx, ts.missing)
}

// ensureLogStreams creates the log streams of the awslogs containers among ctrs and
// records each destination beside the container's log, where the shipper finds it. The
// first that fails is returned as a startFailure (with the ECS agent's wording); one that
// fails because ctx ended is not.
func (t *task) ensureLogStreams(ctx context.Context, ctrs []*ctrState) error {
	for _, c := range ctrs {
		lc := c.Def.GetLogConfiguration()
		if lc.GetLogDriver() != "awslogs" || c.Status == state.Stopped {
			continue
		}
		err := t.ensureLogStream(ctx, c)
		if err == nil || ctx.Err() != nil {
			continue
		}
		t.m.log.Warn("awslogs stream not created", "task", t.arn, "container", c.Name, "err", err)
		return &startFailure{reason: reasonLogger + err.Error() + " : exit status 1"}
	}
	return nil
}

func (t *task) ensureLogStream(ctx context.Context, c *ctrState) error {
	opts, secret := t.logOptions(c.Name, c.Def.GetLogConfiguration().GetOptions())
	d, err := logs.ParseAWSLogs(opts, t.arn, c.Name, c.ID)
	if err != nil {
		return scrub(err, secret)
	}
	d.Redacted = len(secret) > 0
	if t.m.cfg.LogStreams == nil {
		return errors.New("this agent has no control plane to ship logs to")
	}
	if err := t.m.cfg.LogStreams.EnsureLogStream(ctx, d.Region, d.Group, d.Stream, d.CreateGroup); err != nil {
		return scrub(err, secret)
	}
	return scrub(t.m.cfg.Logs.SetDestination(t.arn, c.Name, d), secret)
}

// logOptions returns the log driver options of container: its logConfiguration.options
// with its secretOptions (resolved by the control plane, Kind "log") added, as ECS gives
// secretOptions to the driver. secret lists the values that came from secrets, for
// scrub.
func (t *task) logOptions(container string, opts map[string]string) (out map[string]string, secret []string) {
	out = maps.Clone(opts)
	for _, s := range t.a.GetResolvedSecrets() {
		if s.GetContainerName() != container || s.GetKind() != secretLog {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[s.GetName()] = s.GetValue()
		if s.GetValue() != "" {
			secret = append(secret, s.GetValue())
		}
	}
	return out, secret
}

// scrub returns err with every secret value replaced by "****", so a driver error about
// an option read from a secret never shows the value (it becomes the stoppedReason and
// goes into the agent's log).
func scrub(err error, secret []string) error {
	if err == nil || len(secret) == 0 {
		return err
	}
	msg := err.Error()
	for _, v := range secret {
		msg = strings.ReplaceAll(msg, v, "****")
	}
	return errors.New(msg)
}
