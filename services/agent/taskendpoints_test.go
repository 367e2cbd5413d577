package agent_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent"
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
