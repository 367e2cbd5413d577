package logsapi

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
)

// The tests below check what the answers carry, and what they leave out: the gateway
// writes every set optional field and every unboxed number, so presence is part of
// the wire (a nextToken is absent on the last page, names and ARNs are always set).

func TestDescribeLogGroupsAnswer(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	must(t, s, (*Service).CreateLogGroup, &logsv1.CreateLogGroupRequest{LogGroupName: str("/h")})
	must(t, s, (*Service).PutRetentionPolicy, &logsv1.PutRetentionPolicyRequest{LogGroupName: str("/g"), RetentionInDays: 7})

	first := must(t, s, (*Service).DescribeLogGroups, &logsv1.DescribeLogGroupsRequest{Limit: 1})
	if len(first.GetLogGroups()) != 1 || first.NextToken == nil {
		t.Fatalf("page 1 = %v, want one group and a nextToken", first)
	}
	want := &logsv1.LogGroup{LogGroupName: str("/g"), CreationTime: now.UnixMilli(), RetentionInDays: 7,
		Arn: str(groupARN + ":*"), LogGroupArn: str(groupARN), LogGroupClass: str("STANDARD"), StoredBytes: first.GetLogGroups()[0].GetStoredBytes()}
	if !proto.Equal(first.GetLogGroups()[0], want) || want.GetStoredBytes() == 0 {
		t.Errorf("group = %v, want %v with stored bytes", first.GetLogGroups()[0], want)
	}
	last := must(t, s, (*Service).DescribeLogGroups, &logsv1.DescribeLogGroupsRequest{Limit: 1, NextToken: first.NextToken})
	if len(last.GetLogGroups()) != 1 || last.GetLogGroups()[0].GetLogGroupName() != "/h" || last.NextToken != nil {
		t.Fatalf("page 2 = %v, want /h and no nextToken", last)
	}
	if g := last.GetLogGroups()[0]; g.GetRetentionInDays() != 0 || g.GetStoredBytes() != 0 {
		t.Errorf("/h = %v, want no retention and nothing stored", g)
	}

	for name, tc := range map[string]struct {
		req  *logsv1.DescribeLogGroupsRequest
		want []string
	}{
		"prefix":              {&logsv1.DescribeLogGroupsRequest{LogGroupNamePrefix: str("/h")}, []string{"/h"}},
		"pattern":             {&logsv1.DescribeLogGroupsRequest{LogGroupNamePattern: str("G")}, []string{"/g"}},
		"empty prefix":        {&logsv1.DescribeLogGroupsRequest{LogGroupNamePrefix: str("")}, []string{"/g", "/h"}},
		"identifiers":         {&logsv1.DescribeLogGroupsRequest{LogGroupIdentifiers: []string{"/h", groupARN, "/nope", "arn:aws:logs:us-east-1:999999999999:log-group:/g"}}, []string{"/h", "/g"}},
		"class STANDARD":      {&logsv1.DescribeLogGroupsRequest{LogGroupClass: str("STANDARD")}, []string{"/g", "/h"}},
		"class INFREQUENT":    {&logsv1.DescribeLogGroupsRequest{LogGroupClass: str("INFREQUENT_ACCESS")}, nil},
		"class of identifier": {&logsv1.DescribeLogGroupsRequest{LogGroupClass: str("DELIVERY"), LogGroupIdentifiers: []string{"/g"}}, nil},
	} {
		resp := must(t, s, (*Service).DescribeLogGroups, tc.req)
		var got []string
		for _, g := range resp.GetLogGroups() {
			got = append(got, g.GetLogGroupName())
		}
		if !slices.Equal(got, tc.want) || resp.NextToken != nil {
			t.Errorf("%s: %v, nextToken %v; want %v and none", name, got, resp.NextToken, tc.want)
		}
	}
}

func TestDescribeLogStreamsAnswer(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	must(t, s, (*Service).CreateLogStream, &logsv1.CreateLogStreamRequest{LogGroupName: str("/g"), LogStreamName: str("db/1")})
	ms := now.UnixMilli()

	names := func(resp *logsv1.DescribeLogStreamsResponse) (out []string) {
		for _, st := range resp.GetLogStreams() {
			out = append(out, st.GetLogStreamName())
		}
		return out
	}
	all := must(t, s, (*Service).DescribeLogStreams, &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g")})
	if got := names(all); !slices.Equal(got, []string{"db/1", "web/1", "web/2"}) || all.NextToken != nil {
		t.Fatalf("streams = %v, nextToken %v", got, all.NextToken)
	}
	if empty := all.GetLogStreams()[0]; !proto.Equal(empty, &logsv1.LogStream{LogStreamName: str("db/1"), CreationTime: ms, Arn: str(groupARN + ":log-stream:db/1")}) {
		t.Errorf("empty stream = %v, want no event times and nothing stored", empty)
	}
	web1 := all.GetLogStreams()[1]
	if web1.GetFirstEventTimestamp() != ms-3000 || web1.GetLastEventTimestamp() != ms-1000 || web1.GetLastIngestionTime() != ms || web1.GetStoredBytes() == 0 || web1.UploadSequenceToken != nil {
		t.Errorf("web/1 = %v", web1)
	}

	byTime := must(t, s, (*Service).DescribeLogStreams, &logsv1.DescribeLogStreamsRequest{LogGroupIdentifier: str(groupARN), OrderBy: str("LastEventTime"), Descending: true})
	if got := names(byTime); !slices.Equal(got[:2], []string{"web/2", "web/1"}) {
		t.Errorf("by last event time, descending = %v", got)
	}
	page := must(t, s, (*Service).DescribeLogStreams, &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), LogStreamNamePrefix: str("web/"), OrderBy: str("LogStreamName"), Limit: 1})
	if got := names(page); !slices.Equal(got, []string{"web/1"}) || page.NextToken == nil {
		t.Fatalf("page 1 = %v, nextToken %v", got, page.NextToken)
	}
	page = must(t, s, (*Service).DescribeLogStreams, &logsv1.DescribeLogStreamsRequest{LogGroupName: str("/g"), LogStreamNamePrefix: str("web/"), Limit: 1, NextToken: page.NextToken})
	if got := names(page); !slices.Equal(got, []string{"web/2"}) {
		t.Fatalf("page 2 = %v", got)
	}
}

func TestPutLogEventsAnswer(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	ms := now.UnixMilli()
	const day = 24 * 3600 * 1000
	put := func(evs ...*logsv1.InputLogEvent) *logsv1.PutLogEventsResponse {
		t.Helper()
		return must(t, s, (*Service).PutLogEvents, &logsv1.PutLogEventsRequest{LogGroupName: str("/g"), LogStreamName: str("web/1"), LogEvents: evs})
	}
	if resp := put(ev(ms, "ok")); resp.RejectedLogEventsInfo != nil || resp.NextSequenceToken != nil {
		t.Errorf("all stored: %v, want no rejectedLogEventsInfo and no sequence token", resp)
	}
	// An index of 0 and none are the same on the wire (the fields have no presence),
	// but rejectedLogEventsInfo is there whenever an event was rejected.
	if resp := put(ev(ms-15*day, "old"), ev(ms, "ok")); !proto.Equal(resp.RejectedLogEventsInfo, &logsv1.RejectedLogEventsInfo{}) {
		t.Errorf("first too old: %v", resp)
	}
	want := &logsv1.RejectedLogEventsInfo{TooOldLogEventEndIndex: 1, TooNewLogEventStartIndex: 3}
	if resp := put(ev(ms-16*day, "old"), ev(ms-15*day, "old"), ev(ms, "ok"), ev(ms+3*3600*1000, "future")); !proto.Equal(resp.RejectedLogEventsInfo, want) {
		t.Errorf("too old and too new: %v, want %v", resp.RejectedLogEventsInfo, want)
	}
	must(t, s, (*Service).PutRetentionPolicy, &logsv1.PutRetentionPolicyRequest{LogGroupName: str("/g"), RetentionInDays: 1})
	want = &logsv1.RejectedLogEventsInfo{ExpiredLogEventEndIndex: 1}
	if resp := put(ev(ms-3*day, "expired"), ev(ms-2*day, "expired"), ev(ms, "ok")); !proto.Equal(resp.RejectedLogEventsInfo, want) {
		t.Errorf("expired: %v, want %v", resp.RejectedLogEventsInfo, want)
	}
}

func TestGetLogEventsAnswer(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	ms := now.UnixMilli()
	get := func(req *logsv1.GetLogEventsRequest) (*logsv1.GetLogEventsResponse, []string) {
		t.Helper()
		if req.LogGroupIdentifier == nil {
			req.LogGroupName = str("/g")
		}
		req.LogStreamName = str("web/1")
		resp := must(t, s, (*Service).GetLogEvents, req)
		if resp.NextForwardToken == nil || resp.NextBackwardToken == nil {
			t.Fatalf("tokens missing: %v", resp)
		}
		var msgs []string
		for _, e := range resp.GetEvents() {
			msgs = append(msgs, e.GetMessage())
		}
		return resp, msgs
	}
	tail, msgs := get(&logsv1.GetLogEventsRequest{Limit: 2})
	if !slices.Equal(msgs, []string{"GET /b status=300", "user alice logged in"}) {
		t.Fatalf("tail = %v", msgs)
	}
	if e := tail.GetEvents()[1]; !proto.Equal(e, &logsv1.OutputLogEvent{Timestamp: ms - 1000, Message: str("user alice logged in"), IngestionTime: ms}) {
		t.Errorf("event = %v", e)
	}
	if _, msgs := get(&logsv1.GetLogEventsRequest{NextToken: tail.NextBackwardToken}); !slices.Equal(msgs, []string{"GET /a status=200"}) {
		t.Errorf("backward = %v", msgs)
	}
	head, msgs := get(&logsv1.GetLogEventsRequest{StartFromHead: true, Limit: 1})
	if !slices.Equal(msgs, []string{"GET /a status=200"}) {
		t.Errorf("head = %v", msgs)
	}
	rest, msgs := get(&logsv1.GetLogEventsRequest{NextToken: head.NextForwardToken})
	if len(msgs) != 2 {
		t.Errorf("forward = %v", msgs)
	}
	// At the end the forward token comes back unchanged, which is how clients stop.
	if end, msgs := get(&logsv1.GetLogEventsRequest{NextToken: rest.NextForwardToken}); len(msgs) != 0 || end.GetNextForwardToken() != rest.GetNextForwardToken() {
		t.Errorf("end = %v, %v", msgs, end)
	}
	// startTime is inclusive, endTime exclusive; 0 leaves either out.
	if _, msgs := get(&logsv1.GetLogEventsRequest{StartTime: ms - 2000, EndTime: ms - 1000, StartFromHead: true}); !slices.Equal(msgs, []string{"GET /b status=300"}) {
		t.Errorf("window = %v", msgs)
	}
	if _, msgs := get(&logsv1.GetLogEventsRequest{LogGroupIdentifier: str(groupARN + ":*"), StartFromHead: true, Unmask: true}); len(msgs) != 3 {
		t.Errorf("by identifier = %v", msgs)
	}
}

func TestFilterLogEventsAnswer(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	filter := func(req *logsv1.FilterLogEventsRequest) (*logsv1.FilterLogEventsResponse, []string) {
		t.Helper()
		req.LogGroupName = str("/g")
		resp := must(t, s, (*Service).FilterLogEvents, req)
		var msgs []string
		for _, e := range resp.GetEvents() {
			if e.GetEventId() == "" || e.GetLogStreamName() == "" || e.GetIngestionTime() == 0 {
				t.Errorf("event %v", e)
			}
			msgs = append(msgs, e.GetMessage())
		}
		return resp, msgs
	}
	for pattern, want := range map[string][]string{
		"":                        {"GET /a status=200", "GET /c status=400", "GET /b status=300", "user alice logged in", "POST /d status=200"},
		`status=200`:              {"GET /a status=200", "POST /d status=200"},
		`"logged in"`:             {"user alice logged in"},
		`?status=300 ?status=400`: {"GET /c status=400", "GET /b status=300"},
		`GET -status=300`:         {"GET /a status=200", "GET /c status=400"},
	} {
		resp, msgs := filter(&logsv1.FilterLogEventsRequest{FilterPattern: str(pattern), Interleaved: true})
		if !slices.Equal(msgs, want) || resp.NextToken != nil {
			t.Errorf("pattern %q: %v, nextToken %v; want %v", pattern, msgs, resp.NextToken, want)
		}
		searched := &logsv1.FilterLogEventsResponse{SearchedLogStreams: []*logsv1.SearchedLogStream{
			{LogStreamName: str("web/1"), SearchedCompletely: true}, {LogStreamName: str("web/2"), SearchedCompletely: true}}}
		if !proto.Equal(&logsv1.FilterLogEventsResponse{SearchedLogStreams: resp.GetSearchedLogStreams()}, searched) {
			t.Errorf("pattern %q: searched %v", pattern, resp.GetSearchedLogStreams())
		}
	}
	page, msgs := filter(&logsv1.FilterLogEventsRequest{Limit: 2})
	if len(msgs) != 2 || page.NextToken == nil || page.GetSearchedLogStreams()[0].GetSearchedCompletely() {
		t.Fatalf("page 1 = %v", page)
	}
	if _, msgs := filter(&logsv1.FilterLogEventsRequest{Limit: 2, NextToken: page.NextToken}); !slices.Equal(msgs, []string{"GET /b status=300", "user alice logged in"}) {
		t.Errorf("page 2 = %v", msgs)
	}
	if _, msgs := filter(&logsv1.FilterLogEventsRequest{LogStreamNames: []string{"web/2"}, StartTime: now.UnixMilli() - 1000}); !slices.Equal(msgs, []string{"POST /d status=200"}) {
		t.Errorf("web/2 since -1s = %v", msgs)
	}
	if _, msgs := filter(&logsv1.FilterLogEventsRequest{LogStreamNamePrefix: str("web/1"), EndTime: now.UnixMilli() - 2000}); !slices.Equal(msgs, []string{"GET /a status=200"}) {
		t.Errorf("web/1 until -2s = %v", msgs)
	}
}

func TestTagsAnswer(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	must(t, s, (*Service).TagResource, &logsv1.TagResourceRequest{ResourceArn: str(groupARN + ":*"), Tags: map[string]string{"env": "dev"}})
	must(t, s, (*Service).TagLogGroup, &logsv1.TagLogGroupRequest{LogGroupName: str("/g"), Tags: map[string]string{"tier": "web"}})
	must(t, s, (*Service).UntagResource, &logsv1.UntagResourceRequest{ResourceArn: str(groupARN), TagKeys: []string{"team", "absent"}})
	if resp := must(t, s, (*Service).ListTagsForResource, &logsv1.ListTagsForResourceRequest{ResourceArn: str(groupARN)}); !proto.Equal(resp, &logsv1.ListTagsForResourceResponse{Tags: map[string]string{"env": "dev", "tier": "web"}}) {
		t.Errorf("tags = %v", resp)
	}
	must(t, s, (*Service).UntagLogGroup, &logsv1.UntagLogGroupRequest{LogGroupName: str("/g"), Tags: []string{"env", "tier"}})
	if resp := must(t, s, (*Service).ListTagsLogGroup, &logsv1.ListTagsLogGroupRequest{LogGroupName: str("/g")}); len(resp.GetTags()) != 0 {
		t.Errorf("tags after untag = %v", resp)
	}
	// Streams, retention and groups are deleted.
	must(t, s, (*Service).DeleteLogStream, &logsv1.DeleteLogStreamRequest{LogGroupName: str("/g"), LogStreamName: str("web/2")})
	must(t, s, (*Service).DeleteRetentionPolicy, &logsv1.DeleteRetentionPolicyRequest{LogGroupName: str("/g")})
	must(t, s, (*Service).DeleteLogGroup, &logsv1.DeleteLogGroupRequest{LogGroupName: str("/g")})
	if resp := must(t, s, (*Service).DescribeLogGroups, &logsv1.DescribeLogGroupsRequest{}); len(resp.GetLogGroups()) != 0 {
		t.Errorf("groups after delete = %v", resp)
	}
}
