package cloudwatch

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	"github.com/berthhq/berth/gen/berth/cloudwatch/v1/cloudwatchv1connect"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Limits of the API, CloudWatch's (Service Quotas / API reference).
const (
	maxMetricData      = 1000 // MetricData per PutMetricData
	maxDimensions      = 30   // dimensions per metric
	maxValues          = 150  // Values per datum
	maxDatapoints      = 1440 // datapoints per GetMetricStatistics
	maxQueries         = 500  // MetricDataQueries per GetMetricData
	defaultMaxPoints   = 100800
	listMetricsPage    = 500
	maxFutureTimestamp = 2 * time.Hour
	// maxValue bounds values: CloudWatch rejects values above 2^360 in magnitude.
	maxValue = 2.348542582773833e+108
)

// Handler serves the CloudWatch API. Actions it does not implement answer
// UnsupportedOperation (the embedded Unimplemented handler).
type Handler struct {
	cloudwatchv1connect.UnimplementedCloudwatchServiceHandler
	// Metrics is the metric data; nil answers every metric action with an error.
	Metrics *Metrics
	// KV holds the alarms.
	KV clientv3.KV
	// Actions runs alarm actions on SetAlarmState; nil records them as failed.
	Actions AlarmActions
	// Logger receives errors answered as InternalServiceError.
	Logger *slog.Logger
	now    func() time.Time
}

func (h *Handler) log() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

func (h *Handler) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

func invalid(format string, args ...any) error {
	return awserr.New("InvalidParameterValue", format, args...)
}

func missing(param string) error {
	return awserr.New("MissingParameter", "The parameter %s is required.", param)
}

func combination(format string, args ...any) error {
	return awserr.New("InvalidParameterCombination", format, args...)
}

func (h *Handler) metrics() (*Metrics, error) {
	if h.Metrics == nil {
		return nil, awserr.New("InternalServiceError", "This scheduler has no metric store.")
	}
	return h.Metrics, nil
}

// dimensions validates a metric's dimensions and returns them as a map.
func dimensions(dims []*cwv1.Dimension, param string) (map[string]string, error) {
	if len(dims) > maxDimensions {
		return nil, invalid("The collection %s must not have a size greater than %d.", param, maxDimensions)
	}
	out := make(map[string]string, len(dims))
	for i, d := range dims {
		p := fmt.Sprintf("%s.member.%d", param, i+1)
		if d.GetName() == "" {
			return nil, missing(p + ".Name")
		}
		if d.Value == nil {
			return nil, missing(p + ".Value")
		}
		if len(d.GetName()) > 255 {
			return nil, invalid("The parameter %s.Name must be between 1 and 255 characters long.", p)
		}
		if d.GetValue() == "" || len(d.GetValue()) > 1024 {
			return nil, invalid("The parameter %s.Value must be between 1 and 1024 characters long.", p)
		}
		if _, dup := out[d.GetName()]; dup {
			return nil, invalid("No Metric may specify the same dimension name twice (%s).", d.GetName())
		}
		out[d.GetName()] = d.GetValue()
	}
	return out, nil
}

func dimensionList(m map[string]string) []*cwv1.Dimension {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]*cwv1.Dimension, 0, len(m))
	for _, k := range names {
		out = append(out, &cwv1.Dimension{Name: proto.String(k), Value: proto.String(m[k])})
	}
	return out
}

func checkNamespace(ns, param string) error {
	if ns == "" {
		return missing(param)
	}
	if len(ns) > 255 || strings.HasPrefix(ns, ":") || !printable(ns) {
		return invalid("The value %s for parameter %s is invalid.", ns, param)
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// PutMetricData stores custom metric data. Namespaces starting with "AWS/" are refused,
// as CloudWatch reserves them.
func (h *Handler) PutMetricData(ctx context.Context, req *connect.Request[cwv1.PutMetricDataRequest]) (*connect.Response[cwv1.PutMetricDataResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.PutMetricDataRequest) (*cwv1.PutMetricDataResponse, error) {
		ns := in.GetNamespace()
		if err := checkNamespace(ns, "Namespace"); err != nil {
			return nil, err
		}
		if strings.HasPrefix(ns, "AWS/") {
			return nil, invalid("The value %s for parameter Namespace is invalid.", ns)
		}
		if len(in.GetEntityMetricData()) > 0 {
			return nil, invalid("Berth does not support EntityMetricData; send MetricData.")
		}
		if len(in.GetMetricData()) == 0 {
			return nil, missing("MetricData")
		}
		if len(in.GetMetricData()) > maxMetricData {
			return nil, invalid("The collection MetricData must not have a size greater than %d.", maxMetricData)
		}
		m, err := h.metrics()
		if err != nil {
			return nil, err
		}
		now := h.clock()
		points := make([]metricstore.Point, 0, len(in.GetMetricData()))
		for i, d := range in.GetMetricData() {
			p := fmt.Sprintf("MetricData.member.%d", i+1)
			pts, err := datumPoints(d, p, ns, now)
			if err != nil {
				return nil, err
			}
			for j := range pts {
				pts[j].Metric.Account, pts[j].Metric.Region = scope.Account, scope.Region
			}
			points = append(points, pts...)
		}
		if err := m.put(ctx, points); err != nil {
			return nil, err
		}
		return &cwv1.PutMetricDataResponse{}, nil
	})
}

// datumPoints validates one MetricDatum and returns its points (one per value, or one
// statistic set).
func datumPoints(d *cwv1.MetricDatum, p, ns string, now time.Time) ([]metricstore.Point, error) {
	if d.GetMetricName() == "" {
		return nil, missing(p + ".MetricName")
	}
	if len(d.GetMetricName()) > 255 {
		return nil, invalid("The parameter %s.MetricName must be between 1 and 255 characters long.", p)
	}
	dims, err := dimensions(d.GetDimensions(), p+".Dimensions")
	if err != nil {
		return nil, err
	}
	switch d.GetStorageResolution() {
	case 1, 60:
	case 0:
		if d.StorageResolution != nil {
			return nil, invalid("The value 0 for parameter %s.StorageResolution is invalid. Valid values are 1 and 60.", p)
		}
	default:
		return nil, invalid("The value %d for parameter %s.StorageResolution is invalid. Valid values are 1 and 60.", d.GetStorageResolution(), p)
	}
	t := now
	if d.Timestamp != nil {
		t = awsapi.FromEpoch(d.GetTimestamp())
		if t.Before(now.Add(-metricstore.MaxAge)) {
			return nil, invalid("The parameter %s.Timestamp must specify a time no more than two weeks in the past.", p)
		}
		if t.After(now.Add(maxFutureTimestamp)) {
			return nil, invalid("The parameter %s.Timestamp must specify a time no more than two hours in the future.", p)
		}
	}
	unit := d.GetUnit()
	if unit == "" {
		unit = "None"
	}
	metric := metricstore.Metric{Namespace: ns, Name: d.GetMetricName(), Dimensions: dims}
	point := func(s metricstore.Stats) metricstore.Point {
		return metricstore.Point{Metric: metric, Unit: unit, Time: t, Stats: s}
	}
	ss := d.GetStatisticValues()
	given := 0
	if d.Value != nil {
		given++
	}
	if ss != nil {
		given++
	}
	if len(d.GetValues()) > 0 {
		given++
	}
	if given > 1 {
		return nil, combination("The parameters %s.Value, %s.Values and %s.StatisticValues are mutually exclusive and you have specified more than one.", p, p, p)
	}
	if len(d.GetCounts()) > 0 && len(d.GetValues()) == 0 {
		return nil, combination("The parameter %s.Counts can only be given with %s.Values.", p, p)
	}
	switch {
	case ss != nil:
		for name, v := range map[string]float64{"SampleCount": ss.GetSampleCount(), "Sum": ss.GetSum(), "Minimum": ss.GetMinimum(), "Maximum": ss.GetMaximum()} {
			if finite(v) != nil {
				return nil, invalid("The value %v for parameter %s.StatisticValues.%s is invalid.", v, p, name)
			}
		}
		if ss.GetSampleCount() <= 0 {
			return nil, invalid("The parameter %s.StatisticValues.SampleCount must be greater than 0.", p)
		}
		if ss.GetMinimum() > ss.GetMaximum() {
			return nil, invalid("The parameter %s.StatisticValues.Maximum must be greater than %s.StatisticValues.Minimum.", p, p)
		}
		return []metricstore.Point{point(metricstore.Stats{SampleCount: ss.GetSampleCount(), Sum: ss.GetSum(), Minimum: ss.GetMinimum(), Maximum: ss.GetMaximum()})}, nil
	case len(d.GetValues()) > 0:
		vals, counts := d.GetValues(), d.GetCounts()
		if len(vals) > maxValues {
			return nil, invalid("The collection %s.Values must not have a size greater than %d.", p, maxValues)
		}
		if len(counts) > 0 && len(counts) != len(vals) {
			return nil, invalid("The parameters %s.Values and %s.Counts must be of the same size.", p, p)
		}
		var s metricstore.Stats
		for i, v := range vals {
			c := 1.0
			if len(counts) > 0 {
				c = counts[i]
			}
			if finite(v) != nil || finite(c) != nil || c < 0 {
				return nil, invalid("The value %v for parameter %s.Values.member.%d is invalid.", v, p, i+1)
			}
			if c == 0 {
				continue
			}
			s.Merge(metricstore.Stats{SampleCount: c, Sum: v * c, Minimum: v, Maximum: v})
		}
		if s.SampleCount == 0 {
			return nil, nil
		}
		return []metricstore.Point{point(s)}, nil
	}
	v := d.GetValue()
	if finite(v) != nil || math.Abs(v) > maxValue {
		return nil, invalid("The value %v for parameter %s.Value is invalid.", v, p)
	}
	return []metricstore.Point{point(metricstore.Stats{SampleCount: 1, Sum: v, Minimum: v, Maximum: v})}, nil
}

// checkPeriod validates a period in seconds: 1, 5, 10, 30 or a multiple of 60.
func checkPeriod(period int32, param string) error {
	switch {
	case period <= 0:
		return invalid("The parameter %s must be greater than 0.", param)
	case period == 1 || period == 5 || period == 10 || period == 30 || period%60 == 0:
		return nil
	}
	return invalid("The parameter %s must be 1, 5, 10, 30, or a multiple of 60.", param)
}

// GetMetricStatistics answers a metric's statistics per period.
func (h *Handler) GetMetricStatistics(ctx context.Context, req *connect.Request[cwv1.GetMetricStatisticsRequest]) (*connect.Response[cwv1.GetMetricStatisticsResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.GetMetricStatisticsRequest) (*cwv1.GetMetricStatisticsResponse, error) {
		if err := checkNamespace(in.GetNamespace(), "Namespace"); err != nil {
			return nil, err
		}
		if in.GetMetricName() == "" {
			return nil, missing("MetricName")
		}
		if in.StartTime == nil {
			return nil, missing("StartTime")
		}
		if in.EndTime == nil {
			return nil, missing("EndTime")
		}
		if in.Period == nil {
			return nil, missing("Period")
		}
		if err := checkPeriod(in.GetPeriod(), "Period"); err != nil {
			return nil, err
		}
		if len(in.GetStatistics()) == 0 && len(in.GetExtendedStatistics()) == 0 || len(in.GetStatistics()) > 0 && len(in.GetExtendedStatistics()) > 0 {
			return nil, combination("Must specify either Statistics or ExtendedStatistics, but not both.")
		}
		if len(in.GetExtendedStatistics()) > 0 {
			return nil, invalid("Berth does not support ExtendedStatistics (percentiles); use Statistics.")
		}
		if len(in.GetStatistics()) > 5 {
			return nil, invalid("The collection Statistics must not have a size greater than 5.")
		}
		for i, s := range in.GetStatistics() {
			if _, ok := (metricstore.Stats{}).Get(s); !ok {
				return nil, invalid("The value %s for parameter Statistics.member.%d is invalid.", s, i+1)
			}
		}
		dims, err := dimensions(in.GetDimensions(), "Dimensions")
		if err != nil {
			return nil, err
		}
		start, end := awsapi.FromEpoch(in.GetStartTime()), awsapi.FromEpoch(in.GetEndTime())
		if !start.Before(end) {
			return nil, invalid("The parameter StartTime must be less than the parameter EndTime.")
		}
		period := time.Duration(in.GetPeriod()) * time.Second
		if n := int64(end.Sub(start.Truncate(period)) / period); n > maxDatapoints {
			return nil, invalid("You have requested up to %d datapoints, which exceeds the limit of %d. You may reduce the datapoints requested by increasing Period, or decreasing the time range.", n, maxDatapoints)
		}
		m, err := h.metrics()
		if err != nil {
			return nil, err
		}
		buckets, err := m.series(ctx, scope, metricstore.Metric{Namespace: in.GetNamespace(), Name: in.GetMetricName(), Dimensions: dims}, in.GetUnit(), period, start, end)
		if err != nil {
			return nil, err
		}
		out := &cwv1.GetMetricStatisticsResponse{Label: proto.String(in.GetMetricName()), Datapoints: []*cwv1.Datapoint{}}
		for _, b := range buckets {
			dp := &cwv1.Datapoint{Timestamp: proto.Float64(awsapi.Epoch(b.Start)), Unit: proto.String(b.Unit)}
			for _, s := range in.GetStatistics() {
				v, _ := b.Stats.Get(s)
				switch s {
				case "SampleCount":
					dp.SampleCount = proto.Float64(v)
				case "Average":
					dp.Average = proto.Float64(v)
				case "Sum":
					dp.Sum = proto.Float64(v)
				case "Minimum":
					dp.Minimum = proto.Float64(v)
				case "Maximum":
					dp.Maximum = proto.Float64(v)
				}
			}
			out.Datapoints = append(out.Datapoints, dp)
		}
		return out, nil
	})
}

var queryID = regexp.MustCompile(`^[a-z][a-zA-Z0-9_]*$`)

// GetMetricData answers MetricStat queries; metric math expressions are refused.
func (h *Handler) GetMetricData(ctx context.Context, req *connect.Request[cwv1.GetMetricDataRequest]) (*connect.Response[cwv1.GetMetricDataResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.GetMetricDataRequest) (*cwv1.GetMetricDataResponse, error) {
		qs := in.GetMetricDataQueries()
		if len(qs) == 0 {
			return nil, missing("MetricDataQueries")
		}
		if len(qs) > maxQueries {
			return nil, invalid("The collection MetricDataQueries must not have a size greater than %d.", maxQueries)
		}
		if in.StartTime == nil {
			return nil, missing("StartTime")
		}
		if in.EndTime == nil {
			return nil, missing("EndTime")
		}
		start, end := awsapi.FromEpoch(in.GetStartTime()), awsapi.FromEpoch(in.GetEndTime())
		if !start.Before(end) {
			return nil, invalid("The parameter StartTime must be less than the parameter EndTime.")
		}
		if in.GetNextToken() != "" {
			return nil, awserr.New("InvalidNextToken", "The service cannot find the specified token.")
		}
		if in.GetLabelOptions() != nil && in.GetLabelOptions().GetTimezone() != "" {
			return nil, invalid("Berth does not support LabelOptions.Timezone.")
		}
		ascending := false
		switch in.GetScanBy() {
		case "", "TimestampDescending":
		case "TimestampAscending":
			ascending = true
		default:
			return nil, invalid("The value %s for parameter ScanBy is invalid.", in.GetScanBy())
		}
		maxPoints := int(in.GetMaxDatapoints())
		if maxPoints <= 0 {
			maxPoints = defaultMaxPoints
		}
		seen := map[string]bool{}
		for i, q := range qs {
			p := fmt.Sprintf("MetricDataQueries.member.%d", i+1)
			if q.GetId() == "" {
				return nil, missing(p + ".Id")
			}
			if !queryID.MatchString(q.GetId()) || len(q.GetId()) > 255 {
				return nil, invalid("The value %s for parameter %s.Id is invalid: it must start with a lowercase letter and hold only letters, digits and underscores.", q.GetId(), p)
			}
			if seen[q.GetId()] {
				return nil, invalid("The values for parameter id in MetricDataQueries are not unique.")
			}
			seen[q.GetId()] = true
			if q.GetAccountId() != "" && q.GetAccountId() != scope.Account {
				return nil, invalid("Berth does not support cross-account queries (%s.AccountId).", p)
			}
			switch {
			case q.Expression != nil && q.MetricStat != nil:
				return nil, combination("The parameters %s.Expression and %s.MetricStat are mutually exclusive and you have specified both.", p, p)
			case q.Expression != nil:
				return nil, invalid("Berth does not support metric math: %s.Expression is not evaluated; query with MetricStat.", p)
			case q.MetricStat == nil:
				return nil, combination("Exactly one of %s.Expression and %s.MetricStat must be specified.", p, p)
			}
		}
		m, err := h.metrics()
		if err != nil {
			return nil, err
		}
		out := &cwv1.GetMetricDataResponse{MetricDataResults: []*cwv1.MetricDataResult{}, Messages: []*cwv1.MessageData{}}
		total := 0
		for i, q := range qs {
			p := fmt.Sprintf("MetricDataQueries.member.%d.MetricStat", i+1)
			ms := q.GetMetricStat()
			metric := ms.GetMetric()
			if metric == nil {
				return nil, missing(p + ".Metric")
			}
			if metric.GetMetricName() == "" {
				return nil, missing(p + ".Metric.MetricName")
			}
			if err := checkNamespace(metric.GetNamespace(), p+".Metric.Namespace"); err != nil {
				return nil, err
			}
			if ms.Period == nil {
				return nil, missing(p + ".Period")
			}
			if err := checkPeriod(ms.GetPeriod(), p+".Period"); err != nil {
				return nil, err
			}
			if ms.GetStat() == "" {
				return nil, missing(p + ".Stat")
			}
			if _, ok := (metricstore.Stats{}).Get(ms.GetStat()); !ok {
				return nil, invalid("The value %s for parameter %s.Stat is invalid: Berth computes SampleCount, Average, Sum, Minimum and Maximum.", ms.GetStat(), p)
			}
			dims, err := dimensions(metric.GetDimensions(), p+".Metric.Dimensions")
			if err != nil {
				return nil, err
			}
			buckets, err := m.series(ctx, scope, metricstore.Metric{Namespace: metric.GetNamespace(), Name: metric.GetMetricName(), Dimensions: dims}, ms.GetUnit(), time.Duration(ms.GetPeriod())*time.Second, start, end)
			if err != nil {
				return nil, err
			}
			label := q.GetLabel()
			if label == "" {
				label = metric.GetMetricName()
			}
			res := &cwv1.MetricDataResult{Id: proto.String(q.GetId()), Label: proto.String(label), StatusCode: proto.String("Complete"),
				Timestamps: []float64{}, Values: []float64{}, Messages: []*cwv1.MessageData{}}
			if !ascending {
				for l, r := 0, len(buckets)-1; l < r; l, r = l+1, r-1 {
					buckets[l], buckets[r] = buckets[r], buckets[l]
				}
			}
			for _, b := range buckets {
				if total >= maxPoints {
					res.StatusCode = proto.String("PartialData")
					break
				}
				v, _ := b.Stats.Get(ms.GetStat())
				res.Timestamps = append(res.Timestamps, awsapi.Epoch(b.Start))
				res.Values = append(res.Values, v)
				total++
			}
			if q.ReturnData != nil && !q.GetReturnData() {
				continue // ReturnData false: computed, not returned (default true)
			}
			out.MetricDataResults = append(out.MetricDataResults, res)
		}
		return out, nil
	})
}

// ListMetrics lists the metrics with data in the last two weeks (three hours with
// RecentlyActive PT3H), 500 per page.
func (h *Handler) ListMetrics(ctx context.Context, req *connect.Request[cwv1.ListMetricsRequest]) (*connect.Response[cwv1.ListMetricsResponse], error) {
	return awsapi.Handle(ctx, h.log(), req, func(ctx context.Context, scope keys.Scope, in *cwv1.ListMetricsRequest) (*cwv1.ListMetricsResponse, error) {
		if in.GetIncludeLinkedAccounts() || in.GetOwningAccount() != "" && in.GetOwningAccount() != scope.Account {
			return nil, invalid("Berth does not support cross-account observability (IncludeLinkedAccounts, OwningAccount).")
		}
		if len(in.GetDimensions()) > 10 {
			return nil, invalid("The collection Dimensions must not have a size greater than 10.")
		}
		f := metricstore.Filter{Account: scope.Account, Region: scope.Region, Namespace: in.GetNamespace(), Name: in.GetMetricName(), Dimensions: map[string]string{}}
		for i, d := range in.GetDimensions() {
			if d.GetName() == "" {
				return nil, missing(fmt.Sprintf("Dimensions.member.%d.Name", i+1))
			}
			f.Dimensions[d.GetName()] = d.GetValue()
		}
		now := h.clock()
		switch in.GetRecentlyActive() {
		case "":
			f.Since = now.Add(-metricstore.MaxAge)
		case "PT3H":
			f.Since = now.Add(-3 * time.Hour)
		default:
			return nil, invalid("The value %s for parameter RecentlyActive is invalid.", in.GetRecentlyActive())
		}
		offset := 0
		if tok := in.GetNextToken(); tok != "" {
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 {
				return nil, awserr.New("InvalidNextToken", "The service cannot find the specified token.")
			}
			offset = n
		}
		m, err := h.metrics()
		if err != nil {
			return nil, err
		}
		list, err := m.store.List(ctx, f)
		if err != nil {
			return nil, err
		}
		out := &cwv1.ListMetricsResponse{Metrics: []*cwv1.Metric{}}
		if offset > len(list) {
			offset = len(list)
		}
		list = list[offset:]
		if len(list) > listMetricsPage {
			list = list[:listMetricsPage]
			out.NextToken = proto.String(strconv.Itoa(offset + listMetricsPage))
		}
		for _, mt := range list {
			out.Metrics = append(out.Metrics, &cwv1.Metric{Namespace: proto.String(mt.Namespace), MetricName: proto.String(mt.Name), Dimensions: dimensionList(mt.Dimensions)})
		}
		return out, nil
	})
}
