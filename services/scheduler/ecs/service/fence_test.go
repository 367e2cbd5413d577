package service

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// The reconciler as the app runs it: its client is the term's fenced client
// (leader.Term.Client, no Fence compares of its own). While it leads it launches; once
// deposed, neither a launch (placement commit) nor a stop gets written.
func TestDeposedReconcilerWritesNothing(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	elect := keys.Election("scheduler") + e.acc
	put, err := sharedEtcd.Put(context.Background(), elect, "me")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sharedEtcd.Delete(context.Background(), elect) })
	term := leader.Term{Key: elect, Rev: put.Header.Revision}
	p := placement.NewPlacer(sharedEtcd, nil, placement.WithoutCache())
	t.Cleanup(p.Close)
	e.r = NewReconciler(ReconcilerConfig{Client: term.Client(sharedEtcd), Placer: p, Now: e.clock.Now, StableAfter: -1})

	e.host("h1", 4096, 4096)
	td := e.taskDef("f", "img", 128, 128, false)
	e.createService("f", td, 1, nil)
	e.settle("f", 10)

	if _, err := sharedEtcd.Delete(context.Background(), elect); err != nil {
		t.Fatal(err)
	}
	for _, desired := range []int32{3, 0} {
		must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String(e.cluster), Service: proto.String("f"), DesiredCount: proto.Int32(desired)})
		if err := e.r.Pass(context.Background()); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("desired %d: deposed Pass: %v, want ErrFenced", desired, err)
		}
		c := e.count("f")
		if c.total != 1 || c.healthy != 1 {
			t.Fatalf("desired %d: %d live tasks (%d healthy) after a deposed pass, want the 1 running", desired, c.total, c.healthy)
		}
		for _, rec := range e.tasks() {
			if rec.GetTask().GetDesiredStatus() != "RUNNING" {
				t.Fatalf("desired %d: a deposed pass stopped task %s", desired, rec.GetTask().GetTaskArn())
			}
		}
	}
}
