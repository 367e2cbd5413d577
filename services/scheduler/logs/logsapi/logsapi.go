// Package logsapi serves the CloudWatch Logs API over the scheduler's log store
// (logs/logstore). Service implements logsv1connect.LogsServiceHandler, which the
// gateway calls for requests signed for the SigV4 service "logs" (see docs/logs.md):
// each method reads the generated request message of its operation, checks it as
// CloudWatch Logs does, and answers the generated response message. Errors are
// *awserr.Error carrying the AWS exception type; a logstore.Error keeps its type and
// message.
package logsapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
	"github.com/berthhq/berth/gen/berth/logs/v1/logsv1connect"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Service serves the CloudWatch Logs operations Berth supports over a log store.
// Operations it does not serve (StartLiveTail, metric filters, subscriptions, Insights
// queries, …) are the embedded Unimplemented handler's, which the gateway answers as
// UnsupportedOperationException.
type Service struct {
	logsv1connect.UnimplementedLogsServiceHandler
	store *logstore.Store
	log   *slog.Logger
}

var _ logsv1connect.LogsServiceHandler = (*Service)(nil)

// NewService returns the service over store. A failure that is not an AWS exception
// (a disk error, say) is logged to log (nil discards) and answered as ServerException.
func NewService(store *logstore.Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, log: log}
}

// handle is awsapi.Handle with the caller's scope as a logstore.Scope: fn gets the
// scope and the request message, and a *logstore.Error it returns becomes the
// awserr.Error of the same type and message.
func handle[Req, Resp any](ctx context.Context, s *Service, req *connect.Request[Req], fn func(sc logstore.Scope, m *Req) (*Resp, error)) (*connect.Response[Resp], error) {
	return awsapi.Handle(ctx, s.log, req, func(_ context.Context, scope keys.Scope, m *Req) (*Resp, error) {
		resp, err := fn(logstore.Scope{Account: scope.Account, Region: scope.Region}, m)
		var le *logstore.Error
		if errors.As(err, &le) {
			return nil, awserr.New(le.Type, "%s", le.Message)
		}
		return resp, err
	})
}

// CreateLogGroup creates the group logGroupName (required) with tags. It refuses
// kmsKeyId, a logGroupClass other than STANDARD and deletionProtectionEnabled
// (InvalidParameterException), and answers an empty response, or
// ResourceAlreadyExistsException for an existing group.
func (s *Service) CreateLogGroup(ctx context.Context, req *connect.Request[logsv1.CreateLogGroupRequest]) (*connect.Response[logsv1.CreateLogGroupResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.CreateLogGroupRequest) (*logsv1.CreateLogGroupResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		switch {
		case m.KmsKeyId != nil:
			return nil, awserr.InvalidParameterf("kmsKeyId is not supported by Berth: it has no KMS; log events are stored on the scheduler's disk.")
		case m.LogGroupClass != nil && m.GetLogGroupClass() != "STANDARD":
			return nil, awserr.InvalidParameterf("logGroupClass %s is not supported by Berth; only STANDARD is.", m.GetLogGroupClass())
		case m.GetDeletionProtectionEnabled():
			return nil, awserr.InvalidParameterf("deletionProtectionEnabled is not supported by Berth; leave it out or false.")
		}
		return &logsv1.CreateLogGroupResponse{}, s.store.CreateGroup(sc, m.GetLogGroupName(), m.GetTags())
	})
}

// DeleteLogGroup deletes the group logGroupName (required) with its streams and
// events. It answers an empty response, or ResourceNotFoundException.
func (s *Service) DeleteLogGroup(ctx context.Context, req *connect.Request[logsv1.DeleteLogGroupRequest]) (*connect.Response[logsv1.DeleteLogGroupResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.DeleteLogGroupRequest) (*logsv1.DeleteLogGroupResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		return &logsv1.DeleteLogGroupResponse{}, s.store.DeleteGroup(sc, m.GetLogGroupName())
	})
}

// DescribeLogGroups lists the caller's groups in name order, a page of limit (1–50,
// default 50) at a time: those with logGroupNamePrefix, or containing
// logGroupNamePattern, after nextToken; or those logGroupIdentifiers name (names or
// ARNs; unknown ones are left out). A logGroupClass other than STANDARD matches none.
// It answers the groups and the nextToken of the next page (absent on the last), or
// InvalidParameterException for a bad limit or token, prefix with pattern, identifiers
// with either, and for includeLinkedAccounts or accountIdentifiers.
func (s *Service) DescribeLogGroups(ctx context.Context, req *connect.Request[logsv1.DescribeLogGroupsRequest]) (*connect.Response[logsv1.DescribeLogGroupsResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.DescribeLogGroupsRequest) (*logsv1.DescribeLogGroupsResponse, error) {
		if m.GetIncludeLinkedAccounts() || len(m.GetAccountIdentifiers()) > 0 {
			return nil, awserr.InvalidParameterf("Berth has no cross-account observability: includeLinkedAccounts and accountIdentifiers are not supported.")
		}
		groups, next, err := s.describeGroups(sc, m)
		if err != nil {
			return nil, err
		}
		resp := &logsv1.DescribeLogGroupsResponse{LogGroups: make([]*logsv1.LogGroup, 0, len(groups)), NextToken: nonEmpty(next)}
		if m.LogGroupClass != nil && m.GetLogGroupClass() != "STANDARD" {
			return resp, nil // every group Berth keeps is STANDARD
		}
		for _, g := range groups {
			resp.LogGroups = append(resp.LogGroups, &logsv1.LogGroup{LogGroupName: proto.String(g.Name), CreationTime: g.CreationTime,
				RetentionInDays: g.RetentionInDays, Arn: proto.String(g.ARN), StoredBytes: g.StoredBytes,
				LogGroupClass: proto.String("STANDARD"), LogGroupArn: proto.String(g.GroupARN)})
		}
		return resp, nil
	})
}

// describeGroups returns the groups a DescribeLogGroups request selects and the token
// of the next page.
func (s *Service) describeGroups(sc logstore.Scope, m *logsv1.DescribeLogGroupsRequest) ([]logstore.Group, string, error) {
	in := logstore.DescribeGroupsInput{Prefix: m.GetLogGroupNamePrefix(), Pattern: m.GetLogGroupNamePattern(), Token: m.GetNextToken(), Limit: int(m.GetLimit())}
	if len(m.GetLogGroupIdentifiers()) == 0 {
		return s.store.DescribeGroups(sc, in)
	}
	if in.Prefix != "" || in.Pattern != "" {
		return nil, "", awserr.InvalidParameterf("logGroupIdentifiers cannot be combined with logGroupNamePrefix or logGroupNamePattern.")
	}
	var groups []logstore.Group
	for _, id := range m.GetLogGroupIdentifiers() {
		name, err := logstore.GroupName(sc, id)
		if err != nil {
			continue
		}
		if g, err := s.store.DescribeGroup(sc, name); err == nil {
			groups = append(groups, g)
		}
	}
	return groups, "", nil
}

// CreateLogStream creates the stream logStreamName in the group logGroupName (both
// required). It answers an empty response, or ResourceNotFoundException for a missing
// group, ResourceAlreadyExistsException for an existing stream and
// InvalidParameterException for an invalid name.
func (s *Service) CreateLogStream(ctx context.Context, req *connect.Request[logsv1.CreateLogStreamRequest]) (*connect.Response[logsv1.CreateLogStreamResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.CreateLogStreamRequest) (*logsv1.CreateLogStreamResponse, error) {
		if err := cmp.Or(missing("logGroupName", m.GetLogGroupName()), missing("logStreamName", m.GetLogStreamName())); err != nil {
			return nil, err
		}
		return &logsv1.CreateLogStreamResponse{}, s.store.CreateStream(sc, m.GetLogGroupName(), m.GetLogStreamName())
	})
}

// DeleteLogStream deletes the stream logStreamName of the group logGroupName (both
// required) with its events. It answers an empty response, or
// ResourceNotFoundException for a missing group or stream.
func (s *Service) DeleteLogStream(ctx context.Context, req *connect.Request[logsv1.DeleteLogStreamRequest]) (*connect.Response[logsv1.DeleteLogStreamResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.DeleteLogStreamRequest) (*logsv1.DeleteLogStreamResponse, error) {
		if err := cmp.Or(missing("logGroupName", m.GetLogGroupName()), missing("logStreamName", m.GetLogStreamName())); err != nil {
			return nil, err
		}
		return &logsv1.DeleteLogStreamResponse{}, s.store.DeleteStream(sc, m.GetLogGroupName(), m.GetLogStreamName())
	})
}

// DescribeLogStreams lists the streams of the group named by logGroupName or
// logGroupIdentifier (exactly one), a page of limit (1–50, default 50) after nextToken:
// by name (with logStreamNamePrefix) or, with orderBy LastEventTime, by last event
// time; descending reverses the order. It answers the streams and the nextToken of the
// next page (absent on the last), or ResourceNotFoundException for a missing group and
// InvalidParameterException for a bad limit, token or orderBy, or a prefix with
// LastEventTime.
func (s *Service) DescribeLogStreams(ctx context.Context, req *connect.Request[logsv1.DescribeLogStreamsRequest]) (*connect.Response[logsv1.DescribeLogStreamsResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.DescribeLogStreamsRequest) (*logsv1.DescribeLogStreamsResponse, error) {
		g, err := groupName(sc, m.LogGroupName, m.LogGroupIdentifier)
		if err != nil {
			return nil, err
		}
		in := logstore.DescribeStreamsInput{Group: g, Prefix: m.GetLogStreamNamePrefix(), Descending: m.GetDescending(), Token: m.GetNextToken(), Limit: int(m.GetLimit())}
		if m.OrderBy != nil {
			switch m.GetOrderBy() {
			case "LogStreamName":
			case "LastEventTime":
				in.OrderByLastEventTime = true
			default:
				return nil, awserr.InvalidParameterf("1 validation error detected: Value '%s' at 'orderBy' failed to satisfy constraint: Member must satisfy enum value set: [LogStreamName, LastEventTime]", m.GetOrderBy())
			}
		}
		streams, next, err := s.store.DescribeStreams(sc, in)
		if err != nil {
			return nil, err
		}
		resp := &logsv1.DescribeLogStreamsResponse{LogStreams: make([]*logsv1.LogStream, 0, len(streams)), NextToken: nonEmpty(next)}
		for _, st := range streams {
			resp.LogStreams = append(resp.LogStreams, &logsv1.LogStream{LogStreamName: proto.String(st.Name), CreationTime: st.CreationTime,
				FirstEventTimestamp: st.FirstEventTimestamp, LastEventTimestamp: st.LastEventTimestamp,
				LastIngestionTime: st.LastIngestionTime, Arn: proto.String(st.ARN), StoredBytes: st.StoredBytes})
		}
		return resp, nil
	})
}

// PutRetentionPolicy sets the retention of the group logGroupName (required) to
// retentionInDays (required; one of logstore.RetentionDays). It answers an empty
// response, or ResourceNotFoundException and InvalidParameterException.
func (s *Service) PutRetentionPolicy(ctx context.Context, req *connect.Request[logsv1.PutRetentionPolicyRequest]) (*connect.Response[logsv1.PutRetentionPolicyResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.PutRetentionPolicyRequest) (*logsv1.PutRetentionPolicyResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		if m.GetRetentionInDays() == 0 { // no presence: 0 is how an absent member arrives
			return nil, null("retentionInDays")
		}
		return &logsv1.PutRetentionPolicyResponse{}, s.store.PutRetention(sc, m.GetLogGroupName(), m.GetRetentionInDays())
	})
}

// DeleteRetentionPolicy makes the events of the group logGroupName (required) never
// expire. It answers an empty response, or ResourceNotFoundException.
func (s *Service) DeleteRetentionPolicy(ctx context.Context, req *connect.Request[logsv1.DeleteRetentionPolicyRequest]) (*connect.Response[logsv1.DeleteRetentionPolicyResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.DeleteRetentionPolicyRequest) (*logsv1.DeleteRetentionPolicyResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		return &logsv1.DeleteRetentionPolicyResponse{}, s.store.DeleteRetention(sc, m.GetLogGroupName())
	})
}

// PutLogEvents stores logEvents (each with a timestamp and a message) in the stream
// logStreamName of the group logGroupName (all required) under AWS's rules (see
// logstore.Store.PutEvents); sequenceToken is ignored, as AWS now ignores it, and entity
// is refused. It answers rejectedLogEventsInfo when events were too new, too old or
// expired (the others are stored), or ResourceNotFoundException and
// InvalidParameterException.
func (s *Service) PutLogEvents(ctx context.Context, req *connect.Request[logsv1.PutLogEventsRequest]) (*connect.Response[logsv1.PutLogEventsResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.PutLogEventsRequest) (*logsv1.PutLogEventsResponse, error) {
		if err := cmp.Or(missing("logGroupName", m.GetLogGroupName()), missing("logStreamName", m.GetLogStreamName())); err != nil {
			return nil, err
		}
		if m.Entity != nil {
			return nil, awserr.InvalidParameterf("entity is not supported by Berth (it has no CloudWatch explore); leave it out.")
		}
		evs := make([]logstore.InputEvent, len(m.GetLogEvents()))
		for i, e := range m.GetLogEvents() {
			switch {
			case e.GetTimestamp() == 0: // no presence: 0 is how an absent timestamp arrives
				return nil, null(fmt.Sprintf("logEvents.%d.member.timestamp", i+1))
			case e.Message == nil:
				return nil, null(fmt.Sprintf("logEvents.%d.member.message", i+1))
			}
			evs[i] = logstore.InputEvent{Timestamp: e.GetTimestamp(), Message: e.GetMessage()}
		}
		rej, err := s.store.PutEvents(sc, m.GetLogGroupName(), m.GetLogStreamName(), evs)
		if err != nil || !rej.Any() {
			return &logsv1.PutLogEventsResponse{}, err
		}
		return &logsv1.PutLogEventsResponse{RejectedLogEventsInfo: &logsv1.RejectedLogEventsInfo{
			TooNewLogEventStartIndex: index(rej.TooNewStartIndex),
			TooOldLogEventEndIndex:   index(rej.TooOldEndIndex),
			ExpiredLogEventEndIndex:  index(rej.ExpiredEndIndex),
		}}, nil
	})
}

// index returns a logstore.Rejected index for the wire: the fields have no presence,
// so none (-1) is 0, as is the index 0.
func index(i int) int32 { return int32(max(i, 0)) }

// GetLogEvents reads a page of the stream logStreamName (required) of the group named
// by logGroupName or logGroupIdentifier (exactly one): at most limit events (1–10,000;
// default as many as fit in 1 MB) between startTime and endTime, from nextToken or,
// without one, from the newest events (the oldest with startFromHead). It answers the
// events oldest first with nextForwardToken and nextBackwardToken (the forward token
// comes back unchanged at the end), or ResourceNotFoundException and
// InvalidParameterException for a bad limit or token.
func (s *Service) GetLogEvents(ctx context.Context, req *connect.Request[logsv1.GetLogEventsRequest]) (*connect.Response[logsv1.GetLogEventsResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.GetLogEventsRequest) (*logsv1.GetLogEventsResponse, error) {
		g, err := groupName(sc, m.LogGroupName, m.LogGroupIdentifier)
		if err != nil {
			return nil, err
		}
		if err := missing("logStreamName", m.GetLogStreamName()); err != nil {
			return nil, err
		}
		// unmask reveals data masked by a data protection policy; Berth masks nothing.
		res, err := s.store.GetEvents(sc, logstore.GetEventsInput{Group: g, Stream: m.GetLogStreamName(),
			Start: bound(m.GetStartTime()), End: bound(m.GetEndTime()), Token: m.GetNextToken(),
			Limit: int(m.GetLimit()), StartFromHead: m.GetStartFromHead()})
		if err != nil {
			return nil, err
		}
		resp := &logsv1.GetLogEventsResponse{Events: make([]*logsv1.OutputLogEvent, 0, len(res.Events)),
			NextForwardToken: proto.String(res.NextForwardToken), NextBackwardToken: proto.String(res.NextBackwardToken)}
		for _, e := range res.Events {
			resp.Events = append(resp.Events, &logsv1.OutputLogEvent{Timestamp: e.Timestamp, Message: proto.String(e.Message), IngestionTime: e.IngestionTime})
		}
		return resp, nil
	})
}

// FilterLogEvents searches the streams of the group named by logGroupName or
// logGroupIdentifier (exactly one) — all, those in logStreamNames or those with
// logStreamNamePrefix — for events between startTime and endTime that match
// filterPattern (see logstore.ParsePattern), interleaved by timestamp, at most limit
// (1–10,000, default 10,000) after nextToken. It answers the events, the streams
// searched and the nextToken to continue with (absent once the search is complete), or
// ResourceNotFoundException and InvalidParameterException for a bad limit, token or
// pattern, or both logStreamNames and logStreamNamePrefix.
func (s *Service) FilterLogEvents(ctx context.Context, req *connect.Request[logsv1.FilterLogEventsRequest]) (*connect.Response[logsv1.FilterLogEventsResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.FilterLogEventsRequest) (*logsv1.FilterLogEventsResponse, error) {
		g, err := groupName(sc, m.LogGroupName, m.LogGroupIdentifier)
		if err != nil {
			return nil, err
		}
		// interleaved is deprecated and always true on AWS; results are always interleaved.
		res, err := s.store.FilterEvents(sc, logstore.FilterInput{Group: g, Streams: m.GetLogStreamNames(),
			StreamPrefix: m.GetLogStreamNamePrefix(), Start: bound(m.GetStartTime()), End: bound(m.GetEndTime()),
			Pattern: m.GetFilterPattern(), Token: m.GetNextToken(), Limit: int(m.GetLimit())})
		if err != nil {
			return nil, err
		}
		resp := &logsv1.FilterLogEventsResponse{Events: make([]*logsv1.FilteredLogEvent, 0, len(res.Events)),
			SearchedLogStreams: make([]*logsv1.SearchedLogStream, 0, len(res.Searched)), NextToken: nonEmpty(res.NextToken)}
		for _, e := range res.Events {
			resp.Events = append(resp.Events, &logsv1.FilteredLogEvent{LogStreamName: proto.String(e.Stream), Timestamp: e.Timestamp,
				Message: proto.String(e.Message), IngestionTime: e.IngestionTime, EventId: proto.String(e.ID)})
		}
		for _, name := range res.Searched {
			resp.SearchedLogStreams = append(resp.SearchedLogStreams, &logsv1.SearchedLogStream{LogStreamName: proto.String(name), SearchedCompletely: res.NextToken == ""})
		}
		return resp, nil
	})
}

// TagResource adds tags (required, at most 50 on the group) to the log group
// resourceArn names. It answers an empty response, or ResourceNotFoundException, and
// InvalidParameterException for no tags, a bad tag or an ARN that is not a log group's.
func (s *Service) TagResource(ctx context.Context, req *connect.Request[logsv1.TagResourceRequest]) (*connect.Response[logsv1.TagResourceResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.TagResourceRequest) (*logsv1.TagResourceResponse, error) {
		g, err := resourceGroup(sc, m.GetResourceArn())
		if err != nil {
			return nil, err
		}
		if len(m.GetTags()) == 0 {
			return nil, awserr.InvalidParameterf("1 validation error detected: Value at 'tags' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		return &logsv1.TagResourceResponse{}, s.store.TagGroup(sc, g, m.GetTags())
	})
}

// UntagResource removes the tags tagKeys from the log group resourceArn names. It
// answers an empty response, or ResourceNotFoundException, and
// InvalidParameterException for an ARN that is not a log group's.
func (s *Service) UntagResource(ctx context.Context, req *connect.Request[logsv1.UntagResourceRequest]) (*connect.Response[logsv1.UntagResourceResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.UntagResourceRequest) (*logsv1.UntagResourceResponse, error) {
		g, err := resourceGroup(sc, m.GetResourceArn())
		if err != nil {
			return nil, err
		}
		return &logsv1.UntagResourceResponse{}, s.store.UntagGroup(sc, g, m.GetTagKeys())
	})
}

// ListTagsForResource answers the tags of the log group resourceArn names, or
// ResourceNotFoundException, and InvalidParameterException for an ARN that is not a
// log group's.
func (s *Service) ListTagsForResource(ctx context.Context, req *connect.Request[logsv1.ListTagsForResourceRequest]) (*connect.Response[logsv1.ListTagsForResourceResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.ListTagsForResourceRequest) (*logsv1.ListTagsForResourceResponse, error) {
		g, err := resourceGroup(sc, m.GetResourceArn())
		if err != nil {
			return nil, err
		}
		tags, err := s.tags(sc, g)
		return &logsv1.ListTagsForResourceResponse{Tags: tags}, err
	})
}

// TagLogGroup (deprecated by AWS for TagResource) adds tags (required) to the group
// logGroupName (required). It answers an empty response, or ResourceNotFoundException
// and InvalidParameterException.
func (s *Service) TagLogGroup(ctx context.Context, req *connect.Request[logsv1.TagLogGroupRequest]) (*connect.Response[logsv1.TagLogGroupResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.TagLogGroupRequest) (*logsv1.TagLogGroupResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		if len(m.GetTags()) == 0 {
			return nil, awserr.InvalidParameterf("tags must be a non-empty map of tag keys to values.")
		}
		return &logsv1.TagLogGroupResponse{}, s.store.TagGroup(sc, m.GetLogGroupName(), m.GetTags())
	})
}

// UntagLogGroup (deprecated by AWS for UntagResource) removes the tag keys tags
// (required) from the group logGroupName (required). It answers an empty response, or
// ResourceNotFoundException and InvalidParameterException.
func (s *Service) UntagLogGroup(ctx context.Context, req *connect.Request[logsv1.UntagLogGroupRequest]) (*connect.Response[logsv1.UntagLogGroupResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.UntagLogGroupRequest) (*logsv1.UntagLogGroupResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		if len(m.GetTags()) == 0 {
			return nil, awserr.InvalidParameterf("tags must be a non-empty list of tag keys.")
		}
		return &logsv1.UntagLogGroupResponse{}, s.store.UntagGroup(sc, m.GetLogGroupName(), m.GetTags())
	})
}

// ListTagsLogGroup (deprecated by AWS for ListTagsForResource) answers the tags of the
// group logGroupName (required), or ResourceNotFoundException.
func (s *Service) ListTagsLogGroup(ctx context.Context, req *connect.Request[logsv1.ListTagsLogGroupRequest]) (*connect.Response[logsv1.ListTagsLogGroupResponse], error) {
	return handle(ctx, s, req, func(sc logstore.Scope, m *logsv1.ListTagsLogGroupRequest) (*logsv1.ListTagsLogGroupResponse, error) {
		if err := missing("logGroupName", m.GetLogGroupName()); err != nil {
			return nil, err
		}
		tags, err := s.tags(sc, m.GetLogGroupName())
		return &logsv1.ListTagsLogGroupResponse{Tags: tags}, err
	})
}

// tags returns the tags of group g.
func (s *Service) tags(sc logstore.Scope, g string) (map[string]string, error) {
	grp, err := s.store.DescribeGroup(sc, g)
	return grp.Tags, err
}

// null returns AWS's InvalidParameterException for the required member field (a path
// such as "logEvents.1.member.message") that the request lacks.
func null(field string) error {
	return awserr.InvalidParameterf("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", field)
}

// missing returns null(field) when v, the value of a required member, is empty (absent
// or ""), else nil.
func missing(field, v string) error {
	if v != "" {
		return nil
	}
	return null(field)
}

// groupName returns the group a request names by logGroupName or logGroupIdentifier
// (a name or an ARN of the caller's scope): exactly one of them, as AWS requires where
// both exist.
func groupName(sc logstore.Scope, name, ident *string) (string, error) {
	switch {
	case name != nil && ident != nil:
		return "", awserr.InvalidParameterf("LogGroup name and LogGroup identifier are mutually exclusive parameters.")
	case ident != nil:
		return logstore.GroupName(sc, *ident)
	case name != nil:
		return *name, nil
	}
	return "", awserr.InvalidParameterf("Either LogGroup name or LogGroup identifier must be provided.")
}

// resourceGroup returns the log group a resource ARN names; tags are served for log
// groups only.
func resourceGroup(sc logstore.Scope, arn string) (string, error) {
	if err := missing("resourceArn", arn); err != nil {
		return "", err
	}
	if !strings.HasPrefix(arn, "arn:") || !strings.Contains(arn, ":log-group:") || strings.Contains(arn, ":log-stream:") {
		return "", awserr.InvalidParameterf("Berth tags log groups only; %s is not a log group ARN.", arn)
	}
	return logstore.GroupName(sc, arn)
}

// nonEmpty returns &s, or nil for "": a nextToken is left out on the last page.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// bound returns a time bound in milliseconds for the store: nil (unbounded) for 0,
// which is how an absent startTime or endTime arrives (the fields have no presence).
func bound(ms int64) *int64 {
	if ms == 0 {
		return nil
	}
	return &ms
}
