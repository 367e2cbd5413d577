package cloudwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// DefaultEvaluationInterval is how often the leader evaluates every alarm (CloudWatch
// evaluates metric alarms every minute).
const DefaultEvaluationInterval = time.Minute

// Evaluator evaluates metric alarms against the metric store; the leader runs it.
type Evaluator struct {
	// KV holds the alarms (the leader's fenced client).
	KV clientv3.KV
	// Metrics is the metric data.
	Metrics *Metrics
	// Actions runs alarm actions; nil records each as failed.
	Actions AlarmActions
	// Interval is the time between evaluations; DefaultEvaluationInterval when 0.
	Interval time.Duration
	// Log receives evaluation errors.
	Log *slog.Logger
	now func() time.Time
}

func (e *Evaluator) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// Run evaluates every alarm each Interval until ctx ends.
func (e *Evaluator) Run(ctx context.Context) error {
	iv := e.Interval
	if iv <= 0 {
		iv = DefaultEvaluationInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		if err := e.EvaluateAll(ctx); err != nil && ctx.Err() == nil {
			e.Log.Warn("evaluating alarms", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// EvaluateAll evaluates every alarm of every scope once.
func (e *Evaluator) EvaluateAll(ctx context.Context) error {
	items, err := store.ListAll[*storev1.CloudWatchAlarmRecord](ctx, e.KV, keys.CloudWatchAlarmsAll())
	if err != nil {
		return err
	}
	var errs []error
	for _, it := range items {
		if err := e.Evaluate(ctx, it.Value.GetAlarm()); err != nil {
			errs = append(errs, fmt.Errorf("alarm %s: %w", it.Value.GetAlarm().GetAlarmArn(), err))
		}
	}
	return errors.Join(errs...)
}

// Datapoint is one evaluated period: its start and value, or missing.
type Datapoint struct {
	Start   time.Time
	Value   float64
	Missing bool
}

// Decide is CloudWatch's alarm rule: of the evaluation range's datapoints (oldest first),
// DatapointsToAlarm (m) breaching ones put the alarm in ALARM. Missing datapoints count as
// treatMissing says: "breaching" and "notBreaching" as such; "missing" (the default) not
// at all, so a range without any datapoint is INSUFFICIENT_DATA; "ignore" keeps the
// current state when there is no datapoint. It returns the new state and the breaching
// datapoints.
func Decide(points []Datapoint, op string, threshold float64, m int, treatMissing, current string) (string, int) {
	cmp := comparisons[op]
	breaching, present := 0, 0
	for _, p := range points {
		switch {
		case !p.Missing:
			present++
			if cmp(p.Value, threshold) {
				breaching++
			}
		case treatMissing == "breaching":
			breaching++
		}
	}
	if breaching >= m {
		return StateAlarm, breaching
	}
	switch treatMissing {
	case "breaching", "notBreaching":
		return StateOK, breaching
	case "ignore":
		if present == 0 {
			return current, breaching
		}
	}
	if present == 0 {
		return StateInsufficientData, breaching
	}
	return StateOK, breaching
}

// Evaluate evaluates one alarm and records a state change.
func (e *Evaluator) Evaluate(ctx context.Context, a *cwv1.MetricAlarm) error {
	scope, ok := scopeOfAlarm(a.GetAlarmArn())
	if !ok || e.Metrics == nil {
		return nil
	}
	period := time.Duration(a.GetPeriod()) * time.Second
	n := int(a.GetEvaluationPeriods())
	m := int(a.GetDatapointsToAlarm())
	if m == 0 {
		m = n
	}
	// The evaluation range: the last n complete periods.
	end := e.clock().Truncate(period)
	start := end.Add(-time.Duration(n) * period)
	buckets, err := e.Metrics.series(ctx, scope, metricstore.Metric{Namespace: a.GetNamespace(), Name: a.GetMetricName(), Dimensions: mustDims(a.GetDimensions())}, a.GetUnit(), period, start, end)
	if err != nil {
		return err
	}
	points := make([]Datapoint, n)
	for i := range points {
		points[i] = Datapoint{Start: start.Add(time.Duration(i) * period), Missing: true}
	}
	for _, b := range buckets {
		i := int(b.Start.Sub(start) / period)
		if i >= 0 && i < n {
			v, _ := b.Stats.Get(a.GetStatistic())
			points[i] = Datapoint{Start: b.Start, Value: v}
		}
	}
	treat := a.GetTreatMissingData()
	if treat == "" {
		treat = "missing"
	}
	state, breaching := Decide(points, a.GetComparisonOperator(), a.GetThreshold(), m, treat, a.GetStateValue())
	reason, data, value := stateReason(a, points, state, breaching, m, e.clock())
	if state == a.GetStateValue() {
		// Application Auto Scaling's alarm actions run again every evaluation while the
		// alarm stays in ALARM (CloudWatch repeats Auto Scaling actions), so a step
		// policy keeps scaling.
		if state == StateAlarm && a.GetActionsEnabled() && e.Actions != nil {
			for _, act := range a.GetAlarmActions() {
				if strings.Contains(act, ":autoscaling:") {
					if err := e.Actions.InvokeAlarmAction(ctx, scope, act, a.GetAlarmName(), state, value-a.GetThreshold()); err != nil {
						e.Log.Warn("alarm action", "alarm", a.GetAlarmArn(), "action", act, "err", err)
					}
				}
			}
		}
		return nil
	}
	return e.transition(ctx, scope, a.GetAlarmName(), state, reason, data, value, false)
}

// stateReason writes the reason of an evaluated state as CloudWatch does ("Threshold
// Crossed: 1 datapoint [90.0 (05/12/26 10:00:00)] was greater than the threshold (80.0).")
// with its JSON data.
func stateReason(a *cwv1.MetricAlarm, points []Datapoint, state string, breaching, m int, now time.Time) (string, string, float64) {
	var recent []Datapoint
	for i := len(points) - 1; i >= 0; i-- {
		if !points[i].Missing {
			recent = append(recent, points[i])
		}
	}
	value := 0.0
	if len(recent) > 0 {
		value = recent[0].Value
	}
	fmtV := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	th := fmtV(a.GetThreshold())
	if !strings.Contains(th, ".") {
		th += ".0"
	}
	words := comparisonWords[a.GetComparisonOperator()]
	var list []string
	for _, p := range recent {
		v := fmtV(p.Value)
		if !strings.Contains(v, ".") {
			v += ".0"
		}
		list = append(list, fmt.Sprintf("%s (%s)", v, p.Start.UTC().Format("02/01/06 15:04:05")))
	}
	var reason string
	switch {
	case state == StateInsufficientData:
		reason = fmt.Sprintf("Insufficient Data: %d datapoint%s unknown.", len(points), plural(len(points), " was", "s were"))
	case state == StateAlarm && len(points) == 1:
		reason = fmt.Sprintf("Threshold Crossed: 1 datapoint [%s] was %s the threshold (%s).", strings.Join(list, ", "), words, th)
	case state == StateAlarm:
		reason = fmt.Sprintf("Threshold Crossed: %d out of the last %d datapoints [%s] were %s the threshold (%s) (minimum %d datapoint%s for OK -> ALARM transition).",
			breaching, len(points), strings.Join(list, ", "), words, th, m, plural(m, "", "s"))
	case len(list) == 1:
		reason = fmt.Sprintf("Threshold Crossed: 1 datapoint [%s] was not %s the threshold (%s).", list[0], words, th)
	default:
		reason = fmt.Sprintf("Threshold Crossed: no datapoints were received for %d periods and %d missing datapoints were treated as [%s].", len(points)-len(recent), len(points)-len(recent), treatWord(a.GetTreatMissingData()))
		if len(recent) > 0 {
			reason = fmt.Sprintf("Threshold Crossed: %d datapoint%s [%s] %s not %s the threshold (%s).", len(list), plural(len(list), "", "s"), strings.Join(list, ", "), plural(len(list), "was", "were"), words, th)
		}
	}
	type evaluated struct {
		Timestamp   string  `json:"timestamp"`
		SampleCount float64 `json:"sampleCount,omitempty"`
		Value       float64 `json:"value"`
	}
	var ev []evaluated
	var recentVals []float64
	for _, p := range recent {
		ev = append(ev, evaluated{Timestamp: isoTime(p.Start), Value: p.Value})
		recentVals = append(recentVals, p.Value)
	}
	start := now
	if len(points) > 0 {
		start = points[0].Start
	}
	data, _ := json.Marshal(map[string]any{
		"version": "1.0", "queryDate": isoTime(now), "startDate": isoTime(start),
		"statistic": a.GetStatistic(), "period": a.GetPeriod(), "recentDatapoints": nonNilF(recentVals),
		"threshold": a.GetThreshold(), "evaluatedDatapoints": ev,
	})
	return reason, string(data), value
}

func treatWord(t string) string {
	switch t {
	case "breaching":
		return "Breaching"
	case "notBreaching":
		return "NonBreaching"
	}
	return "Missing"
}

func nonNilF(v []float64) []float64 {
	if v == nil {
		return []float64{}
	}
	return v
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// transition moves an alarm to state with a StateUpdate history item and runs the new
// state's actions when enabled. force (SetAlarmState) records the change even when the
// state is the same.
func (e *Evaluator) transition(ctx context.Context, scope keys.Scope, name, state, reason, reasonData string, value float64, force bool) error {
	now := e.clock()
	var changed bool
	var oldState string
	rec, _, err := store.Mutate(ctx, e.KV, keys.CloudWatchAlarm(scope, name), func(r *storev1.CloudWatchAlarmRecord) error {
		a := r.GetAlarm()
		oldState = a.GetStateValue()
		changed = oldState != state
		if !changed && !force {
			return store.ErrNoChange
		}
		oldReason := a.GetStateReason()
		a.StateValue, a.StateReason = proto.String(state), proto.String(reason)
		a.StateReasonData = nil
		if reasonData != "" {
			a.StateReasonData = proto.String(reasonData)
		}
		a.StateUpdatedTimestamp = timestamp(now)
		if changed {
			a.StateTransitionedTimestamp = timestamp(now)
		}
		newState := map[string]any{"stateValue": state, "stateReason": reason}
		if reasonData != "" {
			newState["stateReasonData"] = json.RawMessage(reasonData)
		}
		data, _ := json.Marshal(map[string]any{"version": "1.0",
			"oldState": map[string]any{"stateValue": oldState, "stateReason": oldReason},
			"newState": newState})
		addHistory(r, now, "StateUpdate", fmt.Sprintf("Alarm updated from %s to %s", oldState, state), string(data))
		return nil
	})
	if err != nil || (!changed && !force) {
		if errors.Is(err, store.ErrNoChange) {
			return nil
		}
		return err
	}
	a := rec.GetAlarm()
	if !a.GetActionsEnabled() {
		return nil
	}
	var actions []string
	switch state {
	case StateAlarm:
		actions = a.GetAlarmActions()
	case StateOK:
		actions = a.GetOkActions()
	case StateInsufficientData:
		actions = a.GetInsufficientDataActions()
	}
	if len(actions) == 0 {
		return nil
	}
	type result struct{ summary, data string }
	var results []result
	for _, act := range actions {
		var err error
		if e.Actions == nil {
			err = errors.New("no action runner is configured")
		} else {
			err = e.Actions.InvokeAlarmAction(ctx, scope, act, name, state, value-a.GetThreshold())
		}
		if err != nil {
			d, _ := json.Marshal(map[string]any{"actionState": "Failed", "notificationResource": act, "stateUpdateTimestamp": now.UnixMilli(), "error": err.Error()})
			results = append(results, result{fmt.Sprintf("Failed to execute action %s. Received error: %q", act, err.Error()), string(d)})
			continue
		}
		d, _ := json.Marshal(map[string]any{"actionState": "Succeeded", "notificationResource": act, "stateUpdateTimestamp": now.UnixMilli()})
		results = append(results, result{"Successfully executed action " + act, string(d)})
	}
	_, _, err = store.Mutate(ctx, e.KV, keys.CloudWatchAlarm(scope, name), func(r *storev1.CloudWatchAlarmRecord) error {
		for _, res := range results {
			addHistory(r, now, "Action", res.summary, res.data)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
