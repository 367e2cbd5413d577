package service

import (
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
)

// Task set states (TaskSet in the ECS API reference): status PRIMARY (the one serving
// production traffic; at most one), ACTIVE, DRAINING (deleted: its tasks are being
// stopped; it leaves taskSets[] once none is left); stabilityStatus STEADY_STATE or
// STABILIZING.
const (
	TaskSetPrimary     = "PRIMARY"
	TaskSetActive      = "ACTIVE"
	TaskSetDraining    = "DRAINING"
	StabilitySteady    = "STEADY_STATE"
	StabilityStabilize = "STABILIZING"
	// ControllerExternal is the deploymentController type whose tasks are grouped in task
	// sets the caller manages (CreateTaskSet and the like) instead of deployments.
	ControllerExternal = "EXTERNAL"
)

// external reports whether s uses the EXTERNAL deployment controller.
func external(s *ecsv1.Service) bool {
	return s.GetDeploymentController().GetType() == ControllerExternal
}

// ComputedDesiredCount is a task set's computedDesiredCount as the ECS API reference
// defines it: the service's desiredCount times the task set's scale percentage, rounded
// up (1.2 tasks is 2); 0 for a DRAINING task set.
func ComputedDesiredCount(desired int32, scalePercent float64) int32 {
	if desired <= 0 || scalePercent <= 0 {
		return 0
	}
	// Rounded to 1e-9 first so that 3 × 33.333333333 does not become 2.
	v := math.Round(float64(desired)*scalePercent/100*1e9) / 1e9
	return int32(math.Ceil(v))
}

// computeExternal is Compute for a service under the EXTERNAL deployment controller: each
// task set not DRAINING is reconciled like a deployment of its own with its
// computedDesiredCount (healthy tasks kept first, then the oldest; unhealthy ones and
// those on instances that are not ACTIVE replaced; the excess stopped at once, as a task
// set's scale takes effect at once on AWS), tasks of DRAINING task sets or of no task set
// are stopped, a DRAINING task set without tasks leaves the list, the counts and
// stabilityStatus of every task set are recorded, and a deleted service without tasks
// becomes INACTIVE. The launch backoff applies per task set (its DeploymentRecord).
func computeExternal(st State, pol Policy) (Plan, error) {
	at := ts // the loop below names its task sets ts
	rec := proto.Clone(st.Service.Value).(*storev1.ServiceRecord)
	s := rec.GetService()
	name := s.GetServiceName()
	plan := Plan{Account: st.Account, Service: st.Service, Record: rec}
	views, err := classify(st, pol, s)
	if err != nil {
		return Plan{}, err
	}
	ev := &events{svc: name, now: st.Now}
	deleting := s.GetStatus() == StatusDraining
	byDep := map[string][]*view{}
	for _, v := range views {
		byDep[v.dep] = append(byDep[v.dep], v)
	}
	sets := map[string]*ecsv1.TaskSet{}
	for _, ts := range s.GetTaskSets() {
		sets[ts.GetId()] = ts
	}
	var stopped []string
	stop := func(v *view, reason string) {
		plan.Stop = append(plan.Stop, Stop{Task: v.item, ID: v.id, Reason: reason})
		v.live, v.stopping = false, true
		stopped = append(stopped, v.id)
	}
	// Tasks of no task set (deleted with the service, or a task set gone) go at once.
	for dep, vs := range byDep {
		if ts := sets[dep]; ts != nil && ts.GetStatus() != TaskSetDraining && !deleting {
			continue
		}
		for _, v := range vs {
			if v.live {
				reason := fmt.Sprintf(ReasonScaleIn, dep)
				if deleting {
					reason = ReasonServiceDeleted
				}
				stop(v, reason)
			}
		}
	}
	steadyAll := !deleting
	for _, ts := range s.GetTaskSets() {
		id := ts.GetId()
		vs := byDep[id]
		if ts.GetStatus() == TaskSetDraining || deleting {
			ts.ComputedDesiredCount = 0
		} else {
			ts.ComputedDesiredCount = ComputedDesiredCount(s.GetDesiredCount(), ts.GetScale().GetValue())
		}
		want := int(ts.GetComputedDesiredCount())
		dr := deploymentRecord(rec, id)
		_, consecutive := failureCounts(vs)
		switch {
		case consecutive == 0:
			dr.FailedLaunches, dr.NextLaunchAt = 0, nil
		case consecutive > int(dr.GetFailedLaunches()):
			dr.FailedLaunches = int32(consecutive)
			if delay := LaunchDelay(consecutive, pol.BackoffAfter, pol.BackoffBase, pol.BackoffCap); delay > 0 {
				dr.NextLaunchAt = at(st.Now.Add(delay))
				ev.add(fmt.Sprintf("(service %s) (taskSet %s) is unable to consistently start tasks successfully. For more information, see the Troubleshooting section.", name, id))
			}
		default:
			dr.FailedLaunches = int32(consecutive)
		}
		kept := 0
		for _, v := range liveInKeepOrder(vs, nil) {
			switch {
			case v.unhealthy:
				ev.add(fmt.Sprintf("(service %s) (task %s) failed container health checks.", name, v.id))
				stop(v, ReasonUnhealthy)
			case v.draining:
				stop(v, ReasonDraining)
			case kept >= want:
				stop(v, fmt.Sprintf(ReasonScaleIn, id))
			default:
				kept++
			}
		}
		backoff := dr.NextLaunchAt != nil && st.Now.Before(dr.GetNextLaunchAt().AsTime())
		if n := want - kept; n > 0 && !backoff {
			l := Launch{Deployment: id, TaskDefinition: ts.GetTaskDefinition(), Count: n, LaunchType: ts.GetLaunchType()}
			if plan.Launch.Count == 0 {
				plan.Launch = l
			} else {
				plan.More = append(plan.More, l)
			}
		}
		// Counts as the task records say (tasks launched now count next pass).
		var run, pend int32
		stable, stopping := 0, false
		for _, v := range vs {
			if v.running {
				run++
			}
			if v.pending {
				pend++
			}
			if v.live && v.stable {
				stable++
			}
			if v.stopping {
				stopping = true
			}
		}
		changed := ts.GetRunningCount() != run || ts.GetPendingCount() != pend
		ts.RunningCount, ts.PendingCount = run, pend
		stab := StabilityStabilize
		if kept == want && stable == want && pend == 0 && !stopping && run == int32(want) {
			stab = StabilitySteady
		}
		if ts.GetStabilityStatus() != stab {
			ts.StabilityStatus = proto.String(stab)
			ts.StabilityStatusAt = proto.Float64(awsapi.Epoch(st.Now))
			changed = true
		}
		if changed {
			ts.UpdatedAt = proto.Float64(awsapi.Epoch(st.Now))
		}
		if stab != StabilitySteady {
			steadyAll = false
		}
	}
	// A DRAINING task set leaves the list once it has no task left.
	s.TaskSets = slices.DeleteFunc(s.TaskSets, func(ts *ecsv1.TaskSet) bool {
		if ts.GetStatus() != TaskSetDraining {
			return false
		}
		for _, v := range byDep[ts.GetId()] {
			if v.live || v.stopping {
				return false
			}
		}
		return true
	})
	if len(stopped) > 0 {
		ev.add(fmt.Sprintf("(service %s) has stopped %d running tasks: %s.", name, len(stopped), taskList(stopped)))
	}
	var run, pend int32
	total := 0
	for _, v := range views {
		if v.running {
			run++
		}
		if v.pending {
			pend++
		}
		if v.live || v.stopping {
			total++
		}
	}
	s.RunningCount, s.PendingCount = run, pend
	split := len(ev.msgs)
	if steadyAll && plan.Launch.Count == 0 && len(plan.Stop) == 0 {
		ev.steady(s)
	}
	if deleting && total == 0 {
		s.Status = proto.String(StatusInactive)
		s.TaskSets = []*ecsv1.TaskSet{}
	}
	plan.Events, plan.After = ev.msgs[:split:split], ev.msgs[split:]
	return plan, nil
}
