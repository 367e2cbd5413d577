package agent_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// TestTerminalAndStdin: pseudoTerminal gives the process a terminal as its stdout;
// interactive keeps its stdin open (a reader waits) where without it stdin ends at once.
func TestTerminalAndStdin(t *testing.T) {
	w := newWorld(t)

	// ttyLine runs the tty mode, with a pseudo-terminal or not, and returns its line once
	// logged, stopping the task then.
	ttyLine := func(t *testing.T, family string, tty bool) string {
		cp := newControlPlane(t)
		name := clusterName(t)
		ta := startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		c := containerDef("main", w.image, "tty")
		c.PseudoTerminal = proto.Bool(tty)
		cp.assign(t, arn, taskDef(family, c))
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		var got string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = strings.Join(stdout(t, ta, arn, "main"), "\n"); strings.Contains(got, "terminal") {
				break
			}
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
		return got
	}
	t.Run("pseudo_terminal", func(t *testing.T) {
		t.Parallel()
		if got := ttyLine(t, "tty", true); !strings.Contains(got, "stdout is a terminal") {
			t.Errorf("pseudoTerminal: %q; want a terminal", got)
		}
	})
	t.Run("no_terminal", func(t *testing.T) {
		t.Parallel()
		if got := ttyLine(t, "notty", false); !strings.Contains(got, "stdout is not a terminal") {
			t.Errorf("without pseudoTerminal: %q", got)
		}
	})
	t.Run("interactive", func(t *testing.T) {
		t.Parallel()
		cp := newControlPlane(t)
		name := clusterName(t)
		ta := startAgent(t, testConfig(t, w, cp, name), cp)
		arn := taskARN(name)
		c := containerDef("main", w.image, "read-stdin")
		c.Interactive = proto.Bool(true)
		cp.assign(t, arn, taskDef("interactive", c))
		cp.waitStatus(t, arn, "RUNNING", 60*time.Second)
		time.Sleep(2 * time.Second)
		cp.mu.Lock()
		s := cp.latestLocked(arn)
		cp.mu.Unlock()
		if s.GetLastStatus() != "RUNNING" {
			t.Fatalf("interactive: the reader of stdin did not keep running: %v", s)
		}
		if got := strings.Join(stdout(t, ta, arn, "main"), "\n"); strings.Contains(got, "stdin ended") {
			t.Fatalf("interactive: stdin ended: %q", got)
		}
		cp.stop(t, arn, "UserInitiated")
		cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
	})
	t.Run("not_interactive", func(t *testing.T) {
		t.Parallel()
		ta, arn, _ := runToStop(t, w, taskDef("stdin", containerDef("main", w.image, "read-stdin")), nil)
		if got := strings.Join(stdout(t, ta, arn, "main"), "\n"); !strings.Contains(got, "stdin ended") {
			t.Errorf("without interactive stdin should end at once: %q", got)
		}
	})
}
