package logsapi

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
)

var sc = logstore.Scope{Account: "123456789012", Region: "us-east-1"}

func TestServeErrors(t *testing.T) {
	st, err := logstore.Open(logstore.Config{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := New(st)
	for _, tc := range []struct{ action, body, typ, msg string }{
		{"StartLiveTail", `{}`, UnknownOperation, "Berth does not support the CloudWatch Logs operation StartLiveTail"},
		{"CreateLogGroup", `{"logGroupName":"g","bogus":1}`, "SerializationException", "bogus"},
		{"CreateLogGroup", `{}`, "InvalidParameterException", "'logGroupName' failed to satisfy constraint: Member must not be null"},
		{"CreateLogGroup", `{"logGroupName":"g","kmsKeyId":"k"}`, "InvalidParameterException", "kmsKeyId is not supported"},
		{"GetLogEvents", `{"logGroupName":"g","logGroupIdentifier":"g","logStreamName":"s"}`, "InvalidParameterException", "mutually exclusive"},
		{"GetLogEvents", `{"logGroupName":"g","logStreamName":"s"}`, "ResourceNotFoundException", "The specified log group does not exist."},
		{"PutLogEvents", `{"logGroupName":"g","logStreamName":"s","logEvents":[{"message":"m"}]}`, "InvalidParameterException", "logEvents.1.member.timestamp"},
		{"TagResource", `{"resourceArn":"arn:aws:logs:us-east-1:123456789012:log-group:g:log-stream:s","tags":{"a":"b"}}`, "InvalidParameterException", "log groups only"},
		{"DescribeLogGroups", `{"includeLinkedAccounts":true}`, "InvalidParameterException", "cross-account"},
	} {
		_, err := h.Serve(sc, tc.action, []byte(tc.body))
		var ae *Error
		if !errors.As(err, &ae) || ae.Type != tc.typ || !strings.Contains(ae.Message, tc.msg) || ae.Status != 400 {
			t.Errorf("%s %s: %v, want %s containing %q", tc.action, tc.body, err, tc.typ, tc.msg)
		}
	}
	// An ARN of another account names no group here.
	_, err = h.Serve(sc, "DescribeLogStreams", []byte(`{"logGroupIdentifier":"arn:aws:logs:us-east-1:999999999999:log-group:g"}`))
	if !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("other account's ARN: %v", err)
	}
}

// TestToJSONKeepsNumbers: the Connect adapter hands 64-bit times to the handler as JSON
// numbers under the model's member names, and leaves unset members out.
func TestToJSONKeepsNumbers(t *testing.T) {
	ts := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	req := &logsv1.PutLogEventsRequest{LogGroupName: proto.String("g"), LogStreamName: proto.String("s"),
		LogEvents: []*logsv1.InputLogEvent{{Timestamp: ts, Message: proto.String("hi")}}}
	b, err := json.Marshal(toJSON(req.ProtoReflect()))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"logEvents":[{"message":"hi","timestamp":` + strconv.FormatInt(ts, 10) + `}],"logGroupName":"g","logStreamName":"s"}`
	if string(b) != want {
		t.Fatalf("toJSON = %s, want %s", b, want)
	}
}
