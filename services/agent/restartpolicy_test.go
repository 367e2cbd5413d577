package agent_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// restartPolicy returns c with an enabled restartPolicy of period seconds ignoring codes.
// The agent takes the period as given: RegisterTaskDefinition's 60-second minimum is the
// control plane's, so these tests can restart after 1 second.
func restartPolicy(c *ecsv1.ContainerDefinition, period int32, ignored ...int32) *ecsv1.ContainerDefinition {
	c.RestartPolicy = &ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(true), RestartAttemptPeriod: proto.Int32(period), IgnoredExitCodes: ignored}
	return c
}

// TestRestartPolicy runs containers with a restartPolicy on real containerd: an exited
// container is started again in place (same task, same container, its output continuing
// in the same log) and counted; an essential one being restarted does not stop the task;
// an ignored exit code, or an exit before restartAttemptPeriod, is not restarted.
func TestRestartPolicy(t *testing.T) {
	w := newWorld(t)

	t.Run("restarted_in_place_and_counted", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		ta := startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		// Essential (the default): without the policy its exit 1 would stop the task.
		main := restartPolicy(containerDef("main", w.image, "sleep-exit", "1", "1"), 1)
		cp.assign(t, arn, taskDef("restart", main))
		cp.waitFor(t, 60*time.Second, "main restarted twice", func() bool {
			s := cp.latestLocked(arn)
			return s != nil && containerOf(s, "main").GetRestartCount() >= 2
		})
		for _, s := range cp.statesOf(arn) {
			if s.GetLastStatus() == "STOPPED" || containerOf(s, "main").GetLastStatus() == "STOPPED" {
				t.Fatalf("the task or its essential container stopped while being restarted: %v", s)
			}
		}
		if runs := strings.Count(strings.Join(stdout(t, ta, arn, "main"), "\n"), "exiting with status 1"); runs < 2 {
			t.Errorf("the container's log shows %d exits, want the runs before each restart (>= 2)", runs)
		}
		cp.stop(t, arn, "UserInitiated")
		st := cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
		if st.GetStopCode() != "UserInitiated" || containerOf(st, "main").GetRestartCount() < 2 {
			t.Fatalf("stopped task: %v", st)
		}
	})

	t.Run("ignored_exit_code_not_restarted", func(t *testing.T) {
		t.Parallel()
		// It runs past the 1-second period: only the ignored code keeps it down.
		main := restartPolicy(containerDef("main", w.image, "sleep-exit", "2", "3"), 1, 3)
		_, _, st := runToStop(t, w, taskDef("ignored", main), nil)
		c := containerOf(st, "main")
		if c.GetExitCode() != 3 || c.GetRestartCount() != 0 || st.GetStopCode() != "EssentialContainerExited" {
			t.Fatalf("ignored exit code: %v", st)
		}
	})

	t.Run("early_exit_not_restarted", func(t *testing.T) {
		t.Parallel()
		main := restartPolicy(containerDef("main", w.image, "exit", "1"), 60)
		_, _, st := runToStop(t, w, taskDef("early", main), nil)
		c := containerOf(st, "main")
		if c.GetExitCode() != 1 || c.GetRestartCount() != 0 || st.GetStopCode() != "EssentialContainerExited" {
			t.Fatalf("exit before restartAttemptPeriod: %v", st)
		}
	})

	t.Run("disabled_not_restarted", func(t *testing.T) {
		t.Parallel()
		main := containerDef("main", w.image, "sleep-exit", "2", "1")
		main.RestartPolicy = &ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(false), RestartAttemptPeriod: proto.Int32(1)}
		_, _, st := runToStop(t, w, taskDef("disabled", main), nil)
		if c := containerOf(st, "main"); c.GetExitCode() != 1 || c.GetRestartCount() != 0 {
			t.Fatalf("disabled restartPolicy: %v", st)
		}
	})
}
