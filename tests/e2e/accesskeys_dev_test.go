package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevAccessKeySecretSealed runs `berth dev` with an access key of its own (seeded
// through the admin API's CreateAccessKey, as `berth admin key create` does) and checks
// that the key's secret is nowhere in etcd's data directory (WAL, snapshots, bbolt
// database: it is sealed with the cluster's secrets key before it is written), while the
// AWS CLI signing with the key still passes SigV4 verification and a wrong secret does
// not.
func TestDevAccessKeySecretSealed(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	raw := make([]byte, 20)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secret := "Sealed" + hex.EncodeToString(raw) // 46 printable characters, unique to this run
	env := append(devEnv(t, filepath.Join(dir, "data")),
		"BERTH_ACCESS_KEY_ID=AKIASEALEDTEST00001",
		"BERTH_SECRET_ACCESS_KEY="+secret,
		"AWS_ACCESS_KEY_ID=AKIASEALEDTEST00001",
		"AWS_SECRET_ACCESS_KEY="+secret,
	)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))

	// SigV4 with the key verifies: the gateway resolves the sealed secret.
	cli(t, root, env, "aws", "ecs", "create-cluster", "--cluster-name", "sealed")
	if out := cli(t, root, env, "aws", "ecs", "list-clusters", "--query", "clusterArns", "--output", "text"); !strings.Contains(out, "cluster/sealed") {
		t.Fatalf("list-clusters with the key: %q", out)
	}
	bad := exec.Command("aws", "ecs", "list-clusters")
	bad.Dir, bad.Env = root, append(append([]string{}, env...), "AWS_SECRET_ACCESS_KEY=not-"+secret)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "InvalidSignatureException") {
		t.Errorf("a wrong secret: %v\n%s", err, out)
	}

	// The secret's bytes are in no file etcd keeps (its WAL included).
	etcdDir := filepath.Join(dir, "data", "etcd")
	files, walHoldsRecord := 0, false
	err := filepath.WalkDir(etcdDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the access key's secret in the clear", path)
		}
		if strings.HasSuffix(path, ".wal") && bytes.Contains(b, []byte("AKIASEALEDTEST00001")) {
			walHoldsRecord = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !walHoldsRecord {
		t.Fatalf("scanned %d files under %s, none of them a WAL holding the key's record: the scan proves nothing", files, etcdDir)
	}
}
