package agent

import (
	"context"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent/tasks"
)

// taskStats returns the session's Stats: the sampler's task samples with the capacity
// the instance registers (the control plane's CPUReservation and cluster CPUUtilization
// divide by it). Nothing is sent while the runtime is down.
func (h *hostView) taskStats(s *tasks.Sampler) func(ctx context.Context) *agentv1.TaskStats {
	return func(ctx context.Context) *agentv1.TaskStats {
		ready, _, cpu, mem := h.capacity()
		if !ready {
			return nil
		}
		st := s.Sample(ctx)
		st.InstanceCpu, st.InstanceMemory = cpu, mem
		return st
	}
}
