// Package logsapi serves the CloudWatch Logs API (JSON 1.1, target prefix
// Logs_20140328) over the scheduler's logstore: each operation takes the request's
// JSON body as the AWS model shapes it and returns the response's JSON body, or an
// *Error carrying the AWS error type. The gateway reaches it through the scheduler
// (see docs/logs.md); any transport that hands it the caller's account and region
// (from the SigV4 scope) can serve it.
package logsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/berthhq/berth/services/scheduler/logs/logstore"
)

// TargetPrefix is the X-Amz-Target prefix of CloudWatch Logs operations.
const TargetPrefix = "Logs_20140328"

// Error is an AWS error: Type is the exception name (ResourceNotFoundException,
// InvalidParameterException, …) and Status the HTTP status AWS answers with.
type Error struct {
	// Type is the AWS exception name.
	Type string
	// Message says what is wrong.
	Message string
	// Status is the HTTP status: 400 for every CloudWatch Logs client error.
	Status int
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

func invalid(format string, args ...any) *Error {
	return &Error{Type: logstore.InvalidParameter, Message: fmt.Sprintf(format, args...), Status: 400}
}

// UnknownOperation is the type of the error for an operation Berth does not serve.
const UnknownOperation = "UnknownOperationException"

// Handler serves the API over a store.
type Handler struct {
	store *logstore.Store
}

// New returns a handler over store.
func New(store *logstore.Store) *Handler { return &Handler{store: store} }

type op func(h *Handler, sc logstore.Scope, body []byte) (any, error)

var ops = map[string]op{
	"CreateLogGroup":        wrap((*Handler).createLogGroup),
	"DeleteLogGroup":        wrap((*Handler).deleteLogGroup),
	"DescribeLogGroups":     wrap((*Handler).describeLogGroups),
	"CreateLogStream":       wrap((*Handler).createLogStream),
	"DeleteLogStream":       wrap((*Handler).deleteLogStream),
	"DescribeLogStreams":    wrap((*Handler).describeLogStreams),
	"PutLogEvents":          wrap((*Handler).putLogEvents),
	"GetLogEvents":          wrap((*Handler).getLogEvents),
	"FilterLogEvents":       wrap((*Handler).filterLogEvents),
	"PutRetentionPolicy":    wrap((*Handler).putRetentionPolicy),
	"DeleteRetentionPolicy": wrap((*Handler).deleteRetentionPolicy),
	"TagResource":           wrap((*Handler).tagResource),
	"UntagResource":         wrap((*Handler).untagResource),
	"ListTagsForResource":   wrap((*Handler).listTagsForResource),
	"TagLogGroup":           wrap((*Handler).tagLogGroup),
	"UntagLogGroup":         wrap((*Handler).untagLogGroup),
	"ListTagsLogGroup":      wrap((*Handler).listTagsLogGroup),
}

// Operations returns the names of the operations Berth serves, sorted.
func Operations() []string {
	out := make([]string, 0, len(ops))
	for k := range ops {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func wrap[Req any](f func(*Handler, logstore.Scope, *Req) (any, error)) op {
	return func(h *Handler, sc logstore.Scope, body []byte) (any, error) {
		req := new(Req)
		if len(bytes.TrimSpace(body)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(req); err != nil {
				return nil, &Error{Type: "SerializationException", Message: err.Error(), Status: 400}
			}
		}
		return f(h, sc, req)
	}
}

// Serve runs operation action (the X-Amz-Target suffix) for the caller's account and
// region with the JSON request body, and returns the JSON response body. Errors are
// *Error: UnknownOperation for an operation Berth does not serve (StartLiveTail,
// metric filters, subscriptions, queries, …), else the AWS type of the failure.
func (h *Handler) Serve(sc logstore.Scope, action string, body []byte) ([]byte, error) {
	f, ok := ops[action]
	if !ok {
		return nil, &Error{Type: UnknownOperation, Message: fmt.Sprintf("Berth does not support the CloudWatch Logs operation %s; it serves %s.", action, strings.Join(Operations(), ", ")), Status: 400}
	}
	out, err := f(h, sc, body)
	if err != nil {
		var le *logstore.Error
		if errors.As(err, &le) {
			status := 400
			if le.Type == logstore.ServiceUnavailable {
				status = 503
			}
			return nil, &Error{Type: le.Type, Message: le.Message, Status: status}
		}
		var ae *Error
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, err
	}
	return json.Marshal(out)
}

type empty struct{}

// groupName returns the group a request names by logGroupName or logGroupIdentifier
// (exactly one of them, as AWS requires where both exist).
func groupName(sc logstore.Scope, name, ident *string) (string, error) {
	switch {
	case name != nil && ident != nil:
		return "", invalid("LogGroup name and LogGroup identifier are mutually exclusive parameters.")
	case ident != nil:
		return logstore.GroupName(sc, *ident)
	case name != nil:
		return *name, nil
	}
	return "", invalid("Either LogGroup name or LogGroup identifier must be provided.")
}

func required(field string, v *string) (string, error) {
	if v == nil || *v == "" {
		return "", invalid("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", field)
	}
	return *v, nil
}

type createLogGroupReq struct {
	LogGroupName              *string           `json:"logGroupName"`
	KmsKeyID                  *string           `json:"kmsKeyId"`
	Tags                      map[string]string `json:"tags"`
	LogGroupClass             *string           `json:"logGroupClass"`
	DeletionProtectionEnabled *bool             `json:"deletionProtectionEnabled"`
}

func (h *Handler) createLogGroup(sc logstore.Scope, r *createLogGroupReq) (any, error) {
	name, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	if r.KmsKeyID != nil {
		return nil, invalid("kmsKeyId is not supported by Berth: it has no KMS; log events are stored on the scheduler's disk.")
	}
	if r.LogGroupClass != nil && *r.LogGroupClass != "STANDARD" {
		return nil, invalid("logGroupClass %s is not supported by Berth; only STANDARD is.", *r.LogGroupClass)
	}
	if r.DeletionProtectionEnabled != nil && *r.DeletionProtectionEnabled {
		return nil, invalid("deletionProtectionEnabled is not supported by Berth; leave it out or false.")
	}
	return empty{}, h.store.CreateGroup(sc, name, r.Tags)
}

type groupReq struct {
	LogGroupName *string `json:"logGroupName"`
}

func (h *Handler) deleteLogGroup(sc logstore.Scope, r *groupReq) (any, error) {
	name, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	return empty{}, h.store.DeleteGroup(sc, name)
}

type describeLogGroupsReq struct {
	LogGroupNamePrefix    *string  `json:"logGroupNamePrefix"`
	LogGroupNamePattern   *string  `json:"logGroupNamePattern"`
	NextToken             *string  `json:"nextToken"`
	Limit                 *int     `json:"limit"`
	IncludeLinkedAccounts *bool    `json:"includeLinkedAccounts"`
	LogGroupClass         *string  `json:"logGroupClass"`
	AccountIdentifiers    []string `json:"accountIdentifiers"`
	LogGroupIdentifiers   []string `json:"logGroupIdentifiers"`
}

type logGroupOut struct {
	LogGroupName      string `json:"logGroupName"`
	CreationTime      int64  `json:"creationTime"`
	RetentionInDays   *int32 `json:"retentionInDays,omitempty"`
	MetricFilterCount int    `json:"metricFilterCount"`
	Arn               string `json:"arn"`
	StoredBytes       int64  `json:"storedBytes"`
	LogGroupClass     string `json:"logGroupClass"`
	LogGroupArn       string `json:"logGroupArn"`
}

func (h *Handler) describeLogGroups(sc logstore.Scope, r *describeLogGroupsReq) (any, error) {
	if r.IncludeLinkedAccounts != nil && *r.IncludeLinkedAccounts || len(r.AccountIdentifiers) > 0 {
		return nil, invalid("Berth has no cross-account observability: includeLinkedAccounts and accountIdentifiers are not supported.")
	}
	in := logstore.DescribeGroupsInput{}
	if r.LogGroupNamePrefix != nil {
		in.Prefix = *r.LogGroupNamePrefix
	}
	if r.LogGroupNamePattern != nil {
		in.Pattern = *r.LogGroupNamePattern
	}
	if r.NextToken != nil {
		in.Token = *r.NextToken
	}
	if r.Limit != nil {
		if *r.Limit == 0 {
			return nil, invalid("1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1")
		}
		in.Limit = *r.Limit
	}
	var groups []logstore.Group
	var next string
	if len(r.LogGroupIdentifiers) > 0 {
		if in.Prefix != "" || in.Pattern != "" {
			return nil, invalid("logGroupIdentifiers cannot be combined with logGroupNamePrefix or logGroupNamePattern.")
		}
		for _, id := range r.LogGroupIdentifiers {
			name, err := logstore.GroupName(sc, id)
			if err != nil {
				continue
			}
			if g, err := h.store.DescribeGroup(sc, name); err == nil {
				groups = append(groups, g)
			}
		}
	} else {
		var err error
		if groups, next, err = h.store.DescribeGroups(sc, in); err != nil {
			return nil, err
		}
	}
	out := struct {
		LogGroups []logGroupOut `json:"logGroups"`
		NextToken string        `json:"nextToken,omitempty"`
	}{LogGroups: []logGroupOut{}, NextToken: next}
	for _, g := range groups {
		if r.LogGroupClass != nil && *r.LogGroupClass != "STANDARD" {
			continue
		}
		o := logGroupOut{LogGroupName: g.Name, CreationTime: g.CreationTime, Arn: g.ARN, StoredBytes: g.StoredBytes, LogGroupClass: "STANDARD", LogGroupArn: g.GroupARN}
		if g.RetentionInDays > 0 {
			d := g.RetentionInDays
			o.RetentionInDays = &d
		}
		out.LogGroups = append(out.LogGroups, o)
	}
	return out, nil
}

type streamReq struct {
	LogGroupName  *string `json:"logGroupName"`
	LogStreamName *string `json:"logStreamName"`
}

func (h *Handler) createLogStream(sc logstore.Scope, r *streamReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	s, err := required("logStreamName", r.LogStreamName)
	if err != nil {
		return nil, err
	}
	return empty{}, h.store.CreateStream(sc, g, s)
}

func (h *Handler) deleteLogStream(sc logstore.Scope, r *streamReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	s, err := required("logStreamName", r.LogStreamName)
	if err != nil {
		return nil, err
	}
	return empty{}, h.store.DeleteStream(sc, g, s)
}

type describeLogStreamsReq struct {
	LogGroupName        *string `json:"logGroupName"`
	LogGroupIdentifier  *string `json:"logGroupIdentifier"`
	LogStreamNamePrefix *string `json:"logStreamNamePrefix"`
	OrderBy             *string `json:"orderBy"`
	Descending          *bool   `json:"descending"`
	NextToken           *string `json:"nextToken"`
	Limit               *int    `json:"limit"`
}

type logStreamOut struct {
	LogStreamName       string `json:"logStreamName"`
	CreationTime        int64  `json:"creationTime"`
	FirstEventTimestamp *int64 `json:"firstEventTimestamp,omitempty"`
	LastEventTimestamp  *int64 `json:"lastEventTimestamp,omitempty"`
	LastIngestionTime   *int64 `json:"lastIngestionTime,omitempty"`
	UploadSequenceToken string `json:"uploadSequenceToken,omitempty"`
	Arn                 string `json:"arn"`
	StoredBytes         int64  `json:"storedBytes"`
}

func optTime(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func (h *Handler) describeLogStreams(sc logstore.Scope, r *describeLogStreamsReq) (any, error) {
	g, err := groupName(sc, r.LogGroupName, r.LogGroupIdentifier)
	if err != nil {
		return nil, err
	}
	in := logstore.DescribeStreamsInput{Group: g}
	if r.LogStreamNamePrefix != nil {
		in.Prefix = *r.LogStreamNamePrefix
	}
	if r.OrderBy != nil {
		switch *r.OrderBy {
		case "LogStreamName":
		case "LastEventTime":
			in.OrderByLastEventTime = true
		default:
			return nil, invalid("1 validation error detected: Value '%s' at 'orderBy' failed to satisfy constraint: Member must satisfy enum value set: [LogStreamName, LastEventTime]", *r.OrderBy)
		}
	}
	if r.Descending != nil {
		in.Descending = *r.Descending
	}
	if r.NextToken != nil {
		in.Token = *r.NextToken
	}
	if r.Limit != nil {
		if *r.Limit == 0 {
			return nil, invalid("1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1")
		}
		in.Limit = *r.Limit
	}
	streams, next, err := h.store.DescribeStreams(sc, in)
	if err != nil {
		return nil, err
	}
	out := struct {
		LogStreams []logStreamOut `json:"logStreams"`
		NextToken  string         `json:"nextToken,omitempty"`
	}{LogStreams: []logStreamOut{}, NextToken: next}
	for _, s := range streams {
		out.LogStreams = append(out.LogStreams, logStreamOut{LogStreamName: s.Name, CreationTime: s.CreationTime,
			FirstEventTimestamp: optTime(s.FirstEventTimestamp), LastEventTimestamp: optTime(s.LastEventTimestamp),
			LastIngestionTime: optTime(s.LastIngestionTime), Arn: s.ARN, StoredBytes: s.StoredBytes})
	}
	return out, nil
}

type inputEvent struct {
	Timestamp *int64  `json:"timestamp"`
	Message   *string `json:"message"`
}

type putLogEventsReq struct {
	LogGroupName  *string         `json:"logGroupName"`
	LogStreamName *string         `json:"logStreamName"`
	LogEvents     []inputEvent    `json:"logEvents"`
	SequenceToken *string         `json:"sequenceToken"`
	Entity        json.RawMessage `json:"entity"`
}

func (h *Handler) putLogEvents(sc logstore.Scope, r *putLogEventsReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	s, err := required("logStreamName", r.LogStreamName)
	if err != nil {
		return nil, err
	}
	if len(r.Entity) > 0 {
		return nil, invalid("entity is not supported by Berth (it has no CloudWatch explore); leave it out.")
	}
	// sequenceToken is ignored, as AWS now ignores it.
	evs := make([]logstore.InputEvent, len(r.LogEvents))
	for i, e := range r.LogEvents {
		if e.Timestamp == nil || e.Message == nil {
			return nil, invalid("1 validation error detected: Value null at 'logEvents.%d.member.%s' failed to satisfy constraint: Member must not be null", i+1, map[bool]string{true: "timestamp", false: "message"}[e.Timestamp == nil])
		}
		evs[i] = logstore.InputEvent{Timestamp: *e.Timestamp, Message: *e.Message}
	}
	rej, err := h.store.PutEvents(sc, g, s, evs)
	if err != nil {
		return nil, err
	}
	type rejected struct {
		TooNewLogEventStartIndex *int `json:"tooNewLogEventStartIndex,omitempty"`
		TooOldLogEventEndIndex   *int `json:"tooOldLogEventEndIndex,omitempty"`
		ExpiredLogEventEndIndex  *int `json:"expiredLogEventEndIndex,omitempty"`
	}
	out := struct {
		Rejected *rejected `json:"rejectedLogEventsInfo,omitempty"`
	}{}
	if rej.Any() {
		out.Rejected = &rejected{}
		idx := func(i int) *int {
			if i < 0 {
				return nil
			}
			return &i
		}
		out.Rejected.TooNewLogEventStartIndex = idx(rej.TooNewStartIndex)
		out.Rejected.TooOldLogEventEndIndex = idx(rej.TooOldEndIndex)
		out.Rejected.ExpiredLogEventEndIndex = idx(rej.ExpiredEndIndex)
	}
	return out, nil
}

type getLogEventsReq struct {
	LogGroupName       *string `json:"logGroupName"`
	LogGroupIdentifier *string `json:"logGroupIdentifier"`
	LogStreamName      *string `json:"logStreamName"`
	StartTime          *int64  `json:"startTime"`
	EndTime            *int64  `json:"endTime"`
	NextToken          *string `json:"nextToken"`
	Limit              *int    `json:"limit"`
	StartFromHead      *bool   `json:"startFromHead"`
	Unmask             *bool   `json:"unmask"`
}

type outputEvent struct {
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
}

func (h *Handler) getLogEvents(sc logstore.Scope, r *getLogEventsReq) (any, error) {
	g, err := groupName(sc, r.LogGroupName, r.LogGroupIdentifier)
	if err != nil {
		return nil, err
	}
	s, err := required("logStreamName", r.LogStreamName)
	if err != nil {
		return nil, err
	}
	// unmask reveals data masked by a data protection policy; Berth masks nothing.
	in := logstore.GetEventsInput{Group: g, Stream: s, Start: r.StartTime, End: r.EndTime}
	if r.NextToken != nil {
		in.Token = *r.NextToken
	}
	if r.Limit != nil {
		if *r.Limit == 0 {
			return nil, invalid("1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1")
		}
		in.Limit = *r.Limit
	}
	if r.StartFromHead != nil {
		in.StartFromHead = *r.StartFromHead
	}
	res, err := h.store.GetEvents(sc, in)
	if err != nil {
		return nil, err
	}
	out := struct {
		Events            []outputEvent `json:"events"`
		NextForwardToken  string        `json:"nextForwardToken"`
		NextBackwardToken string        `json:"nextBackwardToken"`
	}{Events: make([]outputEvent, 0, len(res.Events)), NextForwardToken: res.NextForwardToken, NextBackwardToken: res.NextBackwardToken}
	for _, e := range res.Events {
		out.Events = append(out.Events, outputEvent{Timestamp: e.Timestamp, Message: e.Message, IngestionTime: e.IngestionTime})
	}
	return out, nil
}

type filterLogEventsReq struct {
	LogGroupName        *string  `json:"logGroupName"`
	LogGroupIdentifier  *string  `json:"logGroupIdentifier"`
	LogStreamNames      []string `json:"logStreamNames"`
	LogStreamNamePrefix *string  `json:"logStreamNamePrefix"`
	StartTime           *int64   `json:"startTime"`
	EndTime             *int64   `json:"endTime"`
	FilterPattern       *string  `json:"filterPattern"`
	NextToken           *string  `json:"nextToken"`
	Limit               *int     `json:"limit"`
	Interleaved         *bool    `json:"interleaved"`
	Unmask              *bool    `json:"unmask"`
}

type filteredEvent struct {
	LogStreamName string `json:"logStreamName"`
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
	EventID       string `json:"eventId"`
}

type searchedStream struct {
	LogStreamName      string `json:"logStreamName"`
	SearchedCompletely bool   `json:"searchedCompletely"`
}

func (h *Handler) filterLogEvents(sc logstore.Scope, r *filterLogEventsReq) (any, error) {
	g, err := groupName(sc, r.LogGroupName, r.LogGroupIdentifier)
	if err != nil {
		return nil, err
	}
	// interleaved is deprecated and always true on AWS; results are always interleaved.
	in := logstore.FilterInput{Group: g, Streams: r.LogStreamNames, Start: r.StartTime, End: r.EndTime}
	if r.LogStreamNamePrefix != nil {
		in.StreamPrefix = *r.LogStreamNamePrefix
	}
	if r.FilterPattern != nil {
		in.Pattern = *r.FilterPattern
	}
	if r.NextToken != nil {
		in.Token = *r.NextToken
	}
	if r.Limit != nil {
		if *r.Limit == 0 {
			return nil, invalid("1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1")
		}
		in.Limit = *r.Limit
	}
	res, err := h.store.FilterEvents(sc, in)
	if err != nil {
		return nil, err
	}
	out := struct {
		Events             []filteredEvent  `json:"events"`
		SearchedLogStreams []searchedStream `json:"searchedLogStreams"`
		NextToken          string           `json:"nextToken,omitempty"`
	}{Events: make([]filteredEvent, 0, len(res.Events)), SearchedLogStreams: []searchedStream{}, NextToken: res.NextToken}
	for _, e := range res.Events {
		out.Events = append(out.Events, filteredEvent{LogStreamName: e.Stream, Timestamp: e.Timestamp, Message: e.Message, IngestionTime: e.IngestionTime, EventID: e.ID})
	}
	for _, s := range res.Searched {
		out.SearchedLogStreams = append(out.SearchedLogStreams, searchedStream{LogStreamName: s, SearchedCompletely: res.NextToken == ""})
	}
	return out, nil
}

type retentionReq struct {
	LogGroupName    *string `json:"logGroupName"`
	RetentionInDays *int32  `json:"retentionInDays"`
}

func (h *Handler) putRetentionPolicy(sc logstore.Scope, r *retentionReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	if r.RetentionInDays == nil {
		return nil, invalid("1 validation error detected: Value null at 'retentionInDays' failed to satisfy constraint: Member must not be null")
	}
	return empty{}, h.store.PutRetention(sc, g, *r.RetentionInDays)
}

func (h *Handler) deleteRetentionPolicy(sc logstore.Scope, r *groupReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	return empty{}, h.store.DeleteRetention(sc, g)
}

type tagResourceReq struct {
	ResourceArn *string           `json:"resourceArn"`
	Tags        map[string]string `json:"tags"`
	TagKeys     []string          `json:"tagKeys"`
}

// resourceGroup returns the log group a resource ARN names; tags are served for log
// groups only.
func resourceGroup(sc logstore.Scope, a *string) (string, error) {
	v, err := required("resourceArn", a)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(v, "arn:") || !strings.Contains(v, ":log-group:") || strings.Contains(v, ":log-stream:") {
		return "", invalid("Berth tags log groups only; %s is not a log group ARN.", v)
	}
	return logstore.GroupName(sc, v)
}

func (h *Handler) tagResource(sc logstore.Scope, r *tagResourceReq) (any, error) {
	g, err := resourceGroup(sc, r.ResourceArn)
	if err != nil {
		return nil, err
	}
	if len(r.Tags) == 0 {
		return nil, invalid("1 validation error detected: Value at 'tags' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	return empty{}, h.store.TagGroup(sc, g, r.Tags)
}

func (h *Handler) untagResource(sc logstore.Scope, r *tagResourceReq) (any, error) {
	g, err := resourceGroup(sc, r.ResourceArn)
	if err != nil {
		return nil, err
	}
	return empty{}, h.store.UntagGroup(sc, g, r.TagKeys)
}

type tagsOut struct {
	Tags map[string]string `json:"tags"`
}

func (h *Handler) listTagsForResource(sc logstore.Scope, r *tagResourceReq) (any, error) {
	g, err := resourceGroup(sc, r.ResourceArn)
	if err != nil {
		return nil, err
	}
	return h.tagsOf(sc, g)
}

func (h *Handler) tagsOf(sc logstore.Scope, g string) (any, error) {
	grp, err := h.store.DescribeGroup(sc, g)
	if err != nil {
		return nil, err
	}
	out := tagsOut{Tags: grp.Tags}
	if out.Tags == nil {
		out.Tags = map[string]string{}
	}
	return out, nil
}

type tagLogGroupReq struct {
	LogGroupName *string         `json:"logGroupName"`
	Tags         json.RawMessage `json:"tags"`
}

func (h *Handler) tagLogGroup(sc logstore.Scope, r *tagLogGroupReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	var tags map[string]string
	if err := json.Unmarshal(r.Tags, &tags); err != nil || len(tags) == 0 {
		return nil, invalid("tags must be a non-empty map of tag keys to values.")
	}
	return empty{}, h.store.TagGroup(sc, g, tags)
}

func (h *Handler) untagLogGroup(sc logstore.Scope, r *tagLogGroupReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	var keys []string
	if err := json.Unmarshal(r.Tags, &keys); err != nil || len(keys) == 0 {
		return nil, invalid("tags must be a non-empty list of tag keys.")
	}
	return empty{}, h.store.UntagGroup(sc, g, keys)
}

func (h *Handler) listTagsLogGroup(sc logstore.Scope, r *groupReq) (any, error) {
	g, err := required("logGroupName", r.LogGroupName)
	if err != nil {
		return nil, err
	}
	return h.tagsOf(sc, g)
}
