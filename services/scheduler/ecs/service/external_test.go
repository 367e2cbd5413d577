package service

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

func TestComputedDesiredCount(t *testing.T) {
	for _, c := range []struct {
		desired int32
		pct     float64
		want    int32
	}{
		{4, 100, 4}, {4, 0, 0}, {4, 50, 2}, {4, 30, 2}, {3, 100.0 / 3, 1}, {10, 12.5, 2},
		{1, 1, 1}, {0, 100, 0}, {5, 20, 1}, {3, 33.333333333, 1},
	} {
		if got := ComputedDesiredCount(c.desired, c.pct); got != c.want {
			t.Errorf("ComputedDesiredCount(%d, %g) = %d, want %d", c.desired, c.pct, got, c.want)
		}
	}
}

const (
	tsA = "ecs-svc/2000000000000000001"
	tsB = "ecs-svc/2000000000000000002"
)

// externalWorld is newWorld's service under the EXTERNAL controller with task sets A
// (tdV1) and B (tdV2) at the given scales and no deployment.
func externalWorld(t *testing.T, desired int32, scaleA, scaleB float64) *world {
	w := newWorld(t, desired, 100, 200)
	rec := w.st.Service.Value
	s := rec.GetService()
	s.DeploymentController = &ecsv1.DeploymentController{Type: proto.String(ControllerExternal)}
	s.Deployments = nil
	rec.Deployments = nil
	for _, x := range []struct {
		id, td, status string
		pct            float64
	}{{tsA, tdV1, TaskSetPrimary, scaleA}, {tsB, tdV2, TaskSetActive, scaleB}} {
		s.TaskSets = append(s.TaskSets, &ecsv1.TaskSet{
			Id: proto.String(x.id), Status: proto.String(x.status), TaskDefinition: proto.String(x.td), LaunchType: proto.String("EC2"),
			Scale: &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: x.pct}, StabilityStatus: proto.String(StabilityStabilize),
		})
		rec.Deployments = append(rec.Deployments, &storev1.DeploymentRecord{Id: x.id})
	}
	return w
}

func launches(p Plan) map[string]int {
	out := map[string]int{}
	for _, l := range append([]Launch{p.Launch}, p.More...) {
		if l.Count > 0 {
			out[l.Deployment] += l.Count
		}
	}
	return out
}

func stopsOf(p Plan) map[string]int {
	out := map[string]int{}
	for _, s := range p.Stop {
		out[s.Task.Value.GetDeploymentId()]++
	}
	return out
}

// TestComputeExternal is the task set reconciler's table: each task set is brought to
// its computedDesiredCount at once, both ways, independently of the others.
func TestComputeExternal(t *testing.T) {
	for _, c := range []struct {
		name           string
		desired        int32
		scaleA, scaleB float64
		runA, runB     int // RUNNING tasks of each task set before the pass
		draining       bool
		wantLaunch     map[string]int
		wantStop       map[string]int
		wantCDC        [2]int32
		wantSteady     [2]bool
	}{
		{name: "empty sets launch", desired: 4, scaleA: 100, scaleB: 0, wantLaunch: map[string]int{tsA: 4}, wantStop: map[string]int{}, wantCDC: [2]int32{4, 0}, wantSteady: [2]bool{false, true}},
		{name: "steady", desired: 4, scaleA: 100, scaleB: 0, runA: 4, wantLaunch: map[string]int{}, wantStop: map[string]int{}, wantCDC: [2]int32{4, 0}, wantSteady: [2]bool{true, true}},
		{name: "both at 100 while shifting", desired: 4, scaleA: 100, scaleB: 100, runA: 4, wantLaunch: map[string]int{tsB: 4}, wantStop: map[string]int{}, wantCDC: [2]int32{4, 4}, wantSteady: [2]bool{true, false}},
		{name: "A to 0 stops at once", desired: 4, scaleA: 0, scaleB: 100, runA: 4, runB: 4, wantLaunch: map[string]int{}, wantStop: map[string]int{tsA: 4}, wantCDC: [2]int32{0, 4}, wantSteady: [2]bool{false, true}},
		{name: "rounded up", desired: 3, scaleA: 50, scaleB: 50, runA: 1, wantLaunch: map[string]int{tsA: 1, tsB: 2}, wantStop: map[string]int{}, wantCDC: [2]int32{2, 2}, wantSteady: [2]bool{false, false}},
		{name: "draining set stopped", desired: 2, scaleA: 100, scaleB: 100, runA: 2, runB: 2, draining: true, wantLaunch: map[string]int{}, wantStop: map[string]int{tsB: 2}, wantCDC: [2]int32{2, 0}, wantSteady: [2]bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := externalWorld(t, c.desired, c.scaleA, c.scaleB)
			if c.draining {
				w.st.Service.Value.GetService().GetTaskSets()[1].Status = proto.String(TaskSetDraining)
			}
			w.running(c.runA, tsA, time.Hour)
			w.running(c.runB, tsB, time.Hour)
			p, err := Compute(w.st, w.pol)
			if err != nil {
				t.Fatal(err)
			}
			if got := launches(p); !mapsEqual(got, c.wantLaunch) {
				t.Errorf("launches %v, want %v", got, c.wantLaunch)
			}
			if got := stopsOf(p); !mapsEqual(got, c.wantStop) {
				t.Errorf("stops %v, want %v", got, c.wantStop)
			}
			sets := p.Record.GetService().GetTaskSets()
			for i, set := range sets {
				if set.GetComputedDesiredCount() != c.wantCDC[i] {
					t.Errorf("task set %d computedDesiredCount %d, want %d", i, set.GetComputedDesiredCount(), c.wantCDC[i])
				}
				if steady := set.GetStabilityStatus() == StabilitySteady; steady != c.wantSteady[i] {
					t.Errorf("task set %d stabilityStatus %s", i, set.GetStabilityStatus())
				}
			}
			for _, l := range append([]Launch{p.Launch}, p.More...) {
				if l.Count > 0 && l.Deployment == tsB && l.TaskDefinition != tdV2 {
					t.Errorf("task set B launches %s", l.TaskDefinition)
				}
			}
		})
	}
}

// TestComputeExternalDrainedSetLeaves: a DRAINING task set without tasks leaves the
// list; a deleted service without tasks becomes INACTIVE.
func TestComputeExternalDrainedSetLeaves(t *testing.T) {
	w := externalWorld(t, 2, 100, 0)
	w.st.Service.Value.GetService().GetTaskSets()[1].Status = proto.String(TaskSetDraining)
	p, err := Compute(w.st, w.pol)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Record.GetService().GetTaskSets()); n != 1 {
		t.Fatalf("%d task sets left, want 1", n)
	}
	w.st.Service.Value.GetService().Status = proto.String(StatusDraining)
	p, err = Compute(w.st, w.pol)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Record.GetService().GetStatus(); got != StatusInactive || launches(p)[tsA] != 0 {
		t.Fatalf("deleted service: status %s, launches %v", got, launches(p))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTaskSetsShiftTraffic drives a service under the EXTERNAL controller through the
// actions and real reconcile passes: task set A at 100% runs desiredCount tasks; B is
// created at 0% and made PRIMARY; then A goes to 0% and B to 100% while both run, counted
// from the task records at each step; A is deleted and leaves the list.
func TestTaskSetsShiftTraffic(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	e.host("h2", 4096, 4096)
	tdA := e.taskDef("blue", "img", 128, 128, false)
	tdB := e.taskDef("green", "img", 128, 128, false)
	ext := &ecsv1.DeploymentController{Type: proto.String(ControllerExternal)}
	svc := must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("web"), DesiredCount: proto.Int32(4), DeploymentController: ext,
	}).GetService()
	if len(svc.GetDeployments()) != 0 || svc.GetTaskSets() == nil || svc.GetDeploymentController().GetType() != ControllerExternal {
		t.Fatalf("created %v", svc)
	}
	// Errors as AWS: a task definition with EXTERNAL; task sets on an ECS service.
	_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String("c1"), ServiceName: proto.String("x"), DesiredCount: proto.Int32(1), DeploymentController: ext, TaskDefinition: proto.String(tdA),
	})
	wantErr(t, err, "InvalidParameterException")
	e.createService("rolling", tdA, 0, nil)
	_, err = call(e, e.h.CreateTaskSet, &ecsv1.CreateTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("rolling"), TaskDefinition: proto.String(tdA)})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.h.CreateTaskSet, &ecsv1.CreateTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("nope"), TaskDefinition: proto.String(tdA)})
	wantErr(t, err, "ServiceNotFoundException")
	_, err = call(e, e.h.CreateTaskSet, &ecsv1.CreateTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(tdA), Scale: &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: 101}})
	wantErr(t, err, "InvalidParameterException")

	a := must(e, e.h.CreateTaskSet, &ecsv1.CreateTaskSetRequest{
		Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(tdA), ExternalId: proto.String("blue"),
		Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}},
	}).GetTaskSet()
	if a.GetStatus() != TaskSetActive || a.GetComputedDesiredCount() != 4 || a.GetStabilityStatus() != StabilityStabilize || a.GetScale().GetValue() != 100 || len(a.GetTags()) != 1 {
		t.Fatalf("task set A %v", a)
	}
	must(e, e.h.UpdateServicePrimaryTaskSet, &ecsv1.UpdateServicePrimaryTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), PrimaryTaskSet: a.TaskSetArn})
	byTD := func() map[string]int { return e.count("web").byTD }
	stepUntil := func(what string, ok func(map[string]int) bool) {
		t.Helper()
		for range 10 {
			e.step()
			if ok(byTD()) {
				e.pass()
				return
			}
		}
		t.Fatalf("%s: tasks by task definition %v", what, byTD())
	}
	stepUntil("A at 100%", func(m map[string]int) bool { return m[tdA] == 4 && m[tdB] == 0 })
	b := must(e, e.h.CreateTaskSet, &ecsv1.CreateTaskSetRequest{
		Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(tdB), Scale: &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: 0},
	}).GetTaskSet()
	e.step()
	if m := byTD(); m[tdA] != 4 || m[tdB] != 0 {
		t.Fatalf("B at 0%%: %v", m)
	}
	// Shift: B up to 100% while A still runs, then A down to 0%.
	must(e, e.h.UpdateTaskSet, &ecsv1.UpdateTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskSet: b.Id, Scale: &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: 100}})
	stepUntil("both at 100%", func(m map[string]int) bool { return m[tdA] == 4 && m[tdB] == 4 })
	must(e, e.h.UpdateServicePrimaryTaskSet, &ecsv1.UpdateServicePrimaryTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), PrimaryTaskSet: b.Id})
	_, err = call(e, e.h.DeleteTaskSet, &ecsv1.DeleteTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskSet: a.Id})
	wantErr(t, err, "InvalidParameterException") // still scaled above 0
	must(e, e.h.UpdateTaskSet, &ecsv1.UpdateTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskSet: a.Id, Scale: &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: 0}})
	stepUntil("A at 0%, B at 100%", func(m map[string]int) bool { return m[tdA] == 0 && m[tdB] == 4 })
	sets := must(e, e.h.DescribeTaskSets, &ecsv1.DescribeTaskSetsRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskSets: []string{*a.Id, *b.TaskSetArn, "ecs-svc/0"}})
	if len(sets.GetTaskSets()) != 2 || len(sets.GetFailures()) != 1 || sets.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("describe %v", sets)
	}
	ga, gb := sets.GetTaskSets()[0], sets.GetTaskSets()[1]
	if ga.GetStatus() != TaskSetActive || ga.GetComputedDesiredCount() != 0 || ga.GetRunningCount() != 0 ||
		gb.GetStatus() != TaskSetPrimary || gb.GetComputedDesiredCount() != 4 || gb.GetRunningCount() != 4 || gb.GetStabilityStatus() != StabilitySteady {
		t.Fatalf("after the shift: A %v\nB %v", ga, gb)
	}
	if ga.Tags != nil {
		t.Fatalf("tags without include TAGS: %v", ga.Tags)
	}
	if s := e.service("web"); s.GetRunningCount() != 4 || len(s.GetTaskSets()) != 2 || s.GetTaskDefinition() != tdB {
		t.Fatalf("service %v", s)
	}
	d := must(e, e.h.DeleteTaskSet, &ecsv1.DeleteTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskSet: a.Id}).GetTaskSet()
	if d.GetStatus() != TaskSetDraining {
		t.Fatalf("deleted %v", d)
	}
	e.step()
	e.pass()
	if s := e.service("web"); len(s.GetTaskSets()) != 1 || s.GetTaskSets()[0].GetId() != b.GetId() {
		t.Fatalf("task sets after delete %v", s.GetTaskSets())
	}
	_, err = call(e, e.h.UpdateTaskSet, &ecsv1.UpdateTaskSetRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskSet: a.Id, Scale: &ecsv1.Scale{Value: 10}})
	wantErr(t, err, "TaskSetNotFoundException")
	// Scaling the service scales the task sets.
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), DesiredCount: proto.Int32(2)})
	stepUntil("service at 2", func(m map[string]int) bool { return m[tdB] == 2 })
	_, err = call(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(tdA)})
	wantErr(t, err, "InvalidParameterException")
	// Deleting the service stops everything.
	must(e, e.h.DeleteService, &ecsv1.DeleteServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), Force: proto.Bool(true)})
	stepUntil("deleted", func(m map[string]int) bool { return m[tdB] == 0 })
	e.pass()
	r := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String("c1"), Services: []string{"web"}})
	if len(r.GetServices()) == 1 && r.GetServices()[0].GetStatus() != StatusInactive {
		t.Fatalf("deleted service %s", r.GetServices()[0].GetStatus())
	}
}

// TestComputeExternalInvariants runs Compute over random services under the EXTERNAL
// controller — two task sets at random scales, one possibly DRAINING, tasks of every
// state on ACTIVE and DRAINING instances — and checks what must hold whatever the state:
// each task set not DRAINING ends with at most computedDesiredCount live tasks and
// launches only what it lacks; a DRAINING task set launches nothing and keeps no live
// task; only live tasks are stopped, each once; every launch names its task set's task
// definition.
func TestComputeExternalInvariants(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 29))
	t.Logf("seed %d", seed)
	for i := range 1000 {
		desired := int32(rng.IntN(7))
		w := externalWorld(t, desired, float64(rng.IntN(101)), float64(rng.IntN(101)))
		sets := w.svc().GetTaskSets()
		if rng.IntN(3) == 0 {
			sets[rng.IntN(2)].Status = proto.String(TaskSetDraining)
		}
		if rng.IntN(4) == 0 {
			w.drain("i2")
		}
		ids := []string{tsA, tsB}
		for range rng.IntN(12) {
			id := ids[rng.IntN(2)]
			switch rng.IntN(4) {
			case 0:
				w.task(id, "PENDING", time.Minute)
			case 1:
				w.failed(1, id, time.Minute)
			default:
				w.running(1, id, time.Hour)
			}
		}
		p, err := Compute(w.st, w.pol)
		if err != nil {
			t.Fatalf("case %d (seed %d): %v", i, seed, err)
		}
		stopped := map[string]bool{}
		for _, s := range p.Stop {
			if stopped[s.ID] {
				t.Fatalf("case %d (seed %d): %s stopped twice", i, seed, s.ID)
			}
			stopped[s.ID] = true
			tk := s.Task.Value.GetTask()
			if tk.GetLastStatus() == "STOPPED" || tk.GetDesiredStatus() != "RUNNING" {
				t.Fatalf("case %d (seed %d): stops %s (%s/%s)", i, seed, s.ID, tk.GetLastStatus(), tk.GetDesiredStatus())
			}
		}
		live := map[string]int{}
		for _, it := range w.st.Tasks {
			tk := it.Value.GetTask()
			if tk.GetLastStatus() != "STOPPED" && tk.GetDesiredStatus() == "RUNNING" && !stopped[taskIDOf(it.Value)] {
				live[it.Value.GetDeploymentId()]++
			}
		}
		got := launches(p)
		for _, set := range w.svc().GetTaskSets() {
			id := set.GetId()
			want := ComputedDesiredCount(desired, set.GetScale().GetValue())
			if set.GetStatus() == TaskSetDraining {
				want = 0
			}
			if live[id] > int(want) || live[id]+got[id] > int(want) {
				t.Fatalf("case %d (seed %d): task set %s (%s, want %d) keeps %d live and launches %d", i, seed, id, set.GetStatus(), want, live[id], got[id])
			}
		}
		for _, l := range append([]Launch{p.Launch}, p.More...) {
			if l.Count > 0 && l.TaskDefinition != map[string]string{tsA: tdV1, tsB: tdV2}[l.Deployment] {
				t.Fatalf("case %d (seed %d): launch %+v", i, seed, l)
			}
		}
	}
}
