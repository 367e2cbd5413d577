package rpcv2cbor

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/fxamacker/cbor/v2"
	"google.golang.org/protobuf/proto"
)

func TestSplitPath(t *testing.T) {
	for _, tc := range []struct {
		path, svc, op string
		ok            bool
	}{
		{"/service/GraniteServiceVersion20100801/operation/PutMetricData", "GraniteServiceVersion20100801", "PutMetricData", true},
		{"/service/X/operation/", "", "", false},
		{"/service/X/operation/A/B", "", "", false},
		{"/", "", "", false},
	} {
		svc, op, ok := SplitPath(tc.path)
		if svc != tc.svc || op != tc.op || ok != tc.ok {
			t.Errorf("SplitPath(%q) = %q, %q, %v", tc.path, svc, op, ok)
		}
	}
}

// TestUnmarshal decodes what botocore sends: a CBOR map with tag-1 timestamps, floats
// of several widths, integers, lists and nested structures.
func TestUnmarshal(t *testing.T) {
	ts := time.Date(2026, 12, 5, 10, 0, 0, 500_000_000, time.UTC)
	body, err := cbor.Marshal(map[string]any{
		"Namespace": "App",
		"MetricData": []any{
			map[string]any{
				"MetricName":        "Latency",
				"Dimensions":        []any{map[string]any{"Name": "Host", "Value": "a"}},
				"Timestamp":         cbor.Tag{Number: 1, Content: float64(ts.UnixMilli()) / 1000},
				"Value":             float32(1.5),
				"Unit":              "Seconds",
				"StorageResolution": 60,
			},
			map[string]any{"MetricName": "Count", "Values": []any{1, 2.5}, "Counts": []any{3.0, 1.0}, "Unit": nil},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var in cwv1.PutMetricDataRequest
	if err := Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	d := in.GetMetricData()
	if in.GetNamespace() != "App" || len(d) != 2 || d[0].GetMetricName() != "Latency" || d[0].GetValue() != 1.5 ||
		d[0].GetTimestamp() != float64(ts.UnixMilli())/1000 || d[0].GetDimensions()[0].GetValue() != "a" || d[0].GetStorageResolution() != 60 {
		t.Fatalf("decoded %v", &in)
	}
	if d[1].Unit != nil || len(d[1].GetValues()) != 2 || d[1].GetCounts()[0] != 3 {
		t.Fatalf("decoded %v", d[1])
	}
	// An empty body is an empty input.
	if err := Unmarshal(nil, &cwv1.ListMetricsRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	nan, _ := cbor.Marshal(map[string]any{"Namespace": "A", "MetricData": []any{map[string]any{"MetricName": "m", "Value": math.NaN()}}})
	notMap, _ := cbor.Marshal([]any{1})
	for name, tc := range map[string]struct {
		body []byte
		typ  string
	}{
		"garbage":   {[]byte{0xff, 0x00}, "SerializationException"},
		"not a map": {notMap, "SerializationException"},
		"NaN":       {nan, "InvalidParameterValue"},
	} {
		err := Unmarshal(tc.body, &cwv1.PutMetricDataRequest{})
		var ae *awsjson.Error
		if !errors.As(err, &ae) || ae.Type != tc.typ {
			t.Errorf("%s: err = %v, want %s", name, err, tc.typ)
		}
	}
}

// TestFromJSON encodes a response: timestamps as tag 1, doubles as floats, absent
// members absent, lists as arrays.
func TestFromJSON(t *testing.T) {
	out := &cwv1.GetMetricStatisticsResponse{Label: proto.String("Latency"), Datapoints: []*cwv1.Datapoint{
		{Timestamp: proto.Float64(1796536800), Average: proto.Float64(2.5), Unit: proto.String("Seconds")},
	}}
	wire, err := proto.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	doc, release, err := awsjson.MarshalWirePooled(out.ProtoReflect().Type(), wire)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromJSON(out.ProtoReflect().Descriptor(), doc)
	release()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	dm, _ := cbor.DecOptions{DefaultMapType: mapType, TimeTagToAny: cbor.TimeTagToTime}.DecMode()
	if err := dm.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	dp := got["Datapoints"].([]any)[0].(map[string]any)
	if tm, ok := dp["Timestamp"].(time.Time); !ok || !tm.Equal(time.Unix(1796536800, 0)) {
		t.Fatalf("Timestamp = %#v", dp["Timestamp"])
	}
	if dp["Average"] != 2.5 || dp["Unit"] != "Seconds" || got["Label"] != "Latency" {
		t.Fatalf("decoded %#v", got)
	}
	if _, ok := dp["Sum"]; ok {
		t.Fatalf("absent Sum written: %#v", dp)
	}
	// The timestamp is tag 1 on the wire (0xc1).
	if !bytes.Contains(b, []byte{0xc1, 0x1a}) {
		t.Fatalf("no tag-1 integer timestamp in % x", b)
	}
}

func TestAppendError(t *testing.T) {
	var got map[string]string
	if err := cbor.Unmarshal(AppendError("InvalidParameterValueException", "bad"), &got); err != nil {
		t.Fatal(err)
	}
	if got["__type"] != "InvalidParameterValueException" || got["message"] != "bad" {
		t.Fatalf("%v", got)
	}
}
