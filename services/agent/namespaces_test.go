package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// runPeers runs td (its first container a long sleep, the others short), waits for the
// container named last to stop, stops the task and returns the agent, the task ARN and
// the last report. The task is cleaned up a second after it stops; its data dir is
// dataDir.
func runPeers(t *testing.T, w *world, td *ecsv1.TaskDefinition, last string, dataDir *string) (*testAgent, string, *agentv1.TaskStateChange) {
	t.Helper()
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := testConfig(t, w, cp, name)
	cfg.CleanupWait = time.Second
	if dataDir != nil {
		*dataDir = cfg.DataDir
	}
	ta := startAgent(t, cfg, cp)
	arn := taskARN(name)
	cp.assign(t, arn, td)
	cp.waitFor(t, 60*time.Second, last+" STOPPED", func() bool {
		s := cp.latestLocked(arn)
		return s != nil && containerOf(s, last).GetLastStatus() == "STOPPED"
	})
	cp.stop(t, arn, "UserInitiated")
	return ta, arn, cp.waitStatus(t, arn, "STOPPED", 30*time.Second)
}

// TestTaskNamespaces: with pidMode task one container sees the other's processes (PID 1
// of the shared namespace is the first container's program); with ipcMode task what one
// container puts in /dev/shm another reads. Without them neither holds.
func TestTaskNamespaces(t *testing.T) {
	w := newWorld(t)

	pidTask := func(family, mode string) *ecsv1.TaskDefinition {
		td := taskDef(family, containerDef("holder", w.image, "sleep", "600"), nonEssential(containerDef("peer", w.image, "cat", "/proc/1/cmdline")))
		if mode != "" {
			td.PidMode = proto.String(mode)
		}
		return td
	}
	t.Run("pid_mode_task", func(t *testing.T) {
		t.Parallel()
		ta, arn, _ := runPeers(t, w, pidTask("pidtask", "task"), "peer", nil)
		if got := strings.Join(stdout(t, ta, arn, "peer"), ""); !strings.Contains(got, "sleep\x00600") {
			t.Errorf("pidMode task: the peer's PID 1 is %q, want the holder's sleep 600", got)
		}
	})
	t.Run("pid_mode_default_private", func(t *testing.T) {
		t.Parallel()
		ta, arn, _ := runPeers(t, w, pidTask("pidprivate", ""), "peer", nil)
		if got := strings.Join(stdout(t, ta, arn, "peer"), ""); !strings.Contains(got, "cat\x00/proc/1/cmdline") {
			t.Errorf("without pidMode the peer's PID 1 is %q, want its own cat", got)
		}
	})

	ipcTask := func(family, mode string) *ecsv1.TaskDefinition {
		writer := nonEssential(containerDef("writer", w.image, "write", "/dev/shm/shared", "from-writer"))
		reader := nonEssential(after(containerDef("reader", w.image, "cat", "/dev/shm/shared"), "writer"))
		td := taskDef(family, containerDef("holder", w.image, "sleep", "600"), writer, reader)
		if mode != "" {
			td.IpcMode = proto.String(mode)
		}
		return td
	}
	t.Run("ipc_mode_task", func(t *testing.T) {
		t.Parallel()
		var dataDir string
		ta, arn, st := runPeers(t, w, ipcTask("ipctask", "task"), "reader", &dataDir)
		if got := strings.Join(stdout(t, ta, arn, "reader"), ""); containerOf(st, "reader").ExitCode == nil || containerOf(st, "reader").GetExitCode() != 0 || !strings.Contains(got, "from-writer") {
			t.Errorf("ipcMode task: reader printed %q, want the writer's from-writer; %v", got, st)
		}
		// The task's shared /dev/shm tmpfs goes with the task.
		shm, _ := filepath.Glob(filepath.Join(dataDir, "volumes", "*.shm"))
		if len(shm) != 1 {
			t.Fatalf("task shm dirs %v, want one while the task is kept", shm)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(shm[0]); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the task's /dev/shm %s is still there after cleanup", shm[0])
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("ipc_mode_default_private", func(t *testing.T) {
		t.Parallel()
		_, _, st := runPeers(t, w, ipcTask("ipcprivate", ""), "reader", nil)
		if c := containerOf(st, "reader"); c.ExitCode == nil || c.GetExitCode() == 0 {
			t.Errorf("without ipcMode the reader found the writer's /dev/shm file: %v", c)
		}
	})
}
