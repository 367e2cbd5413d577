package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestLocalDriverOpts: a task-scoped local volume with driverOpts type tmpfs is a tmpfs of
// the size o asks for inside the container, what one container writes there another
// reads, and the mount goes with the task.
func TestLocalDriverOpts(t *testing.T) {
	w := newWorld(t)
	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := testConfig(t, w, cp, name)
	cfg.CleanupWait = time.Second
	ta := startAgent(t, cfg, cp)
	arn := taskARN(name)

	writer := nonEssential(mount(containerDef("writer", w.image, "write", "/data/note", "in-tmpfs"), "scratch", "/data", false))
	reader := nonEssential(after(mount(containerDef("reader", w.image, "cat", "/data/note"), "scratch", "/data", true), "writer"))
	mounts := after(mount(containerDef("mounts", w.image, "cat", "/proc/self/mounts"), "scratch", "/data", false), "reader")
	td := taskDef("driveropts", writer, reader, mounts)
	td.Volumes = []*ecsv1.Volume{{Name: proto.String("scratch"), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{
		Scope: proto.String("task"), Driver: proto.String("local"),
		DriverOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=4m,mode=0777"},
	}}}
	cp.assign(t, arn, td)
	st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
	if l := mountLine(stdout(t, ta, arn, "mounts"), "/data"); !strings.HasPrefix(l, "tmpfs /data tmpfs ") || !strings.Contains(l, "size=4096k") {
		t.Errorf("/data mount %q: want a 4 MiB tmpfs; %v", l, st)
	}
	if got := strings.Join(stdout(t, ta, arn, "reader"), ""); !strings.Contains(got, "in-tmpfs") {
		t.Errorf("reader of the volume printed %q, want the writer's in-tmpfs", got)
	}
	dir := filepath.Join(cfg.DataDir, "volumes", arn[strings.LastIndexByte(arn, '/')+1:])
	if _, err := os.Stat(filepath.Join(dir, "scratch")); err != nil {
		t.Fatalf("the task's volume before cleanup: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task's volume directory %s (a tmpfs) is still there after cleanup", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
