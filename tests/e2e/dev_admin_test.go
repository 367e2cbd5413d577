package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
)

// TestDevAdminToken runs `bin/berth dev` and calls AdminService on its real internal
// listener (the URL the dev writes to its data dir): without the dev admin token, and with
// a forged Berth-Account header, ListAccounts and ResolveAccessKey are refused
// (unauthenticated); with the token from the data dir (mode 0600) ListAccounts answers;
// `berth admin account list` finds URL and token by itself; the gateway's /_berth/reset,
// which calls AdminService with the token, still works.
func TestDevAdminToken(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	env := devEnv(t, dataDir)
	dev := startDev(t, root, env, filepath.Join(dir, "dev.log"))

	urlBytes, err := os.ReadFile(filepath.Join(dataDir, "scheduler-url"))
	if err != nil {
		t.Fatalf("berth dev wrote no scheduler-url in its data dir: %v", err)
	}
	schedURL := strings.TrimSpace(string(urlBytes))
	tokenPath := filepath.Join(dataDir, "admin-token")
	fi, err := os.Stat(tokenPath)
	if err != nil {
		t.Fatalf("berth dev wrote no admin-token in its data dir: %v", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("admin-token mode = %v, want 0600", perm)
	}
	tokenBytes, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))

	client := adminv1connect.NewAdminServiceClient(http.DefaultClient, schedURL)
	ctx := t.Context()

	list := func(header map[string]string) (*connect.Response[adminv1.ListAccountsResponse], error) {
		req := connect.NewRequest(&adminv1.ListAccountsRequest{})
		for k, v := range header {
			req.Header().Set(k, v)
		}
		return client.ListAccounts(ctx, req)
	}
	if _, err := list(nil); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("ListAccounts without the token: err = %v, want unauthenticated", err)
	}
	if _, err := list(map[string]string{"Berth-Account": "000000000000", "Berth-Region": "us-east-1"}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("ListAccounts with a forged Berth-Account header: err = %v, want unauthenticated", err)
	}
	if _, err := list(map[string]string{"Authorization": "Bearer berth-admin-not-the-token"}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("ListAccounts with a wrong token: err = %v, want unauthenticated", err)
	}
	if _, err := client.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: "test"})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("ResolveAccessKey (answers the secret) without the token: err = %v, want unauthenticated", err)
	}
	res, err := list(map[string]string{"Authorization": "Bearer " + token})
	if err != nil {
		t.Fatalf("ListAccounts with the dev admin token: %v", err)
	}
	var ids []string
	for _, a := range res.Msg.GetAccounts() {
		ids = append(ids, a.GetId())
	}
	if len(ids) != 1 || ids[0] != "000000000000" {
		t.Errorf("ListAccounts with the token = %v, want the dev account", ids)
	}

	// berth admin, given nothing but the environment's BERTH_DATA_DIR.
	if out := cli(t, root, env, "bin/berth", "admin", "account", "list"); !strings.Contains(out, "000000000000") {
		t.Errorf("berth admin account list:\n%s\nwant the dev account", out)
	}
	// Given another token for the dev's URL, it sends that one and is refused.
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin/berth"), "admin", "--token", "berth-admin-wrong", "account", "list")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "admin credential") {
		t.Errorf("berth admin --token wrong: err = %v, output:\n%s\nwant a refusal naming the admin credential", err, out)
	}

	resp, err := http.Post(dev.endpoint+"/_berth/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /_berth/reset = %d, want 200 (the gateway holds the dev admin token)", resp.StatusCode)
	}
}
