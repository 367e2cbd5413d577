package tasks

import "github.com/berthhq/berth/services/agent/tasks/state"

// CountByStatus returns how many of the tasks this manager holds are in each lastStatus
// (PENDING, RUNNING, STOPPED), for metrics. It takes each task's lock briefly, never
// while holding the manager's.
func (m *Manager) CountByStatus() map[string]int {
	m.mu.Lock()
	ts := make([]*task, 0, len(m.tasks))
	for _, t := range m.tasks {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	counts := map[string]int{state.Pending: 0, state.Running: 0, state.Stopped: 0}
	for _, t := range ts {
		t.mu.Lock()
		counts[t.st.Status]++
		t.mu.Unlock()
	}
	return counts
}
