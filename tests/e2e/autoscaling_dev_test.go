package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAutoScalingDev runs `berth dev` (real containerd) and scales a real service with
// the AWS CLI: an at() scheduled action a few seconds ahead raises its minimum to 2, the
// leader's loop sets desiredCount 2 through ECS, and a second task runs.
func TestAutoScalingDev(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	aws("ecs", "register-task-definition", "--family", "scaled", "--container-definitions",
		`[{"name":"app","image":"`+image+`","memory":32,"command":["serve","8080"]}]`)
	aws("ecs", "create-service", "--service-name", "scaled", "--task-definition", "scaled", "--desired-count", "1")
	target := []string{"--service-namespace", "ecs", "--scalable-dimension", "ecs:service:DesiredCount", "--resource-id", "service/default/scaled"}
	aws(append([]string{"application-autoscaling", "register-scalable-target", "--min-capacity", "1", "--max-capacity", "3"}, target...)...)
	at := time.Now().UTC().Add(5 * time.Second).Format("2006-01-02T15:04:05")
	aws(append([]string{"application-autoscaling", "put-scheduled-action", "--scheduled-action-name", "rush",
		"--schedule", "at(" + at + ")", "--scalable-target-action", "MinCapacity=2,MaxCapacity=3"}, target...)...)
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-services", "--services", "scaled", "--query", "services[0].[desiredCount,runningCount]", "--output", "text")
		return s, strings.Join(strings.Fields(s), " ") == "2 2"
	})
	acts := aws("application-autoscaling", "describe-scaling-activities", "--service-namespace", "ecs", "--resource-id", "service/default/scaled",
		"--query", "ScalingActivities[].[Description,Cause,StatusCode]", "--output", "text")
	for _, want := range []string{
		"Setting min capacity to 2 and max capacity to 3\tscheduled action name rush was triggered\tSuccessful",
		"Setting desired count to 2.\tminimum capacity was set to 2\tSuccessful",
	} {
		if !strings.Contains(acts, want) {
			t.Errorf("activities lack %q:\n%s", want, acts)
		}
	}
	aws(append([]string{"application-autoscaling", "deregister-scalable-target"}, target...)...)
	aws("ecs", "update-service", "--service", "scaled", "--desired-count", "0")
}
