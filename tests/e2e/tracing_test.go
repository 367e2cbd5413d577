package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector is an in-test OTLP/HTTP trace receiver: it decodes the protobuf export
// requests POSTed to /v1/traces and keeps every span.
type otlpCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace returns the spans of the trace whose "ECS {action}" gateway span carries the
// request id, ordered by start time.
func (c *otlpCollector) trace(action, requestID string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id []byte
	for _, s := range c.spans {
		if s.GetName() == "ECS "+action && attr(s, "berth.request_id") == requestID {
			id = s.GetTraceId()
		}
	}
	if id == nil {
		return nil
	}
	var out []*tracepb.Span
	for _, s := range c.spans {
		if string(s.GetTraceId()) == string(id) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *tracepb.Span) int {
		return int(int64(a.GetStartTimeUnixNano()) - int64(b.GetStartTimeUnixNano()))
	})
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestRunTaskTrace runs `berth dev` with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an
// in-test OTLP collector and checks that one RunTask's trace holds, in order, the
// gateway's "ECS RunTask" span (with the request id the client got back), the
// scheduler's RunTask span under it (same request id), etcd txn spans under that, and
// the agent's "agent StartTask" span (with its image pull) joined to the same trace.
func TestRunTaskTrace(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	col := &otlpCollector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	env := append(devEnv(t, filepath.Join(dir, "data")),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL,
		"OTEL_BSP_SCHEDULE_DELAY=200", // ms: export soon after each span ends
	)
	dev := startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	cli(t, root, env, "bin/berth", "image", "demo")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "traced", "--container-definitions",
		fmt.Sprintf(`[{"name":"app","image":"%s/berth/demo:latest","memory":16,"command":["sleep","600"]}]`, reg))
	c := ecs.New(ecs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(dev.endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("traced")})
	if err != nil || len(out.Tasks) != 1 {
		t.Fatalf("RunTask: %v %v", err, out)
	}
	task := aws.ToString(out.Tasks[0].TaskArn)
	t.Cleanup(func() {
		_, _ = c.StopTask(context.Background(), &ecs.StopTaskInput{Task: aws.String(task)})
		waitFor(t, func() (string, bool) {
			d, err := c.DescribeTasks(context.Background(), &ecs.DescribeTasksInput{Tasks: []string{task}})
			if err != nil || len(d.Tasks) != 1 {
				return fmt.Sprint(err), false
			}
			return aws.ToString(d.Tasks[0].LastStatus), aws.ToString(d.Tasks[0].LastStatus) == "STOPPED"
		})
	})
	requestID, ok := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	if !ok || requestID == "" {
		t.Fatal("RunTask answer has no request id")
	}

	var spans []*tracepb.Span
	names := func() string {
		var b strings.Builder
		for _, s := range spans {
			fmt.Fprintf(&b, "\n  %s span=%s parent=%s", s.GetName(), hex.EncodeToString(s.GetSpanId()), hex.EncodeToString(s.GetParentSpanId()))
		}
		return b.String()
	}
	waitFor(t, func() (string, bool) {
		spans = col.trace("RunTask", requestID)
		for _, s := range spans {
			if s.GetName() == "agent StartTask" {
				return names(), true
			}
		}
		return names(), false
	})
	t.Logf("trace of RunTask %s:%s", requestID, names())

	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.GetSpanId())] = s
	}
	find := func(name string) *tracepb.Span {
		t.Helper()
		for _, s := range spans {
			if s.GetName() == name {
				return s
			}
		}
		t.Fatalf("no %q span in the trace:%s", name, names())
		return nil
	}
	// under reports whether s descends from anc.
	under := func(s, anc *tracepb.Span) bool {
		for p := byID[string(s.GetParentSpanId())]; p != nil; p = byID[string(p.GetParentSpanId())] {
			if p == anc {
				return true
			}
		}
		return false
	}
	gw := find("ECS RunTask")
	sched := find("/berth.ecs.v1.EcsService/RunTask")
	agent := find("agent StartTask")
	pull := find("agent pull images")
	if len(gw.GetParentSpanId()) != 0 {
		t.Errorf("the gateway span has a parent: the trace should start at the gateway")
	}
	if string(sched.GetParentSpanId()) != string(gw.GetSpanId()) {
		t.Errorf("the scheduler's RunTask span is not a child of the gateway's")
	}
	if got := attr(sched, "berth.request_id"); got != requestID {
		t.Errorf("scheduler span request id %q, want %q", got, requestID)
	}
	var txn *tracepb.Span
	for _, s := range spans {
		if s.GetName() == "etcd txn" && under(s, sched) {
			txn = s
			break
		}
	}
	if txn == nil {
		t.Fatalf("no etcd txn span under the scheduler's RunTask span:%s", names())
	}
	if !under(agent, sched) {
		t.Errorf("the agent's StartTask span is not under the scheduler's RunTask span")
	}
	if string(pull.GetParentSpanId()) != string(agent.GetSpanId()) {
		t.Errorf("the image pull span is not a child of the agent's StartTask")
	}
	if attr(agent, "aws.ecs.task.arn") != task {
		t.Errorf("agent span task %q, want %q", attr(agent, "aws.ecs.task.arn"), task)
	}
	// In order: gateway, scheduler, etcd txn, agent; each ends after its children start.
	order := []*tracepb.Span{gw, sched, txn, agent, pull}
	for i := 1; i < len(order); i++ {
		if order[i].GetStartTimeUnixNano() < order[i-1].GetStartTimeUnixNano() {
			t.Errorf("%s starts before %s", order[i].GetName(), order[i-1].GetName())
		}
	}
	if txn.GetEndTimeUnixNano() > sched.GetEndTimeUnixNano() || sched.GetEndTimeUnixNano() > gw.GetEndTimeUnixNano() {
		t.Errorf("a span ends after its parent: txn %d, scheduler %d, gateway %d", txn.GetEndTimeUnixNano(), sched.GetEndTimeUnixNano(), gw.GetEndTimeUnixNano())
	}
}
