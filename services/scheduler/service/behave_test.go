package service

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestSecondUpdateDuringRolloutKeepsRunning is issue 12's "a second update during a
// rollout can take a service to zero": 2 RUNNING tasks of a first rollout that has not
// completed yet (RUNNING for less than StableAfter), minimumHealthyPercent 100, then an
// update to an image that cannot be pulled, then another. The running count must never
// fall below desired because of a deployment, and the older deployments stay listed while
// their tasks run.
func TestSecondUpdateDuringRolloutKeepsRunning(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{StableAfter: DefaultStableAfter})
	e.host("h1", 8192, 8192)
	good := e.taskDef("web", "good", 128, 128, false)
	bad := e.taskDef("web", "unpullable", 128, 128, false)
	bad2 := e.taskDef("web", "unpullable2", 128, 128, false)
	e.behave = func(t *ecsv1.Task) string {
		if t.GetTaskDefinitionArn() == good {
			return "run"
		}
		return "crash" // the pull fails: STOPPED without ever running
	}
	dc := &ecsv1.DeploymentConfiguration{MinimumHealthyPercent: proto.Int32(100), MaximumPercent: proto.Int32(200)}
	e.createService("web", good, 2, dc)
	e.step() // launch, RUNNING
	e.clock.Advance(time.Second)
	s := e.service("web")
	if s.GetRunningCount() != 2 || s.GetDeployments()[0].GetRolloutState() != RolloutInProgress {
		t.Fatalf("setup: running %d deployments %v", s.GetRunningCount(), s.GetDeployments())
	}
	firstID := s.GetDeployments()[0].GetId()
	check := func(when string) {
		t.Helper()
		if n := e.count("web"); n.healthyByTD[good] < 2 {
			t.Fatalf("%s: %d running tasks of the working revision, want 2 (by definition %v)", when, n.healthyByTD[good], n.byTD)
		}
		s := e.service("web")
		if s.GetRunningCount() < 2 {
			t.Fatalf("%s: runningCount %d", when, s.GetRunningCount())
		}
		if findDeployment(s, firstID) == nil {
			t.Fatalf("%s: the first deployment vanished while its tasks run: %v", when, s.GetDeployments())
		}
	}
	for i, td := range []string{bad, bad2} {
		must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(td)})
		for j := range 6 {
			e.pass()
			check("after pass")
			e.agent()
			check("after agent")
			e.clock.Advance(time.Duration(i*6+j) * 100 * time.Millisecond)
		}
	}
}
