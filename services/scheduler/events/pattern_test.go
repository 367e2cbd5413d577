package events

import (
	"errors"
	"testing"

	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// taskEvent is an "ECS Task State Change" event shaped as AWS documents it.
const taskEvent = `{
  "version": "0", "id": "3317b2af-7005-947d-b652-f55e762e571a", "detail-type": "ECS Task State Change",
  "source": "aws.ecs", "account": "111122223333", "time": "2026-03-01T16:41:06Z", "region": "us-east-1",
  "resources": ["arn:aws:ecs:us-east-1:111122223333:task/default/b99d40b3"],
  "detail": {
    "clusterArn": "arn:aws:ecs:us-east-1:111122223333:cluster/default",
    "lastStatus": "STOPPED", "desiredStatus": "STOPPED", "stopCode": "EssentialContainerExited",
    "group": "family:nightly", "launchType": "EC2", "cpu": "256", "version": 4,
    "sourceIp": "10.0.3.17",
    "containers": [
      {"name": "web", "lastStatus": "STOPPED", "exitCode": 0},
      {"name": "worker", "lastStatus": "STOPPED", "exitCode": 137, "reason": "OOM"}
    ],
    "attachments": [],
    "overrides": {"containerOverrides": [{"name": "web"}]},
    "flag": true, "nothing": null
  }
}`

// TestPatternMatch table-tests EventBridge's event pattern semantics against one event.
func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    bool
	}{
		{`{"source":["aws.ecs"]}`, true},
		{`{"source":["aws.ec2"]}`, false},
		{`{"source":["aws.ec2","aws.ecs"]}`, true},
		{`{"source":["aws.ecs"],"detail-type":["ECS Task State Change"],"detail":{"lastStatus":["STOPPED"]}}`, true},
		{`{"source":["aws.ecs"],"detail":{"lastStatus":["RUNNING"]}}`, false},
		// Arrays in the event: any element may match.
		{`{"resources":["arn:aws:ecs:us-east-1:111122223333:task/default/b99d40b3"]}`, true},
		// Numbers compare numerically.
		{`{"detail":{"version":[4.0]}}`, true},
		{`{"detail":{"version":["4"]}}`, false},
		{`{"detail":{"flag":[true]}}`, true},
		{`{"detail":{"flag":[false]}}`, false},
		{`{"detail":{"nothing":[null]}}`, true},
		// Nested objects inside an array of objects.
		{`{"detail":{"containers":{"exitCode":[137]}}}`, true},
		{`{"detail":{"containers":{"exitCode":[1]}}}`, false},
		{`{"detail":{"containers":{"name":["worker"],"reason":["OOM"]}}}`, true},
		{`{"detail":{"containers":{"name":["web"],"reason":["OOM"]}}}`, false},
		// prefix, suffix, equals-ignore-case, wildcard.
		{`{"detail":{"group":[{"prefix":"family:"}]}}`, true},
		{`{"detail":{"group":[{"prefix":"service:"}]}}`, false},
		{`{"detail":{"group":[{"prefix":{"equals-ignore-case":"FAMILY:"}}]}}`, true},
		{`{"detail":{"group":[{"suffix":"nightly"}]}}`, true},
		{`{"detail":{"group":[{"suffix":{"equals-ignore-case":"NIGHTLY"}}]}}`, true},
		{`{"detail":{"stopCode":[{"equals-ignore-case":"essentialcontainerexited"}]}}`, true},
		{`{"detail":{"clusterArn":[{"wildcard":"arn:aws:ecs:*:cluster/default"}]}}`, true},
		{`{"detail":{"clusterArn":[{"wildcard":"arn:aws:ecs:*:cluster/prod"}]}}`, false},
		// anything-but.
		{`{"detail":{"stopCode":[{"anything-but":"UserInitiated"}]}}`, true},
		{`{"detail":{"stopCode":[{"anything-but":["UserInitiated","EssentialContainerExited"]}]}}`, false},
		{`{"detail":{"group":[{"anything-but":{"prefix":"service:"}}]}}`, true},
		{`{"detail":{"group":[{"anything-but":{"prefix":"family:"}}]}}`, false},
		{`{"detail":{"group":[{"anything-but":{"suffix":"nightly"}}]}}`, false},
		{`{"detail":{"stopCode":[{"anything-but":{"equals-ignore-case":["userinitiated"]}}]}}`, true},
		{`{"detail":{"version":[{"anything-but":[4]}]}}`, false},
		{`{"detail":{"missing":[{"anything-but":"x"}]}}`, false},
		// numeric.
		{`{"detail":{"version":[{"numeric":[">",3]}]}}`, true},
		{`{"detail":{"version":[{"numeric":[">",3,"<=",4]}]}}`, true},
		{`{"detail":{"version":[{"numeric":[">",4]}]}}`, false},
		{`{"detail":{"version":[{"numeric":["=",4]}]}}`, true},
		{`{"detail":{"cpu":[{"numeric":[">",0]}]}}`, false}, // a string is not a number
		{`{"detail":{"containers":{"exitCode":[{"numeric":[">",0]}]}}}`, true},
		// exists.
		{`{"detail":{"stopCode":[{"exists":true}]}}`, true},
		{`{"detail":{"stoppedReason":[{"exists":true}]}}`, false},
		{`{"detail":{"stoppedReason":[{"exists":false}]}}`, true},
		{`{"detail":{"stopCode":[{"exists":false}]}}`, false},
		{`{"detail":{"overrides":[{"exists":true}]}}`, false}, // exists matches leaves only
		{`{"nope":{"deeper":[{"exists":false}]}}`, true},
		// cidr.
		{`{"detail":{"sourceIp":[{"cidr":"10.0.0.0/16"}]}}`, true},
		{`{"detail":{"sourceIp":[{"cidr":"10.1.0.0/16"}]}}`, false},
		// $or.
		{`{"source":["aws.ecs"],"$or":[{"detail":{"lastStatus":["RUNNING"]}},{"detail":{"stopCode":["EssentialContainerExited"]}}]}`, true},
		{`{"$or":[{"detail":{"lastStatus":["RUNNING"]}},{"source":["aws.ec2"]}]}`, false},
		// Objects in the pattern against a scalar in the event.
		{`{"source":{"x":["aws.ecs"]}}`, false},
		// A literal never matches an object.
		{`{"detail":{"overrides":["x"]}}`, false},
	} {
		p, err := CompilePattern(tc.pattern)
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		if got := p.Match([]byte(taskEvent)); got != tc.want {
			t.Errorf("%s matched %v, want %v", tc.pattern, got, tc.want)
		}
	}
}

// TestPatternInvalid checks that malformed patterns answer InvalidEventPatternException.
func TestPatternInvalid(t *testing.T) {
	for _, p := range []string{
		``, `[]`, `"x"`, `{}`, `{"source":"aws.ecs"}`, `{"source":[]}`, `{"source":5}`,
		`{"detail":{}}`, `{"source":[{"prefix":5}]}`, `{"source":[{"nope":"x"}]}`,
		`{"source":[{"prefix":"a","suffix":"b"}]}`, `{"a":[{"numeric":[">"]}]}`,
		`{"a":[{"numeric":["~",1]}]}`, `{"a":[{"numeric":["=",1,"<",2]}]}`, `{"a":[{"exists":"yes"}]}`,
		`{"a":[{"cidr":"10.0.0.0/33"}]}`, `{"a":[{"anything-but":[]}]}`, `{"a":[{"anything-but":{"numeric":[">",1]}}]}`,
		`{"a":[{"wildcard":"a**b"}]}`, `{"$or":[{"a":["x"]}]}`, `{"a":["x"]} trailing`, `{"a":[["x"]]}`,
	} {
		_, err := CompilePattern(p)
		var ae *awserr.Error
		if !errors.As(err, &ae) || ae.Type != "InvalidEventPatternException" {
			t.Errorf("%q: err = %v, want InvalidEventPatternException", p, err)
		}
	}
}

// TestWildcard covers the '*' matcher's edges.
func TestWildcard(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*", "abc", true}, {"*c", "abc", true}, {"a*c", "ac", true}, {"a*b*c", "axbyc", true},
		{"a*b*c", "axcyb", false}, {"abc", "abc", true}, {"abc", "abd", false}, {"a*a", "a", false},
	} {
		if got := wildcard(tc.p, tc.s); got != tc.want {
			t.Errorf("wildcard(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}
