package tasks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"google.golang.org/protobuf/proto"
)

func TestParseEFSMappings(t *testing.T) {
	got, err := ParseEFSMappings([]string{"fs-12345678=nfs.example:/exports/a", " fs-abcdef12=/srv/efs "})
	if err != nil || got["fs-12345678"] != "nfs.example:/exports/a" || got["fs-abcdef12"] != "/srv/efs" || len(got) != 2 {
		t.Fatalf("ParseEFSMappings = %v, %v", got, err)
	}
	for _, bad := range [][]string{{"fs-1"}, {"=/x"}, {"fs-1="}, {"fs-1=relative/dir"}, {"fs-1=host:export"}, {"fs-1=:/export"}, {"fs-1=/a", "fs-1=/b"}} {
		if _, err := ParseEFSMappings(bad); err == nil {
			t.Errorf("ParseEFSMappings(%q) accepted", bad)
		}
	}
}

// TestEFSSource: the single-host form resolves to the mapped directory's rootDirectory;
// an unmapped file system and a missing rootDirectory fail with the ECS agent's
// ResourceInitializationError wording and mount(8)'s exit codes.
func TestEFSSource(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	tk := &task{m: &Manager{cfg: Config{EFS: map[string]string{"fs-12345678": dir}, VolumeDir: t.TempDir()}},
		arn: "arn:aws:ecs:us-east-1:000000000000:task/c/abc", a: &agentv1.Assignment{}}
	vol := func(fs, root string) *ecsv1.Volume {
		return &ecsv1.Volume{Name: proto.String("v"), EfsVolumeConfiguration: &ecsv1.EFSVolumeConfiguration{FileSystemId: proto.String(fs), RootDirectory: proto.String(root)}}
	}
	for root, want := range map[string]string{"": dir, "/": dir, "/data/app": filepath.Join(dir, "data", "app"), "data/app/": filepath.Join(dir, "data", "app")} {
		if got, err := tk.volumeSource(vol("fs-12345678", root)); err != nil || got != want {
			t.Errorf("rootDirectory %q: %q, %v; want %q", root, got, err, want)
		}
	}
	_, err := tk.efsSource(vol("fs-87654321", "/"))
	if err == nil || !strings.HasPrefix(err.Error(), reasonEFS+`Failed to resolve "fs-87654321"`) || !strings.HasSuffix(err.Error(), reasonEFSEnd+"1") {
		t.Errorf("unmapped: %v", err)
	}
	_, err = tk.efsSource(vol("fs-12345678", "/nope"))
	if err == nil || !strings.Contains(err.Error(), "No such file or directory") || !strings.HasSuffix(err.Error(), reasonEFSEnd+"32") {
		t.Errorf("missing rootDirectory: %v", err)
	}
	tk.a = &agentv1.Assignment{TaskDefinition: &ecsv1.TaskDefinition{Volumes: []*ecsv1.Volume{vol("fs-87654321", "/")}}}
	f, ok := (&efsHook{t: tk}).prestart(t.Context(), &taskStart{}).(*startFailure)
	if !ok || !f.all || !strings.HasPrefix(f.reason, "ResourceInitializationError: failed to invoke EFS utils commands to set up EFS volumes: ") {
		t.Errorf("efsHook.prestart = %#v", f)
	}

	// The NFS form: the mount is attempted for real; where it cannot succeed (no export,
	// or no kernel NFS client) the task fails with the mount's error, code 32.
	if os.Geteuid() != 0 {
		t.Skip("mounting NFS needs root")
	}
	tk.m.cfg.EFS["fs-0000aaaa"] = "127.0.0.1:/no-such-export"
	_, err = tk.efsSource(vol("fs-0000aaaa", "/sub"))
	if err == nil || !strings.HasPrefix(err.Error(), reasonEFS+"mount.nfs4: mounting 127.0.0.1:/no-such-export/sub failed") || !strings.HasSuffix(err.Error(), reasonEFSEnd+"32") {
		t.Errorf("NFS mount without a server: %v", err)
	}
	t.Logf("NFS mount without a server: %v", err)
}
