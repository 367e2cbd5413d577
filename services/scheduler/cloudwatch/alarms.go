package cloudwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/proto"
)

// Alarm states.
const (
	StateOK               = "OK"
	StateAlarm            = "ALARM"
	StateInsufficientData = "INSUFFICIENT_DATA"
)

// AlarmActions runs an alarm's actions (the ARNs of AlarmActions, OKActions and
// InsufficientDataActions) when its state changes; Application Auto Scaling implements it
// for its scaling policies. value is how far the datapoint that decided the state lies
// from the alarm's Threshold (datapoint − Threshold; −Threshold for a state set by
// SetAlarmState), which is what step scaling's bounds are relative to. An error is
// written to the alarm's history as a failed action.
type AlarmActions interface {
	InvokeAlarmAction(ctx context.Context, scope keys.Scope, actionARN, alarmName, newState string, value float64) error
}

const (
	maxAlarmNames    = 100
	maxActions       = 5
	maxHistoryItems  = 100
	historyRetention = 30 * 24 * time.Hour
	maxEvaluation    = 24 * time.Hour // Period × EvaluationPeriods
)

var comparisons = map[string]func(v, t float64) bool{
	"GreaterThanOrEqualToThreshold": func(v, t float64) bool { return v >= t },
	"GreaterThanThreshold":          func(v, t float64) bool { return v > t },
	"LessThanThreshold":             func(v, t float64) bool { return v < t },
	"LessThanOrEqualToThreshold":    func(v, t float64) bool { return v <= t },
}

var comparisonWords = map[string]string{
	"GreaterThanOrEqualToThreshold": "greater than or equal to",
	"GreaterThanThreshold":          "greater than",
	"LessThanThreshold":             "less than",
	"LessThanOrEqualToThreshold":    "less than or equal to",
}

func alarmARN(scope keys.Scope, name string) string {
	return "arn:aws:cloudwatch:" + scope.Region + ":" + scope.Account + ":alarm:" + name
}

// scopeOfAlarm returns the scope in an alarm ARN.
func scopeOfAlarm(arn string) (keys.Scope, bool) {
	parts := strings.SplitN(arn, ":", 7)
	if len(parts) < 7 || parts[2] != "cloudwatch" {
		return keys.Scope{}, false
	}
	return keys.Scope{Region: parts[3], Account: parts[4]}, true
}

func timestamp(t time.Time) *float64 { return proto.Float64(awsapi.Epoch(t)) }

// isoTime is the time format of alarm history data and state reason data.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000+0000") }

func checkActions(list []string, param string) error {
	if len(list) > maxActions {
		return invalid("The collection %s must not have a size greater than %d.", param, maxActions)
	}
	for i, a := range list {
		if !strings.HasPrefix(a, "arn:") || len(a) > 1024 {
			return invalid("The value %s for parameter %s.member.%d is invalid.", a, param, i+1)
		}
	}
	return nil
}

// PutMetricAlarm creates or replaces a metric alarm. A new alarm starts in
// INSUFFICIENT_DATA; an update keeps the state, as CloudWatch does.
func (h *Handler) PutMetricAlarm(ctx context.Context, req *connect.Request[cwv1.PutMetricAlarmRequest]) (*connect.Response[cwv1.PutMetricAlarmResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.PutMetricAlarmRequest) (*cwv1.PutMetricAlarmResponse, error) {
		a, err := validateAlarm(in)
		if err != nil {
			return nil, err
		}
		now := h.clock()
		a.AlarmArn = proto.String(alarmARN(scope, a.GetAlarmName()))
		a.AlarmConfigurationUpdatedTimestamp = timestamp(now)
		key := keys.CloudWatchAlarm(scope, a.GetAlarmName())
		for attempt := 0; ; attempt++ {
			old, rev, err := store.Get[*storev1.CloudWatchAlarmRecord](ctx, h.KV, key)
			txn := store.NewTxn(h.KV)
			rec := &storev1.CloudWatchAlarmRecord{Alarm: a, Tags: in.GetTags()}
			summary, typ := fmt.Sprintf("Alarm %q created", a.GetAlarmName()), "Create"
			if err == nil {
				summary, typ = fmt.Sprintf("Alarm %q updated", a.GetAlarmName()), "Update"
			}
			data, _ := json.Marshal(map[string]any{"version": "1.0", "type": typ, strings.ToLower(typ) + "dAlarm": alarmJSON(a)})
			switch {
			case errors.Is(err, store.ErrNotFound):
				a.StateValue = proto.String(StateInsufficientData)
				a.StateReason = proto.String("Unchecked: Initial alarm creation")
				a.StateUpdatedTimestamp = timestamp(now)
				a.StateTransitionedTimestamp = timestamp(now)
				addHistory(rec, now, "ConfigurationUpdate", summary, string(data))
				txn.IfAbsent(key).Create(key, rec)
			case err != nil:
				return nil, err
			default:
				prev := old.GetAlarm()
				a.StateValue, a.StateReason, a.StateReasonData = prev.StateValue, prev.StateReason, prev.StateReasonData
				a.StateUpdatedTimestamp, a.StateTransitionedTimestamp = prev.StateUpdatedTimestamp, prev.StateTransitionedTimestamp
				rec.History = old.GetHistory()
				if len(in.GetTags()) == 0 {
					rec.Tags = old.GetTags() // PutMetricAlarm's tags apply only on creation when absent
				}
				addHistory(rec, now, "ConfigurationUpdate", summary, string(data))
				txn.Update(key, rev, rec)
			}
			if _, err := txn.Commit(ctx); err != nil {
				if (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists)) && attempt < 5 {
					continue
				}
				return nil, err
			}
			return &cwv1.PutMetricAlarmResponse{}, nil
		}
	})
}

// alarmJSON is the alarm configuration written into ConfigurationUpdate history data.
func alarmJSON(a *cwv1.MetricAlarm) map[string]any {
	return map[string]any{
		"alarmName": a.GetAlarmName(), "alarmArn": a.GetAlarmArn(), "namespace": a.GetNamespace(),
		"metricName": a.GetMetricName(), "statistic": a.GetStatistic(), "period": a.GetPeriod(),
		"evaluationPeriods": a.GetEvaluationPeriods(), "datapointsToAlarm": a.GetDatapointsToAlarm(),
		"threshold": a.GetThreshold(), "comparisonOperator": a.GetComparisonOperator(),
		"treatMissingData": a.GetTreatMissingData(), "actionsEnabled": a.GetActionsEnabled(),
	}
}

func addHistory(rec *storev1.CloudWatchAlarmRecord, now time.Time, typ, summary, data string) {
	rec.History = append(rec.History, &cwv1.AlarmHistoryItem{
		AlarmName: proto.String(rec.GetAlarm().GetAlarmName()), AlarmType: proto.String("MetricAlarm"),
		HistoryItemType: proto.String(typ), HistorySummary: proto.String(summary), HistoryData: proto.String(data),
		Timestamp: timestamp(now),
	})
	cut := 0
	for cut < len(rec.History) && (len(rec.History)-cut > maxHistoryItems || awsapi.FromEpoch(rec.History[cut].GetTimestamp()).Before(now.Add(-historyRetention))) {
		cut++
	}
	rec.History = rec.History[cut:]
}

// validateAlarm checks a PutMetricAlarm request and returns the alarm it describes
// (without ARN and state).
func validateAlarm(in *cwv1.PutMetricAlarmRequest) (*cwv1.MetricAlarm, error) {
	name := in.GetAlarmName()
	if name == "" {
		return nil, missing("AlarmName")
	}
	if len(name) > 255 || !printable(name) {
		return nil, invalid("The value %s for parameter AlarmName is invalid.", name)
	}
	if len(in.GetAlarmDescription()) > 1024 {
		return nil, invalid("The parameter AlarmDescription must be at most 1024 characters long.")
	}
	if in.EvaluationPeriods == nil {
		return nil, missing("EvaluationPeriods")
	}
	if in.GetEvaluationPeriods() < 1 {
		return nil, invalid("The parameter EvaluationPeriods must be greater than or equal to 1.")
	}
	if in.GetComparisonOperator() == "" {
		return nil, missing("ComparisonOperator")
	}
	if comparisons[in.GetComparisonOperator()] == nil {
		return nil, invalid("Berth does not support the ComparisonOperator %s: anomaly detection bands are not computed.", in.GetComparisonOperator())
	}
	if len(in.GetMetrics()) > 0 {
		return nil, invalid("Berth does not support alarms on metric math (Metrics); give Namespace, MetricName and Statistic.")
	}
	if in.GetThresholdMetricId() != "" {
		return nil, invalid("Berth does not support ThresholdMetricId (anomaly detection).")
	}
	if in.GetEvaluationCriteria() != nil || in.EvaluationInterval != nil {
		return nil, invalid("Berth does not support EvaluationCriteria or EvaluationInterval (PromQL alarms).")
	}
	if in.GetExtendedStatistic() != "" {
		if in.GetStatistic() != "" {
			return nil, combination("The parameters Statistic and ExtendedStatistic are mutually exclusive and you have specified both.")
		}
		return nil, invalid("Berth does not support ExtendedStatistic (percentiles); use Statistic.")
	}
	if in.GetEvaluateLowSampleCountPercentile() != "" {
		return nil, invalid("EvaluateLowSampleCountPercentile applies to percentile alarms, which Berth does not support.")
	}
	if in.GetNamespace() == "" {
		return nil, missing("Namespace")
	}
	if err := checkNamespace(in.GetNamespace(), "Namespace"); err != nil {
		return nil, err
	}
	if in.GetMetricName() == "" {
		return nil, missing("MetricName")
	}
	if in.GetStatistic() == "" {
		return nil, missing("Statistic")
	}
	if _, ok := (metricstore.Stats{}).Get(in.GetStatistic()); !ok {
		return nil, invalid("The value %s for parameter Statistic is invalid.", in.GetStatistic())
	}
	if in.Period == nil {
		return nil, missing("Period")
	}
	if p := in.GetPeriod(); p != 10 && p != 30 && (p < 60 || p%60 != 0) {
		return nil, invalid("The parameter Period must be 10, 30, or a multiple of 60.")
	}
	if time.Duration(in.GetPeriod())*time.Duration(in.GetEvaluationPeriods())*time.Second > maxEvaluation {
		return nil, invalid("The evaluation period (Period × EvaluationPeriods) must not exceed one day (86400 seconds).")
	}
	if m := in.GetDatapointsToAlarm(); in.DatapointsToAlarm != nil && (m < 1 || m > in.GetEvaluationPeriods()) {
		return nil, invalid("DatapointsToAlarm must be between 1 and EvaluationPeriods (%d).", in.GetEvaluationPeriods())
	}
	switch in.GetTreatMissingData() {
	case "", "breaching", "notBreaching", "ignore", "missing":
	default:
		return nil, invalid("The value %s for parameter TreatMissingData is invalid. Valid values are breaching, notBreaching, ignore and missing.", in.GetTreatMissingData())
	}
	if in.Threshold == nil {
		return nil, missing("Threshold")
	}
	if finite(in.GetThreshold()) != nil {
		return nil, invalid("The value %v for parameter Threshold is invalid.", in.GetThreshold())
	}
	for _, l := range [][2]any{{in.GetAlarmActions(), "AlarmActions"}, {in.GetOkActions(), "OKActions"}, {in.GetInsufficientDataActions(), "InsufficientDataActions"}} {
		if err := checkActions(l[0].([]string), l[1].(string)); err != nil {
			return nil, err
		}
	}
	if _, err := dimensions(in.GetDimensions(), "Dimensions"); err != nil {
		return nil, err
	}
	if len(in.GetTags()) > 50 {
		return nil, invalid("The collection Tags must not have a size greater than 50.")
	}
	a := &cwv1.MetricAlarm{
		AlarmName: proto.String(name), AlarmDescription: in.AlarmDescription,
		ActionsEnabled:          proto.Bool(in.ActionsEnabled == nil || in.GetActionsEnabled()), // default true
		AlarmActions:            nonNil(in.GetAlarmActions()),
		OkActions:               nonNil(in.GetOkActions()),
		InsufficientDataActions: nonNil(in.GetInsufficientDataActions()),
		Namespace:               in.Namespace, MetricName: in.MetricName, Statistic: in.Statistic,
		Dimensions: dimensionList(mustDims(in.GetDimensions())), Period: in.Period,
		EvaluationPeriods: in.EvaluationPeriods, DatapointsToAlarm: in.DatapointsToAlarm,
		Threshold: in.Threshold, ComparisonOperator: in.ComparisonOperator,
		TreatMissingData: in.TreatMissingData, Unit: in.Unit,
		Metrics: []*cwv1.MetricDataQuery{},
	}
	return a, nil
}

func mustDims(d []*cwv1.Dimension) map[string]string {
	m, _ := dimensions(d, "Dimensions")
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// alarms returns the scope's alarms, sorted by name.
func (h *Handler) alarms(ctx context.Context, scope keys.Scope) ([]*storev1.CloudWatchAlarmRecord, error) {
	items, err := store.ListAll[*storev1.CloudWatchAlarmRecord](ctx, h.KV, keys.CloudWatchAlarms(scope))
	if err != nil {
		return nil, err
	}
	out := make([]*storev1.CloudWatchAlarmRecord, 0, len(items))
	for _, it := range items {
		out = append(out, it.Value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetAlarm().GetAlarmName() < out[j].GetAlarm().GetAlarmName() })
	return out, nil
}

func pageOf(token string, max int32, def int, n int) (from, to int, next *string, err error) {
	size := def
	if max != 0 {
		if max < 1 || max > 100 {
			return 0, 0, nil, invalid("The parameter MaxRecords must be between 1 and 100.")
		}
		size = int(max)
	}
	if token != "" {
		from, err = strconv.Atoi(token)
		if err != nil || from < 0 || from > n {
			return 0, 0, nil, awserr.New("InvalidNextToken", "The service cannot find the specified token.")
		}
	}
	to = min(from+size, n)
	if to < n {
		next = proto.String(strconv.Itoa(to))
	}
	return from, to, next, nil
}

// DescribeAlarms lists metric alarms by names, name prefix, state and action prefix.
// Composite alarms are not supported, so CompositeAlarms is always empty.
func (h *Handler) DescribeAlarms(ctx context.Context, req *connect.Request[cwv1.DescribeAlarmsRequest]) (*connect.Response[cwv1.DescribeAlarmsResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.DescribeAlarmsRequest) (*cwv1.DescribeAlarmsResponse, error) {
		if len(in.GetAlarmNames()) > maxAlarmNames {
			return nil, invalid("The collection AlarmNames must not have a size greater than %d.", maxAlarmNames)
		}
		if len(in.GetAlarmNames()) > 0 && in.GetAlarmNamePrefix() != "" {
			return nil, combination("AlarmNames and AlarmNamePrefix are mutually exclusive.")
		}
		if in.GetChildrenOfAlarmName() != "" || in.GetParentsOfAlarmName() != "" {
			return nil, invalid("Berth does not support composite alarms (ChildrenOfAlarmName, ParentsOfAlarmName).")
		}
		metricAlarms := len(in.GetAlarmTypes()) == 0
		for _, t := range in.GetAlarmTypes() {
			switch t {
			case "MetricAlarm":
				metricAlarms = true
			case "CompositeAlarm":
			default:
				return nil, invalid("The value %s for parameter AlarmTypes is invalid.", t)
			}
		}
		switch in.GetStateValue() {
		case "", StateOK, StateAlarm, StateInsufficientData:
		default:
			return nil, invalid("The value %s for parameter StateValue is invalid.", in.GetStateValue())
		}
		all, err := h.alarms(ctx, scope)
		if err != nil {
			return nil, err
		}
		names := map[string]bool{}
		for _, n := range in.GetAlarmNames() {
			names[n] = true
		}
		var match []*cwv1.MetricAlarm
		for _, r := range all {
			a := r.GetAlarm()
			if !metricAlarms ||
				len(names) > 0 && !names[a.GetAlarmName()] ||
				!strings.HasPrefix(a.GetAlarmName(), in.GetAlarmNamePrefix()) ||
				in.GetStateValue() != "" && a.GetStateValue() != in.GetStateValue() ||
				in.GetActionPrefix() != "" && !hasActionPrefix(a, in.GetActionPrefix()) {
				continue
			}
			match = append(match, a)
		}
		from, to, next, err := pageOf(in.GetNextToken(), in.GetMaxRecords(), 50, len(match))
		if err != nil {
			return nil, err
		}
		out := &cwv1.DescribeAlarmsResponse{MetricAlarms: []*cwv1.MetricAlarm{}, CompositeAlarms: []*cwv1.CompositeAlarm{}, NextToken: next}
		out.MetricAlarms = append(out.MetricAlarms, match[from:to]...)
		return out, nil
	})
}

func hasActionPrefix(a *cwv1.MetricAlarm, prefix string) bool {
	for _, l := range [][]string{a.GetAlarmActions(), a.GetOkActions(), a.GetInsufficientDataActions()} {
		for _, x := range l {
			if strings.HasPrefix(x, prefix) {
				return true
			}
		}
	}
	return false
}

// DescribeAlarmsForMetric lists the alarms on one metric.
func (h *Handler) DescribeAlarmsForMetric(ctx context.Context, req *connect.Request[cwv1.DescribeAlarmsForMetricRequest]) (*connect.Response[cwv1.DescribeAlarmsForMetricResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.DescribeAlarmsForMetricRequest) (*cwv1.DescribeAlarmsForMetricResponse, error) {
		if in.GetNamespace() == "" {
			return nil, missing("Namespace")
		}
		if in.GetMetricName() == "" {
			return nil, missing("MetricName")
		}
		if in.GetExtendedStatistic() != "" {
			return nil, invalid("Berth does not support ExtendedStatistic (percentiles).")
		}
		dims, err := dimensions(in.GetDimensions(), "Dimensions")
		if err != nil {
			return nil, err
		}
		all, err := h.alarms(ctx, scope)
		if err != nil {
			return nil, err
		}
		want := metricKey(in.GetNamespace(), in.GetMetricName(), dims)
		out := &cwv1.DescribeAlarmsForMetricResponse{MetricAlarms: []*cwv1.MetricAlarm{}}
		for _, r := range all {
			a := r.GetAlarm()
			if metricKey(a.GetNamespace(), a.GetMetricName(), mustDims(a.GetDimensions())) != want ||
				in.GetStatistic() != "" && a.GetStatistic() != in.GetStatistic() ||
				in.Period != nil && a.GetPeriod() != in.GetPeriod() ||
				in.GetUnit() != "" && a.GetUnit() != in.GetUnit() {
				continue
			}
			out.MetricAlarms = append(out.MetricAlarms, a)
		}
		return out, nil
	})
}

func metricKey(ns, name string, dims map[string]string) string {
	var b strings.Builder
	b.WriteString(ns + "\x00" + name)
	for _, d := range dimensionList(dims) {
		b.WriteString("\x00" + d.GetName() + "=" + d.GetValue())
	}
	return b.String()
}

// DeleteAlarms deletes alarms, all or none: a name that does not exist fails the call
// with ResourceNotFound and deletes nothing, as CloudWatch does.
func (h *Handler) DeleteAlarms(ctx context.Context, req *connect.Request[cwv1.DeleteAlarmsRequest]) (*connect.Response[cwv1.DeleteAlarmsResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.DeleteAlarmsRequest) (*cwv1.DeleteAlarmsResponse, error) {
		if len(in.GetAlarmNames()) == 0 {
			return nil, missing("AlarmNames")
		}
		if len(in.GetAlarmNames()) > maxAlarmNames {
			return nil, invalid("The collection AlarmNames must not have a size greater than %d.", maxAlarmNames)
		}
		txn := store.NewTxn(h.KV)
		var absent []string
		seen := map[string]bool{}
		for _, n := range in.GetAlarmNames() {
			if seen[n] {
				continue
			}
			seen[n] = true
			key := keys.CloudWatchAlarm(scope, n)
			_, rev, err := store.Get[*storev1.CloudWatchAlarmRecord](ctx, h.KV, key)
			if errors.Is(err, store.ErrNotFound) {
				absent = append(absent, n)
				continue
			}
			if err != nil {
				return nil, err
			}
			txn.IfModRevision(key, rev).Delete(key)
		}
		if len(absent) > 0 {
			return nil, awserr.New("ResourceNotFound", "%d/%d alarms not found: [%s]", len(absent), len(seen), strings.Join(absent, ", "))
		}
		if _, err := txn.Commit(ctx); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, awserr.New("ConcurrentModificationException", "An alarm was changed while it was being deleted; try again.")
			}
			return nil, err
		}
		return &cwv1.DeleteAlarmsResponse{}, nil
	})
}

// setActions enables or disables the actions of the named alarms (names that do not
// exist are skipped, as CloudWatch does).
func (h *Handler) setActions(ctx context.Context, scope keys.Scope, names []string, enabled bool) error {
	if len(names) == 0 {
		return missing("AlarmNames")
	}
	if len(names) > maxAlarmNames {
		return invalid("The collection AlarmNames must not have a size greater than %d.", maxAlarmNames)
	}
	for _, n := range names {
		_, _, err := store.Mutate(ctx, h.KV, keys.CloudWatchAlarm(scope, n), func(r *storev1.CloudWatchAlarmRecord) error {
			if r.GetAlarm().GetActionsEnabled() == enabled {
				return store.ErrNoChange
			}
			r.Alarm.ActionsEnabled = proto.Bool(enabled)
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// EnableAlarmActions enables the actions of alarms.
func (h *Handler) EnableAlarmActions(ctx context.Context, req *connect.Request[cwv1.EnableAlarmActionsRequest]) (*connect.Response[cwv1.EnableAlarmActionsResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.EnableAlarmActionsRequest) (*cwv1.EnableAlarmActionsResponse, error) {
		return &cwv1.EnableAlarmActionsResponse{}, h.setActions(ctx, scope, in.GetAlarmNames(), true)
	})
}

// DisableAlarmActions disables the actions of alarms.
func (h *Handler) DisableAlarmActions(ctx context.Context, req *connect.Request[cwv1.DisableAlarmActionsRequest]) (*connect.Response[cwv1.DisableAlarmActionsResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.DisableAlarmActionsRequest) (*cwv1.DisableAlarmActionsResponse, error) {
		return &cwv1.DisableAlarmActionsResponse{}, h.setActions(ctx, scope, in.GetAlarmNames(), false)
	})
}

// SetAlarmState sets an alarm's state until its next evaluation, running the new state's
// actions, as CloudWatch does.
func (h *Handler) SetAlarmState(ctx context.Context, req *connect.Request[cwv1.SetAlarmStateRequest]) (*connect.Response[cwv1.SetAlarmStateResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.SetAlarmStateRequest) (*cwv1.SetAlarmStateResponse, error) {
		if in.GetAlarmName() == "" {
			return nil, missing("AlarmName")
		}
		if in.StateReason == nil {
			return nil, missing("StateReason")
		}
		if len(in.GetStateReason()) > 1023 {
			return nil, invalid("The parameter StateReason must be at most 1023 characters long.")
		}
		switch in.GetStateValue() {
		case "":
			return nil, missing("StateValue")
		case StateOK, StateAlarm, StateInsufficientData:
		default:
			return nil, invalid("The value %s for parameter StateValue is invalid.", in.GetStateValue())
		}
		if d := in.GetStateReasonData(); d != "" && !json.Valid([]byte(d)) {
			return nil, awserr.New("InvalidFormat", "The parameter StateReasonData must be JSON.")
		}
		ev := &Evaluator{KV: h.KV, Actions: h.Actions, Log: h.log(), now: h.now}
		err := ev.transition(ctx, scope, in.GetAlarmName(), in.GetStateValue(), in.GetStateReason(), in.GetStateReasonData(), 0, true)
		if errors.Is(err, store.ErrNotFound) {
			return nil, awserr.New("ResourceNotFound", "Alarm %s not found", in.GetAlarmName())
		}
		return &cwv1.SetAlarmStateResponse{}, err
	})
}

// DescribeAlarmHistory answers the history of one alarm or of all the scope's alarms.
func (h *Handler) DescribeAlarmHistory(ctx context.Context, req *connect.Request[cwv1.DescribeAlarmHistoryRequest]) (*connect.Response[cwv1.DescribeAlarmHistoryResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.DescribeAlarmHistoryRequest) (*cwv1.DescribeAlarmHistoryResponse, error) {
		if in.GetAlarmContributorId() != "" {
			return nil, invalid("Berth does not support AlarmContributorId.")
		}
		switch in.GetHistoryItemType() {
		case "", "ConfigurationUpdate", "StateUpdate", "Action":
		case "AlarmContributorStateUpdate", "AlarmContributorAction":
		default:
			return nil, invalid("The value %s for parameter HistoryItemType is invalid.", in.GetHistoryItemType())
		}
		ascending := false
		switch in.GetScanBy() {
		case "", "TimestampDescending":
		case "TimestampAscending":
			ascending = true
		default:
			return nil, invalid("The value %s for parameter ScanBy is invalid.", in.GetScanBy())
		}
		metricAlarms := len(in.GetAlarmTypes()) == 0
		for _, t := range in.GetAlarmTypes() {
			metricAlarms = metricAlarms || t == "MetricAlarm"
		}
		var recs []*storev1.CloudWatchAlarmRecord
		if n := in.GetAlarmName(); n != "" {
			r, _, err := store.Get[*storev1.CloudWatchAlarmRecord](ctx, h.KV, keys.CloudWatchAlarm(scope, n))
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			if err == nil {
				recs = append(recs, r)
			}
		} else {
			all, err := h.alarms(ctx, scope)
			if err != nil {
				return nil, err
			}
			recs = all
		}
		var items []*cwv1.AlarmHistoryItem
		for _, r := range recs {
			if !metricAlarms {
				break
			}
			for _, it := range r.GetHistory() {
				t := it.GetTimestamp()
				if in.GetHistoryItemType() != "" && it.GetHistoryItemType() != in.GetHistoryItemType() ||
					in.StartDate != nil && t < in.GetStartDate() || in.EndDate != nil && t > in.GetEndDate() {
					continue
				}
				items = append(items, it)
			}
		}
		if !ascending {
			slices.Reverse(items) // newest first among items of one timestamp too
		}
		sort.SliceStable(items, func(i, j int) bool {
			if ascending {
				return items[i].GetTimestamp() < items[j].GetTimestamp()
			}
			return items[i].GetTimestamp() > items[j].GetTimestamp()
		})
		from, to, next, err := pageOf(in.GetNextToken(), in.GetMaxRecords(), 100, len(items))
		if err != nil {
			return nil, err
		}
		out := &cwv1.DescribeAlarmHistoryResponse{AlarmHistoryItems: []*cwv1.AlarmHistoryItem{}, NextToken: next}
		out.AlarmHistoryItems = append(out.AlarmHistoryItems, items[from:to]...)
		return out, nil
	})
}

// ListTagsForResource answers an alarm's tags.
func (h *Handler) ListTagsForResource(ctx context.Context, req *connect.Request[cwv1.ListTagsForResourceRequest]) (*connect.Response[cwv1.ListTagsForResourceResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.ListTagsForResourceRequest) (*cwv1.ListTagsForResourceResponse, error) {
		arn := in.GetResourceArn()
		if arn == "" {
			return nil, missing("ResourceARN")
		}
		prefix := "arn:aws:cloudwatch:" + scope.Region + ":" + scope.Account + ":alarm:"
		name, ok := strings.CutPrefix(arn, prefix)
		if !ok {
			return nil, invalid("The value %s for parameter ResourceARN is invalid.", arn)
		}
		r, _, err := store.Get[*storev1.CloudWatchAlarmRecord](ctx, h.KV, keys.CloudWatchAlarm(scope, name))
		if errors.Is(err, store.ErrNotFound) {
			return nil, awserr.New("ResourceNotFoundException", "Alarm %s not found", name)
		}
		if err != nil {
			return nil, err
		}
		tags := r.GetTags()
		if tags == nil {
			tags = []*cwv1.Tag{}
		}
		return &cwv1.ListTagsForResourceResponse{Tags: tags}, nil
	})
}
