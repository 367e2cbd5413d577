package tasks

import (
	"context"
	"testing"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/tasks/state"
)

// TestMetadataWaitsForStartInFlight: a process asks the metadata endpoint about itself
// as soon as it runs, which on a loaded host is before containerd's Start has returned
// to the agent. The answer waits for the start to be recorded instead of saying PENDING
// (and the stats endpoint, that the container is not running).
func TestMetadataWaitsForStartInFlight(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:ecs:us-east-1:000000000000:task/default/0123456789abcdef0123456789abcdef"
	m := &Manager{tasks: map[string]*task{}}
	tk := newTask(m, &agentv1.Assignment{
		Task:           &ecsv1.Task{TaskArn: new(arn)},
		TaskDefinition: &ecsv1.TaskDefinition{Family: new("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: new("app"), Essential: new(true)}}},
	})
	m.tasks[arn] = tk
	c := tk.ctrs[0]
	tk.mu.Lock()
	c.starting = true
	tk.mu.Unlock()

	answered := make(chan string, 1)
	go func() {
		md, ok := m.TaskMetadata(context.Background(), arn)
		if !ok || len(md.Containers) != 1 {
			answered <- "no metadata"
			return
		}
		answered <- md.Containers[0].KnownStatus
	}()
	select {
	case got := <-answered:
		t.Fatalf("answered %q while the start was in flight", got)
	case <-time.After(200 * time.Millisecond):
	}
	tk.mu.Lock()
	c.Status, c.starting = state.Running, false
	tk.broadcastLocked()
	tk.mu.Unlock()
	if got := <-answered; got != state.Running {
		t.Errorf("known status after the start = %q, want %q", got, state.Running)
	}

	// A start that never completes does not hold a request past its context.
	tk.mu.Lock()
	c.starting = true
	tk.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := m.ContainerStats(ctx, arn, "app"); err == nil {
		t.Error("stats of a container with no process answered")
	}
}
