package tasks

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/tasks/state"
	"github.com/containerd/containerd/v2/pkg/cio"
)

var execSeq atomic.Uint64

// healthLoop runs c's health check every interval until ctx is done, as
// Docker does for the ECS agent: failures during startPeriod do not count;
// retries consecutive failures make the container UNHEALTHY; a success
// makes it HEALTHY. CMD runs its arguments; CMD-SHELL runs /bin/sh -c.
func (t *task) healthLoop(ctx context.Context, c *ctrState, hc *ecsv1.HealthCheck) {
	interval := secondsOr(hc.Interval, defaultHealthInterval)
	timeout := secondsOr(hc.Timeout, defaultHealthTimeout)
	retries := defaultHealthRetries
	if hc.Retries != nil {
		retries = int(hc.GetRetries())
	}
	startPeriod := secondsOr(hc.StartPeriod, 0)
	args, err := healthArgs(hc.GetCommand())
	if err != nil {
		t.m.log.Warn("health check not run", "task", t.arn, "container", c.Name, "err", err)
		return
	}
	began := time.Now()
	failures := 0
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-tick.C:
		}
		ok, ran := t.execCheck(ctx, c, args, timeout)
		if ctx.Err() != nil {
			return
		}
		if !ran {
			// No runtime to ask (containerd restarting, container being
			// re-adopted): no verdict either way.
			continue
		}
		t.mu.Lock()
		prev := c.Health
		switch {
		case ok:
			failures = 0
			c.Health = state.Healthy
		case time.Since(began) < startPeriod:
		default:
			failures++
			if failures >= max(retries, 1) {
				c.Health = state.Unhealthy
			}
		}
		if c.Health != prev && c.Status != state.Stopped {
			t.broadcastLocked()
		}
		t.mu.Unlock()
	}
}

func secondsOr(v *int32, def time.Duration) time.Duration {
	if v == nil || *v <= 0 {
		return def
	}
	return time.Duration(*v) * time.Second
}

// healthArgs turns an ECS health check command into process arguments.
func healthArgs(cmd []string) ([]string, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("empty health check command")
	}
	switch cmd[0] {
	case "CMD":
		if len(cmd) < 2 {
			return nil, fmt.Errorf("CMD health check without a command")
		}
		return cmd[1:], nil
	case "CMD-SHELL":
		return []string{"/bin/sh", "-c", strings.Join(cmd[1:], " ")}, nil
	default:
		// Docker treats a bare command as CMD-SHELL.
		return []string{"/bin/sh", "-c", strings.Join(cmd, " ")}, nil
	}
}

// execCheck runs args in c and reports whether they exited 0 within
// timeout; ran is false when there was no runtime to run them in.
func (t *task) execCheck(ctx context.Context, c *ctrState, args []string, timeout time.Duration) (ok, ran bool) {
	t.mu.Lock()
	proc, ctr := c.proc, c.ctr
	t.mu.Unlock()
	if ready, _, _ := t.m.cfg.Gate.State(); !ready || proc == nil || ctr == nil {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec, err := ctr.Spec(ctx)
	if err != nil || spec.Process == nil {
		return false, false
	}
	pspec := *spec.Process
	pspec.Args = args
	pspec.Terminal = false
	id := fmt.Sprintf("health-%d", execSeq.Add(1))
	p, err := proc.Exec(ctx, id, &pspec, cio.NullIO)
	if err != nil {
		return false, false
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer dcancel()
		_, _ = p.Delete(dctx)
	}()
	exitC, err := p.Wait(ctx)
	if err != nil {
		return false, true
	}
	if err := p.Start(ctx); err != nil {
		return false, true
	}
	select {
	case st := <-exitC:
		code, _, err := st.Result()
		return err == nil && code == 0, true
	case <-ctx.Done():
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer kcancel()
		_ = p.Kill(kctx, 9)
		return false, true
	}
}
