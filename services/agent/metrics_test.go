package agent_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// TestMetrics runs a task on an agent with a registry and reads /metrics from the
// LogAddr listener: tasks by status, containerd call latency and container lifecycle
// events (a start, then an exit once stopped).
func TestMetrics(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := testConfig(t, w, cp, name)
	cfg.Registry = prometheus.NewRegistry()
	ta := startAgent(t, cfg, cp)
	arn := taskARN(name)
	cp.assign(t, arn, taskDef("metrics", containerDef("main", w.image, "sleep", "600")))
	cp.waitStatus(t, arn, "RUNNING", 60*time.Second)

	scrape := func() string {
		t.Helper()
		res, err := http.Get("http://" + ta.a.LogAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(body)
	}
	body := scrape()
	for _, want := range []string{
		`berth_agent_tasks{status="RUNNING"} 1`,
		`berth_agent_containerd_call_duration_seconds_count{code="OK",method="/containerd.services.tasks.v1.Tasks/Start"}`,
		`berth_agent_container_events_total{event="start"} 1`,
		`berth_agent_container_events_total{event="exit"} 0`,
		`berth_agent_container_events_total{event="oom"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	cp.stop(t, arn, "UserInitiated")
	cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	if body := scrape(); !strings.Contains(body, `berth_agent_container_events_total{event="exit"} 1`) {
		t.Errorf("/metrics after the stop lacks one exit:\n%s", body)
	}
	// A container killed for memory counts as an exit and an oom.
	oom := taskARN(name)
	c := containerDef("main", w.image, "alloc", "256")
	c.Memory = proto.Int32(32)
	cp.assign(t, oom, taskDef("oom", c))
	cp.waitStatus(t, oom, "STOPPED", 60*time.Second)
	body = scrape()
	for _, want := range []string{
		`berth_agent_container_events_total{event="start"} 2`,
		`berth_agent_container_events_total{event="exit"} 2`,
		`berth_agent_container_events_total{event="oom"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics after the OOM lacks %q:\n%s", want, body)
		}
	}
}
