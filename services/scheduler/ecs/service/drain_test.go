package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestDeletedServiceDrainingUntilTasksStop: a force-deleted service stays DRAINING, in
// DeleteService's answer and in DescribeServices after any number of reconcile passes,
// while its tasks are desired STOPPED but not yet reported STOPPED by their agent; it
// becomes INACTIVE only in the pass after the last task stopped, as on ECS.
func TestDeletedServiceDrainingUntilTasksStop(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td := e.taskDef("web", "img:1", 256, 256, false)
	e.createService("web", td, 2, nil)
	e.settle("web", 10)
	d := must(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), Force: proto.Bool(true)}).GetService()
	if d.GetStatus() != "DRAINING" {
		t.Fatalf("DeleteService answered %s", d.GetStatus())
	}
	for i := range 3 {
		e.pass() // the reconciler stops the tasks; no agent reports them STOPPED
		s := e.service("web")
		if s.GetStatus() != "DRAINING" {
			t.Fatalf("pass %d: status %s while %d tasks are not STOPPED", i, s.GetStatus(), e.count("web").total)
		}
	}
	stopping := 0
	for _, rec := range e.tasks() {
		if tk := rec.GetTask(); tk.GetDesiredStatus() == "STOPPED" && tk.GetLastStatus() != "STOPPED" {
			stopping++
		}
	}
	if stopping != 2 {
		t.Fatalf("%d tasks stopping, want 2", stopping)
	}
	e.agent() // the agent reports both STOPPED
	e.pass()
	if s := e.service("web"); s.GetStatus() != "INACTIVE" {
		t.Fatalf("after the tasks stopped: status %s", s.GetStatus())
	}
}
