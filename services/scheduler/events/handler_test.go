package events_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/events"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

var scope = keys.Scope{Account: "123456789012", Region: "us-east-1"}

const cluster = "arn:aws:ecs:us-east-1:123456789012:cluster/default"

// fakeECS stands in for ECS at the events.ECS seam: it records the RunTask calls and
// knows one task definition family, "job".
type fakeECS struct {
	mu   sync.Mutex
	runs []*ecsv1.RunTaskRequest
}

func (f *fakeECS) RunTask(_ context.Context, s keys.Scope, req *ecsv1.RunTaskRequest) (*ecsv1.RunTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s != scope {
		return nil, errors.New("wrong scope")
	}
	f.runs = append(f.runs, req)
	return &ecsv1.RunTaskResponse{Tasks: []*ecsv1.Task{{TaskArn: proto.String("t")}}}, nil
}

func (f *fakeECS) CheckTaskDefinition(_ context.Context, _ keys.Scope, ref string) error {
	if strings.HasPrefix(ref, "job") || strings.Contains(ref, "task-definition/job") {
		return nil
	}
	return awserr.Clientf("Unable to describe task definition.")
}

func (f *fakeECS) calls() []*ecsv1.RunTaskRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*ecsv1.RunTaskRequest(nil), f.runs...)
}

type env struct {
	h   *events.Handler
	ecs *fakeECS
	ctx context.Context
	kv  store.Client
	now *time.Time
}

func newEnv(t *testing.T) env {
	c := etcdtest.Start(t)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	e := env{ecs: &fakeECS{}, kv: c, now: &now,
		ctx: caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region})}
	e.h = events.New(c, e.ecs, func() time.Time { return *e.now })
	return e
}

func awsType(err error) string {
	if ae, ok := awserr.FromConnect(err); ok {
		return ae.Type + ": " + ae.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

func ecsTarget(id string) *eventsv1.Target {
	return &eventsv1.Target{Id: proto.String(id), Arn: proto.String(cluster), EcsParameters: &eventsv1.EcsParameters{
		TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:123456789012:task-definition/job:1"), TaskCount: 2,
		LaunchType: proto.String("EC2"), Group: proto.String("batch"), ReferenceId: proto.String("ref-1"),
		PlacementStrategy: []*eventsv1.PlacementStrategy{{Type: proto.String("spread"), Field: proto.String("instanceId")}},
		Tags:              []*eventsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}},
	}, Input: proto.String(`{"containerOverrides":[{"name":"app","command":["echo","hi"],"environment":[{"name":"A","value":"1"}]}]}`)}
}

// TestRuleLifecycle walks a rule through Put, Describe, List, targets, tags, Disable and
// Delete, with the errors AWS answers on the way.
func TestRuleLifecycle(t *testing.T) {
	e := newEnv(t)
	put, err := e.h.PutRule(e.ctx, connect.NewRequest(&eventsv1.PutRuleRequest{Name: proto.String("nightly"),
		ScheduleExpression: proto.String("cron(0 2 * * ? *)"), Tags: []*eventsv1.Tag{{Key: proto.String("team"), Value: proto.String("a")}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := put.Msg.GetRuleArn(); got != "arn:aws:events:us-east-1:123456789012:rule/nightly" {
		t.Errorf("RuleArn = %s", got)
	}
	d, err := e.h.DescribeRule(e.ctx, connect.NewRequest(&eventsv1.DescribeRuleRequest{Name: proto.String("nightly")}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Msg.GetState() != "ENABLED" || d.Msg.GetEventBusName() != "default" || d.Msg.GetCreatedBy() != scope.Account {
		t.Errorf("DescribeRule = %v", d.Msg)
	}
	for _, tc := range []struct {
		req  *eventsv1.PutRuleRequest
		want string
	}{
		{&eventsv1.PutRuleRequest{Name: proto.String("x"), ScheduleExpression: proto.String("cron(0 2 * * * *)")}, "ValidationException: Parameter ScheduleExpression is not valid."},
		{&eventsv1.PutRuleRequest{Name: proto.String("x"), ScheduleExpression: proto.String("rate(1 minutes)")}, "ValidationException: Parameter ScheduleExpression is not valid."},
		{&eventsv1.PutRuleRequest{Name: proto.String("x")}, "ValidationException: Parameter(s) EventPattern or ScheduleExpression must be specified."},
		{&eventsv1.PutRuleRequest{Name: proto.String("x"), EventPattern: proto.String(`{"source":"aws.ecs"}`)}, "InvalidEventPatternException"},
		{&eventsv1.PutRuleRequest{Name: proto.String("bad name"), EventPattern: proto.String(`{"source":["a"]}`)}, "ValidationException"},
		{&eventsv1.PutRuleRequest{Name: proto.String("x"), EventPattern: proto.String(`{"source":["a"]}`), State: proto.String("ON")}, "ValidationException"},
		{&eventsv1.PutRuleRequest{Name: proto.String("x"), EventPattern: proto.String(`{"source":["a"]}`), EventBusName: proto.String("orders")}, "ResourceNotFoundException: Event bus orders does not exist."},
	} {
		_, err := e.h.PutRule(e.ctx, connect.NewRequest(tc.req))
		if got := awsType(err); !strings.HasPrefix(got, tc.want) {
			t.Errorf("PutRule(%v) = %q, want %q", tc.req, got, tc.want)
		}
	}
	_, err = e.h.DescribeRule(e.ctx, connect.NewRequest(&eventsv1.DescribeRuleRequest{Name: proto.String("nope")}))
	if got := awsType(err); got != "ResourceNotFoundException: Rule nope does not exist on EventBus default." {
		t.Errorf("DescribeRule(nope) = %q", got)
	}

	// Targets.
	_, err = e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String("nightly"), Targets: []*eventsv1.Target{ecsTarget("t1")}}))
	if err != nil {
		t.Fatal(err)
	}
	bad := func(mut func(*eventsv1.Target)) *eventsv1.Target { t := ecsTarget("t2"); mut(t); return t }
	for _, tc := range []struct {
		target *eventsv1.Target
		want   string
	}{
		{bad(func(t *eventsv1.Target) {
			t.EcsParameters.TaskDefinitionArn = proto.String("arn:aws:ecs:us-east-1:123456789012:task-definition/ghost:1")
		}), "EcsParameters.TaskDefinitionArn is not valid"},
		{bad(func(t *eventsv1.Target) { t.Arn = proto.String("arn:aws:sqs:us-east-1:123456789012:q") }), "Targets[0].Arn is not valid"},
		{bad(func(t *eventsv1.Target) { t.EcsParameters = nil }), "EcsParameters is required"},
		{bad(func(t *eventsv1.Target) { t.DeadLetterConfig = &eventsv1.DeadLetterConfig{Arn: proto.String("q")} }), "DeadLetterConfig is not supported"},
		{bad(func(t *eventsv1.Target) { t.RetryPolicy = &eventsv1.RetryPolicy{MaximumRetryAttempts: 1} }), "RetryPolicy is not supported"},
		{bad(func(t *eventsv1.Target) { t.InputTransformer = &eventsv1.InputTransformer{} }), "InputTransformer is not supported"},
		{bad(func(t *eventsv1.Target) { t.SqsParameters = &eventsv1.SqsParameters{} }), "SqsParameters is not valid"},
		{bad(func(t *eventsv1.Target) { t.EcsParameters.TaskCount = 11 }), "TaskCount is not valid"},
		{bad(func(t *eventsv1.Target) { t.EcsParameters.LaunchType = proto.String("LAMBDA") }), "LaunchType is not valid"},
		{bad(func(t *eventsv1.Target) { t.Input = proto.String(`{"containerOverride":[]}`) }), "Parameter Input is not valid"},
	} {
		_, err := e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String("nightly"), Targets: []*eventsv1.Target{tc.target}}))
		if got := awsType(err); !strings.HasPrefix(got, "ValidationException") || !strings.Contains(got, tc.want) {
			t.Errorf("PutTargets = %q, want ValidationException …%s", got, tc.want)
		}
	}
	_, err = e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String("nope"), Targets: []*eventsv1.Target{ecsTarget("t1")}}))
	if got := awsType(err); !strings.HasPrefix(got, "ResourceNotFoundException") {
		t.Errorf("PutTargets(nope) = %q", got)
	}
	var many []*eventsv1.Target
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		many = append(many, ecsTarget(id))
	}
	_, err = e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String("nightly"), Targets: many}))
	if got := awsType(err); !strings.HasPrefix(got, "LimitExceededException") {
		t.Errorf("PutTargets(6 targets) = %q", got)
	}
	lt, err := e.h.ListTargetsByRule(e.ctx, connect.NewRequest(&eventsv1.ListTargetsByRuleRequest{Rule: proto.String("nightly")}))
	if err != nil || len(lt.Msg.Targets) != 1 || lt.Msg.Targets[0].GetEcsParameters().GetTaskCount() != 2 {
		t.Fatalf("ListTargetsByRule = %v, %v", lt, err)
	}
	names, err := e.h.ListRuleNamesByTarget(e.ctx, connect.NewRequest(&eventsv1.ListRuleNamesByTargetRequest{TargetArn: proto.String(cluster)}))
	if err != nil || len(names.Msg.RuleNames) != 1 || names.Msg.RuleNames[0] != "nightly" {
		t.Errorf("ListRuleNamesByTarget = %v, %v", names, err)
	}

	// Tags.
	arn := put.Msg.GetRuleArn()
	if _, err := e.h.TagResource(e.ctx, connect.NewRequest(&eventsv1.TagResourceRequest{ResourceArn: &arn, Tags: []*eventsv1.Tag{{Key: proto.String("env"), Value: proto.String("prod")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.UntagResource(e.ctx, connect.NewRequest(&eventsv1.UntagResourceRequest{ResourceArn: &arn, TagKeys: []string{"team"}})); err != nil {
		t.Fatal(err)
	}
	tags, err := e.h.ListTagsForResource(e.ctx, connect.NewRequest(&eventsv1.ListTagsForResourceRequest{ResourceArn: &arn}))
	if err != nil || len(tags.Msg.Tags) != 1 || tags.Msg.Tags[0].GetKey() != "env" {
		t.Errorf("ListTagsForResource = %v, %v", tags, err)
	}

	// Listing, paging.
	for _, n := range []string{"a1", "a2", "b1"} {
		if _, err := e.h.PutRule(e.ctx, connect.NewRequest(&eventsv1.PutRuleRequest{Name: proto.String(n), EventPattern: proto.String(`{"source":["x"]}`)})); err != nil {
			t.Fatal(err)
		}
	}
	lr, err := e.h.ListRules(e.ctx, connect.NewRequest(&eventsv1.ListRulesRequest{NamePrefix: proto.String("a"), Limit: 1}))
	if err != nil || len(lr.Msg.Rules) != 1 || lr.Msg.Rules[0].GetName() != "a1" || lr.Msg.GetNextToken() == "" {
		t.Fatalf("ListRules page 1 = %v, %v", lr, err)
	}
	lr, err = e.h.ListRules(e.ctx, connect.NewRequest(&eventsv1.ListRulesRequest{NamePrefix: proto.String("a"), Limit: 1, NextToken: lr.Msg.NextToken}))
	if err != nil || len(lr.Msg.Rules) != 1 || lr.Msg.Rules[0].GetName() != "a2" || lr.Msg.NextToken != nil {
		t.Fatalf("ListRules page 2 = %v, %v", lr, err)
	}

	// Disable, delete.
	if _, err := e.h.DisableRule(e.ctx, connect.NewRequest(&eventsv1.DisableRuleRequest{Name: proto.String("nightly")})); err != nil {
		t.Fatal(err)
	}
	_, err = e.h.DeleteRule(e.ctx, connect.NewRequest(&eventsv1.DeleteRuleRequest{Name: proto.String("nightly")}))
	if got := awsType(err); got != "ValidationException: Rule can't be deleted since it has targets." {
		t.Errorf("DeleteRule with targets = %q", got)
	}
	if _, err := e.h.RemoveTargets(e.ctx, connect.NewRequest(&eventsv1.RemoveTargetsRequest{Rule: proto.String("nightly"), Ids: []string{"t1"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.DeleteRule(e.ctx, connect.NewRequest(&eventsv1.DeleteRuleRequest{Name: proto.String("nightly")})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.DeleteRule(e.ctx, connect.NewRequest(&eventsv1.DeleteRuleRequest{Name: proto.String("nightly")})); err != nil {
		t.Errorf("DeleteRule of a deleted rule = %v, want success as on AWS", err)
	}
}

// TestSchedulePassFiresOnce drives the leader's schedule pass with a clock: a rate(1
// minute) rule fires once a minute through ECS RunTask with every EcsParameters member
// and startedBy events-rule/{name}, and not at all while disabled.
func TestSchedulePassFiresOnce(t *testing.T) {
	e := newEnv(t)
	if _, err := e.h.PutRule(e.ctx, connect.NewRequest(&eventsv1.PutRuleRequest{Name: proto.String("every-minute"), ScheduleExpression: proto.String("rate(1 minute)")})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String("every-minute"), Targets: []*eventsv1.Target{ecsTarget("t1")}})); err != nil {
		t.Fatal(err)
	}
	r := events.Runner{Client: e.kv, ECS: e.ecs, Now: func() time.Time { return *e.now }}
	pass := func() {
		t.Helper()
		if err := r.SchedulePass(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if n := len(e.ecs.calls()); n != 0 {
		t.Fatalf("fired %d times before its first minute", n)
	}
	*e.now = e.now.Add(61 * time.Second)
	pass()
	pass() // the same slot never fires twice
	calls := e.ecs.calls()
	if len(calls) != 1 {
		t.Fatalf("fired %d times after a minute, want 1", len(calls))
	}
	c := calls[0]
	if c.GetStartedBy() != "events-rule/every-minute" || c.GetCount() != 2 || c.GetCluster() != cluster || c.GetGroup() != "batch" ||
		c.GetReferenceId() != "ref-1" || c.GetLaunchType() != "EC2" || len(c.PlacementStrategy) != 1 || len(c.Tags) != 1 ||
		c.GetOverrides().GetContainerOverrides()[0].GetCommand()[1] != "hi" {
		t.Errorf("RunTask request = %v", c)
	}
	// Ten minutes without a leader: one catch-up invocation, not ten.
	*e.now = e.now.Add(10 * time.Minute)
	pass()
	if n := len(e.ecs.calls()); n != 2 {
		t.Errorf("after 10 missed minutes fired %d times in all, want 2", n)
	}
	if _, err := e.h.DisableRule(e.ctx, connect.NewRequest(&eventsv1.DisableRuleRequest{Name: proto.String("every-minute")})); err != nil {
		t.Fatal(err)
	}
	*e.now = e.now.Add(5 * time.Minute)
	pass()
	if n := len(e.ecs.calls()); n != 2 {
		t.Errorf("a disabled rule fired (%d calls)", n)
	}
	if _, err := e.h.EnableRule(e.ctx, connect.NewRequest(&eventsv1.EnableRuleRequest{Name: proto.String("every-minute")})); err != nil {
		t.Fatal(err)
	}
	pass()
	if n := len(e.ecs.calls()); n != 2 {
		t.Errorf("enabling fired the slots missed while disabled (%d calls)", n)
	}
}

// TestTaskStateChangeDelivered puts task records as ECS writes them and checks that a
// rule whose pattern matches STOPPED tasks of one family runs its target once, when the
// task stops, and a rule for another family does not.
func TestTaskStateChangeDelivered(t *testing.T) {
	e := newEnv(t)
	for name, family := range map[string]string{"on-stop": "watched", "other": "unwatched"} {
		pattern := `{"source":["aws.ecs"],"detail-type":["ECS Task State Change"],"detail":{"lastStatus":["STOPPED"],"group":["family:` + family + `"],"containers":{"exitCode":[{"numeric":[">",0]}]}}}`
		if _, err := e.h.PutRule(e.ctx, connect.NewRequest(&eventsv1.PutRuleRequest{Name: proto.String(name), EventPattern: proto.String(pattern)})); err != nil {
			t.Fatal(err)
		}
		if _, err := e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String(name), Targets: []*eventsv1.Target{ecsTarget("t1")}})); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	r := events.Runner{Client: e.kv, ECS: e.ecs, Interval: time.Hour}
	resynced := make(chan struct{}, 1)
	events.OnResync(&r, func() { resynced <- struct{}{} })
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	key := keys.Task(scope, "default", "abc")
	task := &ecsv1.Task{TaskArn: proto.String("arn:aws:ecs:us-east-1:123456789012:task/default/abc"), Group: proto.String("family:watched"),
		LastStatus: proto.String("RUNNING"), DesiredStatus: proto.String("RUNNING"), CreatedAt: proto.Float64(1.7e9),
		Containers: []*ecsv1.Container{{Name: proto.String("app"), LastStatus: proto.String("RUNNING")}}}
	// The watch starts with a listing of the tasks: changes count from there.
	select {
	case <-resynced:
	case <-time.After(60 * time.Second):
		t.Fatal("the task watch never listed the tasks")
	}
	if _, err := store.Create(ctx, e.kv, key, &storev1.TaskRecord{Task: task}); err != nil {
		t.Fatal(err)
	}
	stopped := proto.Clone(task).(*ecsv1.Task)
	stopped.LastStatus, stopped.DesiredStatus = proto.String("STOPPED"), proto.String("STOPPED")
	stopped.Containers[0].ExitCode = proto.Int32(3)
	if _, _, err := store.Mutate(ctx, e.kv, key, func(r *storev1.TaskRecord) error { r.Task = stopped; return nil }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(e.ecs.calls()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	calls := e.ecs.calls()
	if len(calls) != 1 || calls[0].GetStartedBy() != "events-rule/on-stop" {
		t.Fatalf("RunTask calls = %v, want one from events-rule/on-stop", calls)
	}
	cancel()
	<-done
}

// TestTestEventPattern checks the action against AWS's documented envelope requirement.
func TestTestEventPattern(t *testing.T) {
	e := newEnv(t)
	ev := `{"id":"1","account":"123456789012","source":"my.app","time":"2026-03-01T00:00:00Z","region":"us-east-1","detail-type":"Order","resources":[],"detail":{"total":42}}`
	for _, tc := range []struct {
		pattern, event string
		want           bool
		err            string
	}{
		{`{"detail":{"total":[{"numeric":[">=",40]}]}}`, ev, true, ""},
		{`{"source":["other"]}`, ev, false, ""},
		{`{"source":"my.app"}`, ev, false, "InvalidEventPatternException"},
		{`{"source":["my.app"]}`, `{"source":"my.app"}`, false, "ValidationException"},
	} {
		resp, err := e.h.TestEventPattern(e.ctx, connect.NewRequest(&eventsv1.TestEventPatternRequest{EventPattern: &tc.pattern, Event: &tc.event}))
		if got := awsType(err); !strings.HasPrefix(got, tc.err) || (tc.err == "" && got != "") {
			t.Errorf("TestEventPattern(%s) err = %q, want %q", tc.pattern, got, tc.err)
			continue
		}
		if err == nil && resp.Msg.GetResult() != tc.want {
			t.Errorf("TestEventPattern(%s) = %v", tc.pattern, resp.Msg.GetResult())
		}
	}
}

// TestPutEvents checks custom events: entry errors by code, and delivery to a matching
// rule's ECS target.
func TestPutEvents(t *testing.T) {
	e := newEnv(t)
	if _, err := e.h.PutRule(e.ctx, connect.NewRequest(&eventsv1.PutRuleRequest{Name: proto.String("orders"), EventPattern: proto.String(`{"source":["shop"],"detail":{"total":[{"numeric":[">",100]}]}}`)})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.PutTargets(e.ctx, connect.NewRequest(&eventsv1.PutTargetsRequest{Rule: proto.String("orders"), Targets: []*eventsv1.Target{ecsTarget("t1")}})); err != nil {
		t.Fatal(err)
	}
	entry := func(source, detail string) *eventsv1.PutEventsRequestEntry {
		return &eventsv1.PutEventsRequestEntry{Source: proto.String(source), DetailType: proto.String("Order"), Detail: proto.String(detail)}
	}
	resp, err := e.h.PutEvents(e.ctx, connect.NewRequest(&eventsv1.PutEventsRequest{Entries: []*eventsv1.PutEventsRequestEntry{
		entry("shop", `{"total":150}`), entry("shop", `{"total":5}`), entry("aws.ecs", `{}`), entry("shop", `[1]`),
	}}))
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Msg.Entries
	if resp.Msg.FailedEntryCount != 2 || got[0].GetEventId() == "" || got[1].GetEventId() == "" ||
		got[2].GetErrorCode() != "NotAuthorizedForSourceException" || got[3].GetErrorCode() != "MalformedDetail" {
		t.Errorf("PutEvents = %v", resp.Msg)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(e.ecs.calls()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if calls := e.ecs.calls(); len(calls) != 1 || calls[0].GetStartedBy() != "events-rule/orders" {
		t.Errorf("RunTask calls = %v, want one (the 150 order)", calls)
	}
}
