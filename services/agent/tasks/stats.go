package tasks

import (
	"context"
	"strconv"
	"sync"
	"time"

	v1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// Sampler samples the running tasks' cgroup CPU and memory use for the control plane's
// AWS/ECS metrics (agentv1.TaskStats). It remembers each task's CPU time of the previous
// sample: a task's CPU use is reported from its second sample on.
type Sampler struct {
	m    *Manager
	mu   sync.Mutex
	prev map[string]cpuMark // by task ARN
}

type cpuMark struct {
	nanos uint64
	at    time.Time
}

// NewSampler returns a Sampler of m's tasks.
func NewSampler(m *Manager) *Sampler { return &Sampler{m: m, prev: map[string]cpuMark{}} }

// Sample reads the cgroups of every running container and returns one sample per task
// with a CPU rate (tasks seen for the first time are remembered, not reported).
func (s *Sampler) Sample(ctx context.Context) *agentv1.TaskStats {
	now := time.Now()
	out := &agentv1.TaskStats{SampledAt: timestamppb.New(now)}
	s.m.mu.Lock()
	tasks := make([]*task, 0, len(s.m.tasks))
	for _, t := range s.m.tasks {
		if !t.isStopped() {
			tasks = append(tasks, t)
		}
	}
	s.m.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		t.mu.Lock()
		var procs []client.Task
		for _, c := range t.ctrs {
			if c.proc != nil && c.Status == state.Running {
				procs = append(procs, c.proc)
			}
		}
		t.mu.Unlock()
		if len(procs) == 0 {
			continue
		}
		var cpuNanos uint64
		var memBytes float64
		ok := true
		for _, p := range procs {
			n, mem, err := cgroupUse(ctx, p)
			if err != nil {
				ok = false
				break
			}
			cpuNanos += n
			memBytes += mem
		}
		if !ok {
			continue
		}
		seen[t.arn] = true
		prev, had := s.prev[t.arn]
		s.prev[t.arn] = cpuMark{nanos: cpuNanos, at: now}
		if !had || cpuNanos < prev.nanos || !now.After(prev.at) {
			continue
		}
		cpu, mem := reservation(t.a)
		out.Tasks = append(out.Tasks, &agentv1.TaskSample{
			TaskArn:        t.arn,
			Group:          t.a.GetTask().GetGroup(),
			CpuReserved:    cpu,
			MemoryReserved: mem,
			CpuUsed:        float64(cpuNanos-prev.nanos) / float64(now.Sub(prev.at).Nanoseconds()) * 1024,
			MemoryUsed:     memBytes / (1 << 20),
		})
	}
	for arn := range s.prev {
		if !seen[arn] {
			delete(s.prev, arn)
		}
	}
	return out
}

// cgroupUse returns a container's CPU time (ns) and its memory in use (bytes) as the ECS
// agent counts it: usage less inactive page cache (cgroup v2 inactive_file, v1 cache).
func cgroupUse(ctx context.Context, p client.Task) (uint64, float64, error) {
	metric, err := p.Metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	data, err := typeurl.UnmarshalAny(metric.Data)
	if err != nil {
		return 0, 0, err
	}
	switch d := data.(type) {
	case *v2.Metrics:
		mem := d.GetMemory()
		used := float64(mem.GetUsage())
		if ia := float64(mem.GetInactiveFile()); ia < used {
			used -= ia
		}
		return d.GetCPU().GetUsageUsec() * 1000, used, nil
	case *v1.Metrics:
		used := float64(d.GetMemory().GetUsage().GetUsage())
		if c := float64(d.GetMemory().GetCache()); c < used {
			used -= c
		}
		return d.GetCPU().GetUsage().GetTotal(), used, nil
	}
	return 0, 0, nil
}

// reservation is a task's CPU units and memory MiB as ECS reserves them: the task-level
// values, else the sum of the containers' (memory: hard limit, else soft limit).
func reservation(a *agentv1.Assignment) (cpu, mem int32) {
	if v, err := strconv.Atoi(a.GetTask().GetCpu()); err == nil && v > 0 {
		cpu = int32(v)
	} else {
		for _, c := range a.GetTaskDefinition().GetContainerDefinitions() {
			cpu += c.GetCpu()
		}
	}
	if v, err := strconv.Atoi(a.GetTask().GetMemory()); err == nil && v > 0 {
		mem = int32(v)
	} else {
		for _, c := range a.GetTaskDefinition().GetContainerDefinitions() {
			if c.Memory != nil {
				mem += c.GetMemory()
			} else {
				mem += c.GetMemoryReservation()
			}
		}
	}
	return cpu, mem
}
