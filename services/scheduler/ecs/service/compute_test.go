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
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Compute's tests build a State in memory (no etcd), in the style of Nomad's reconciler
// tests: a builder for the service, its deployments, tasks and instances; Compute; then
// assertions on the Plan. sim runs several passes with a scripted agent in between.

var (
	t0         = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testScopeC = keys.Scope{Account: "000000000001", Region: "us-east-1"}
)

const (
	tdV1 = "arn:aws:ecs:us-east-1:000000000001:task-definition/web:1"
	tdV2 = "arn:aws:ecs:us-east-1:000000000001:task-definition/web:2"
	tdV3 = "arn:aws:ecs:us-east-1:000000000001:task-definition/web:3"
	tdHC = "arn:aws:ecs:us-east-1:000000000001:task-definition/checked:1"
	dep1 = "ecs-svc/1000000000000000001"
	dep2 = "ecs-svc/1000000000000000002"
	dep3 = "ecs-svc/1000000000000000003"
)

// world is one service's State under construction.
type world struct {
	t   testing.TB
	st  State
	pol Policy
	seq int
}

// newWorld returns a REPLICA service "web" of desired tasks with the given
// minimumHealthyPercent and maximumPercent, one PRIMARY deployment dep1 of tdV1 that has
// COMPLETED, and three ACTIVE instances i1..i3; the policy is the default one (40 s
// StableAfter, backoff after 3 failures from 5 s, breaker floor 10).
func newWorld(t testing.TB, desired, minPct, maxPct int32) *world {
	t.Helper()
	svc := &ecsv1.Service{
		ServiceName: proto.String("web"), Status: proto.String(StatusActive), SchedulingStrategy: proto.String(StrategyReplica),
		DesiredCount: desired, TaskDefinition: proto.String(tdV1), LaunchType: proto.String("EC2"),
		DeploymentConfiguration: &ecsv1.DeploymentConfiguration{
			MinimumHealthyPercent: proto.Int32(minPct), MaximumPercent: proto.Int32(maxPct),
			DeploymentCircuitBreaker: &ecsv1.DeploymentCircuitBreaker{},
		},
		Deployments: []*ecsv1.Deployment{{
			Id: proto.String(dep1), Status: proto.String(DeploymentPrimary), TaskDefinition: proto.String(tdV1),
			DesiredCount: desired, CreatedAt: proto.Float64(awsapi.Epoch(t0.Add(-time.Hour))), UpdatedAt: proto.Float64(awsapi.Epoch(t0.Add(-time.Hour))),
			RolloutState: proto.String(RolloutCompleted),
		}},
	}
	plain := func(arn string) *ecsv1.TaskDefinition {
		return &ecsv1.TaskDefinition{TaskDefinitionArn: proto.String(arn), ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app")}}}
	}
	checked := plain(tdHC)
	checked.ContainerDefinitions[0].HealthCheck = &ecsv1.HealthCheck{Command: []string{"CMD", "true"}}
	w := &world{t: t, st: State{
		Account: testScopeC,
		Service: store.Item[*storev1.ServiceRecord]{
			Key:         keys.Service(testScopeC, "c1", "web"),
			Value:       &storev1.ServiceRecord{Service: svc, ClusterName: "c1", Deployments: []*storev1.DeploymentRecord{{Id: dep1}}},
			ModRevision: 7,
		},
		Instances:       map[string]store.Item[*storev1.ContainerInstanceRecord]{},
		TaskDefinitions: map[string]*ecsv1.TaskDefinition{tdV1: plain(tdV1), tdV2: plain(tdV2), tdV3: plain(tdV3), tdHC: checked},
		Now:             t0,
	}, pol: Policy{
		StableAfter: DefaultStableAfter, BackoffAfter: DefaultBackoffAfter, BackoffBase: DefaultBackoffBase,
		BackoffCap: DefaultBackoffCap, BreakerMinThreshold: DefaultBreakerMinThreshold,
	}}
	w.instance("i1", "i2", "i3")
	return w
}

func (w *world) svc() *ecsv1.Service { return w.st.Service.Value.GetService() }

// instance adds ACTIVE container instances.
func (w *world) instance(ids ...string) {
	for _, id := range ids {
		w.st.Instances[id] = store.Item[*storev1.ContainerInstanceRecord]{
			Key:   keys.Instance(testScopeC, "c1", id),
			Value: &storev1.ContainerInstanceRecord{ContainerInstance: &ecsv1.ContainerInstance{Status: proto.String(StatusActive)}, ClusterName: "c1"},
		}
	}
}

// drain sets an instance DRAINING, as UpdateContainerInstancesState does.
func (w *world) drain(id string) {
	w.st.Instances[id].Value.ContainerInstance.Status = proto.String("DRAINING")
	w.st.Instances[id].Value.OperatorDrain = true
}

// deploy starts deployment id of td, as UpdateService does: the PRIMARY one becomes
// ACTIVE.
func (w *world) deploy(id, td string) {
	s := w.svc()
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == DeploymentPrimary {
			d.Status = proto.String(DeploymentActive)
		}
	}
	s.Deployments = append([]*ecsv1.Deployment{newDeployment(id, td, s.GetDesiredCount(), "EC2", nil, w.st.Now)}, s.Deployments...)
	s.TaskDefinition = proto.String(td)
	w.st.Service.Value.Deployments = append(w.st.Service.Value.Deployments, &storev1.DeploymentRecord{Id: id})
}

// tdOf returns the task definition of deployment id.
func (w *world) tdOf(id string) string {
	if d := findDeployment(w.svc(), id); d != nil {
		return d.GetTaskDefinition()
	}
	if set := findTaskSet(w.svc(), id); set != nil {
		return set.GetTaskDefinition()
	}
	w.t.Fatalf("no deployment %s", id)
	return ""
}

// task adds one task of deployment dep with lastStatus last (desired RUNNING unless
// STOPPED), created age ago and, when RUNNING, started then; instances are used in turn.
// It returns the task id.
func (w *world) task(dep, last string, age time.Duration) *storev1.TaskRecord {
	w.seq++
	id := fmt.Sprintf("t%03d", w.seq)
	ids := make([]string, 0, len(w.st.Instances))
	for k := range w.st.Instances {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	inst := ids[(w.seq-1)%len(ids)]
	created := w.st.Now.Add(-age)
	t := &ecsv1.Task{
		TaskArn:           proto.String("arn:aws:ecs:us-east-1:000000000001:task/c1/" + id),
		TaskDefinitionArn: proto.String(w.tdOf(dep)),
		LastStatus:        proto.String(last), DesiredStatus: proto.String("RUNNING"),
		StartedBy: proto.String(dep), CreatedAt: proto.Float64(awsapi.Epoch(created) + float64(w.seq)/1e6),
		Containers: []*ecsv1.Container{{Name: proto.String("app"), LastStatus: proto.String(last)}},
	}
	if last == "RUNNING" {
		t.StartedAt = proto.Float64(awsapi.Epoch(created))
	}
	if last == "STOPPED" {
		t.DesiredStatus = proto.String("STOPPED")
	}
	rec := &storev1.TaskRecord{Task: t, ClusterName: "c1", ContainerInstanceId: inst, ServiceName: "web", DeploymentId: dep}
	w.st.Tasks = append(w.st.Tasks, store.Item[*storev1.TaskRecord]{Key: keys.Task(testScopeC, "c1", id), Value: rec, ModRevision: int64(100 + w.seq)})
	return rec
}

// running adds n RUNNING tasks of dep started age ago, and returns their ids.
func (w *world) running(n int, dep string, age time.Duration) []string {
	var ids []string
	for range n {
		ids = append(ids, taskIDOf(w.task(dep, "RUNNING", age)))
	}
	return ids
}

// failed adds n tasks of dep that stopped on their own (EssentialContainerExited).
func (w *world) failed(n int, dep string, age time.Duration) {
	for range n {
		t := w.task(dep, "STOPPED", age).Task
		t.StopCode, t.StoppedReason = proto.String("EssentialContainerExited"), proto.String("Essential container in task exited")
	}
}

func taskIDOf(rec *storev1.TaskRecord) string {
	a := rec.GetTask().GetTaskArn()
	return a[strings.LastIndexByte(a, '/')+1:]
}

// compute runs Compute and checks it left its input alone.
func (w *world) compute() Plan {
	w.t.Helper()
	before := proto.Clone(w.st.Service.Value)
	tasksBefore := make([]proto.Message, len(w.st.Tasks))
	for i, it := range w.st.Tasks {
		tasksBefore[i] = proto.Clone(it.Value)
	}
	p, err := Compute(w.st, w.pol)
	if err != nil {
		w.t.Fatalf("Compute: %v", err)
	}
	if !proto.Equal(before, w.st.Service.Value) {
		w.t.Fatal("Compute modified the service record it was given")
	}
	for i, it := range w.st.Tasks {
		if !proto.Equal(tasksBefore[i], it.Value) {
			w.t.Fatalf("Compute modified task %s", it.Key)
		}
	}
	if p.Service.Key != w.st.Service.Key || p.Service.ModRevision != w.st.Service.ModRevision {
		w.t.Fatalf("plan writes %s@%d, read %s@%d", p.Service.Key, p.Service.ModRevision, w.st.Service.Key, w.st.Service.ModRevision)
	}
	return p
}

// stops returns the ids a plan stops, by reason.
func stops(p Plan) map[string][]string {
	out := map[string][]string{}
	for _, s := range p.Stop {
		out[s.Reason] = append(out[s.Reason], s.ID)
	}
	return out
}

func stopIDs(p Plan) []string {
	var out []string
	for _, s := range p.Stop {
		out = append(out, s.ID)
	}
	return out
}

func planEvents(p Plan) string { return strings.Join(append(slices.Clone(p.Events), p.After...), "\n") }

func scaleIn(dep string) string { return fmt.Sprintf(ReasonScaleIn, dep) }

// settled marks the record as a previous pass left a steady service: counts set and the
// steady-state event newest.
func (w *world) settled(running int32) {
	s := w.svc()
	s.RunningCount = running
	primary(s).RunningCount = running
	s.Events = []*ecsv1.ServiceEvent{{Id: proto.String("e1"), CreatedAt: proto.Float64(awsapi.Epoch(t0)), Message: proto.String("(service web) has reached a steady state.")}}
}

func TestComputeSteadyStateIsNoOp(t *testing.T) {
	w := newWorld(t, 3, 100, 200)
	w.running(3, dep1, time.Hour)
	w.settled(3)
	p := w.compute()
	if len(p.Stop) != 0 || p.Launch.Count != 0 || len(p.Events)+len(p.After) != 0 || p.Breaker != nil {
		t.Fatalf("steady service: plan stops %v launches %d events %q", stopIDs(p), p.Launch.Count, planEvents(p))
	}
	if !proto.Equal(p.Record, w.st.Service.Value) {
		t.Fatalf("steady service: record changed:\n%v\nwas\n%v", p.Record, w.st.Service.Value)
	}

	// The same tasks before the record knew their counts: counts and the steady event,
	// nothing else.
	w = newWorld(t, 3, 100, 200)
	w.running(3, dep1, time.Hour)
	p = w.compute()
	if len(p.Stop) != 0 || p.Launch.Count != 0 {
		t.Fatalf("plan stops %v launches %d", stopIDs(p), p.Launch.Count)
	}
	if s := p.Record.GetService(); s.GetRunningCount() != 3 || primary(s).GetRunningCount() != 3 {
		t.Fatalf("counts not recorded: %v", s)
	}
	if len(p.Events) != 0 || len(p.After) != 1 || p.After[0] != "(service web) has reached a steady state." {
		t.Fatalf("events %q / %q", p.Events, p.After)
	}
}

func TestComputeScale(t *testing.T) {
	for _, tc := range []struct {
		name             string
		desired          int32
		running          int
		launch           int
		stop             int
		keepOldestRunner bool
	}{
		{name: "up from zero", desired: 4, running: 0, launch: 4},
		{name: "up", desired: 5, running: 3, launch: 2},
		{name: "down", desired: 2, running: 4, stop: 2, keepOldestRunner: true},
		{name: "down to zero", desired: 0, running: 3, stop: 3},
		{name: "at count", desired: 3, running: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.desired, 100, 200)
			ids := w.running(tc.running, dep1, time.Hour)
			p := w.compute()
			if p.Launch.Count != tc.launch || len(p.Stop) != tc.stop {
				t.Fatalf("launch %d stop %d, want %d and %d", p.Launch.Count, len(p.Stop), tc.launch, tc.stop)
			}
			if tc.launch > 0 && (p.Launch.Deployment != dep1 || p.Launch.TaskDefinition != tdV1 || p.Launch.Instances != nil) {
				t.Fatalf("launch %+v", p.Launch)
			}
			for _, s := range p.Stop {
				if s.Reason != scaleIn(dep1) {
					t.Fatalf("stop %s reason %q", s.ID, s.Reason)
				}
			}
			if tc.keepOldestRunner && !slices.Equal(stopIDs(p), ids[tc.desired:]) {
				t.Fatalf("stopped %v, want the newest %v", stopIDs(p), ids[tc.desired:])
			}
			if tc.stop > 0 && !strings.Contains(planEvents(p), fmt.Sprintf("has stopped %d running tasks", tc.stop)) {
				t.Fatalf("events %q", planEvents(p))
			}
		})
	}
}

// A rolling update's first pass with three old tasks: minimumHealthyPercent rounds up
// and maximumPercent down, as AWS rounds them.
func TestComputeRollingUpdateRounding(t *testing.T) {
	for _, tc := range []struct {
		minPct, maxPct int32
		desired        int32
		launch, stop   int
	}{
		{minPct: 100, maxPct: 200, desired: 3, launch: 3, stop: 0}, // min 3, max 6
		{minPct: 50, maxPct: 100, desired: 3, launch: 0, stop: 1},  // min ceil(1.5)=2, max 3
		{minPct: 0, maxPct: 100, desired: 3, launch: 0, stop: 3},   // min 0, max 3
		{minPct: 50, maxPct: 150, desired: 3, launch: 1, stop: 1},  // min 2, max floor(4.5)=4
		{minPct: 100, maxPct: 200, desired: 4, launch: 4, stop: 0}, // min 4, max 8
		{minPct: 50, maxPct: 100, desired: 4, launch: 0, stop: 2},  // min 2, max 4
	} {
		t.Run(fmt.Sprintf("%d-%d-of-%d", tc.minPct, tc.maxPct, tc.desired), func(t *testing.T) {
			w := newWorld(t, tc.desired, tc.minPct, tc.maxPct)
			old := w.running(int(tc.desired), dep1, time.Hour)
			w.deploy(dep2, tdV2)
			p := w.compute()
			if p.Launch.Count != tc.launch || len(p.Stop) != tc.stop {
				t.Fatalf("launch %d stop %d, want %d and %d", p.Launch.Count, len(p.Stop), tc.launch, tc.stop)
			}
			if tc.launch > 0 && (p.Launch.Deployment != dep2 || p.Launch.TaskDefinition != tdV2) {
				t.Fatalf("launch %+v, want deployment %s of %s", p.Launch, dep2, tdV2)
			}
			if !slices.Equal(stopIDs(p), old[:tc.stop]) {
				t.Fatalf("stopped %v, want the oldest %d of %v", stopIDs(p), tc.stop, old)
			}
			if left := int(tc.desired) - tc.stop; left < MinHealthy(tc.desired, tc.minPct) {
				t.Fatalf("%d left running, below the minimum %d", left, MinHealthy(tc.desired, tc.minPct))
			}
			d := findDeployment(p.Record.GetService(), dep1)
			if d.GetStatus() != DeploymentActive || d.GetDesiredCount() != tc.desired {
				t.Fatalf("old deployment %v", d)
			}
		})
	}
}

// sim plays passes against a scripted agent: before each pass the agent stops the tasks
// ordered to stop and starts the pending ones; launched tasks are PENDING; the clock
// moves step between passes. check runs on every plan.
func (w *world) sim(passes int, step time.Duration, check func(pass int, p Plan)) Plan {
	w.t.Helper()
	var p Plan
	for i := range passes {
		for _, it := range w.st.Tasks {
			t := it.Value.GetTask()
			switch {
			case t.GetLastStatus() == "STOPPED":
			case t.GetDesiredStatus() == "STOPPED":
				t.LastStatus = proto.String("STOPPED")
			case t.GetLastStatus() == "PENDING":
				t.LastStatus, t.StartedAt = proto.String("RUNNING"), proto.Float64(awsapi.Epoch(w.st.Now))
			}
		}
		p = w.compute()
		check(i, p)
		for _, s := range p.Stop {
			for _, it := range w.st.Tasks {
				if it.Key == s.Task.Key {
					t := it.Value.GetTask()
					t.DesiredStatus, t.StopCode, t.StoppedReason = proto.String("STOPPED"), proto.String(StopCodeScheduler), proto.String(s.Reason)
				}
			}
		}
		for range p.Launch.Count {
			w.task(p.Launch.Deployment, "PENDING", 0)
		}
		w.st.Service.Value = p.Record
		w.st.Service.ModRevision++
		w.st.Now = w.st.Now.Add(step)
	}
	return p
}

// countedLive returns the tasks that count toward minimumHealthyPercent: desired RUNNING,
// RUNNING, for StableAfter.
func (w *world) countedLive(except []string) int {
	n := 0
	for _, it := range w.st.Tasks {
		t := it.Value.GetTask()
		if t.GetDesiredStatus() == "RUNNING" && t.GetLastStatus() == "RUNNING" && !slices.Contains(except, taskIDOf(it.Value)) &&
			!w.st.Now.Before(awsapi.FromEpoch(t.GetStartedAt()).Add(w.pol.StableAfter)) {
			n++
		}
	}
	return n
}

// A second update while the first rollout's tasks have only just started: the old
// deployment's tasks, which count, stay until new ones count; the superseded rollout's
// uncounted tasks go first. At no pass do the counting tasks fall below the minimum, and
// the service converges on the newest deployment.
func TestComputeSecondUpdateKeepsMinimumHealthy(t *testing.T) {
	for _, pct := range [][2]int32{{100, 200}, {50, 200}, {100, 150}} {
		t.Run(fmt.Sprintf("%d-%d", pct[0], pct[1]), func(t *testing.T) {
			w := newWorld(t, 4, pct[0], pct[1])
			minHealthy := MinHealthy(4, pct[0])
			w.running(4, dep1, time.Hour)
			w.deploy(dep2, tdV2)
			w.running(4, dep2, 5*time.Second) // RUNNING, not yet counted
			w.deploy(dep3, tdV3)
			last := w.sim(40, 10*time.Second, func(pass int, p Plan) {
				if got := w.countedLive(stopIDs(p)); got < minHealthy {
					t.Fatalf("pass %d: %d counted tasks left after stopping %v, below the minimum %d", pass, got, stopIDs(p), minHealthy)
				}
				if pass == 0 && pct[0] == 100 {
					for _, s := range p.Stop {
						if s.Task.Value.GetDeploymentId() == dep1 {
							t.Fatalf("pass 0 stopped %s of the old deployment while the new ones did not count yet", s.ID)
						}
					}
				}
			})
			s := last.Record.GetService()
			if len(s.GetDeployments()) < 1 || s.GetDeployments()[0].GetId() != dep3 || s.GetDeployments()[0].GetRolloutState() != RolloutCompleted ||
				s.GetRunningCount() != 4 || findDeployment(s, dep1).GetStatus() != DeploymentInactive || findDeployment(s, dep2).GetStatus() != DeploymentInactive {
				t.Fatalf("did not converge on %s: %v", dep3, s.GetDeployments())
			}
		})
	}
}

func TestComputeCircuitBreaker(t *testing.T) {
	for _, tc := range []struct {
		name              string
		failed            int
		rollback          bool
		wantFailed        bool
		wantRollbackStart bool
	}{
		{name: "below threshold", failed: 9, rollback: true},
		{name: "at threshold, rollback", failed: 10, rollback: true, wantFailed: true, wantRollbackStart: true},
		{name: "at threshold, no rollback", failed: 10, wantFailed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3, 100, 200)
			w.svc().DeploymentConfiguration.DeploymentCircuitBreaker = &ecsv1.DeploymentCircuitBreaker{Enable: true, Rollback: tc.rollback}
			w.running(3, dep1, time.Hour)
			w.deploy(dep2, tdV2)
			w.failed(tc.failed, dep2, time.Minute)
			w.pol.BackoffAfter = 1000 // the breaker alone
			w.pol.NewDeploymentID = func() string { return dep3 }
			p := w.compute()
			s := p.Record.GetService()
			d2 := findDeployment(s, dep2)
			if d2.GetFailedTasks() != int32(tc.failed) {
				t.Fatalf("failedTasks %d, want %d", d2.GetFailedTasks(), tc.failed)
			}
			if got := d2.GetRolloutState() == RolloutFailed; got != tc.wantFailed {
				t.Fatalf("deployment %s rollout %s", dep2, d2.GetRolloutState())
			}
			if tc.wantFailed != strings.Contains(planEvents(p), "deployment failed: tasks failed to start") {
				t.Fatalf("events %q", planEvents(p))
			}
			if len(p.Stop) != 0 {
				t.Fatalf("stopped %v: the old deployment's tasks stay", stopIDs(p))
			}
			if got := p.Breaker != nil; got != tc.wantFailed {
				t.Fatalf("breaker decision %+v, want tripped %v", p.Breaker, tc.wantFailed)
			}
			if tc.wantFailed && (p.Breaker.Failed != dep2 || p.Breaker.FailedTasks != 10 || p.Breaker.Threshold != 10) {
				t.Fatalf("breaker decision %+v", p.Breaker)
			}
			switch {
			case tc.wantRollbackStart:
				// The failed deployment is no longer PRIMARY and, none of its tasks left,
				// INACTIVE at once.
				prim := primary(s)
				if p.Breaker.RolledBackTo != dep1 || p.Breaker.NewID != dep3 || prim.GetId() != dep3 ||
					prim.GetTaskDefinition() != tdV1 || d2.GetStatus() != DeploymentInactive || !deploymentRecord(p.Record, dep3).GetRollback() {
					t.Fatalf("rollback %+v, primary %v, failed deployment %v", p.Breaker, prim, d2)
				}
				if p.Launch.Deployment != prim.GetId() || p.Launch.TaskDefinition != tdV1 || p.Launch.Count != 3 {
					t.Fatalf("launch %+v, want 3 of the rollback deployment", p.Launch)
				}
				if !strings.Contains(planEvents(p), "rolling back to deployment "+dep1) {
					t.Fatalf("events %q", planEvents(p))
				}
			case tc.wantFailed:
				if p.Breaker.NewID != "" || p.Launch.Count != 0 || primary(s).GetId() != dep2 {
					t.Fatalf("failed without rollback: %+v, launch %+v", p.Breaker, p.Launch)
				}
			default:
				if p.Launch.Count != 3 || p.Launch.Deployment != dep2 {
					t.Fatalf("launch %+v", p.Launch)
				}
			}
		})
	}
}

// A crash loop: tasks RUNNING for an instant never count, so the deployment never
// completes and the breaker can trip; once they stay up StableAfter it completes.
func TestComputeCrashLoopNeverCompletes(t *testing.T) {
	w := newWorld(t, 2, 100, 200)
	w.svc().Deployments[0].RolloutState = proto.String(RolloutInProgress)
	w.running(2, dep1, time.Second)
	p := w.compute()
	if primary(p.Record.GetService()).GetRolloutState() != RolloutInProgress || strings.Contains(planEvents(p), "steady") {
		t.Fatalf("tasks up 1s completed the deployment: %v %q", primary(p.Record.GetService()), planEvents(p))
	}
	w.st.Now = w.st.Now.Add(DefaultStableAfter)
	p = w.compute()
	if primary(p.Record.GetService()).GetRolloutState() != RolloutCompleted || deploymentRecord(p.Record, dep1).GetFinishedAt() == nil ||
		!strings.Contains(planEvents(p), "deployment completed") || !strings.Contains(planEvents(p), "steady state") {
		t.Fatalf("tasks up 41s did not complete the deployment: %v %q", primary(p.Record.GetService()), planEvents(p))
	}
}

func TestComputeDaemon(t *testing.T) {
	w := newWorld(t, 0, 0, 100)
	w.svc().SchedulingStrategy = proto.String(StrategyDaemon)
	w.instance("i4")
	w.running(1, dep1, time.Hour)         // on i1
	onI2 := w.running(1, dep1, time.Hour) // on i2
	w.seq += 1                            // skip i3
	onI4 := w.running(1, dep1, time.Hour) // on i4
	w.drain("i2")                         // no longer eligible
	w.st.Eligible = []string{"i1", "i3"}  // i2 draining; i4 fails a constraint
	p := w.compute()
	if s := p.Record.GetService(); s.GetDesiredCount() != 2 || primary(s).GetDesiredCount() != 2 {
		t.Fatalf("desired %d, want the 2 eligible instances", s.GetDesiredCount())
	}
	if !slices.Equal(p.Launch.Instances, []string{"i3"}) || p.Launch.Count != 1 {
		t.Fatalf("launch %+v, want one on i3", p.Launch)
	}
	got := stops(p)
	if !slices.Equal(got[ReasonDraining], onI2) || !slices.Equal(got[scaleIn(dep1)], onI4) || len(p.Stop) != 2 {
		t.Fatalf("stops %v, want %v draining and %v scaled in", got, onI2, onI4)
	}
}

// A draining instance's task is replaced first and stopped once its replacement counts
// (minimumHealthyPercent 100).
func TestComputeDrainingInstanceReplaced(t *testing.T) {
	w := newWorld(t, 3, 100, 200)
	ids := w.running(3, dep1, time.Hour) // i1, i2, i3
	w.settled(3)
	w.drain("i2")
	p := w.compute()
	if p.Launch.Count != 1 || len(p.Stop) != 0 {
		t.Fatalf("pass 1: launch %d stop %v, want 1 launch and no stop", p.Launch.Count, stopIDs(p))
	}
	w.sim(1, 0, func(int, Plan) {}) // the replacement is PENDING
	w.sim(1, DefaultStableAfter, func(int, Plan) {})
	p = w.compute() // RUNNING for StableAfter: it counts
	if got := stops(p)[ReasonDraining]; !slices.Equal(got, ids[1:2]) || len(p.Stop) != 1 || p.Launch.Count != 0 {
		t.Fatalf("stops %v launch %d, want %v stopped as draining", stops(p), p.Launch.Count, ids[1:2])
	}
}

func TestComputeLaunchBackoff(t *testing.T) {
	w := newWorld(t, 1, 100, 200)
	w.failed(3, dep1, time.Minute)
	p := w.compute()
	dr := deploymentRecord(p.Record, dep1)
	if dr.GetFailedLaunches() != 3 || !dr.GetNextLaunchAt().AsTime().Equal(t0.Add(DefaultBackoffBase)) {
		t.Fatalf("after 3 failures: %v, want next launch at %v", dr, t0.Add(DefaultBackoffBase))
	}
	if p.Launch.Count != 0 || !strings.Contains(planEvents(p), "unable to consistently start tasks successfully") {
		t.Fatalf("launched %d while backing off; events %q", p.Launch.Count, planEvents(p))
	}

	// Still inside the delay: nothing; once it ran out: one launch, the delay kept.
	w.st.Service.Value = p.Record
	w.st.Now = t0.Add(DefaultBackoffBase - time.Millisecond)
	if p = w.compute(); p.Launch.Count != 0 {
		t.Fatalf("launched %d inside the delay", p.Launch.Count)
	}
	w.st.Now = t0.Add(DefaultBackoffBase)
	if p = w.compute(); p.Launch.Count != 1 || deploymentRecord(p.Record, dep1).GetFailedLaunches() != 3 {
		t.Fatalf("after the delay: launch %d, record %v", p.Launch.Count, deploymentRecord(p.Record, dep1))
	}

	// A fourth failure doubles the delay; a task that stays up resets the count.
	w.st.Service.Value = p.Record
	w.failed(1, dep1, 0)
	p = w.compute()
	if dr := deploymentRecord(p.Record, dep1); dr.GetFailedLaunches() != 4 || !dr.GetNextLaunchAt().AsTime().Equal(w.st.Now.Add(2*DefaultBackoffBase)) {
		t.Fatalf("after 4 failures: %v", dr)
	}
	w.st.Service.Value = p.Record
	w.running(1, dep1, 0)
	w.st.Now = w.st.Now.Add(DefaultStableAfter)
	p = w.compute()
	if dr := deploymentRecord(p.Record, dep1); dr.GetFailedLaunches() != 0 || dr.NextLaunchAt != nil {
		t.Fatalf("a stable task did not reset the backoff: %v", dr)
	}
}

func TestComputeUnhealthyReplaced(t *testing.T) {
	w := newWorld(t, 2, 100, 200)
	w.svc().Deployments[0].TaskDefinition = proto.String(tdHC)
	w.svc().HealthCheckGracePeriodSeconds = proto.Int32(60)
	ids := w.running(2, dep1, 30*time.Second)
	w.st.Tasks[0].Value.Task.Containers[0].HealthStatus = proto.String("UNHEALTHY")
	w.st.Tasks[1].Value.Task.Containers[0].HealthStatus = proto.String("HEALTHY")
	if p := w.compute(); len(p.Stop) != 0 {
		t.Fatalf("stopped %v inside the grace period", stopIDs(p))
	}
	w.st.Now = w.st.Now.Add(time.Minute)
	p := w.compute()
	if got := stops(p)[ReasonUnhealthy]; !slices.Equal(got, ids[:1]) || p.Launch.Count != 1 {
		t.Fatalf("stops %v launch %d, want %v as unhealthy and one launch", stops(p), p.Launch.Count, ids[:1])
	}
	if !strings.Contains(planEvents(p), "(task "+ids[0]+") failed container health checks") {
		t.Fatalf("events %q", planEvents(p))
	}
}

func TestComputeDeletedService(t *testing.T) {
	w := newWorld(t, 0, 100, 200)
	w.svc().Status = proto.String(StatusDraining)
	ids := w.running(2, dep1, time.Hour)
	p := w.compute()
	if got := stops(p)[ReasonServiceDeleted]; !slices.Equal(got, ids) || p.Launch.Count != 0 || p.Record.GetService().GetStatus() != StatusDraining {
		t.Fatalf("stops %v launch %d status %s", stops(p), p.Launch.Count, p.Record.GetService().GetStatus())
	}
	w.st.Tasks = nil
	if p = w.compute(); p.Record.GetService().GetStatus() != StatusInactive {
		t.Fatalf("no task left: status %s, want INACTIVE", p.Record.GetService().GetStatus())
	}
}

func TestComputeErrors(t *testing.T) {
	w := newWorld(t, 1, 100, 200)
	w.running(1, dep1, time.Hour)
	delete(w.st.TaskDefinitions, tdV1)
	if _, err := Compute(w.st, w.pol); err == nil || !strings.Contains(err.Error(), tdV1) {
		t.Fatalf("missing task definition: %v", err)
	}
	w = newWorld(t, 1, 100, 200)
	w.svc().Deployments[0].Status = proto.String(DeploymentActive)
	if _, err := Compute(w.st, w.pol); err == nil || !strings.Contains(err.Error(), "no PRIMARY") {
		t.Fatalf("no PRIMARY deployment: %v", err)
	}
}
