package logsapi

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
)

const (
	invalid  = "InvalidParameterException"
	notFound = "ResourceNotFoundException"
	exists   = "ResourceAlreadyExistsException"
)

// errCase is a request an action refuses: the AWS exception type and a part of its
// message.
type errCase[Req any] struct {
	name     string
	req      *Req
	typ, msg string
}

// refuses runs every case against method f of s (over the fixture) in a subtest.
func refuses[Req, Resp any](t *testing.T, s *Service, f func(*Service, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), cases []errCase[Req]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := call(s, f, c.req)
			wantAWSError(t, err, c.typ, c.msg)
		})
	}
}

var str = proto.String

// nullMsg is the message of a required member the request lacks.
func nullMsg(field string) string {
	return "Value null at '" + field + "' failed to satisfy constraint: Member must not be null"
}

func TestValidateCreateLogGroup(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	tooMany := map[string]string{}
	for i := range 51 {
		tooMany[strings.Repeat("k", i+1)] = "v"
	}
	refuses(t, s, (*Service).CreateLogGroup, []errCase[logsv1.CreateLogGroupRequest]{
		{"no name", &logsv1.CreateLogGroupRequest{}, invalid, nullMsg("logGroupName")},
		{"empty name", &logsv1.CreateLogGroupRequest{LogGroupName: str("")}, invalid, nullMsg("logGroupName")},
		{"bad name", &logsv1.CreateLogGroupRequest{LogGroupName: str("a b")}, invalid, "Value 'a b' at 'logGroupName' failed to satisfy constraint"},
		{"long name", &logsv1.CreateLogGroupRequest{LogGroupName: str(strings.Repeat("a", 513))}, invalid, "have length between 1 and 512"},
		{"kms key", &logsv1.CreateLogGroupRequest{LogGroupName: str("/n"), KmsKeyId: str("k")}, invalid, "kmsKeyId is not supported"},
		{"empty kms key", &logsv1.CreateLogGroupRequest{LogGroupName: str("/n"), KmsKeyId: str("")}, invalid, "kmsKeyId is not supported"},
		{"class", &logsv1.CreateLogGroupRequest{LogGroupName: str("/n"), LogGroupClass: str("INFREQUENT_ACCESS")}, invalid, "logGroupClass INFREQUENT_ACCESS is not supported by Berth; only STANDARD is."},
		{"deletion protection", &logsv1.CreateLogGroupRequest{LogGroupName: str("/n"), DeletionProtectionEnabled: true}, invalid, "deletionProtectionEnabled is not supported"},
		{"aws: tag", &logsv1.CreateLogGroupRequest{LogGroupName: str("/n"), Tags: map[string]string{"aws:x": "y"}}, invalid, "Invalid tag: key 'aws:x'"},
		{"51 tags", &logsv1.CreateLogGroupRequest{LogGroupName: str("/n"), Tags: tooMany}, invalid, "at most 50 tags"},
		{"exists", &logsv1.CreateLogGroupRequest{LogGroupName: str("/g")}, exists, "The specified log group already exists"},
	})
	must(t, s, (*Service).CreateLogGroup, &logsv1.CreateLogGroupRequest{LogGroupName: str("/std"), LogGroupClass: str("STANDARD")})
}

func TestValidateDeleteLogGroup(t *testing.T) {
	s, _ := newTestService(t)
	refuses(t, s, (*Service).DeleteLogGroup, []errCase[logsv1.DeleteLogGroupRequest]{
		{"no name", &logsv1.DeleteLogGroupRequest{}, invalid, nullMsg("logGroupName")},
		{"missing", &logsv1.DeleteLogGroupRequest{LogGroupName: str("/g")}, notFound, "The specified log group does not exist."},
	})
}

func TestValidateDescribeLogGroups(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	refuses(t, s, (*Service).DescribeLogGroups, []errCase[logsv1.DescribeLogGroupsRequest]{
		{"linked accounts", &logsv1.DescribeLogGroupsRequest{IncludeLinkedAccounts: true}, invalid, "no cross-account observability"},
		{"account identifiers", &logsv1.DescribeLogGroupsRequest{AccountIdentifiers: []string{"111111111111"}}, invalid, "no cross-account observability"},
		{"limit -1", &logsv1.DescribeLogGroupsRequest{Limit: -1}, invalid, "Value '-1' at 'limit' failed to satisfy constraint: Member must have value between 1 and 50"},
		{"limit 51", &logsv1.DescribeLogGroupsRequest{Limit: 51}, invalid, "Value '51' at 'limit'"},
		{"token", &logsv1.DescribeLogGroupsRequest{NextToken: str("nope")}, invalid, "The specified nextToken is invalid."},
		{"prefix and pattern", &logsv1.DescribeLogGroupsRequest{LogGroupNamePrefix: str("/"), LogGroupNamePattern: str("g")}, invalid, "mutually exclusive"},
		{"identifiers and prefix", &logsv1.DescribeLogGroupsRequest{LogGroupIdentifiers: []string{"/g"}, LogGroupNamePrefix: str("/")}, invalid, "logGroupIdentifiers cannot be combined"},
		{"identifiers and pattern", &logsv1.DescribeLogGroupsRequest{LogGroupIdentifiers: []string{"/g"}, LogGroupNamePattern: str("g")}, invalid, "logGroupIdentifiers cannot be combined"},
	})
}

func TestValidateLogStreams(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	refuses(t, s, (*Service).CreateLogStream, []errCase[logsv1.CreateLogStreamRequest]{
		{"nothing", &logsv1.CreateLogStreamRequest{}, invalid, nullMsg("logGroupName")},
		{"no stream", &logsv1.CreateLogStreamRequest{LogGroupName: str("/g")}, invalid, nullMsg("logStreamName")},
		{"no group", &logsv1.CreateLogStreamRequest{LogStreamName: str("s")}, invalid, nullMsg("logGroupName")},
		{"bad name", &logsv1.CreateLogStreamRequest{LogGroupName: str("/g"), LogStreamName: str("a:b")}, invalid, "[^:*]*"},
		{"missing group", &logsv1.CreateLogStreamRequest{LogGroupName: str("/nope"), LogStreamName: str("s")}, notFound, "log group does not exist"},
		{"exists", &logsv1.CreateLogStreamRequest{LogGroupName: str("/g"), LogStreamName: str("web/1")}, exists, ""},
	})
	refuses(t, s, (*Service).DeleteLogStream, []errCase[logsv1.DeleteLogStreamRequest]{
		{"nothing", &logsv1.DeleteLogStreamRequest{}, invalid, nullMsg("logGroupName")},
		{"no stream", &logsv1.DeleteLogStreamRequest{LogGroupName: str("/g")}, invalid, nullMsg("logStreamName")},
		{"missing stream", &logsv1.DeleteLogStreamRequest{LogGroupName: str("/g"), LogStreamName: str("nope")}, notFound, "The specified log stream does not exist."},
	})
	refuses(t, s, (*Service).DescribeLogStreams, []errCase[logsv1.DescribeLogStreamsRequest]{
		{"no group", &logsv1.DescribeLogStreamsRequest{}, invalid, "Either LogGroup name or LogGroup identifier must be provided."},
		{"name and identifier", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), LogGroupIdentifier: str("/g")}, invalid, "mutually exclusive"},
		{"identifier not an ARN of logs", &logsv1.DescribeLogStreamsRequest{LogGroupIdentifier: str("arn:aws:s3:::b")}, invalid, "Invalid logGroupIdentifier"},
		{"missing group", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/nope")}, notFound, ""},
		{"orderBy", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), OrderBy: str("Size")}, invalid, "Value 'Size' at 'orderBy' failed to satisfy constraint: Member must satisfy enum value set: [LogStreamName, LastEventTime]"},
		{"empty orderBy", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), OrderBy: str("")}, invalid, "Value '' at 'orderBy'"},
		{"prefix by LastEventTime", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), OrderBy: str("LastEventTime"), LogStreamNamePrefix: str("web")}, invalid, "Cannot order by LastEventTime with a logStreamNamePrefix."},
		{"limit 51", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), Limit: 51}, invalid, "Member must have value between 1 and 50"},
		{"token", &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), NextToken: str("nope")}, invalid, "The specified nextToken is invalid."},
	})
}

func TestValidatePutLogEvents(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	ms := now.UnixMilli()
	put := func(evs ...*logsv1.InputLogEvent) *logsv1.PutLogEventsRequest {
		return &logsv1.PutLogEventsRequest{LogGroupName: str("/g"), LogStreamName: str("web/1"), LogEvents: evs}
	}
	many := make([]*logsv1.InputLogEvent, 10_001)
	for i := range many {
		many[i] = ev(ms, "m")
	}
	big := make([]*logsv1.InputLogEvent, 5)
	for i := range big {
		big[i] = ev(ms, strings.Repeat("x", 250_000))
	}
	withEntity := put(ev(ms, "m"))
	withEntity.Entity = &logsv1.Entity{}
	refuses(t, s, (*Service).PutLogEvents, []errCase[logsv1.PutLogEventsRequest]{
		{"nothing", &logsv1.PutLogEventsRequest{}, invalid, nullMsg("logGroupName")},
		{"no stream", &logsv1.PutLogEventsRequest{LogGroupName: str("/g")}, invalid, nullMsg("logStreamName")},
		{"entity", withEntity, invalid, "entity is not supported by Berth"},
		{"no events", put(), invalid, "Value '[]' at 'logEvents' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"no timestamp", put(ev(ms, "a"), &logsv1.InputLogEvent{Message: str("b")}), invalid, nullMsg("logEvents.2.member.timestamp")},
		{"no message", put(&logsv1.InputLogEvent{Timestamp: ms}), invalid, nullMsg("logEvents.1.member.message")},
		{"neither", put(&logsv1.InputLogEvent{}), invalid, nullMsg("logEvents.1.member.timestamp")},
		{"empty message", put(ev(ms, "")), invalid, "Value '' at 'logEvents.1.member.message'"},
		{"10,001 events", put(many...), invalid, "Member must have length less than or equal to 10000"},
		{"too large", put(big...), invalid, "Upload too large"},
		{"out of order", put(ev(ms, "b"), ev(ms-1, "a")), invalid, "must be in chronological order"},
		{"over 24 h", put(ev(ms-25*3600*1000, "a"), ev(ms, "b")), invalid, "cannot span more than 24 hours"},
		{"missing stream", &logsv1.PutLogEventsRequest{LogGroupName: str("/g"), LogStreamName: str("nope"), LogEvents: []*logsv1.InputLogEvent{ev(ms, "m")}}, notFound, "log stream does not exist"},
		{"missing group", &logsv1.PutLogEventsRequest{LogGroupName: str("/nope"), LogStreamName: str("s"), LogEvents: []*logsv1.InputLogEvent{ev(ms, "m")}}, notFound, "log group does not exist"},
	})
	// The sequence token is ignored, as AWS now ignores it.
	withToken := put(ev(ms, "m"))
	withToken.SequenceToken = str("49039859")
	must(t, s, (*Service).PutLogEvents, withToken)
}

func TestValidateGetLogEvents(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	get := func(limit int32, token *string) *logsv1.GetLogEventsRequest {
		return &logsv1.GetLogEventsRequest{LogGroupName: str("/g"), LogStreamName: str("web/1"), Limit: limit, NextToken: token}
	}
	refuses(t, s, (*Service).GetLogEvents, []errCase[logsv1.GetLogEventsRequest]{
		{"no group", &logsv1.GetLogEventsRequest{LogStreamName: str("web/1")}, invalid, "Either LogGroup name or LogGroup identifier must be provided."},
		{"name and identifier", &logsv1.GetLogEventsRequest{LogGroupName: str("/g"), LogGroupIdentifier: str(groupARN), LogStreamName: str("web/1")}, invalid, "mutually exclusive"},
		{"no stream", &logsv1.GetLogEventsRequest{LogGroupName: str("/g")}, invalid, nullMsg("logStreamName")},
		{"missing stream", &logsv1.GetLogEventsRequest{LogGroupName: str("/g"), LogStreamName: str("nope")}, notFound, "log stream does not exist"},
		{"limit -1", get(-1, nil), invalid, "Value '-1' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10000"},
		{"limit 10001", get(10_001, nil), invalid, "Value '10001' at 'limit'"},
		{"token", get(0, str("nope")), invalid, "The specified nextToken is invalid."},
		{"token of another kind", get(0, str("f/zz")), invalid, "The specified nextToken is invalid."},
	})
}

func TestValidateFilterLogEvents(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	filter := func(pattern string) *logsv1.FilterLogEventsRequest {
		return &logsv1.FilterLogEventsRequest{LogGroupName: str("/g"), FilterPattern: str(pattern)}
	}
	refuses(t, s, (*Service).FilterLogEvents, []errCase[logsv1.FilterLogEventsRequest]{
		{"no group", &logsv1.FilterLogEventsRequest{}, invalid, "Either LogGroup name or LogGroup identifier must be provided."},
		{"name and identifier", &logsv1.FilterLogEventsRequest{LogGroupName: str("/g"), LogGroupIdentifier: str("/g")}, invalid, "mutually exclusive"},
		{"missing group", &logsv1.FilterLogEventsRequest{LogGroupName: str("/nope")}, notFound, "log group does not exist"},
		{"streams and prefix", &logsv1.FilterLogEventsRequest{LogGroupName: str("/g"), LogStreamNames: []string{"web/1"}, LogStreamNamePrefix: str("web")}, invalid, "Cannot specify both logStreamNamePrefix and logStreamNames"},
		{"101 streams", &logsv1.FilterLogEventsRequest{LogGroupName: str("/g"), LogStreamNames: make([]string, 101)}, invalid, "Member must have length less than or equal to 100"},
		{"limit -1", &logsv1.FilterLogEventsRequest{LogGroupName: str("/g"), Limit: -1}, invalid, "Value '-1' at 'limit'"},
		{"token", &logsv1.FilterLogEventsRequest{LogGroupName: str("/g"), NextToken: str("nope")}, invalid, "The specified nextToken is invalid."},
		{"JSON pattern", filter(`{ $.level = "error" }`), invalid, "JSON, space-delimited and regular-expression patterns are not supported"},
		{"space-delimited pattern", filter(`[ip, user, status]`), invalid, "JSON, space-delimited and regular-expression patterns are not supported"},
		{"unbalanced quotes", filter(`"GET /a`), invalid, "Invalid filter pattern: unbalanced quotes."},
		{"regex pattern", filter(`%err.*%`), invalid, "JSON, space-delimited and regular-expression patterns are not supported"},
	})
}

func TestValidateRetention(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	refuses(t, s, (*Service).PutRetentionPolicy, []errCase[logsv1.PutRetentionPolicyRequest]{
		{"no group", &logsv1.PutRetentionPolicyRequest{RetentionInDays: 7}, invalid, nullMsg("logGroupName")},
		{"no days", &logsv1.PutRetentionPolicyRequest{LogGroupName: str("/g")}, invalid, nullMsg("retentionInDays")},
		{"8 days", &logsv1.PutRetentionPolicyRequest{LogGroupName: str("/g"), RetentionInDays: 8}, invalid, "Value '8' at 'retentionInDays' failed to satisfy constraint: Member must satisfy enum value set"},
		{"missing group", &logsv1.PutRetentionPolicyRequest{LogGroupName: str("/nope"), RetentionInDays: 7}, notFound, ""},
	})
	refuses(t, s, (*Service).DeleteRetentionPolicy, []errCase[logsv1.DeleteRetentionPolicyRequest]{
		{"no group", &logsv1.DeleteRetentionPolicyRequest{}, invalid, nullMsg("logGroupName")},
		{"missing group", &logsv1.DeleteRetentionPolicyRequest{LogGroupName: str("/nope")}, notFound, ""},
	})
}

func TestValidateTags(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	tags := map[string]string{"env": "dev"}
	refuses(t, s, (*Service).TagResource, []errCase[logsv1.TagResourceRequest]{
		{"no ARN", &logsv1.TagResourceRequest{Tags: tags}, invalid, nullMsg("resourceArn")},
		{"stream ARN", &logsv1.TagResourceRequest{ResourceArn: str(groupARN + ":log-stream:web/1"), Tags: tags}, invalid, "Berth tags log groups only"},
		{"a name", &logsv1.TagResourceRequest{ResourceArn: str("/g"), Tags: tags}, invalid, "/g is not a log group ARN"},
		{"no tags", &logsv1.TagResourceRequest{ResourceArn: str(groupARN)}, invalid, "Value at 'tags' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"aws: tag", &logsv1.TagResourceRequest{ResourceArn: str(groupARN), Tags: map[string]string{"aws:k": "v"}}, invalid, "Invalid tag"},
		{"other region", &logsv1.TagResourceRequest{ResourceArn: str("arn:aws:logs:eu-west-1:123456789012:log-group:/g"), Tags: tags}, notFound, ""},
		{"missing group", &logsv1.TagResourceRequest{ResourceArn: str(groupARN + "x"), Tags: tags}, notFound, ""},
	})
	refuses(t, s, (*Service).UntagResource, []errCase[logsv1.UntagResourceRequest]{
		{"no ARN", &logsv1.UntagResourceRequest{TagKeys: []string{"team"}}, invalid, nullMsg("resourceArn")},
		{"stream ARN", &logsv1.UntagResourceRequest{ResourceArn: str(groupARN + ":log-stream:s"), TagKeys: []string{"team"}}, invalid, "Berth tags log groups only"},
		{"missing group", &logsv1.UntagResourceRequest{ResourceArn: str(groupARN + "x"), TagKeys: []string{"team"}}, notFound, ""},
	})
	refuses(t, s, (*Service).ListTagsForResource, []errCase[logsv1.ListTagsForResourceRequest]{
		{"no ARN", &logsv1.ListTagsForResourceRequest{}, invalid, nullMsg("resourceArn")},
		{"not an ARN", &logsv1.ListTagsForResourceRequest{ResourceArn: str("g")}, invalid, "Berth tags log groups only"},
		{"missing group", &logsv1.ListTagsForResourceRequest{ResourceArn: str(groupARN + "x")}, notFound, ""},
	})
	refuses(t, s, (*Service).TagLogGroup, []errCase[logsv1.TagLogGroupRequest]{
		{"no group", &logsv1.TagLogGroupRequest{Tags: tags}, invalid, nullMsg("logGroupName")},
		{"no tags", &logsv1.TagLogGroupRequest{LogGroupName: str("/g")}, invalid, "tags must be a non-empty map of tag keys to values."},
		{"missing group", &logsv1.TagLogGroupRequest{LogGroupName: str("/nope"), Tags: tags}, notFound, ""},
	})
	refuses(t, s, (*Service).UntagLogGroup, []errCase[logsv1.UntagLogGroupRequest]{
		{"no group", &logsv1.UntagLogGroupRequest{Tags: []string{"team"}}, invalid, nullMsg("logGroupName")},
		{"no tags", &logsv1.UntagLogGroupRequest{LogGroupName: str("/g")}, invalid, "tags must be a non-empty list of tag keys."},
		{"missing group", &logsv1.UntagLogGroupRequest{LogGroupName: str("/nope"), Tags: []string{"team"}}, notFound, ""},
	})
	refuses(t, s, (*Service).ListTagsLogGroup, []errCase[logsv1.ListTagsLogGroupRequest]{
		{"no group", &logsv1.ListTagsLogGroupRequest{}, invalid, nullMsg("logGroupName")},
		{"missing group", &logsv1.ListTagsLogGroupRequest{LogGroupName: str("/nope")}, notFound, ""},
	})
}
