package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestPlanMath(t *testing.T) {
	for _, c := range []struct {
		desired, minPct, maxPct int32
		minH, maxT              int
	}{
		{4, 100, 200, 4, 8},
		{4, 50, 100, 2, 4},
		{3, 50, 100, 2, 3}, // 1.5 rounds up
		{3, 0, 150, 0, 4},  // 4.5 rounds down
		{5, 75, 125, 4, 6}, // 3.75 up, 6.25 down
		{1, 50, 200, 1, 2}, // 0.5 rounds up
		{0, 100, 200, 0, 0},
	} {
		if got := MinHealthy(c.desired, c.minPct); got != c.minH {
			t.Errorf("MinHealthy(%d, %d) = %d, want %d", c.desired, c.minPct, got, c.minH)
		}
		if got := MaxTotal(c.desired, c.maxPct); got != c.maxT {
			t.Errorf("MaxTotal(%d, %d) = %d, want %d", c.desired, c.maxPct, got, c.maxT)
		}
	}
	for _, c := range []struct {
		desired int32
		want    int
	}{{1, 10}, {20, 10}, {21, 11}, {100, 50}, {399, 200}, {1000, 200}} {
		if got := BreakerThreshold(c.desired, DefaultBreakerMinThreshold); got != c.want {
			t.Errorf("BreakerThreshold(%d) = %d, want %d", c.desired, got, c.want)
		}
	}
	if got := BreakerThreshold(2, 3); got != 3 {
		t.Errorf("BreakerThreshold(2, min 3) = %d", got)
	}
	want := []time.Duration{0, 0, 0, 5 * time.Second, 10 * time.Second, 20 * time.Second}
	for n, w := range want {
		if got := LaunchDelay(n, DefaultBackoffAfter, DefaultBackoffBase, DefaultBackoffCap); got != w {
			t.Errorf("LaunchDelay(%d) = %v, want %v", n, got, w)
		}
	}
	if got := LaunchDelay(30, DefaultBackoffAfter, DefaultBackoffBase, DefaultBackoffCap); got != 27*time.Minute {
		t.Errorf("LaunchDelay(30) = %v, want the 27m cap", got)
	}
	// With the defaults a task that never starts is launched 10 times in about 10 minutes.
	var total time.Duration
	for n := 1; n < 10; n++ {
		total += LaunchDelay(n, DefaultBackoffAfter, DefaultBackoffBase, DefaultBackoffCap)
	}
	if total > 11*time.Minute {
		t.Errorf("10 launches take %v", total)
	}
}

func TestEventsNewestFirstCapped(t *testing.T) {
	s := &ecsv1.Service{}
	for i := range 150 {
		ev := &events{svc: "web", now: time.Unix(int64(i), 0)}
		ev.add("msg " + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		ev.apply(s)
	}
	if len(s.Events) != MaxEvents {
		t.Fatalf("%d events, want %d", len(s.Events), MaxEvents)
	}
	if s.Events[0].GetCreatedAt() != 149 || s.Events[99].GetCreatedAt() != 50 {
		t.Fatalf("events not newest first: first %v last %v", s.Events[0].GetCreatedAt(), s.Events[99].GetCreatedAt())
	}
	// A repeat of the newest message is not added again.
	ev := &events{svc: "web", now: time.Unix(200, 0)}
	ev.add(s.Events[0].GetMessage())
	ev.apply(s)
	if s.Events[0].GetCreatedAt() != 149 {
		t.Fatal("repeated message was added")
	}
}

func TestCreateServiceValidation(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	td := e.taskDef("web", "img", 128, 128, false)
	for _, c := range []struct {
		name string
		req  *ecsv1.CreateServiceRequest
		typ  string
	}{
		{"no name", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1)}, "InvalidParameterException"},
		{"bad name", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("a/b"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1)}, "InvalidParameterException"},
		{"no count", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("s"), TaskDefinition: proto.String(td)}, "InvalidParameterException"},
		{"negative", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("s"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(-1)}, "InvalidParameterException"},
		{"unknown td", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("s"), TaskDefinition: proto.String("nope"), DesiredCount: proto.Int32(1)}, "ClientException"}, // AWS: ClientException "TaskDefinition not found."
		{"no cluster", &ecsv1.CreateServiceRequest{Cluster: proto.String("nope"), ServiceName: proto.String("s"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1)}, "ClusterNotFoundException"},
		{"min > 100", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("s"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1),
			DeploymentConfiguration: &ecsv1.DeploymentConfiguration{MinimumHealthyPercent: proto.Int32(101)}}, "InvalidParameterException"},
		{"bad constraint", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("s"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1),
			PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("memberOf"), Expression: proto.String("attribute:x ==")}}}, "InvalidParameterException"},
		{"daemon strategy", &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("s"), TaskDefinition: proto.String(td), SchedulingStrategy: proto.String("DAEMON"),
			PlacementStrategy: []*ecsv1.PlacementStrategy{{Type: proto.String("random")}}}, "InvalidParameterException"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := call(e, e.h.CreateService, c.req)
			wantErr(t, err, c.typ)
		})
	}
	if _, err := call(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String("c1")}); err == nil {
		t.Fatal("DescribeServices without services succeeded")
	}
}

// TestNegativeGracePeriodRefused: a negative healthCheckGracePeriodSeconds (AWS allows 0
// to 2,147,483,647) is refused by CreateService and UpdateService with an
// InvalidParameterException naming the field, and nothing is stored.
func TestNegativeGracePeriodRefused(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	td := e.taskDef("gp", "img", 128, 128, false)
	_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("gp"),
		TaskDefinition: proto.String(td), DesiredCount: proto.Int32(0), HealthCheckGracePeriodSeconds: proto.Int32(-1)})
	wantErr(t, err, "InvalidParameterException")
	if !strings.Contains(err.Message, "healthCheckGracePeriodSeconds") {
		t.Fatalf("error does not name the field: %v", err)
	}
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("gp"),
		TaskDefinition: proto.String(td), DesiredCount: proto.Int32(0), HealthCheckGracePeriodSeconds: proto.Int32(30)})
	_, err = call(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("gp"),
		HealthCheckGracePeriodSeconds: proto.Int32(-1)})
	wantErr(t, err, "InvalidParameterException")
	if !strings.Contains(err.Message, "healthCheckGracePeriodSeconds") {
		t.Fatalf("error does not name the field: %v", err)
	}
	out := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String("c1"), Services: []string{"gp"}})
	if g := out.GetServices()[0].GetHealthCheckGracePeriodSeconds(); g != 30 {
		t.Fatalf("grace period after refused update = %d, want 30", g)
	}
}

func TestCreateDescribeUpdateDelete(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td1 := e.taskDef("web", "img:1", 256, 256, false)
	s := e.createService("web", td1, 2, nil)
	if s.GetStatus() != "ACTIVE" || s.GetDesiredCount() != 2 || len(s.GetDeployments()) != 1 ||
		s.GetDeployments()[0].GetStatus() != "PRIMARY" || s.GetDeployments()[0].GetRolloutState() != "IN_PROGRESS" {
		t.Fatalf("created service: %v", s)
	}
	if dc := s.GetDeploymentConfiguration(); dc.GetMinimumHealthyPercent() != 100 || dc.GetMaximumPercent() != 200 {
		t.Fatalf("default deployment configuration: %v", dc)
	}
	if len(deploymentNumber(s.GetDeployments()[0].GetId())) != 19 {
		t.Fatalf("deployment id %q", s.GetDeployments()[0].GetId())
	}
	if s.GetServiceArn() != "arn:aws:ecs:us-east-1:"+e.acc+":service/c1/web" {
		t.Fatalf("arn %s", s.GetServiceArn())
	}
	_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String("c1"), ServiceName: proto.String("web"), TaskDefinition: proto.String(td1), DesiredCount: proto.Int32(1)})
	wantErr(t, err, "InvalidParameterException")
	if c := must(e, e.ctl.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"c1"}}).GetClusters()[0]; c.GetActiveServicesCount() != 1 {
		t.Fatalf("activeServicesCount %d", c.GetActiveServicesCount())
	}

	s = e.settle("web", 10)
	if s.GetRunningCount() != 2 || !hasEvent(s, "(service web) has reached a steady state.") || !hasEvent(s, "(service web) has started 2 tasks: (task ") {
		t.Fatalf("settled service: running %d events %v", s.GetRunningCount(), s.GetEvents())
	}
	for _, rec := range e.tasks() {
		tk := rec.GetTask()
		if tk.GetStartedBy() != s.GetDeployments()[0].GetId() || tk.GetGroup() != "service:web" {
			t.Fatalf("task startedBy %q group %q", tk.GetStartedBy(), tk.GetGroup())
		}
	}
	if s.GetEvents()[0].GetMessage() != "(service web) has reached a steady state." {
		t.Fatalf("newest event %q", s.GetEvents()[0].GetMessage())
	}
	// Counters agree with the task records, on the service and the cluster.
	c := e.count("web")
	cl := must(e, e.ctl.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"c1"}}).GetClusters()[0]
	if int(s.GetRunningCount()) != c.healthy || int(cl.GetRunningTasksCount()) != c.healthy {
		t.Fatalf("service running %d cluster running %d tasks %d", s.GetRunningCount(), cl.GetRunningTasksCount(), c.healthy)
	}

	// ListServices and the filters.
	l := must(e, e.h.ListServices, &ecsv1.ListServicesRequest{Cluster: proto.String("c1")})
	if len(l.GetServiceArns()) != 1 || l.GetServiceArns()[0] != s.GetServiceArn() {
		t.Fatalf("ListServices %v", l.GetServiceArns())
	}
	if l := must(e, e.h.ListServices, &ecsv1.ListServicesRequest{Cluster: proto.String("c1"), SchedulingStrategy: proto.String("DAEMON")}); len(l.GetServiceArns()) != 0 {
		t.Fatalf("ListServices DAEMON %v", l.GetServiceArns())
	}

	// Update to a new revision: a new PRIMARY deployment, the old one ACTIVE.
	td2 := e.taskDef("web", "img:2", 256, 256, false)
	u := must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(td2)}).GetService()
	if len(u.GetDeployments()) != 2 || u.GetDeployments()[0].GetStatus() != "PRIMARY" || u.GetDeployments()[1].GetStatus() != "ACTIVE" || u.GetTaskDefinition() != td2 {
		t.Fatalf("updated deployments %v", u.GetDeployments())
	}
	s = e.settle("web", 20)
	if c := e.count("web"); c.byTD[td2] != 2 || c.byTD[td1] != 0 {
		t.Fatalf("after update tasks by definition %v", c.byTD)
	}
	if !hasEvent(s, "deployment completed.") {
		t.Fatalf("events %v", s.GetEvents())
	}
	deps := must(e, e.h.ListServiceDeployments, &ecsv1.ListServiceDeploymentsRequest{Cluster: proto.String("c1"), Service: proto.String("web")}).GetServiceDeployments()
	if len(deps) != 2 || deps[0].GetStatus() != "SUCCESSFUL" || deps[1].GetStatus() != "SUCCESSFUL" {
		t.Fatalf("ListServiceDeployments %v", deps)
	}
	sd := must(e, e.h.DescribeServiceDeployments, &ecsv1.DescribeServiceDeploymentsRequest{ServiceDeploymentArns: []string{deps[0].GetServiceDeploymentArn(), "arn:aws:ecs:us-east-1:" + e.acc + ":service-deployment/c1/web/1"}})
	if len(sd.GetServiceDeployments()) != 1 || len(sd.GetFailures()) != 1 || sd.GetServiceDeployments()[0].GetTargetServiceRevision().GetRunningTaskCount() != 2 {
		t.Fatalf("DescribeServiceDeployments %v", sd)
	}
	rv := must(e, e.h.DescribeServiceRevisions, &ecsv1.DescribeServiceRevisionsRequest{ServiceRevisionArns: []string{deps[0].GetTargetServiceRevisionArn()}})
	if len(rv.GetServiceRevisions()) != 1 || rv.GetServiceRevisions()[0].GetTaskDefinition() != td2 {
		t.Fatalf("DescribeServiceRevisions %v", rv)
	}

	// DeleteService: refused while scaled above 0, then forced.
	_, err = call(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web")})
	wantErr(t, err, "InvalidParameterException")
	d := must(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), Force: proto.Bool(true)}).GetService()
	if d.GetStatus() != "DRAINING" || d.GetDesiredCount() != 0 {
		t.Fatalf("deleted service %v", d)
	}
	if c := must(e, e.ctl.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"c1"}}).GetClusters()[0]; c.GetActiveServicesCount() != 0 {
		t.Fatalf("activeServicesCount after delete %d", c.GetActiveServicesCount())
	}
	_, err = call(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), DesiredCount: proto.Int32(3)})
	wantErr(t, err, "ServiceNotActiveException")
	for range 5 {
		e.step()
	}
	s = e.service("web")
	if s.GetStatus() != "INACTIVE" || s.GetRunningCount() != 0 || e.count("web").total != 0 {
		t.Fatalf("after delete: status %s running %d", s.GetStatus(), s.GetRunningCount())
	}
	if l := must(e, e.h.ListServices, &ecsv1.ListServicesRequest{Cluster: proto.String("c1")}); len(l.GetServiceArns()) != 0 {
		t.Fatalf("ListServices after delete %v", l.GetServiceArns())
	}
	_, err = call(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web")})
	wantErr(t, err, "ServiceNotFoundException")
	// A service of the same name can be created again once INACTIVE.
	e.createService("web", td1, 0, nil)
	// An INACTIVE service is deleted after the retention.
	must(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web")})
	e.pass()
	e.clock.Advance(2 * time.Hour)
	e.pass()
	e.pass()
	r := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String("c1"), Services: []string{"web"}})
	if len(r.GetServices()) != 0 || len(r.GetFailures()) != 1 || r.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("after retention: %v", r)
	}
}

func TestScaleAndReplace(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	e.host("h2", 4096, 4096)
	td := e.taskDef("app", "img", 256, 256, false)
	e.createService("app", td, 2, nil)
	e.settle("app", 10)
	for _, n := range []int32{5, 1, 3} {
		must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("app"), DesiredCount: proto.Int32(n)})
		s := e.settle("app", 10)
		if c := e.count("app"); c.total != int(n) || s.GetRunningCount() != n {
			t.Fatalf("desired %d: %d live tasks, running %d", n, c.total, s.GetRunningCount())
		}
	}
	// A task whose container dies is replaced.
	var victim *storev1.TaskRecord
	for _, rec := range e.tasks() {
		if rec.GetTask().GetLastStatus() == "RUNNING" {
			victim = rec
			break
		}
	}
	e.kill(victim)
	e.pass()
	s := e.service("app")
	if c := e.count("app"); c.total != 3 {
		t.Fatalf("after kill and pass: %d live tasks", c.total)
	}
	if !hasEvent(s, "(service app) has started 1 tasks: (task ") {
		t.Fatalf("events %v", s.GetEvents())
	}
	s = e.settle("app", 5)
	if s.GetDeployments()[0].GetFailedTasks() != 1 {
		t.Fatalf("failedTasks %d, want 1", s.GetDeployments()[0].GetFailedTasks())
	}
}

func TestRollingUpdateInvariants(t *testing.T) {
	for _, c := range []struct{ minPct, maxPct int32 }{{100, 200}, {50, 100}, {0, 100}} {
		t.Run("", func(t *testing.T) {
			e := newEnv(t, ReconcilerConfig{})
			e.host("h1", 8192, 8192)
			e.host("h2", 8192, 8192)
			const desired = 4
			td1 := e.taskDef("roll", "img:1", 256, 256, true)
			td2 := e.taskDef("roll", "img:2", 256, 256, true)
			dc := &ecsv1.DeploymentConfiguration{MinimumHealthyPercent: proto.Int32(c.minPct), MaximumPercent: proto.Int32(c.maxPct)}
			e.createService("roll", td1, desired, dc)
			e.settle("roll", 10)
			must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("roll"), TaskDefinition: proto.String(td2)})
			minH, maxT := MinHealthy(desired, c.minPct), MaxTotal(desired, c.maxPct)
			check := func(when string) counts {
				n := e.count("roll")
				if n.healthy < minH || n.total > maxT {
					t.Fatalf("(%d,%d) %s: %d healthy (min %d), %d total (max %d)", c.minPct, c.maxPct, when, n.healthy, minH, n.total, maxT)
				}
				return n
			}
			done := false
			for i := 0; i < 30 && !done; i++ {
				e.pass()
				check("after pass")
				e.agent()
				n := check("after agent")
				t.Logf("step %d: healthy %d total %d by definition %v", i, n.healthy, n.total, n.byTD)
				s := e.service("roll")
				done = n.healthyByTD[td2] == desired && n.byTD[td1] == 0 && len(s.GetDeployments()) == 1 && s.GetDeployments()[0].GetRolloutState() == "COMPLETED"
			}
			if !done {
				t.Fatalf("(%d,%d): rollout did not finish: %v", c.minPct, c.maxPct, e.count("roll"))
			}
		})
	}
}

func TestDrainReplacesWithinBounds(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	h1 := e.host("h1", 4096, 4096)
	e.host("h2", 4096, 4096)
	td := e.taskDef("d", "img", 256, 256, false)
	// Spread by instance so both hosts hold tasks.
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("d"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(4),
		PlacementStrategy: []*ecsv1.PlacementStrategy{{Type: proto.String("spread"), Field: proto.String("instanceId")}},
	})
	e.settle("d", 10)
	onH1 := 0
	for _, rec := range e.tasks() {
		if instanceARN(e, rec) == h1 && rec.GetTask().GetLastStatus() == "RUNNING" {
			onH1++
		}
	}
	if onH1 == 0 {
		t.Fatal("no task on h1 to drain")
	}
	e.drain(h1, "DRAINING")
	for range 10 {
		e.pass()
		if n := e.count("d"); n.healthy < 4 || n.total > 8 {
			t.Fatalf("during drain: %d healthy, %d total", n.healthy, n.total)
		}
		e.agent()
		if n := e.count("d"); n.healthy < 4 || n.total > 8 {
			t.Fatalf("during drain: %d healthy, %d total", n.healthy, n.total)
		}
	}
	for _, rec := range e.tasks() {
		if instanceARN(e, rec) == h1 && rec.GetTask().GetLastStatus() != "STOPPED" {
			t.Fatalf("task %s still on the draining instance", rec.GetTask().GetTaskArn())
		}
		if instanceARN(e, rec) == h1 && rec.GetTask().GetStoppedReason() != ReasonDraining {
			t.Fatalf("stopped reason %q", rec.GetTask().GetStoppedReason())
		}
	}
	if n := e.count("d"); n.healthy != 4 {
		t.Fatalf("after drain: %d healthy", n.healthy)
	}
}

func TestUnhealthyTasksReplaced(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td := e.taskDef("hc", "img", 256, 256, true)
	sick := true
	e.behave = func(*ecsv1.Task) string {
		if sick {
			return "unhealthy"
		}
		return "run"
	}
	e.createService("hc", td, 1, nil)
	e.step()
	e.pass() // sees UNHEALTHY, stops it
	stopped := 0
	for _, rec := range e.tasks() {
		if rec.GetTask().GetStoppedReason() == ReasonUnhealthy && rec.GetTask().GetStopCode() == StopCodeScheduler {
			stopped++
		}
	}
	if stopped != 1 {
		t.Fatalf("%d tasks stopped for health checks", stopped)
	}
	sick = false
	s := e.settle("hc", 10)
	if !hasEvent(s, "failed container health checks") || s.GetDeployments()[0].GetFailedTasks() < 1 {
		t.Fatalf("events %v failed %d", s.GetEvents(), s.GetDeployments()[0].GetFailedTasks())
	}
}

func TestCircuitBreakerRollsBack(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 8192, 8192)
	good := e.taskDef("cb", "good", 128, 128, false)
	bad := e.taskDef("cb", "crash", 128, 128, false)
	e.behave = func(t *ecsv1.Task) string {
		if t.GetTaskDefinitionArn() == bad {
			return "crash"
		}
		return "run"
	}
	dc := &ecsv1.DeploymentConfiguration{DeploymentCircuitBreaker: &ecsv1.DeploymentCircuitBreaker{Enable: true, Rollback: true}}
	e.createService("cb", good, 2, dc)
	first := e.settle("cb", 10).GetDeployments()[0].GetId()
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("cb"), TaskDefinition: proto.String(bad)})
	failedID := e.service("cb").GetDeployments()[0].GetId()
	rolled := false
	for i := 0; i < 60 && !rolled; i++ {
		e.step()
		e.clock.Advance(DefaultBackoffCap) // past any launch backoff
		s := e.service("cb")
		if p := s.GetDeployments()[0]; p.GetId() != failedID {
			rolled = true
			if p.GetTaskDefinition() != good {
				t.Fatalf("rollback deployment runs %s", p.GetTaskDefinition())
			}
		}
		// The old tasks keep serving while the new ones crash (min 100%).
		if n := e.count("cb"); n.healthyByTD[good] < 2 {
			t.Fatalf("healthy good tasks %d", n.healthyByTD[good])
		}
	}
	if !rolled {
		t.Fatalf("breaker did not trip: %v", e.service("cb").GetDeployments())
	}
	s := e.settle("cb", 20)
	if s.GetTaskDefinition() != good || !hasEvent(s, "(deployment "+failedID+") deployment failed: tasks failed to start.") || !hasEvent(s, "rolling back to deployment "+first) {
		t.Fatalf("after rollback: td %s events %v", s.GetTaskDefinition(), s.GetEvents())
	}
	deps := must(e, e.h.ListServiceDeployments, &ecsv1.ListServiceDeploymentsRequest{Cluster: proto.String("c1"), Service: proto.String("cb")}).GetServiceDeployments()
	if len(deps) != 3 || deps[0].GetStatus() != "ROLLBACK_SUCCESSFUL" || deps[1].GetStatus() != "STOPPED" {
		t.Fatalf("deployments %v", deps)
	}
	var failed *storev1.ServiceRecord
	failed, _, _ = store.Get[*storev1.ServiceRecord](context.Background(), sharedEtcd, keys.Service(e.sc, "c1", "cb"))
	if d := findDeployment(failed.GetService(), failedID); d.GetRolloutState() != "FAILED" || int(d.GetFailedTasks()) < BreakerThreshold(2, DefaultBreakerMinThreshold) {
		t.Fatalf("failed deployment %v", d)
	}
}

func TestLaunchBackoffWithoutBreaker(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 8192, 8192)
	td := e.taskDef("loop", "crash", 128, 128, false)
	crash := true
	e.behave = func(*ecsv1.Task) string {
		if crash {
			return "crash"
		}
		return "run"
	}
	e.createService("loop", td, 1, nil)
	key := keys.Service(e.sc, "c1", "loop")
	launches := func() int { return len(e.tasks()) }
	for i := 0; launches() < 20; i++ {
		if i > 100 {
			t.Fatal("no progress")
		}
		e.pass()  // launches when allowed, or records the failure and the next launch time
		e.agent() // the task crashes
		rec, _, err := store.Get[*storev1.ServiceRecord](context.Background(), sharedEtcd, key)
		if err != nil {
			t.Fatal(err)
		}
		next := deploymentRecord(rec, primary(rec.GetService()).GetId()).GetNextLaunchAt()
		if next == nil || !e.clock.Now().Before(next.AsTime()) {
			continue
		}
		// Just before the next launch time nothing starts.
		e.clock.Advance(next.AsTime().Sub(e.clock.Now()) - time.Second)
		before := launches()
		e.pass()
		if launches() != before {
			t.Fatalf("a task started inside the backoff, %v before %v", e.clock.Now(), next.AsTime())
		}
		e.clock.Advance(time.Second)
	}
	var created []float64
	for _, rec := range e.tasks() {
		created = append(created, rec.GetTask().GetCreatedAt())
	}
	slices.Sort(created)
	var gaps []time.Duration
	for i := 1; i < len(created); i++ {
		gaps = append(gaps, time.Duration((created[i]-created[i-1])*1000)*time.Millisecond)
	}
	for i := 1; i < len(gaps); i++ {
		if gaps[i] < gaps[i-1] {
			t.Fatalf("gaps shrink: %v", gaps)
		}
	}
	if gaps[0] != 0 || gaps[len(gaps)-1] != DefaultBackoffCap || gaps[len(gaps)-2] != DefaultBackoffCap {
		t.Fatalf("gaps do not grow to the cap: %v", gaps)
	}
	s := e.service("loop")
	if !hasEvent(s, "(service loop) is unable to consistently start tasks successfully.") {
		t.Fatalf("events %v", s.GetEvents())
	}
	// A successful start resets the backoff.
	crash = false
	e.pass() // records the last failure
	e.clock.Advance(DefaultBackoffCap)
	e.pass() // launches
	e.agent()
	e.pass()
	rec, _, _ := store.Get[*storev1.ServiceRecord](context.Background(), sharedEtcd, key)
	if dr := deploymentRecord(rec, primary(rec.GetService()).GetId()); dr.GetFailedLaunches() != 0 || dr.NextLaunchAt != nil {
		t.Fatalf("backoff not reset: %v", dr)
	}
	t.Logf("launch gaps: %v", gaps)
}

func TestDaemonFollowsInstances(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	zone := func(z string) *ecsv1.Attribute {
		return &ecsv1.Attribute{Name: proto.String("zone"), Value: proto.String(z)}
	}
	h1 := e.host("h1", 4096, 4096, zone("a"))
	e.host("h2", 4096, 4096, zone("a"))
	e.host("h3", 4096, 4096, zone("b"))
	td := e.taskDef("mon", "img", 128, 128, false)
	s := must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("mon"), TaskDefinition: proto.String(td),
		SchedulingStrategy:   proto.String("DAEMON"),
		PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("memberOf"), Expression: proto.String("attribute:zone == a")}},
	}).GetService()
	if dc := s.GetDeploymentConfiguration(); dc.GetMinimumHealthyPercent() != 0 || dc.GetMaximumPercent() != 100 {
		t.Fatalf("DAEMON defaults %v", dc)
	}
	perInstance := func() map[string]int {
		m := map[string]int{}
		for _, rec := range e.tasks() {
			if rec.GetTask().GetLastStatus() != "STOPPED" {
				m[instanceARN(e, rec)]++
			}
		}
		return m
	}
	s = e.settle("mon", 10)
	if s.GetDesiredCount() != 2 || len(perInstance()) != 2 {
		t.Fatalf("DAEMON on 2 zone-a instances: desired %d tasks %v", s.GetDesiredCount(), perInstance())
	}
	h4 := e.host("h4", 4096, 4096, zone("a"))
	s = e.settle("mon", 10)
	if m := perInstance(); s.GetDesiredCount() != 3 || m[h4] != 1 || len(m) != 3 {
		t.Fatalf("after join: desired %d tasks %v", s.GetDesiredCount(), m)
	}
	e.drain(h1, "DRAINING")
	s = e.settle("mon", 10)
	if m := perInstance(); s.GetDesiredCount() != 2 || m[h1] != 0 || len(m) != 2 {
		t.Fatalf("after drain: desired %d tasks %v", s.GetDesiredCount(), m)
	}
	e.drain(h1, "ACTIVE")
	s = e.settle("mon", 10)
	if m := perInstance(); s.GetDesiredCount() != 3 || m[h1] != 1 {
		t.Fatalf("after reactivation: desired %d tasks %v", s.GetDesiredCount(), m)
	}
	// A new revision rolls out one instance at a time within 0%/100%.
	td2 := e.taskDef("mon", "img:2", 128, 128, false)
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("mon"), TaskDefinition: proto.String(td2)})
	for range 6 {
		e.step()
		for in, n := range perInstance() {
			if n > 1 {
				t.Fatalf("instance %s runs %d daemon tasks", in, n)
			}
		}
	}
	s = e.settle("mon", 10)
	if c := e.count("mon"); c.byTD[td2] != 3 {
		t.Fatalf("after daemon update: %v", c.byTD)
	}
}

func TestPlacementFailureEvent(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	ci := e.host("h1", 512, 4096)
	td := e.taskDef("big", "img", 1024, 128, false)
	e.createService("big", td, 1, nil)
	e.pass()
	s := e.service("big")
	want := "(service big) was unable to place a task because no container instance met all of its requirements. The closest matching (container-instance " + ci[len(ci)-32:] + ") has insufficient CPU units available. For more information, see the Troubleshooting section."
	if len(s.GetEvents()) == 0 || s.GetEvents()[0].GetMessage() != want {
		t.Fatalf("events %v\nwant %q", s.GetEvents(), want)
	}
	e.pass()
	if n := len(e.service("big").GetEvents()); n != 1 {
		t.Fatalf("repeated placement failure added %d events", n)
	}
}

func TestFencedWritesFail(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{Fence: []clientv3.Cmp{store.Fence(store.MustKey("election", "nobody"), 1)}})
	e.host("h1", 4096, 4096)
	td := e.taskDef("f", "img", 128, 128, false)
	e.createService("f", td, 1, nil)
	err := e.r.Pass(context.Background())
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Pass with a failing fence: %v", err)
	}
	if n := len(e.tasks()); n != 0 {
		t.Fatalf("%d tasks written by a deposed leader", n)
	}
}

func TestRunConvergesAndStops(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{Interval: 20 * time.Millisecond})
	kick := NewKicker()
	e.h.kick = kick
	e.r.cfg.Kick = kick
	e.host("h1", 4096, 4096)
	td := e.taskDef("run", "img", 128, 128, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.r.Run(ctx) }()
	e.createService("run", td, 3, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.agent()
		s := e.service("run")
		if s.GetRunningCount() == 3 && hasEvent(s, "has reached a steady state.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run did not converge: %v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A watched change (a task dies) is acted on without a full pass.
	for _, rec := range e.tasks() {
		e.kill(rec)
		break
	}
	for n := 0; ; n++ {
		e.agent()
		if c := e.count("run"); c.healthy == 3 && c.total == 3 {
			break
		}
		if n > 500 {
			t.Fatalf("dead task not replaced: %v", e.count("run"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestListPaginationTagsAndPropagation(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td := e.taskDef("tg", "img", 128, 128, false)
	for _, n := range []string{"a", "b", "c"} {
		e.createService(n, td, 0, nil)
	}
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("d"), TaskDefinition: proto.String(td), SchedulingStrategy: proto.String("DAEMON"),
	})
	var got []string
	token := ""
	for {
		req := &ecsv1.ListServicesRequest{Cluster: proto.String("c1"), MaxResults: proto.Int32(1), SchedulingStrategy: proto.String("REPLICA")}
		if token != "" {
			req.NextToken = proto.String(token)
		}
		r := must(e, e.h.ListServices, req)
		got = append(got, r.GetServiceArns()...)
		if r.GetNextToken() == "" {
			break
		}
		token = r.GetNextToken()
	}
	if len(got) != 3 || got[0] != "arn:aws:ecs:us-east-1:"+e.acc+":service/c1/a" || got[2] != "arn:aws:ecs:us-east-1:"+e.acc+":service/c1/c" {
		t.Fatalf("paged ListServices %v", got)
	}
	_, err := call(e, e.h.ListServices, &ecsv1.ListServicesRequest{Cluster: proto.String("c1"), MaxResults: proto.Int32(101)})
	wantErr(t, err, "InvalidParameterException")

	tags := []*ecsv1.Tag{{Key: proto.String("team"), Value: proto.String("web")}}
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("tagged"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1),
		Tags: tags, PropagateTags: proto.String("SERVICE"), EnableEcsManagedTags: true,
	})
	r := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String("c1"), Services: []string{"tagged", "nope"}, Include: []string{"TAGS"}})
	if len(r.GetServices()) != 1 || len(r.GetServices()[0].GetTags()) != 1 || len(r.GetFailures()) != 1 ||
		r.GetFailures()[0].GetArn() != "arn:aws:ecs:us-east-1:"+e.acc+":service/nope" { // AWS names it without the cluster
		t.Fatalf("DescribeServices include TAGS: %v", r)
	}
	if r := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String("c1"), Services: []string{"tagged"}}); len(r.GetServices()[0].GetTags()) != 0 {
		t.Fatal("tags without include TAGS")
	}
	e.pass()
	var task *ecsv1.Task
	for _, rec := range e.tasks() {
		if rec.GetServiceName() == "tagged" {
			task = rec.GetTask()
		}
	}
	want := map[string]string{"team": "web", "aws:ecs:clusterName": "c1", "aws:ecs:serviceName": "tagged"}
	if task == nil || len(task.GetTags()) != len(want) {
		t.Fatalf("task tags %v", task.GetTags())
	}
	for _, tg := range task.GetTags() {
		if want[tg.GetKey()] != tg.GetValue() {
			t.Fatalf("task tag %s=%s", tg.GetKey(), tg.GetValue())
		}
	}
}

func TestDescribeCountsFollowTaskRecords(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td := e.taskDef("cnt", "img", 128, 128, false)
	e.createService("cnt", td, 2, nil)
	e.pass()
	if s := e.service("cnt"); s.GetPendingCount() != 2 || s.GetRunningCount() != 0 || s.GetDeployments()[0].GetPendingCount() != 2 {
		t.Fatalf("after launch: pending %d running %d", s.GetPendingCount(), s.GetRunningCount())
	}
	e.agent() // no pass in between
	if s := e.service("cnt"); s.GetPendingCount() != 0 || s.GetRunningCount() != 2 || s.GetDeployments()[0].GetRunningCount() != 2 {
		t.Fatalf("after the agent's reports: pending %d running %d", s.GetPendingCount(), s.GetRunningCount())
	}
	e.kill(e.tasks()[0])
	if s := e.service("cnt"); s.GetRunningCount() != 1 {
		t.Fatalf("after a task died: running %d", s.GetRunningCount())
	}
}

func TestSelectivePassSkipsUnchangedClusters(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td := e.taskDef("sel", "img", 128, 128, false)
	e.createService("sel", td, 1, nil)
	e.settle("sel", 10)
	e.r.markAll(false)
	read := func() int {
		n := e.r.clustersRead
		if err := e.r.pass(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		return e.r.clustersRead - n
	}
	read() // the last full pass wrote the service record
	if n := read(); n != 0 {
		t.Fatalf("unchanged pass read %d clusters", n)
	}
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("sel"), DesiredCount: proto.Int32(2)})
	if n := read(); n != 1 {
		t.Fatalf("pass after UpdateService read %d clusters", n)
	}
	e.r.dmu.Lock()
	e.r.dirty[keys.ClusterRef{Scope: e.sc, Cluster: "c1"}] = true // what the watch does when an instance changes
	e.r.dmu.Unlock()
	if n := read(); n != 1 {
		t.Fatalf("pass after an instance change read %d clusters", n)
	}
	// A task change concerns its service only.
	e.createService("other", td, 1, nil)
	e.settle("other", 10)
	e.settle("sel", 10)
	read()
	read()
	svcs := e.r.servicesRead
	e.r.dmu.Lock()
	e.r.markService(keys.ClusterRef{Scope: e.sc, Cluster: "c1"}, "sel")
	e.r.dmu.Unlock()
	if n := read(); n != 1 || e.r.servicesRead-svcs != 1 {
		t.Fatalf("pass after a task change of one service read %d clusters, %d services", n, e.r.servicesRead-svcs)
	}
}

// TestRunSelectiveRollingAndDaemon drives Run's change-tracked passes only (no full pass
// after the first): a rolling update keeps its bounds and finishes, and a DAEMON service
// follows a joining instance.
func TestRunSelectiveRollingAndDaemon(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{Interval: time.Hour, FullPassEvery: time.Hour})
	kick := NewKicker()
	e.h.kick = kick
	e.r.cfg.Kick = kick
	e.host("h1", 8192, 8192)
	td1 := e.taskDef("rr", "img:1", 128, 128, true)
	td2 := e.taskDef("rr", "img:2", 128, 128, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.r.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool, check func()) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			e.agent()
			if check != nil {
				check()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	e.createService("rr", td1, 4, nil)
	waitFor("4 healthy tasks", func() bool { return e.count("rr").healthyByTD[td1] == 4 }, nil)
	waitFor("steady state", func() bool { return hasEvent(e.service("rr"), "has reached a steady state.") }, nil)
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("rr"), TaskDefinition: proto.String(td2)})
	waitFor("rollout", func() bool {
		s := e.service("rr")
		c := e.count("rr")
		return c.healthyByTD[td2] == 4 && c.byTD[td1] == 0 && len(s.GetDeployments()) == 1 && s.GetDeployments()[0].GetRolloutState() == "COMPLETED"
	}, func() {
		if c := e.count("rr"); c.healthy < 4 || c.total > 8 {
			t.Fatalf("rollout out of bounds: %d healthy, %d total", c.healthy, c.total)
		}
	})
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("dd"), TaskDefinition: proto.String(td1), SchedulingStrategy: proto.String("DAEMON"),
	})
	waitFor("daemon on h1", func() bool { return e.count("dd").healthy == 1 }, nil)
	e.host("h2", 8192, 8192)
	waitFor("daemon on h2", func() bool { return e.count("dd").healthy == 2 }, nil)
}

func TestHealthCheckGracePeriod(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td := e.taskDef("gr", "img", 128, 128, true)
	e.behave = func(*ecsv1.Task) string { return "unhealthy" }
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("gr"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(1),
		HealthCheckGracePeriodSeconds: proto.Int32(60),
	})
	e.step()
	e.clock.Advance(59 * time.Second)
	e.pass()
	if c := e.count("gr"); c.total != 1 {
		t.Fatalf("inside the grace period: %d live tasks", c.total)
	}
	for _, rec := range e.tasks() {
		if rec.GetTask().GetDesiredStatus() != "RUNNING" {
			t.Fatal("task stopped inside the grace period")
		}
	}
	e.clock.Advance(2 * time.Second)
	e.pass()
	stopped := 0
	for _, rec := range e.tasks() {
		if rec.GetTask().GetStoppedReason() == ReasonUnhealthy {
			stopped++
		}
	}
	if stopped != 1 {
		t.Fatalf("after the grace period %d tasks stopped for health checks", stopped)
	}
}

// TestCrashLoopNeverCompletes is the user trial against a real agent: a service whose
// container exits 3 right after starting, so each task goes PENDING, RUNNING and STOPPED
// within a second. The deployment must stay IN_PROGRESS with no steady-state event, the
// launch backoff must hold, and the circuit breaker must mark it FAILED at the threshold.
// A service whose tasks stay up completes once they have run for StableAfter.
func TestCrashLoopNeverCompletes(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{StableAfter: DefaultStableAfter})
	e.host("h1", 8192, 8192)
	crash := e.taskDef("crash", "crash", 128, 128, false)
	good := e.taskDef("ok", "good", 128, 128, false)
	e.behave = func(t *ecsv1.Task) string {
		if t.GetTaskDefinitionArn() == crash {
			return "flap"
		}
		return "run"
	}
	dc := &ecsv1.DeploymentConfiguration{DeploymentCircuitBreaker: &ecsv1.DeploymentCircuitBreaker{Enable: true, Rollback: false}}
	e.createService("crash", crash, 2, dc)
	depID := e.service("crash").GetDeployments()[0].GetId()
	key := keys.Service(e.sc, "c1", "crash")
	threshold := BreakerThreshold(2, DefaultBreakerMinThreshold)
	backedOff := false
	failed := false
	for i := 0; i < 200 && !failed; i++ {
		e.pass()  // launches (unless backing off); sees the tasks RUNNING for an instant
		e.agent() // PENDING → RUNNING, RUNNING → STOPPED (exit 3)
		e.clock.Advance(500 * time.Millisecond)
		s := e.service("crash")
		d := findDeployment(s, depID)
		if hasEvent(s, "has reached a steady state.") || hasEvent(s, "deployment completed.") {
			t.Fatalf("crash loop reported steady/completed after %d rounds: running %d events %v", i, s.GetRunningCount(), s.GetEvents())
		}
		switch d.GetRolloutState() {
		case RolloutFailed:
			failed = true
			continue
		case RolloutInProgress:
		default:
			t.Fatalf("rolloutState %s after %d rounds", d.GetRolloutState(), i)
		}
		rec, _, err := store.Get[*storev1.ServiceRecord](context.Background(), sharedEtcd, key)
		if err != nil {
			t.Fatal(err)
		}
		next := deploymentRecord(rec, depID).GetNextLaunchAt()
		if next == nil || !e.clock.Now().Before(next.AsTime()) {
			continue
		}
		backedOff = true
		// Nothing launches inside the backoff, even with the crashed tasks replaced.
		e.agent()
		before := len(e.tasks())
		e.clock.Advance(next.AsTime().Sub(e.clock.Now()) - time.Second)
		e.pass()
		if n := len(e.tasks()); n != before {
			t.Fatalf("%d tasks launched inside the backoff", n-before)
		}
		e.clock.Advance(time.Second)
	}
	s := e.service("crash")
	d := findDeployment(s, depID)
	if !failed || int(d.GetFailedTasks()) < threshold {
		t.Fatalf("breaker did not trip: %v", d)
	}
	if !backedOff || !hasEvent(s, "(service crash) is unable to consistently start tasks successfully.") {
		t.Fatalf("no launch backoff in the crash loop: events %v", s.GetEvents())
	}
	if !hasEvent(s, "(service crash) (deployment "+depID+") deployment failed: tasks failed to start.") ||
		d.GetRolloutStateReason() != "ECS deployment circuit breaker: tasks failed to start." {
		t.Fatalf("failed deployment %v events %v", d, s.GetEvents())
	}
	if hasEvent(s, "has reached a steady state.") || hasEvent(s, "deployment completed.") {
		t.Fatalf("events %v", s.GetEvents())
	}
	// A FAILED deployment launches no more.
	before := len(e.tasks())
	for range 3 {
		e.clock.Advance(DefaultBackoffCap)
		e.step()
	}
	if n := len(e.tasks()); n != before {
		t.Fatalf("failed deployment launched %d more tasks", n-before)
	}

	// Tasks that stay up: COMPLETED and steady only after StableAfter.
	e.createService("ok", good, 2, dc)
	okID := e.service("ok").GetDeployments()[0].GetId()
	e.step() // launch, RUNNING
	e.pass()
	if s := e.service("ok"); findDeployment(s, okID).GetRolloutState() != RolloutInProgress || hasEvent(s, "has reached a steady state.") {
		t.Fatalf("completed before StableAfter: %v %v", findDeployment(s, okID), s.GetEvents())
	}
	e.clock.Advance(DefaultStableAfter)
	e.pass()
	if s := e.service("ok"); findDeployment(s, okID).GetRolloutState() != RolloutCompleted || !hasEvent(s, "(service ok) has reached a steady state.") ||
		!hasEvent(s, "(service ok) (deployment "+okID+") deployment completed.") {
		t.Fatalf("not completed after StableAfter: %v %v", findDeployment(s, okID), s.GetEvents())
	}
	// A rolling update to the crash loop (minimumHealthyPercent 100) keeps the old tasks:
	// new ones RUNNING for an instant are not healthy enough to replace them.
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("ok"), TaskDefinition: proto.String(crash)})
	badID := e.service("ok").GetDeployments()[0].GetId()
	for i := 0; i < 200 && findDeployment(e.service("ok"), badID).GetRolloutState() != RolloutFailed; i++ {
		e.step()
		e.clock.Advance(time.Second) // the new tasks crash a second after they start
		if e.count("ok").byTD[crash] == 0 {
			e.clock.Advance(DefaultBackoffCap) // past any launch backoff
		}
		if n := e.count("ok"); n.healthyByTD[good] < 2 {
			t.Fatalf("round %d: healthy old tasks %d", i, n.healthyByTD[good])
		}
	}
	if d := findDeployment(e.service("ok"), badID); d.GetRolloutState() != RolloutFailed {
		t.Fatalf("rolling update to the crash loop: %v", d)
	}
}
