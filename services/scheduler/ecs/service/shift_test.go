package service

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

func TestProductionSteps(t *testing.T) {
	m := time.Minute
	cases := []struct {
		name string
		dc   *ecsv1.DeploymentConfiguration
		want []Step
	}{
		{"blue/green", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployBlueGreen)}, []Step{{100, 0}}},
		{"linear 25", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 25, StepBakeTimeInMinutes: 2}},
			[]Step{{25, 2 * m}, {50, 2 * m}, {75, 2 * m}, {100, 0}}},
		{"linear 30 ends at 100", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 30}},
			[]Step{{30, 0}, {60, 0}, {90, 0}, {100, 0}}},
		{"linear default 10%", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployLinear)},
			[]Step{{10, 6 * m}, {20, 6 * m}, {30, 6 * m}, {40, 6 * m}, {50, 6 * m}, {60, 6 * m}, {70, 6 * m}, {80, 6 * m}, {90, 6 * m}, {100, 0}}},
		{"linear 3.3 no drift", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 33.3}},
			[]Step{{33.3, 0}, {66.6, 0}, {99.9, 0}, {100, 0}}},
		{"canary", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployCanary), CanaryConfiguration: &ecsv1.CanaryConfiguration{CanaryPercent: 5.5, CanaryBakeTimeInMinutes: 15}},
			[]Step{{5.5, 15 * m}, {100, 0}}},
		{"canary default", &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployCanary)}, []Step{{5, 10 * m}, {100, 0}}},
	}
	for _, c := range cases {
		if got := ProductionSteps(c.dc, m); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRuleWeights(t *testing.T) {
	for _, c := range []struct {
		pct         float64
		blue, green int32
	}{{0, 100, 0}, {25, 75, 25}, {100, 0, 100}, {5.5, 945, 55}, {99.9, 1, 999}, {0.1, 999, 1}} {
		if b, g := RuleWeights(c.pct); b != c.blue || g != c.green {
			t.Errorf("RuleWeights(%g) = %d, %d; want %d, %d", c.pct, b, g, c.blue, c.green)
		}
	}
}

// shiftClock is an injectable time for Advance.
type shiftClock struct{ t time.Time }

func (c *shiftClock) add(d time.Duration) { c.t = c.t.Add(d) }

func ids() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("ecs-pause-%d", n) }
}

// TestAdvanceBlueGreenPause walks a BLUE_GREEN deployment with a PAUSE hook at
// POST_TEST_TRAFFIC_SHIFT: it waits for its tasks, moves test traffic, waits at the hook,
// and once the hook succeeds moves production traffic, bakes and reaches CLEAN_UP.
func TestAdvanceBlueGreenPause(t *testing.T) {
	c := &shiftClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dc := &ecsv1.DeploymentConfiguration{
		Strategy: proto.String(DeployBlueGreen), BakeTimeInMinutes: proto.Int32(3),
		LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StagePostTestShift}}},
	}
	st := &storev1.ShiftState{Source: "ecs-svc/1"}
	in := func(ready bool) ShiftInput {
		return ShiftInput{Now: c.t, Config: dc, GreenReady: ready, NewHookID: ids()}
	}
	Advance(st, in(false))
	if st.GetStage() != StageScaleUp || st.GetTestWeight() != 0 || st.GetProductionWeight() != 0 {
		t.Fatalf("before the tasks are ready: %v", st)
	}
	Advance(st, in(true))
	if st.GetStage() != StagePostTestShift || st.GetTestWeight() != 100 || st.GetProductionWeight() != 0 {
		t.Fatalf("at the hook: %v", st)
	}
	if len(st.GetHooks()) != 1 || st.Hooks[0].GetStatus() != hookAwaiting || st.Hooks[0].GetTimeoutAction() != actionRollback ||
		!st.Hooks[0].GetExpiresAt().AsTime().Equal(c.t.Add(1440*time.Minute)) {
		t.Fatalf("hook: %v", st.GetHooks())
	}
	c.add(time.Hour)
	Advance(st, in(true)) // still paused
	if st.GetStage() != StagePostTestShift || len(st.GetHooks()) != 1 {
		t.Fatalf("paused: %v", st)
	}
	awaitingHook(st, st.Hooks[0].GetHookId()).Status = hookSucceeded // ContinueServiceDeployment CONTINUE
	res := Advance(st, in(true))
	if st.GetStage() != StageBakeTime || st.GetProductionWeight() != 100 || len(res.Events) != 1 {
		t.Fatalf("after continue: %v %v", st, res)
	}
	c.add(2 * time.Minute)
	Advance(st, in(true))
	if st.GetStage() != StageBakeTime {
		t.Fatalf("bake of 3 minutes ended after 2: %v", st)
	}
	c.add(time.Minute)
	Advance(st, in(true))
	if st.GetStage() != StageCleanUp {
		t.Fatalf("after the bake: %v", st)
	}
}

// TestAdvanceLinear takes a LINEAR 25% deployment through its four production steps,
// each after the step bake time.
func TestAdvanceLinear(t *testing.T) {
	c := &shiftClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dc := &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 25, StepBakeTimeInMinutes: 5}}
	st := &storev1.ShiftState{Source: "ecs-svc/1"}
	var seen []float64
	for range 40 {
		Advance(st, ShiftInput{Now: c.t, Config: dc, GreenReady: true})
		if n := len(seen); n == 0 || seen[n-1] != st.GetProductionWeight() {
			seen = append(seen, st.GetProductionWeight())
		}
		if st.GetStage() == StageCleanUp {
			break
		}
		c.add(time.Minute)
	}
	if want := []float64{25, 50, 75, 100}; !slices.Equal(seen, want) {
		t.Fatalf("production weights %v, want %v", seen, want)
	}
	if st.GetStage() != StageCleanUp {
		t.Fatalf("stage %s", st.GetStage())
	}
}

// TestAdvanceHookPerStep pauses at every production step of a LINEAR deployment (hooks
// at PRODUCTION_TRAFFIC_SHIFT run at each step) and rolls back when a hook times out.
func TestAdvanceHookPerStep(t *testing.T) {
	c := &shiftClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dc := &ecsv1.DeploymentConfiguration{
		Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 50},
		LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StageProdShift},
			TimeoutConfiguration: &ecsv1.DeploymentLifecycleHookTimeoutConfiguration{TimeoutInMinutes: proto.Int32(10)}}},
	}
	st := &storev1.ShiftState{Source: "ecs-svc/1"}
	next := ids()
	in := func() ShiftInput { return ShiftInput{Now: c.t, Config: dc, GreenReady: true, NewHookID: next} }
	Advance(st, in())
	if st.GetStage() != StageProdShift || st.GetProductionWeight() != 50 || len(st.GetHooks()) != 1 || st.Hooks[0].GetStep() != 1 {
		t.Fatalf("first step: %v", st)
	}
	st.Hooks[0].Status = hookSucceeded
	Advance(st, in())
	if st.GetProductionWeight() != 100 || len(st.GetHooks()) != 2 || st.Hooks[1].GetStep() != 2 {
		t.Fatalf("second step: %v", st)
	}
	c.add(10 * time.Minute)
	res := Advance(st, in())
	if !res.Rollback || st.Hooks[1].GetStatus() != hookTimedOut {
		t.Fatalf("timeout: %v %v", res, st)
	}
}

func TestValidateShiftConfig(t *testing.T) {
	bad := []*ecsv1.DeploymentConfiguration{
		{Strategy: proto.String("SIDEWAYS")},
		{Strategy: proto.String(DeployBlueGreen), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 10}},
		{Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 2}},
		{Strategy: proto.String(DeployLinear), LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 10.05}},
		{Strategy: proto.String(DeployCanary), CanaryConfiguration: &ecsv1.CanaryConfiguration{CanaryBakeTimeInMinutes: 1441}},
		{Strategy: proto.String(DeployBlueGreen), BakeTimeInMinutes: proto.Int32(-1)},
		{Strategy: proto.String(DeployRolling), LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StagePreScaleUp}}}},
		{Strategy: proto.String(DeployBlueGreen), LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{HookTargetArn: proto.String("arn:aws:lambda:us-east-1:000000000000:function:f"), LifecycleStages: []string{StagePreScaleUp}}}},
		{Strategy: proto.String(DeployBlueGreen), LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{"SCALE_UP"}}}},
		{Strategy: proto.String(DeployBlueGreen), LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StagePreScaleUp},
			TimeoutConfiguration: &ecsv1.DeploymentLifecycleHookTimeoutConfiguration{TimeoutInMinutes: proto.Int32(0)}}}},
	}
	for i, dc := range bad {
		if err := validateShiftConfig(StrategyReplica, dc); err == nil {
			t.Errorf("case %d: accepted %v", i, dc)
		}
	}
	if err := validateShiftConfig(StrategyDaemon, &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployBlueGreen)}); err == nil {
		t.Error("DAEMON blue/green accepted")
	}
	good := &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployLinear), BakeTimeInMinutes: proto.Int32(0),
		LinearConfiguration: &ecsv1.LinearConfiguration{StepPercent: 25, StepBakeTimeInMinutes: 1440},
		LifecycleHooks:      []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: hookStages}}}
	if err := validateShiftConfig(StrategyReplica, good); err != nil {
		t.Errorf("refused: %v", err)
	}
}

// TestComputeBlueGreen runs Compute pass by pass (the scripted agent of world.sim) over a
// BLUE_GREEN deployment of a service without load balancers: the new revision scales up
// in full beside the old one (maximumPercent does not bound it), the old tasks are held
// until CLEAN_UP, a PAUSE hook at POST_SCALE_UP holds the deployment until it succeeds,
// and the deployment completes once the old tasks are gone.
func TestComputeBlueGreen(t *testing.T) {
	w := newWorld(t, 2, 100, 100)
	w.pol.NewHookID = ids()
	s := w.svc()
	s.DeploymentConfiguration.Strategy = proto.String(DeployBlueGreen)
	s.DeploymentConfiguration.LifecycleHooks = []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StagePostScaleUp}}}
	w.running(2, dep1, time.Hour)
	w.settled(2)
	w.deploy(dep2, tdV2)
	var stage string
	w.sim(12, 10*time.Second, func(pass int, p Plan) {
		for _, st := range p.Stop {
			t.Fatalf("pass %d stopped %s (%s) while the shift is in progress", pass, st.ID, st.Reason)
		}
		if pass == 0 && (p.Launch.Count != 2 || p.Launch.Deployment != dep2) {
			t.Fatalf("pass 0 launched %+v, want both new tasks at once", p.Launch)
		}
		dr := findRecord(p.Record, dep2)
		stage = dr.GetShift().GetStage()
		if dr.GetShift().GetSource() != dep1 || !dr.GetAlternate() {
			t.Fatalf("shift state %v (alternate %v)", dr.GetShift(), dr.GetAlternate())
		}
	})
	dr := findRecord(w.st.Service.Value, dep2)
	if stage != StagePostScaleUp || len(dr.GetShift().GetHooks()) != 1 || dr.Shift.Hooks[0].GetStatus() != hookAwaiting {
		t.Fatalf("not paused at POST_SCALE_UP: %v", dr.GetShift())
	}
	dr.Shift.Hooks[0].Status = hookSucceeded // ContinueServiceDeployment
	var stopped []string
	p := w.sim(6, 10*time.Second, func(_ int, p Plan) { stopped = append(stopped, stopIDs(p)...) })
	d := findDeployment(p.Record.GetService(), dep2)
	if len(stopped) != 2 || d.GetRolloutState() != RolloutCompleted || findRecord(p.Record, dep2).GetShift().GetStage() != StageCleanUp {
		t.Fatalf("after the hook: stopped %v, deployment %v, shift %v\n%s", stopped, d, findRecord(p.Record, dep2).GetShift(), planEvents(p))
	}
	if st, _ := deploymentStatus(d, findRecord(p.Record, dep2)); st != "SUCCESSFUL" {
		t.Fatalf("status %s", st)
	}
}

// TestComputeBlueGreenRollback rolls a shift back in place (as StopServiceDeployment and
// ContinueServiceDeployment ROLLBACK do): the old deployment is PRIMARY again and keeps
// its tasks, the new one's tasks stop, and it ends ROLLBACK_SUCCESSFUL.
func TestComputeBlueGreenRollback(t *testing.T) {
	w := newWorld(t, 2, 100, 200)
	s := w.svc()
	s.DeploymentConfiguration.Strategy = proto.String(DeployLinear)
	s.DeploymentConfiguration.LifecycleHooks = []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StageProdShift}}}
	w.running(2, dep1, time.Hour)
	w.settled(2)
	w.deploy(dep2, tdV2)
	w.sim(10, 10*time.Second, func(int, Plan) {})
	rec := w.st.Service.Value
	if sh := findRecord(rec, dep2).GetShift(); sh.GetStage() != StageProdShift || sh.GetProductionWeight() != 10 {
		t.Fatalf("first linear step: %v", sh)
	}
	if !rollbackShift(rec, findDeployment(rec.GetService(), dep2), "test.", w.st.Now) {
		t.Fatal("rollbackShift refused")
	}
	if primary(rec.GetService()).GetId() != dep1 || rec.GetService().GetTaskDefinition() != tdV1 {
		t.Fatalf("primary after rollback: %v", primary(rec.GetService()))
	}
	if st, _ := deploymentStatus(findDeployment(rec.GetService(), dep2), findRecord(rec, dep2)); st != "ROLLBACK_IN_PROGRESS" {
		t.Fatalf("status %s", st)
	}
	var stopped []string
	p := w.sim(4, 10*time.Second, func(_ int, p Plan) {
		for _, st := range p.Stop {
			if !strings.HasPrefix(w.tdOfTask(st.ID), tdV2) {
				t.Fatalf("stopped a task of the old revision: %s", st.ID)
			}
			stopped = append(stopped, st.ID)
		}
	})
	if len(stopped) != 2 {
		t.Fatalf("stopped %v, want the two new tasks", stopped)
	}
	if st, _ := deploymentStatus(findDeployment(p.Record.GetService(), dep2), findRecord(p.Record, dep2)); st != "ROLLBACK_SUCCESSFUL" {
		t.Fatalf("status %s\n%s", st, planEvents(p))
	}
}

// tdOfTask returns the task definition of task id.
func (w *world) tdOfTask(id string) string {
	for _, it := range w.st.Tasks {
		if taskIDOf(it.Value) == id {
			return it.Value.GetTask().GetTaskDefinitionArn()
		}
	}
	return ""
}

// TestBlueGreenHandlers drives a BLUE_GREEN service through the handlers and the
// reconciler: it pauses at a PAUSE hook (DescribeServiceDeployments shows the stage and
// the hook awaiting action), ContinueServiceDeployment refuses an unknown hook id,
// StopServiceDeployment ROLLBACK rolls the deployment back in place, and the rolled back
// deployment ends ROLLBACK_SUCCESSFUL with the old revision's tasks still running.
func TestBlueGreenHandlers(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td1 := e.taskDef("bg", "img:1", 128, 128, false)
	td2 := e.taskDef("bg", "img:2", 128, 128, false)
	e.createService("web", td1, 2, &ecsv1.DeploymentConfiguration{
		Strategy:       proto.String(DeployBlueGreen),
		LifecycleHooks: []*ecsv1.DeploymentLifecycleHook{{TargetType: proto.String(hookPause), LifecycleStages: []string{StagePostScaleUp}}},
	})
	first := e.settle("web", 10).GetCurrentServiceDeployment()
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(td2)})
	var sd *ecsv1.ServiceDeployment
	for range 10 {
		e.step()
		cur := e.service("web").GetCurrentServiceDeployment()
		sd = must(e, e.h.DescribeServiceDeployments, &ecsv1.DescribeServiceDeploymentsRequest{ServiceDeploymentArns: []string{cur}}).GetServiceDeployments()[0]
		if len(sd.GetLifecycleHookDetails()) == 1 {
			break
		}
	}
	if sd.GetLifecycleStage() != StagePostScaleUp || sd.GetStatus() != "IN_PROGRESS" || len(sd.GetLifecycleHookDetails()) != 1 ||
		sd.GetLifecycleHookDetails()[0].GetStatus() != hookAwaiting || len(sd.GetSourceServiceRevisions()) != 1 {
		t.Fatalf("paused deployment %v", sd)
	}
	if c := e.count("web"); c.byTD[td1] != 2 || c.byTD[td2] != 2 {
		t.Fatalf("tasks while paused: %v", c.byTD)
	}
	_, err := call(e, e.h.ContinueServiceDeployment, &ecsv1.ContinueServiceDeploymentRequest{ServiceDeploymentArn: sd.ServiceDeploymentArn, HookId: proto.String("ecs-pause-nope")})
	wantErr(t, err, "InvalidParameterException")
	must(e, e.h.StopServiceDeployment, &ecsv1.StopServiceDeploymentRequest{ServiceDeploymentArn: sd.ServiceDeploymentArn})
	s := e.settle("web", 10)
	if s.GetTaskDefinition() != td1 || e.count("web").byTD[td2] != 0 || e.count("web").byTD[td1] != 2 {
		t.Fatalf("after rollback: td %s tasks %v", s.GetTaskDefinition(), e.count("web").byTD)
	}
	got := map[string]string{}
	for _, b := range must(e, e.h.ListServiceDeployments, &ecsv1.ListServiceDeploymentsRequest{Cluster: proto.String("c1"), Service: proto.String("web")}).GetServiceDeployments() {
		got[b.GetServiceDeploymentArn()] = b.GetStatus()
	}
	if got[sd.GetServiceDeploymentArn()] != "ROLLBACK_SUCCESSFUL" || got[first] != "SUCCESSFUL" {
		t.Fatalf("deployments %v", got)
	}
	d := must(e, e.h.DescribeServiceDeployments, &ecsv1.DescribeServiceDeploymentsRequest{ServiceDeploymentArns: []string{sd.GetServiceDeploymentArn()}}).GetServiceDeployments()[0]
	if d.GetRollback() == nil || !strings.Contains(d.GetRollback().GetServiceRevisionArn(), strings.TrimPrefix(first[strings.LastIndex(first, "/"):], "/")) {
		t.Fatalf("rollback section %v (first %s)", d.GetRollback(), first)
	}
}
