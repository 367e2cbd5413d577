package service

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// The reconciler's watches (through store.Watch) mark what changed: a task's service, a
// cluster whose task was deleted or whose instance changed, a service whose record
// changed; the first resync clears allDirty and asks for one full pass.
func TestWatchMarksChanges(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range []func(context.Context) error{e.r.watchTasks, e.r.watchInstances, e.r.watchServices} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.r.watch(ctx, w)
		}()
	}
	defer wg.Wait()
	defer cancel()
	c := keys.ClusterRef{Scope: e.sc, Cluster: "wc"}
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			e.r.dmu.Lock()
			done := ok()
			e.r.dmu.Unlock()
			if done {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("watch did not mark %s", what)
	}
	wait("the resync", func() bool { return !e.r.allDirty && e.r.full })
	e.r.takeDirty()

	task := keys.Task(e.sc, "wc", "t1")
	if _, err := store.Create(ctx, sharedEtcd, task, &storev1.TaskRecord{Task: &ecsv1.Task{LastStatus: proto.String("PENDING")}, ServiceName: "web"}); err != nil {
		t.Fatal(err)
	}
	wait("the task's service", func() bool { return e.r.dirtySvc[c]["web"] && !e.r.dirty[c] })
	if _, err := sharedEtcd.Delete(ctx, task); err != nil {
		t.Fatal(err)
	}
	wait("the cluster of a deleted task", func() bool { return e.r.dirty[c] })
	e.r.takeDirty()

	if _, err := store.Create(ctx, sharedEtcd, keys.Instance(e.sc, "wc", "i1"), &storev1.ContainerInstanceRecord{}); err != nil {
		t.Fatal(err)
	}
	wait("the cluster of an instance", func() bool { return e.r.dirty[c] })
	e.r.takeDirty()

	if _, err := store.Create(ctx, sharedEtcd, keys.Service(e.sc, "wc", "api"), &storev1.ServiceRecord{}); err != nil {
		t.Fatal(err)
	}
	wait("the service", func() bool { return e.r.dirtySvc[c]["api"] && !e.r.dirty[c] })
	_, _ = sharedEtcd.Delete(ctx, keys.Instance(e.sc, "wc", "i1"))
	_, _ = sharedEtcd.Delete(ctx, keys.Service(e.sc, "wc", "api"))
}
