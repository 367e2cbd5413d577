package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

// reasonEFS and reasonEFSEnd frame why a task's EFS volume could not be set up, as the
// ECS agent words it ("ResourceInitializationError: failed to invoke EFS utils commands
// to set up EFS volumes: stderr: ... : unsuccessful EFS utils command execution; code:
// N"); code 32 is mount(8)'s "mount failure", 1 a file system efs-utils cannot resolve.
const (
	reasonEFS    = "ResourceInitializationError: failed to invoke EFS utils commands to set up EFS volumes: stderr: "
	reasonEFSEnd = " : unsuccessful EFS utils command execution; code: "
)

// efsHook mounts the task's EFS volumes before its containers are created: each
// efsVolumeConfiguration's fileSystemId through the operator's mapping (Config.EFS). A
// file system the host has no mapping for, or one that does not mount, fails the task's
// start with ResourceInitializationError, as on ECS.
type efsHook struct{ t *task }

func (h *efsHook) name() string { return "efs" }

func (h *efsHook) prestart(_ context.Context, _ *taskStart) error {
	for _, v := range h.t.a.GetTaskDefinition().GetVolumes() {
		if v.GetEfsVolumeConfiguration() == nil {
			continue
		}
		if _, err := h.t.efsSource(v); err != nil {
			return &startFailure{reason: err.Error(), all: true}
		}
	}
	return nil
}

// efsError is a failure of an EFS volume, its Error the ECS agent's wording.
type efsError struct {
	stderr string
	code   int
}

func (e *efsError) Error() string {
	return fmt.Sprintf("%s%s%s%d", reasonEFS, e.stderr, reasonEFSEnd, e.code)
}

// efsSource returns the host directory of EFS volume v, mounting it first when its file
// system is an NFS export: the mapped target's rootDirectory. A local directory target
// (the single-host form) is bind-mounted as is; an NFS export ("host:/export") is mounted
// (NFSv4.1, as efs-utils mounts EFS) at the volume's directory of the task, unmounted with
// the task. The error is an *efsError.
func (t *task) efsSource(v *ecsv1.Volume) (string, error) {
	ev := v.GetEfsVolumeConfiguration()
	fsID := ev.GetFileSystemId()
	target, ok := t.m.cfg.EFS[fsID]
	if !ok {
		return "", &efsError{code: 1, stderr: fmt.Sprintf("Failed to resolve %q - check that your file system ID is correct: this container instance maps no file system of that ID (berth agent --efs %s=HOST:/EXPORT or =/PATH).", fsID, fsID)}
	}
	root := filepath.Join("/", ev.GetRootDirectory()) // cleaned; ".." was refused at registration
	if strings.HasPrefix(target, "/") {
		dir := filepath.Join(target, root)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			why := "No such file or directory"
			if err == nil {
				why = "Not a directory"
			} else if !errors.Is(err, os.ErrNotExist) {
				why = err.Error()
			}
			return "", &efsError{code: 32, stderr: fmt.Sprintf("mount of %s:%s (%s) failed, reason given by server: %s", fsID, root, dir, why)}
		}
		return dir, nil
	}
	host, export, _ := strings.Cut(target, ":")
	source := host + ":" + filepath.Join("/", export, root)
	dir := filepath.Join(t.m.volumeDir(t.arn), taskIDOf(v.GetName()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", &efsError{code: 32, stderr: err.Error()}
	}
	if err := runtime.MountNFS(dir, source); err != nil {
		return "", &efsError{code: 32, stderr: err.Error()}
	}
	return dir, nil
}

// ParseEFSMappings reads the operator's EFS mappings (berth agent --efs, repeatable):
// "fs-ID=HOST:/EXPORT" names an NFS export the agent mounts for volumes of that file
// system, "fs-ID=/PATH" a directory of this host bind-mounted instead (the single-host
// form: every host running such tasks needs the same directory, e.g. on shared storage).
// It returns the map Config.EFS takes, or an error naming the malformed value.
func ParseEFSMappings(vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		id, target, ok := strings.Cut(strings.TrimSpace(v), "=")
		if !ok || id == "" || target == "" {
			return nil, fmt.Errorf("--efs %q: want fs-ID=HOST:/EXPORT or fs-ID=/PATH", v)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("--efs: file system %s is mapped twice", id)
		}
		if !strings.HasPrefix(target, "/") {
			host, export, ok := strings.Cut(target, ":")
			if !ok || host == "" || !strings.HasPrefix(export, "/") {
				return nil, fmt.Errorf("--efs %q: the target must be HOST:/EXPORT (an NFS export) or an absolute path", v)
			}
		}
		out[id] = target
	}
	return out, nil
}
