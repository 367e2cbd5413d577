package logsapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
)

// now is the store's clock in these tests; events are put around it.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// who is the caller of these tests: account 123456789012 in us-east-1.
var who = caller.With(context.Background(), caller.Identity{Account: "123456789012", Region: "us-east-1"})

// groupARN is the ARN of /g (without ":*") in who's scope.
const groupARN = "arn:aws:logs:us-east-1:123456789012:log-group:/g"

// newTestService returns a Service over a store on disk in a temp dir, clocked at now.
func newTestService(t *testing.T) (*Service, *logstore.Store) {
	t.Helper()
	st, err := logstore.Open(logstore.Config{Dir: t.TempDir(), NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return NewService(st, nil), st
}

// call runs method f of s for who with m and returns the response message.
func call[Req, Resp any](s *Service, f func(*Service, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), m *Req) (*Resp, error) {
	resp, err := f(s, who, connect.NewRequest(m))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// must is call that fails the test on an error.
func must[Req, Resp any](t *testing.T, s *Service, f func(*Service, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), m *Req) *Resp {
	t.Helper()
	resp, err := call(s, f, m)
	if err != nil {
		t.Fatalf("%T: %v", m, err)
	}
	return resp
}

// wantAWSError fails unless err is a Connect error carrying the AWS exception typ with a
// message containing msg.
func wantAWSError(t *testing.T, err error, typ, msg string) {
	t.Helper()
	ae, ok := awserr.FromConnect(err)
	if !ok || ae.Type != typ || !strings.Contains(ae.Message, msg) {
		t.Errorf("err = %v, want %s containing %q", err, typ, msg)
	}
}

// fixture creates the group /g (tagged team=a) with the streams web/1 (three events a
// second apart, the last one 1 s before now) and web/2 (two events).
func fixture(t *testing.T, s *Service) {
	t.Helper()
	ms := now.UnixMilli()
	must(t, s, (*Service).CreateLogGroup, &logsv1.CreateLogGroupRequest{LogGroupName: proto.String("/g"), Tags: map[string]string{"team": "a"}})
	for name, evs := range map[string][]*logsv1.InputLogEvent{
		"web/1": {ev(ms-3000, "GET /a status=200"), ev(ms-2000, "GET /b status=300"), ev(ms-1000, "user alice logged in")},
		"web/2": {ev(ms-2500, "GET /c status=400"), ev(ms-500, "POST /d status=200")},
	} {
		must(t, s, (*Service).CreateLogStream, &logsv1.CreateLogStreamRequest{LogGroupName: proto.String("/g"), LogStreamName: proto.String(name)})
		must(t, s, (*Service).PutLogEvents, &logsv1.PutLogEventsRequest{LogGroupName: proto.String("/g"), LogStreamName: proto.String(name), LogEvents: evs})
	}
}

func ev(ts int64, msg string) *logsv1.InputLogEvent {
	return &logsv1.InputLogEvent{Timestamp: ts, Message: proto.String(msg)}
}

// TestCallerAndErrors: a call needs an account and a region; store errors keep their
// AWS type and message with a matching Connect code; operations Berth does not serve
// are unimplemented (the gateway's UnsupportedOperationException).
func TestCallerAndErrors(t *testing.T) {
	s, st := newTestService(t)
	req := connect.NewRequest(&logsv1.DescribeLogGroupsRequest{})
	for name, ctx := range map[string]context.Context{
		"no caller":  context.Background(),
		"no account": caller.With(context.Background(), caller.Identity{Region: "us-east-1"}),
		"no region":  caller.With(context.Background(), caller.Identity{Account: "123456789012"}),
	} {
		_, err := s.DescribeLogGroups(ctx, req)
		wantAWSError(t, err, "AccessDeniedException", "The request carries no")
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s: code %v", name, connect.CodeOf(err))
		}
	}

	_, err := call(s, (*Service).GetLogEvents, &logsv1.GetLogEventsRequest{LogGroupName: proto.String("/g"), LogStreamName: proto.String("s")})
	wantAWSError(t, err, "ResourceNotFoundException", "The specified log group does not exist.")
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("not found: code %v", connect.CodeOf(err))
	}
	must(t, s, (*Service).CreateLogGroup, &logsv1.CreateLogGroupRequest{LogGroupName: proto.String("/g")})
	_, err = call(s, (*Service).CreateLogGroup, &logsv1.CreateLogGroupRequest{LogGroupName: proto.String("/g")})
	wantAWSError(t, err, "ResourceAlreadyExistsException", "The specified log group already exists")

	st.SetReady("joining")
	_, err = call(s, (*Service).DescribeLogGroups, &logsv1.DescribeLogGroupsRequest{})
	wantAWSError(t, err, "ServiceUnavailableException", "catching up with the other replicas (joining)")
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("unready: code %v", connect.CodeOf(err))
	}
	st.SetReady("")

	if _, err := s.StartLiveTail(who, connect.NewRequest(&logsv1.StartLiveTailRequest{})); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("StartLiveTail: %v, want unimplemented", err)
	}
}

// TestScopes: groups of one account and region are invisible to every other, by name
// and by ARN.
func TestScopes(t *testing.T) {
	s, _ := newTestService(t)
	fixture(t, s)
	west := caller.With(context.Background(), caller.Identity{Account: "123456789012", Region: "eu-west-1"})
	dg, err := s.DescribeLogGroups(west, connect.NewRequest(&logsv1.DescribeLogGroupsRequest{}))
	if err != nil || len(dg.Msg.GetLogGroups()) != 0 {
		t.Fatalf("eu-west-1 sees %v, %v", dg, err)
	}
	_, err = call(s, (*Service).DescribeLogStreams, &logsv1.DescribeLogStreamsRequest{LogGroupIdentifier: proto.String("arn:aws:logs:us-east-1:999999999999:log-group:/g")})
	wantAWSError(t, err, "ResourceNotFoundException", "")
}
