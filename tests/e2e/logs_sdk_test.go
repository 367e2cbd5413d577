package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go"
)

// newLogsClient starts the real scheduler (with its log store) behind the real gateway
// and returns the SDK's CloudWatch Logs client for account 123456789012 in us-east-1.
func newLogsClient(t *testing.T) (*cloudwatchlogs.Client, *apiStack) {
	t.Helper()
	stack := startAPIStack(t, "123456789012")
	return cloudwatchlogs.NewFromConfig(stack.awsConfig("123456789012", "us-east-1")), stack
}

func apiErr(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

// TestLogsAPIWithSDK drives every served operation through the Go SDK, the real gateway
// (SigV4 scope "logs") and the real scheduler: groups with
// tags and retention, streams, PutLogEvents under AWS's rules, GetLogEvents paging both
// ways, FilterLogEvents with terms and phrases, and AWS's errors.
func TestLogsAPIWithSDK(t *testing.T) {
	ctx := t.Context()
	c, stack := newLogsClient(t)
	g, s := "/ecs/sdk", "web/app/0123"
	if _, err := c.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: &g, Tags: map[string]string{"team": "a"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: &g})
	apiErr(t, err, "ResourceAlreadyExistsException")
	_, err = c.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String("/nope"), LogStreamName: &s})
	apiErr(t, err, "ResourceNotFoundException")
	if _, err := c.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: &g, LogStreamName: &s}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var evs []cwtypes.InputLogEvent
	for i := range 30 {
		evs = append(evs, cwtypes.InputLogEvent{Timestamp: aws.Int64(now - 30 + int64(i)), Message: aws.String(fmt.Sprintf("GET /item/%d status=%d", i, 200+100*(i%3)))})
	}
	put, err := c.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: &g, LogStreamName: &s, LogEvents: evs})
	if err != nil || put.RejectedLogEventsInfo != nil {
		t.Fatalf("put: %+v, %v", put, err)
	}
	_, err = c.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: &g, LogStreamName: &s, LogEvents: []cwtypes.InputLogEvent{
		{Timestamp: aws.Int64(now), Message: aws.String("b")}, {Timestamp: aws.Int64(now - 1), Message: aws.String("a")}}})
	apiErr(t, err, "InvalidParameterException")
	old, err := c.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: &g, LogStreamName: &s, LogEvents: []cwtypes.InputLogEvent{
		{Timestamp: aws.Int64(now - 15*24*3600*1000), Message: aws.String("too old")}, {Timestamp: aws.Int64(now), Message: aws.String("GET /late status=200")}}})
	if err != nil || old.RejectedLogEventsInfo == nil || aws.ToInt32(old.RejectedLogEventsInfo.TooOldLogEventEndIndex) != 0 {
		t.Fatalf("put old: %+v, %v", old, err)
	}

	// GetLogEvents from the tail, then back, then forward to the end.
	last, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: &g, LogStreamName: &s, Limit: aws.Int32(10)})
	if err != nil || len(last.Events) != 10 || aws.ToString(last.Events[9].Message) != "GET /late status=200" {
		t.Fatalf("tail: %v", err)
	}
	back, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: &g, LogStreamName: &s, Limit: aws.Int32(10), NextToken: last.NextBackwardToken})
	if err != nil || len(back.Events) != 10 || aws.ToString(back.Events[9].Message) != "GET /item/20 status=400" {
		t.Fatalf("backward: %+v %v", back.Events, err)
	}
	head, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: &g, LogStreamName: &s, StartFromHead: aws.Bool(true)})
	if err != nil || len(head.Events) != 31 || aws.ToString(head.Events[0].Message) != "GET /item/0 status=200" || aws.ToInt64(head.Events[0].IngestionTime) == 0 {
		t.Fatalf("head: %d events, %v", len(head.Events), err)
	}
	end, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: &g, LogStreamName: &s, NextToken: head.NextForwardToken})
	if err != nil || len(end.Events) != 0 || aws.ToString(end.NextForwardToken) != aws.ToString(head.NextForwardToken) {
		t.Fatalf("end: %+v %v", end, err)
	}

	// FilterLogEvents: terms and quoted phrases, paged.
	for pattern, want := range map[string]int{`status=300`: 10, `"GET /item/1"`: 11, `GET status=200`: 11, `?status=300 ?status=400`: 20, ``: 31} {
		n := 0
		p := cloudwatchlogs.NewFilterLogEventsPaginator(c, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: &g, FilterPattern: aws.String(pattern), Limit: aws.Int32(4)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				if aws.ToString(e.LogStreamName) != s || aws.ToString(e.EventId) == "" {
					t.Fatalf("event %+v", e)
				}
			}
			n += len(page.Events)
		}
		if n != want {
			t.Errorf("filter %q: %d events, want %d", pattern, n, want)
		}
	}

	// Describe, retention, tags.
	if _, err := c.PutRetentionPolicy(ctx, &cloudwatchlogs.PutRetentionPolicyInput{LogGroupName: &g, RetentionInDays: aws.Int32(7)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutRetentionPolicy(ctx, &cloudwatchlogs.PutRetentionPolicyInput{LogGroupName: &g, RetentionInDays: aws.Int32(8)})
	apiErr(t, err, "InvalidParameterException")
	dg, err := c.DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String("/ecs/")})
	if err != nil || len(dg.LogGroups) != 1 || aws.ToInt32(dg.LogGroups[0].RetentionInDays) != 7 ||
		aws.ToString(dg.LogGroups[0].Arn) != "arn:aws:logs:us-east-1:123456789012:log-group:/ecs/sdk:*" || aws.ToInt64(dg.LogGroups[0].StoredBytes) == 0 {
		t.Fatalf("describe groups: %+v %v", dg, err)
	}
	ds, err := c.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: &g, OrderBy: cwtypes.OrderByLastEventTime, Descending: aws.Bool(true)})
	if err != nil || len(ds.LogStreams) != 1 || aws.ToInt64(ds.LogStreams[0].LastEventTimestamp) != now {
		t.Fatalf("describe streams: %+v %v", ds, err)
	}
	arn := aws.ToString(dg.LogGroups[0].LogGroupArn)
	if _, err := c.TagResource(ctx, &cloudwatchlogs.TagResourceInput{ResourceArn: &arn, Tags: map[string]string{"env": "dev"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UntagResource(ctx, &cloudwatchlogs.UntagResourceInput{ResourceArn: &arn, TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.ListTagsForResource(ctx, &cloudwatchlogs.ListTagsForResourceInput{ResourceArn: &arn})
	if err != nil || len(tags.Tags) != 1 || tags.Tags["env"] != "dev" {
		t.Fatalf("tags: %+v %v", tags, err)
	}
	// Another region sees nothing; StartLiveTail is refused with a clear error.
	west := cloudwatchlogs.NewFromConfig(stack.awsConfig("123456789012", "eu-west-1"))
	if dg, err := west.DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{}); err != nil || len(dg.LogGroups) != 0 {
		t.Fatalf("eu-west-1 groups: %+v %v", dg, err)
	}
	_, err = c.DescribeMetricFilters(ctx, &cloudwatchlogs.DescribeMetricFiltersInput{LogGroupName: &g})
	apiErr(t, err, "UnsupportedOperationException")
	if _, err := c.DeleteLogGroup(ctx, &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: &g}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: &g, LogStreamName: &s})
	apiErr(t, err, "ResourceNotFoundException")
	if !strings.Contains(err.Error(), "The specified log group does not exist.") {
		t.Errorf("message: %v", err)
	}
}
