package agent_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

func awslogs(c *ecsv1.ContainerDefinition, opts map[string]string) *ecsv1.ContainerDefinition {
	c.LogConfiguration = &ecsv1.LogConfiguration{LogDriver: proto.String("awslogs"), Options: opts}
	return c
}

// TestAWSLogsDriver runs containers with the awslogs driver on real containerd: output is
// shipped to the control plane's stream prefix/container/task-id; a missing group without
// awslogs-create-group stops the task before it starts with AWS's
// ResourceInitializationError; and output written across an agent restart (while no
// agent reads the container's pipes) arrives once, in order.
func TestAWSLogsDriver(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cp := newControlPlane(t)
	cfg := testConfig(t, w, cp, "awslogs")
	ta := startAgent(t, cfg, cp)

	t.Run("ships", func(t *testing.T) {
		arn := taskARN("awslogs")
		cp.assign(t, arn, taskDef("echo", awslogs(containerDef("app", w.image, "echo", "to stdout", "to stderr"),
			map[string]string{"awslogs-group": "/ecs/echo", "awslogs-create-group": "true", "awslogs-stream-prefix": "web", "awslogs-region": "eu-west-1"})))
		cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		stream := "web/app/" + arn[strings.LastIndex(arn, "/")+1:]
		cp.waitFor(t, 10*time.Second, "shipped output", func() bool { return len(cp.logEvents["eu-west-1|/ecs/echo|"+stream]) == 2 })
		got := cp.shipped("eu-west-1", "/ecs/echo", stream)
		if !(got[0] == "to stdout" && got[1] == "to stderr") && !(got[1] == "to stdout" && got[0] == "to stderr") {
			t.Fatalf("shipped %q", got)
		}
	})

	t.Run("secretOptions", func(t *testing.T) {
		arn := taskARN("awslogs")
		def := awslogs(containerDef("app", w.image, "echo", "via secret options", "to stderr"), map[string]string{"awslogs-create-group": "true"})
		def.LogConfiguration.SecretOptions = []*ecsv1.Secret{
			{Name: proto.String("awslogs-group"), ValueFrom: proto.String("/log/group")},
			{Name: proto.String("awslogs-stream-prefix"), ValueFrom: proto.String("/log/prefix")},
		}
		td := taskDef("secretopts", def)
		cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId: "d-secretopts", Task: &ecsv1.Task{TaskArn: proto.String(arn), TaskDefinitionArn: td.TaskDefinitionArn}, TaskDefinition: td,
			ResolvedSecrets: []*agentv1.ResolvedSecret{
				{ContainerName: "app", Kind: "log", Name: "awslogs-group", Value: "/ecs/from-secret"},
				{ContainerName: "app", Kind: "log", Name: "awslogs-stream-prefix", Value: "sec"},
			},
		}}})
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		if st.GetStopCode() != "EssentialContainerExited" {
			t.Fatalf("stopped: %s / %s", st.GetStopCode(), st.GetStoppedReason())
		}
		stream := "sec/app/" + arn[strings.LastIndex(arn, "/")+1:]
		cp.waitFor(t, 10*time.Second, "shipped output", func() bool { return len(cp.logEvents["|/ecs/from-secret|"+stream]) == 2 })
		if got := cp.shipped("", "/ecs/from-secret", stream); !slices.Contains(got, "via secret options") {
			t.Fatalf("shipped %q", got)
		}

		// A value the driver refuses stops the task; the reason names the option, not the value.
		arn2 := taskARN("awslogs")
		bad := awslogs(containerDef("app", w.image, "echo", "never", "never"), map[string]string{"awslogs-group": "/ecs/x"})
		bad.LogConfiguration.SecretOptions = []*ecsv1.Secret{{Name: proto.String("mode"), ValueFrom: proto.String("/log/mode")}}
		td2 := taskDef("badsecretopt", bad)
		cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId: "d-badsecretopt", Task: &ecsv1.Task{TaskArn: proto.String(arn2), TaskDefinitionArn: td2.TaskDefinitionArn}, TaskDefinition: td2,
			ResolvedSecrets: []*agentv1.ResolvedSecret{{ContainerName: "app", Kind: "log", Name: "mode", Value: "t0p-s3cret-mode"}},
		}}})
		st = cp.waitStatus(t, arn2, "STOPPED", 60*time.Second)
		if st.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st.GetStoppedReason(), "ResourceInitializationError: failed to validate logger args") ||
			!strings.Contains(st.GetStoppedReason(), "mode") || strings.Contains(st.GetStoppedReason(), "t0p-s3cret-mode") {
			t.Fatalf("stopped: %s / %s", st.GetStopCode(), st.GetStoppedReason())
		}
		for _, c := range st.GetContainers() {
			if strings.Contains(c.GetReason(), "t0p-s3cret-mode") {
				t.Errorf("container reason shows the secret: %s", c.GetReason())
			}
		}
	})

	t.Run("missing group", func(t *testing.T) {
		arn := taskARN("awslogs")
		cp.assign(t, arn, taskDef("nogroup", awslogs(containerDef("app", w.image, "sleep", "60"), map[string]string{"awslogs-group": "/ecs/absent"})))
		st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		if st.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st.GetStoppedReason(), "ResourceInitializationError: failed to validate logger args") ||
			!strings.Contains(st.GetStoppedReason(), "ResourceNotFoundException: The specified log group does not exist.") {
			t.Fatalf("stopped: %s / %s", st.GetStopCode(), st.GetStoppedReason())
		}
		if c := containerOf(st, "app"); c.GetExitCode() != 0 || c.ExitCode != nil {
			t.Errorf("container ran: %v", c)
		}
	})

	t.Run("agent restart", func(t *testing.T) {
		arn := taskARN("awslogs")
		cp.mu.Lock()
		cp.logGroups["|/ecs/tick"] = true
		cp.mu.Unlock()
		cp.assign(t, arn, taskDef("tick", awslogs(containerDef("app", w.image, "tick", "40", "100"), map[string]string{"awslogs-group": "/ecs/tick"})))
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		stream := ""
		cp.waitFor(t, 10*time.Second, "first ticks", func() bool {
			for k, v := range cp.logEvents {
				if strings.HasPrefix(k, "|/ecs/tick|") && len(v) >= 3 {
					stream = strings.TrimPrefix(k, "|/ecs/tick|")
					return true
				}
			}
			return false
		})
		ta.stop()
		time.Sleep(1500 * time.Millisecond) // ticks go to the pipe while no agent runs
		startAgent(t, cfg, cp)
		cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
		cp.waitFor(t, 15*time.Second, "all ticks", func() bool { return len(cp.logEvents["|/ecs/tick|"+stream]) >= 40 })
		got := cp.shipped("", "/ecs/tick", stream)
		if len(got) != 40 {
			t.Fatalf("shipped %d events: %q", len(got), got)
		}
		for i, m := range got {
			if m != fmt.Sprintf("tick %d", i+1) {
				t.Fatalf("event %d = %q; all: %q", i, m, got)
			}
		}
	})
}

// BenchmarkAWSLogsShipping runs a log-heavy task (100,000 lines of 100 bytes, written as
// fast as the container can) b.N times with logDriver json-file and b.N times with
// awslogs (blocking, so nothing is dropped), alternating, and reports the task's
// runtime (assignment → STOPPED) under each, their ratio (goal ≤ 1.1: shipping does not
// slow the task) and the shipping rate (lines/s from the assignment until the control
// plane holds every line; goal ≥ 20,000).
//
//	go test -run '^$' -bench AWSLogsShipping -benchtime 3x ./
func BenchmarkAWSLogsShipping(b *testing.B) {
	const lines, size = 100_000, 100
	w := newWorld(b)
	cp := newControlPlane(b)
	cfg := testConfig(b, w, cp, "logbench")
	cfg.Logger = nil
	startAgent(b, cfg, cp)
	warm := taskARN("logbench")
	cp.assign(b, warm, taskDef("warm", containerDef("main", w.image, "exit", "0")))
	cp.waitStatus(b, warm, "STOPPED", 60*time.Second)
	cp.mu.Lock()
	cp.logGroups["|/bench"] = true
	cp.mu.Unlock()

	var plain, shipped time.Duration
	var shipRate float64
	for i := 0; i < b.N; i++ {
		arn := taskARN("logbench")
		t0 := time.Now()
		cp.assign(b, arn, taskDef("plain", containerDef("main", w.image, "lines", fmt.Sprint(lines), fmt.Sprint(size))))
		cp.waitStatus(b, arn, "STOPPED", 120*time.Second)
		plain += time.Since(t0)

		arn = taskARN("logbench")
		t0 = time.Now()
		cp.assign(b, arn, taskDef("shipped", awslogs(containerDef("main", w.image, "lines", fmt.Sprint(lines), fmt.Sprint(size)),
			map[string]string{"awslogs-group": "/bench", "awslogs-stream-prefix": "b", "mode": "blocking"})))
		cp.waitStatus(b, arn, "STOPPED", 120*time.Second)
		shipped += time.Since(t0)
		stream := "b/main/" + arn[strings.LastIndex(arn, "/")+1:]
		cp.waitFor(b, 120*time.Second, "every line shipped", func() bool { return len(cp.logEvents["|/bench|"+stream]) >= lines })
		shipRate += lines / time.Since(t0).Seconds()
		cp.mu.Lock()
		delete(cp.logEvents, "|/bench|"+stream)
		cp.mu.Unlock()
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain.Milliseconds())/n, "json-file-ms")
	b.ReportMetric(float64(shipped.Milliseconds())/n, "awslogs-ms")
	b.ReportMetric(shipped.Seconds()/plain.Seconds(), "runtime-ratio")
	b.ReportMetric(shipRate/n, "shipped-lines/s")
}
