package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevGPUNone: the no-GPU path for real. `berth dev`'s agent on its private containerd
// finds no NVIDIA GPU on this host, so its instance registers no GPU resource; through the
// gateway (AWS CLI) RunTask of a task definition with a GPU resourceRequirement answers
// a failure with AWS's reason RESOURCE:GPU for that instance and starts nothing, while
// the same definition without the GPU is placed.
func TestDevGPUNone(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	if m, _ := filepath.Glob("/dev/nvidia[0-9]*"); len(m) > 0 {
		t.Skipf("this host has NVIDIA GPUs %v: the no-GPU path needs a host without", m)
	}
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	aws := func(args ...string) string {
		t.Helper()
		return cli(t, root, env, "aws", args...)
	}
	ci := waitFor(t, func() (string, bool) {
		s := aws("ecs", "list-container-instances", "--query", "containerInstanceArns[0]", "--output", "text")
		return s, strings.HasPrefix(s, "arn:aws:ecs:")
	})
	var desc struct {
		ContainerInstances []struct {
			RegisteredResources []struct{ Name string } `json:"registeredResources"`
		} `json:"containerInstances"`
	}
	if err := json.Unmarshal([]byte(aws("ecs", "describe-container-instances", "--container-instances", ci)), &desc); err != nil {
		t.Fatal(err)
	}
	for _, r := range desc.ContainerInstances[0].RegisteredResources {
		if r.Name == "GPU" {
			t.Fatalf("instance registered a GPU resource on a host without GPUs: %+v", desc)
		}
	}
	td := func(req string) string {
		return fmt.Sprintf(`[{"name":"g","image":"busybox","memory":16,"command":["true"]%s}]`, req)
	}
	aws("ecs", "register-task-definition", "--family", "gpu", "--container-definitions", td(`,"resourceRequirements":[{"type":"GPU","value":"1"}]`))
	var run struct {
		Tasks    []json.RawMessage `json:"tasks"`
		Failures []struct{ Arn, Reason string }
	}
	if err := json.Unmarshal([]byte(aws("ecs", "run-task", "--task-definition", "gpu")), &run); err != nil {
		t.Fatal(err)
	}
	if len(run.Tasks) != 0 || len(run.Failures) != 1 || run.Failures[0].Reason != "RESOURCE:GPU" || run.Failures[0].Arn != ci {
		t.Fatalf("RunTask of a GPU task: %+v, want one RESOURCE:GPU failure for %s", run, ci)
	}
	// Only the GPU stood in the way: the same container without it is placed.
	aws("ecs", "register-task-definition", "--family", "nogpu", "--container-definitions", td(""))
	if out := aws("ecs", "run-task", "--task-definition", "nogpu", "--query", "length(tasks)", "--output", "text"); out != "1" {
		t.Fatalf("RunTask without a GPU placed %s tasks", out)
	}
}
