package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/tasks"
)

// TestTaskRoleEnvironment: a task with a taskRoleArn asks the control plane for its
// credentials before its container starts, and the container gets the credentials and
// metadata URIs on the agent's endpoint listener; a task without one gets only metadata.
// With the endpoints off, a task with a role fails to start with a
// ResourceInitializationError.
func TestTaskRoleEnvironment(t *testing.T) {
	w := newWorld(t)
	td := taskDef("role", containerDef("main", w.image, "env"))
	td.TaskRoleArn = proto.String("arn:aws:iam::000000000000:role/app")
	ta, arn, st := runToStop(t, w, td, nil)
	if st.GetStopCode() != "EssentialContainerExited" {
		t.Fatalf("stopCode %q reason %q", st.GetStopCode(), st.GetStoppedReason())
	}
	out := texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn}), "stdout")
	var full, meta string
	for _, l := range out {
		if v, ok := strings.CutPrefix(l, "AWS_CONTAINER_CREDENTIALS_FULL_URI="); ok {
			full = v
		}
		if v, ok := strings.CutPrefix(l, "ECS_CONTAINER_METADATA_URI_V4="); ok {
			meta = v
		}
	}
	if !strings.HasPrefix(full, "http://127.0.0.1:") || !strings.Contains(full, "/v2/credentials/") ||
		!strings.HasPrefix(meta, "http://127.0.0.1:") || !strings.Contains(meta, "/v4/") || !slices.Contains(out, "AWS_EXECUTION_ENV=AWS_ECS_EC2") {
		t.Errorf("environment: %q", out)
	}

	td = taskDef("role-off", containerDef("main", w.image, "env"))
	td.TaskRoleArn = proto.String("arn:aws:iam::000000000000:role/app")
	_, _, st = runToStop(t, w, td, func(c *agent.Config) { c.EndpointAddr = "off" })
	if st.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st.GetStoppedReason(), "ResourceInitializationError: ") {
		t.Errorf("endpoints off: stopCode %q reason %q", st.GetStopCode(), st.GetStoppedReason())
	}
}

// containerEnv returns the environment in the spec of the containerd container id.
func containerEnv(t *testing.T, w *world, ns, id string) []string {
	t.Helper()
	c, err := w.ctd.Client(t, ns).LoadContainer(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return spec.Process.Env
}

// TestTaskCredentialsSurviveAgentRestart: with a pinned endpoint address, a task adopted
// by a restarted agent keeps its credentials URI (the id is derived from a key in the data
// dir), which serves freshly fetched credentials; after the task stops it answers 400.
func TestTaskCredentialsSurviveAgentRestart(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	cfg := testConfig(t, w, cp, "credrestart")
	cfg.EndpointAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ta := startAgent(t, cfg, cp)
	arn := taskARN("credrestart")
	td := taskDef("long", containerDef("main", w.image, "sleep", "600"))
	td.TaskRoleArn = proto.String("arn:aws:iam::000000000000:role/app")
	cp.assign(t, arn, td)
	cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
	var uri string
	for _, kv := range containerEnv(t, w, cfg.Namespace, tasks.ContainerID(arn, "main")) {
		if v, ok := strings.CutPrefix(kv, "AWS_CONTAINER_CREDENTIALS_FULL_URI="); ok {
			uri = v
		}
	}
	if !strings.HasPrefix(uri, "http://"+cfg.EndpointAddr+"/v2/credentials/") {
		t.Fatalf("credentials URI %q", uri)
	}
	keyOf := func() (int, string) {
		resp, err := http.Get(uri)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var c struct{ AccessKeyId string }
		_ = json.NewDecoder(resp.Body).Decode(&c)
		return resp.StatusCode, c.AccessKeyId
	}
	st, first := keyOf()
	if st != 200 || first == "" {
		t.Fatalf("before restart: %d %q", st, first)
	}

	ta.stop()
	startAgent(t, cfg, cp)
	cp.waitFor(t, 30*time.Second, "second hello", func() bool { return len(cp.hellos) >= 2 })
	cp.waitFor(t, 30*time.Second, "credentials served again", func() bool {
		st, key := keyOf()
		return st == 200 && key != "" && key != first
	})

	cp.stop(t, arn, "UserInitiated")
	cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	if st, _ := keyOf(); st != http.StatusBadRequest {
		t.Errorf("after stop: %d, want 400", st)
	}
}
