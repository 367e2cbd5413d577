package service

import (
	"strings"
	"testing"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestComputeDeploymentAlarms: an alarm in ALARM during a rollout fails the deployment
// and, with rollback, starts a deployment of the last COMPLETED one; alarms disabled or
// none firing leave the rollout alone.
func TestComputeDeploymentAlarms(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		enable, rollback       bool
		firing                 []string
		wantFailed, wantRollBk bool
	}{
		{name: "firing, rollback", enable: true, rollback: true, firing: []string{"cpu-high"}, wantFailed: true, wantRollBk: true},
		{name: "firing, no rollback", enable: true, firing: []string{"cpu-high"}, wantFailed: true},
		{name: "none firing", enable: true, rollback: true},
		{name: "disabled", rollback: true, firing: []string{"cpu-high"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3, 100, 200)
			w.svc().DeploymentConfiguration.Alarms = &ecsv1.DeploymentAlarms{AlarmNames: []string{"cpu-high"}, Enable: tc.enable, Rollback: tc.rollback}
			w.running(3, dep1, time.Hour)
			w.deploy(dep2, tdV2)
			w.st.AlarmsInAlarm = tc.firing
			w.pol.NewDeploymentID = func() string { return dep3 }
			p := w.compute()
			s := p.Record.GetService()
			d2 := findDeployment(s, dep2)
			if got := d2.GetRolloutState() == RolloutFailed; got != tc.wantFailed {
				t.Fatalf("deployment %s rollout %s (%s)", dep2, d2.GetRolloutState(), d2.GetRolloutStateReason())
			}
			if tc.wantFailed && (d2.GetRolloutStateReason() != "ECS deployment detected triggered alarm(s)." || !strings.Contains(planEvents(p), "alarm(s) cpu-high in ALARM")) {
				t.Fatalf("reason %q, events %q", d2.GetRolloutStateReason(), planEvents(p))
			}
			prim := primary(s)
			switch {
			case tc.wantRollBk:
				if prim.GetId() != dep3 || prim.GetTaskDefinition() != tdV1 || !deploymentRecord(p.Record, dep3).GetRollback() {
					t.Fatalf("primary %v after rollback", prim)
				}
			case tc.wantFailed:
				if prim.GetId() != dep2 || p.Launch.Count != 0 {
					t.Fatalf("failed without rollback: primary %v, launch %+v", prim, p.Launch)
				}
			default:
				if prim.GetId() != dep2 || p.Launch.Deployment != dep2 || p.Launch.Count == 0 {
					t.Fatalf("rollout stopped: primary %v, launch %+v", prim, p.Launch)
				}
			}
		})
	}
}
