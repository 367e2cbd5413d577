package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevEFSVolume runs `berth dev` with an EFS mapping in its single-host form
// (--efs fs-12345678=DIR: the agent bind-mounts DIR for that file system) and drives it
// with the AWS CLI: a task definition with an efsVolumeConfiguration registers and is
// described back as given; a real containerd task writes a file into the volume's
// rootDirectory and the file is on the host; a task naming a file system the instance has
// no mapping for, or a rootDirectory that does not exist, stops before running with AWS's
// ResourceInitializationError; transit encryption is refused at registration. The NFS
// form (fs-ID=HOST:/EXPORT) needs an NFS server and the kernel's NFS client: the subtest
// skips naming what this machine lacks.
func TestDevEFSVolume(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	efsRoot := filepath.Join(dir, "efs")
	if err := os.MkdirAll(filepath.Join(efsRoot, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(devEnv(t, filepath.Join(dir, "data")), "BERTH_EFS=fs-12345678="+efsRoot)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	register := func(family, fsID, rootDir string) string {
		t.Helper()
		def, _ := json.Marshal([]map[string]any{{
			"name": "app", "image": image, "memory": 32, "essential": true,
			"command":     []string{"write", "/mnt/efs/hello.txt", "written by " + family},
			"mountPoints": []map[string]any{{"sourceVolume": "shared", "containerPath": "/mnt/efs"}},
		}})
		vols, _ := json.Marshal([]map[string]any{{"name": "shared", "efsVolumeConfiguration": map[string]any{
			"fileSystemId": fsID, "rootDirectory": rootDir, "transitEncryption": "DISABLED"}}})
		return aws("ecs", "register-task-definition", "--family", family, "--network-mode", "host",
			"--container-definitions", string(def), "--volumes", string(vols),
			"--query", "taskDefinition.volumes[0].efsVolumeConfiguration", "--output", "json")
	}
	stored := register("efs-app", "fs-12345678", "/app")
	var got map[string]any
	if err := json.Unmarshal([]byte(stored), &got); err != nil || got["fileSystemId"] != "fs-12345678" || got["rootDirectory"] != "/app" || got["transitEncryption"] != "DISABLED" {
		t.Fatalf("registered efsVolumeConfiguration %s (%v)", stored, err)
	}
	if d := aws("ecs", "describe-task-definition", "--task-definition", "efs-app", "--query", "taskDefinition.volumes[0].efsVolumeConfiguration.fileSystemId", "--output", "text"); d != "fs-12345678" {
		t.Errorf("described fileSystemId %q", d)
	}
	run := func(family string) (status, code, reason, stopCode string) {
		t.Helper()
		task := aws("ecs", "run-task", "--task-definition", family, "--query", "tasks[0].taskArn", "--output", "text")
		waitFor(t, func() (string, bool) {
			s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
			return s, s == "STOPPED"
		})
		q := func(expr string) string {
			return aws("ecs", "describe-tasks", "--tasks", task, "--query", expr, "--output", "text")
		}
		return q("tasks[0].lastStatus"), q("tasks[0].containers[0].exitCode"), q("tasks[0].stoppedReason"), q("tasks[0].stopCode")
	}

	// The task writes into the file system's /app; the host sees it there.
	if _, code, reason, _ := run("efs-app"); code != "0" {
		t.Fatalf("writer exit code %s, reason %q", code, reason)
	}
	b, err := os.ReadFile(filepath.Join(efsRoot, "app", "hello.txt"))
	if err != nil || string(b) != "written by efs-app" {
		t.Fatalf("file on the host: %q, %v", b, err)
	}

	// No mapping for the file system: AWS's ResourceInitializationError, nothing ran.
	register("efs-unmapped", "fs-87654321", "/")
	_, code, reason, stopCode := run("efs-unmapped")
	const prefix = "ResourceInitializationError: failed to invoke EFS utils commands to set up EFS volumes: stderr: "
	if !strings.HasPrefix(reason, prefix) || !strings.Contains(reason, "fs-87654321") || !strings.Contains(reason, "unsuccessful EFS utils command execution; code: 1") || stopCode != "TaskFailedToStart" {
		t.Errorf("unmapped file system: stoppedReason %q, stopCode %q", reason, stopCode)
	}
	if code != "None" {
		t.Errorf("unmapped file system: the container ran (exit code %s)", code)
	}

	// A rootDirectory the file system lacks: mount's "No such file or directory".
	register("efs-missing-dir", "fs-12345678", "/missing")
	if _, _, reason, _ := run("efs-missing-dir"); !strings.HasPrefix(reason, prefix) || !strings.Contains(reason, "No such file or directory") || !strings.HasSuffix(reason, "code: 32") {
		t.Errorf("missing rootDirectory: stoppedReason %q", reason)
	}

	t.Run("nfs", func(t *testing.T) {
		fs, _ := os.ReadFile("/proc/filesystems")
		if !strings.Contains(string(fs), "nfs4") {
			t.Skip("the NFS form (--efs fs-ID=HOST:/EXPORT) needs the kernel's NFS client (nfs4 is not in /proc/filesystems) and an NFS server (nfs-kernel-server); this machine has neither")
		}
		t.Skip("an NFS export to mount is not set up by this test: it needs nfs-kernel-server (exportfs, rpc.nfsd), not installed here")
	})
}
