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

// TestStuckDeploymentShowsBothDeployments is issue 12's deployment that cannot make
// progress: desired 1, minimumHealthyPercent 50 (rounded up: 1 task must stay running),
// maximumPercent 100 (rounded down: at most 1 task), on a host with room for one task.
// As on AWS the old task is never stopped and no new one starts; deployments[] shows the
// PRIMARY deployment IN_PROGRESS with desiredCount 1 and nothing running, and the ACTIVE
// one still running its task.
func TestStuckDeploymentShowsBothDeployments(t *testing.T) {
	if MinHealthy(1, 50) != 1 || MaxTotal(1, 100) != 1 || MinHealthy(3, 50) != 2 || MaxTotal(3, 150) != 4 {
		t.Fatalf("rounding: min %d max %d min %d max %d", MinHealthy(1, 50), MaxTotal(1, 100), MinHealthy(3, 50), MaxTotal(3, 150))
	}
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 256, 256)
	td1 := e.taskDef("stuck", "img:1", 256, 256, false)
	td2 := e.taskDef("stuck", "img:2", 256, 256, false)
	dc := &ecsv1.DeploymentConfiguration{MinimumHealthyPercent: proto.Int32(50), MaximumPercent: proto.Int32(100)}
	e.createService("stuck", td1, 1, dc)
	e.settle("stuck", 10)
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("stuck"), TaskDefinition: proto.String(td2)})
	for range 5 {
		e.step()
		e.clock.Advance(time.Minute)
	}
	s := e.service("stuck")
	if n := e.count("stuck"); n.byTD[td1] != 1 || n.byTD[td2] != 0 {
		t.Fatalf("tasks by definition %v: the old task must keep running and no new one start", n.byTD)
	}
	if s.GetRunningCount() != 1 || s.GetDesiredCount() != 1 || len(s.GetDeployments()) != 2 {
		t.Fatalf("service running %d desired %d deployments %v", s.GetRunningCount(), s.GetDesiredCount(), s.GetDeployments())
	}
	p, a := s.GetDeployments()[0], s.GetDeployments()[1]
	if p.GetStatus() != DeploymentPrimary || p.GetTaskDefinition() != td2 || p.GetDesiredCount() != 1 || p.GetRunningCount() != 0 ||
		p.GetPendingCount() != 0 || p.GetRolloutState() != RolloutInProgress {
		t.Fatalf("PRIMARY %v", p)
	}
	if a.GetStatus() != DeploymentActive || a.GetTaskDefinition() != td1 || a.GetDesiredCount() != 1 || a.GetRunningCount() != 1 {
		t.Fatalf("ACTIVE %v", a)
	}
}

// TestUnknownClusterServiceCalls: the service calls naming a cluster that does not exist
// answer ClusterNotFoundException, as AWS does (UpdateService and DeleteService too).
func TestUnknownClusterServiceCalls(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	for _, ref := range []string{"nope", "arn:aws:ecs:us-east-1:" + e.acc + ":cluster/nope"} {
		c := proto.String(ref)
		_, err := call(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: c, Services: []string{"web"}})
		wantErr(t, err, "ClusterNotFoundException")
		_, err = call(e, e.h.ListServices, &ecsv1.ListServicesRequest{Cluster: c})
		wantErr(t, err, "ClusterNotFoundException")
		_, err = call(e, e.h.ListServiceDeployments, &ecsv1.ListServiceDeploymentsRequest{Cluster: c, Service: proto.String("web")})
		wantErr(t, err, "ClusterNotFoundException")
		_, err = call(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: c, Service: proto.String("web"), DesiredCount: proto.Int32(1)})
		wantErr(t, err, "ClusterNotFoundException")
		_, err = call(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: c, Service: proto.String("web")})
		wantErr(t, err, "ClusterNotFoundException")
	}
}

// TestUnknownTaskDefinitionIsClientException: CreateService and UpdateService naming a
// task definition that does not exist answer ClientException "TaskDefinition not found.",
// as AWS answers CreateService.
func TestUnknownTaskDefinitionIsClientException(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	td := e.taskDef("known", "img", 128, 128, false)
	_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("web"), TaskDefinition: proto.String("unknown:7"), DesiredCount: proto.Int32(1),
	})
	wantErr(t, err, "ClientException")
	if err.Message != "TaskDefinition not found." {
		t.Fatalf("message %q", err.Message)
	}
	e.createService("web", td, 0, nil)
	_, err = call(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String("unknown")})
	wantErr(t, err, "ClientException")
}
