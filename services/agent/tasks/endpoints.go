package tasks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent/endpoints"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// This file connects tasks to their credentials and metadata endpoints (package
// endpoints): Prepare before a task's containers are created, Release once it stopped,
// and the Manager as the endpoints' metadata source.

// Endpoints readies and releases a task's credentials and metadata endpoints;
// *endpoints.Server implements it.
type Endpoints interface {
	// Prepare returns, by container name, the environment the task's containers get; an
	// error when the task cannot start (no credentials for its role).
	Prepare(ctx context.Context, a *agentv1.Assignment, networkMode string) (map[string][]string, error)
	// Release forgets a stopped task.
	Release(taskARN string)
}

// reasonCredentials prefixes the stoppedReason of a task whose role credentials could
// not be obtained, as the ECS agent words resource initialisation failures.
const reasonCredentials = "ResourceInitializationError: unable to get the task role credentials: "

// prepareEndpoints readies the task's endpoints and records the environment they give its
// containers. It returns an error (the stoppedReason's detail) when the task must not start.
func (t *task) prepareEndpoints(ctx context.Context) error {
	ep := t.m.cfg.Endpoints
	if ep == nil {
		if endpoints.TaskRole(t.a) != "" {
			return errors.New("this agent serves no task credentials endpoint")
		}
		return nil
	}
	env, err := ep.Prepare(ctx, t.a, t.networkMode())
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.endpointEnv = env
	t.mu.Unlock()
	return nil
}

// TaskMetadata implements endpoints.Source: the task metadata endpoint's view of a task
// this manager holds.
func (m *Manager) TaskMetadata(ctx context.Context, taskARN string) (*endpoints.Task, bool) {
	m.mu.Lock()
	t := m.tasks[taskARN]
	m.mu.Unlock()
	if t == nil {
		return nil, false
	}
	t.awaitStarts(ctx)
	task, def := t.a.GetTask(), t.a.GetTaskDefinition()
	t.mu.Lock()
	defer t.mu.Unlock()
	desired := "RUNNING"
	if t.st.Stopping || task.GetDesiredStatus() == "STOPPED" {
		desired = "STOPPED"
	}
	mode := def.GetNetworkMode()
	if mode == "" {
		mode = "bridge"
	}
	md := &endpoints.Task{
		Cluster:       task.GetClusterArn(),
		TaskARN:       t.arn,
		Family:        def.GetFamily(),
		Revision:      strconv.Itoa(int(def.GetRevision())),
		DesiredStatus: desired,
		KnownStatus:   t.st.Status,
		LaunchType:    cmpOr(task.GetLaunchType(), "EC2"),
		PullStartedAt: timePtr(t.st.PullStarted),
		PullStoppedAt: timePtr(t.st.PullStopped),
		Containers:    []*endpoints.Container{},
	}
	if name, ok := strings.CutPrefix(task.GetGroup(), "service:"); ok {
		md.ServiceName = name
	}
	if !t.st.ExecStoppedAt.IsZero() {
		md.ExecutionStopped = timePtr(t.st.ExecStoppedAt)
	}
	cpu, _ := strconv.ParseFloat(cmpOr(task.GetCpu(), def.GetCpu()), 64)
	mem, _ := strconv.ParseInt(cmpOr(task.GetMemory(), def.GetMemory()), 10, 64)
	if cpu > 0 || mem > 0 {
		md.Limits = &endpoints.Limits{CPU: cpu / 1024, Memory: mem}
	}
	for i, c := range t.ctrs {
		cd := c.Def
		ec := &endpoints.Container{
			DockerID:      c.ID,
			Name:          c.Name,
			DockerName:    c.ID,
			Image:         cd.GetImage(),
			ImageID:       c.ImageDigest,
			Labels:        t.labels(c),
			DesiredStatus: desired,
			KnownStatus:   c.Status,
			ExitCode:      c.ExitCode,
			Limits:        endpoints.Limits{CPU: float64(cd.GetCpu()), Memory: int64(cd.GetMemory())},
			Type:          "NORMAL",
			Networks:      []endpoints.Network{{NetworkMode: mode}},
		}
		if !c.RunningSince.IsZero() {
			ec.StartedAt = timePtr(c.RunningSince)
		}
		if lc := cd.GetLogConfiguration(); lc != nil {
			ec.LogDriver, ec.LogOptions = lc.GetLogDriver(), lc.GetOptions()
		}
		if cs := task.GetContainers(); i < len(cs) && cs[i].GetName() == c.Name {
			ec.ContainerARN = cs[i].GetContainerArn()
		}
		if c.Health != "" {
			ec.Health = &endpoints.Health{Status: c.Health}
		}
		if cd.GetRestartPolicy().GetEnabled() {
			rc := c.RestartCount
			ec.RestartCount = &rc
		}
		md.Containers = append(md.Containers, ec)
	}
	return md, true
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// startWait bounds how long an endpoint request waits for a container start in flight.
const startWait = 10 * time.Second

// awaitStarts returns once no container of t is between its process's start and the
// record of it (ctrState.starting), or after startWait or when ctx ends. A process asks
// about itself the moment it runs, which on a loaded host can be before
// containerd's Start call has returned to the agent: without the wait it would be told
// it is PENDING, or that it has no stats because it is not running.
func (t *task) awaitStarts(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	for {
		t.mu.Lock()
		starting := slices.ContainsFunc(t.ctrs, func(c *ctrState) bool { return c.starting })
		ch := t.changed
		t.mu.Unlock()
		if !starting {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// ContainerStats implements endpoints.Source: the cgroup statistics of a container's
// process in the Docker stats shape, with the previous sample as precpu_stats.
func (m *Manager) ContainerStats(ctx context.Context, taskARN, name string) (*endpoints.Stats, error) {
	m.mu.Lock()
	t := m.tasks[taskARN]
	m.mu.Unlock()
	if t == nil {
		return nil, errors.New("task not found")
	}
	t.awaitStarts(ctx)
	var c *ctrState
	t.mu.Lock()
	for _, x := range t.ctrs {
		if x.Name == name {
			c = x
		}
	}
	var proc containerd.Task
	if c != nil && c.proc != nil && c.Status == state.Running {
		proc = c.proc
	}
	t.mu.Unlock()
	if proc == nil {
		return nil, fmt.Errorf("container %s is not running", name)
	}
	metric, err := proc.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	data, err := typeurl.UnmarshalAny(metric.Data)
	if err != nil {
		return nil, err
	}
	st := &endpoints.Stats{Read: time.Now().UTC(), Name: c.ID, ID: c.ID, MemoryStats: endpoints.MemoryStats{Stats: map[string]uint64{}}}
	st.CPUStats.OnlineCPUs = uint32(goruntime.NumCPU())
	st.CPUStats.SystemCPUUsage = systemCPUNanos()
	switch d := data.(type) {
	case *v2.Metrics:
		st.CPUStats.CPUUsage = endpoints.CPUUsage{TotalUsage: d.GetCPU().GetUsageUsec() * 1000, UsageInKernelmode: d.GetCPU().GetSystemUsec() * 1000, UsageInUsermode: d.GetCPU().GetUserUsec() * 1000}
		st.MemoryStats.Usage = d.GetMemory().GetUsage()
		st.MemoryStats.Limit = d.GetMemory().GetUsageLimit()
		st.MemoryStats.MaxUsage = d.GetMemory().GetMaxUsage()
		st.MemoryStats.Stats["anon"] = d.GetMemory().GetAnon()
		st.MemoryStats.Stats["file"] = d.GetMemory().GetFile()
		st.PidsStats = endpoints.PidsStats{Current: d.GetPids().GetCurrent(), Limit: d.GetPids().GetLimit()}
		st.NumProcs = uint32(d.GetPids().GetCurrent())
		for _, e := range d.GetIo().GetUsage() {
			st.BlkioStats.IOServiceBytesRecursive = append(st.BlkioStats.IOServiceBytesRecursive,
				endpoints.BlkioEntry{Major: e.GetMajor(), Minor: e.GetMinor(), Op: "read", Value: e.GetRbytes()},
				endpoints.BlkioEntry{Major: e.GetMajor(), Minor: e.GetMinor(), Op: "write", Value: e.GetWbytes()})
		}
	case *v1.Metrics:
		u := d.GetCPU().GetUsage()
		st.CPUStats.CPUUsage = endpoints.CPUUsage{TotalUsage: u.GetTotal(), UsageInKernelmode: u.GetKernel(), UsageInUsermode: u.GetUser()}
		st.MemoryStats.Usage = d.GetMemory().GetUsage().GetUsage()
		st.MemoryStats.MaxUsage = d.GetMemory().GetUsage().GetMax()
		st.MemoryStats.Limit = d.GetMemory().GetUsage().GetLimit()
		st.MemoryStats.Stats["rss"] = d.GetMemory().GetRSS()
		st.MemoryStats.Stats["cache"] = d.GetMemory().GetCache()
		st.PidsStats = endpoints.PidsStats{Current: d.GetPids().GetCurrent(), Limit: d.GetPids().GetLimit()}
		st.NumProcs = uint32(d.GetPids().GetCurrent())
	default:
		return nil, fmt.Errorf("unknown metrics type %T", data)
	}
	if st.BlkioStats.IOServiceBytesRecursive == nil {
		st.BlkioStats.IOServiceBytesRecursive = []endpoints.BlkioEntry{}
	}
	m.statsMu.Lock()
	if prev, ok := m.lastStats[c.ID]; ok {
		st.PreRead, st.PreCPUStats = prev.Read, prev.CPUStats
	}
	if m.lastStats == nil {
		m.lastStats = map[string]*endpoints.Stats{}
	}
	m.lastStats[c.ID] = st
	m.statsMu.Unlock()
	return st, nil
}

// systemCPUNanos is the host's total CPU time in nanoseconds from /proc/stat, as Docker
// reports system_cpu_usage; 0 when it cannot be read.
func systemCPUNanos() uint64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "cpu" {
			continue
		}
		var ticks uint64
		for _, v := range fields[1:8] {
			n, _ := strconv.ParseUint(v, 10, 64)
			ticks += n
		}
		return ticks * (uint64(time.Second) / 100) // USER_HZ is 100 on Linux
	}
	return 0
}

// endpointsHook readies the task's credentials and metadata endpoints (prepareEndpoints)
// before its containers are created, and releases them once the task is STOPPED and when
// run returns.
type endpointsHook struct{ t *task }

func (h *endpointsHook) name() string { return "endpoints" }

func (h *endpointsHook) prestart(ctx context.Context, ts *taskStart) error {
	t := h.t
	t.mu.Lock()
	stopping := t.st.Stopping
	t.mu.Unlock()
	if stopping {
		return nil // the task failed before its start: no credentials to fetch
	}
	err := t.prepareEndpoints(ctx)
	if err == nil || ctx.Err() != nil {
		// With ctx ended the agent is stopping: run's supervision ends with ctx.
		return nil
	}
	if ts.adopted != nil && len(ts.missing) == 0 {
		// Every container of this adopted task already runs: an agent restart does not
		// stop a running task over its endpoints, so the failure is only logged.
		t.m.log.Warn("adopted task: its endpoints failed", "task", t.arn, "err", err)
		return nil
	}
	return &startFailure{reason: reasonCredentials + err.Error()}
}

// stop releases the endpoints before STOPPED is reported, so whoever sees STOPPED finds
// the task's credentials gone.
func (h *endpointsHook) stop(context.Context) { h.release() }

func (h *endpointsHook) exit() { h.release() }

func (h *endpointsHook) release() {
	if ep := h.t.m.cfg.Endpoints; ep != nil {
		ep.Release(h.t.arn)
	}
}
