package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/proto"
)

// Deployment alarms (deploymentConfiguration.alarms): while a rolling deployment is in
// progress, any of its CloudWatch alarms in ALARM fails it and, with rollback, starts a
// deployment of the last COMPLETED one's task definition, as "How CloudWatch alarms detect
// Amazon ECS deployment failures" documents. The alarms are read from CloudWatch's records
// in etcd (keys.CloudWatchAlarm); an alarm that does not exist never triggers.

// alarmsInAlarm returns the names of the service's deployment alarms that are in ALARM,
// when its deployment alarms are enabled and a deployment is in progress.
func (r *Reconciler) alarmsInAlarm(ctx context.Context, scope keys.Scope, s *ecsv1.Service) ([]string, error) {
	da := s.GetDeploymentConfiguration().GetAlarms()
	if !da.GetEnable() || len(da.GetAlarmNames()) == 0 || primary(s).GetRolloutState() != RolloutInProgress {
		return nil, nil
	}
	var firing []string
	for _, name := range da.GetAlarmNames() {
		rec, _, err := store.Get[*storev1.CloudWatchAlarmRecord](ctx, r.cfg.Client, keys.CloudWatchAlarm(scope, name))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if rec.GetAlarm().GetStateValue() == "ALARM" {
			firing = append(firing, name)
		}
	}
	return firing, nil
}

// deploymentAlarms fails the PRIMARY deployment when st.AlarmsInAlarm names any alarm
// and, with alarms.rollback, rolls back to the last COMPLETED deployment.
func (d *decision) deploymentAlarms() {
	da := d.s.GetDeploymentConfiguration().GetAlarms()
	prim := d.prim
	if len(d.st.AlarmsInAlarm) == 0 || !da.GetEnable() || d.deleting || prim.GetRolloutState() != RolloutInProgress {
		return
	}
	if da.GetRollback() && shiftInProgress(d.dr) {
		// A traffic-shifting deployment (BLUE_GREEN, LINEAR, CANARY) rolls back in place,
		// as the circuit breaker does: its source revision still runs.
		if d.rollbackInPlace("ECS deployment detected triggered alarm(s).") {
			d.ev.add(fmt.Sprintf("(service %s) deployment failed: alarm(s) %s in ALARM; rolled back.", d.name, strings.Join(d.st.AlarmsInAlarm, ", ")))
			return
		}
	}
	prim.RolloutState = proto.String(RolloutFailed)
	prim.RolloutStateReason = proto.String("ECS deployment detected triggered alarm(s).")
	prim.UpdatedAt = proto.Float64(awsapi.Epoch(d.now))
	d.dr.FinishedAt, d.dr.NextLaunchAt = ts(d.now), nil
	d.ev.add(fmt.Sprintf("(service %s) (deployment %s) deployment failed: alarm(s) %s in ALARM.", d.name, prim.GetId(), strings.Join(d.st.AlarmsInAlarm, ", ")))
	if !da.GetRollback() {
		return
	}
	target := lastCompleted(d.s, prim.GetId())
	if target == nil {
		return
	}
	newID := NewDeploymentID
	if d.pol.NewDeploymentID != nil {
		newID = d.pol.NewDeploymentID
	}
	startDeploymentID(d.rec, d.st.Account, newID(), target.GetTaskDefinition(), true, d.now)
	d.ev.add(fmt.Sprintf("(service %s) rolling back to deployment %s.", d.name, target.GetId()))
	d.prim = primary(d.s)
	d.dr = deploymentRecord(d.rec, d.prim.GetId())
}
