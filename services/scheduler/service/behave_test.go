package service

import (
	"slices"
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

// TestDaemonRefusesDesiredCount: CreateService and UpdateService with a desiredCount for a
// DAEMON service are InvalidParameterException with AWS's message, not a value silently
// dropped.
func TestDaemonRefusesDesiredCount(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	td := e.taskDef("mon", "img", 128, 128, false)
	for _, n := range []int32{0, 2} {
		_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
			Cluster: proto.String("c1"), ServiceName: proto.String("mon"), TaskDefinition: proto.String(td),
			SchedulingStrategy: proto.String("DAEMON"), DesiredCount: proto.Int32(n),
		})
		wantErr(t, err, "InvalidParameterException")
		if err.Message != "The daemon scheduling strategy does not support a desired count for services. Remove the desired count value and try again" {
			t.Fatalf("message %q", err.Message)
		}
	}
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("mon"), TaskDefinition: proto.String(td), SchedulingStrategy: proto.String("DAEMON"),
	})
	_, err := call(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("mon"), DesiredCount: proto.Int32(3)})
	wantErr(t, err, "InvalidParameterException")
	if err.Message != "The daemon scheduling strategy does not support a desired count for services. Remove the desired count value and try again" {
		t.Fatalf("message %q", err.Message)
	}
	// Without a desiredCount the update goes through.
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("mon"), ForceNewDeployment: true})
}

// TestListServicesActiveOnlyFullPages: DRAINING (and INACTIVE) services are not listed, and
// the filters apply before paging: every page but the last holds maxResults ARNs, and the
// last page has no nextToken.
func TestListServicesActiveOnlyFullPages(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	td := e.taskDef("ls", "img", 128, 128, false)
	var want []string
	for i, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		e.createService(n, td, 0, nil)
		if i%3 == 1 {
			must(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String(n)})
			continue
		}
		want = append(want, "arn:aws:ecs:us-east-1:"+e.acc+":service/c1/"+n)
	}
	if s := e.service("b"); s.GetStatus() != StatusDraining {
		t.Fatalf("b is %s, want DRAINING", s.GetStatus())
	}
	var got []string
	token := ""
	for page := 0; ; page++ {
		req := &ecsv1.ListServicesRequest{Cluster: proto.String("c1"), MaxResults: proto.Int32(3)}
		if token != "" {
			req.NextToken = proto.String(token)
		}
		r := must(e, e.h.ListServices, req)
		got = append(got, r.GetServiceArns()...)
		if r.GetNextToken() == "" {
			break
		}
		if len(r.GetServiceArns()) != 3 {
			t.Fatalf("page %d holds %d ARNs and a nextToken: %v", page, len(r.GetServiceArns()), r.GetServiceArns())
		}
		token = r.GetNextToken()
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListServices %v, want %v", got, want)
	}
	// The whole list in one page: no nextToken when nothing follows.
	r := must(e, e.h.ListServices, &ecsv1.ListServicesRequest{Cluster: proto.String("c1"), MaxResults: proto.Int32(int32(len(want)))})
	if !slices.Equal(r.GetServiceArns(), want) || r.GetNextToken() != "" {
		t.Fatalf("one page: %v token %q", r.GetServiceArns(), r.GetNextToken())
	}
}
