package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOldAWSCLIEndpoint: an AWS CLI older than 2.13 (Debian 12's awscli, 2.9.19, where
// installed at /usr/bin/aws) ignores AWS_ENDPOINT_URL, so the README's walkthrough would
// reach real AWS; with the shell function the README gives for such a CLI, the same
// command reaches the endpoint. The endpoint is a stand-in answering ListClusters.
func TestOldAWSCLIEndpoint(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	const old = "/usr/bin/aws"
	out, err := exec.Command(old, "--version").CombinedOutput()
	if err != nil {
		t.Skipf("no %s to try (apt-get install awscli installs Debian's): %v", old, err)
	}
	m := regexp.MustCompile(`^aws-cli/(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s --version: %q", old, out)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major > 2 || (major == 2 && minor >= 13) || (major == 1 && minor >= 29) {
		t.Skipf("%s is %s.%s, which honours AWS_ENDPOINT_URL: no old CLI to try", old, m[1], m[2])
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	fn := regexp.MustCompile("(?m)^aws\\(\\) \\{.*\\}$").FindString(string(readme))
	if fn == "" {
		t.Fatal("README.md gives no aws() function for CLIs that ignore AWS_ENDPOINT_URL")
	}

	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"clusterArns":["arn:aws:ecs:us-east-1:000000000000:cluster/stand-in"]}`))
	}))
	t.Cleanup(srv.Close)
	// Only the old CLI on PATH, as on a Debian 12 machine.
	bin := t.TempDir()
	if err := os.Symlink(old, filepath.Join(bin, "aws")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "AWS_ENDPOINT_URL=" + srv.URL,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION=us-east-1", "AWS_PAGER=",
		"AWS_MAX_ATTEMPTS=1", "AWS_EC2_METADATA_DISABLED=true"}
	run := func(script string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/bash", "-c", script)
		cmd.Env = env
		b, _ := cmd.CombinedOutput()
		return string(b)
	}
	list := "aws ecs list-clusters --cli-connect-timeout 2 --cli-read-timeout 2 --output text"
	if got := run(list); calls.Load() != 0 || strings.Contains(got, "stand-in") {
		t.Fatalf("%s reached AWS_ENDPOINT_URL without --endpoint-url (%d calls): %s\nit honours it: the README's warning is wrong", old, calls.Load(), got)
	}
	if got := run(fn + "\n" + list); calls.Load() != 1 || !strings.Contains(got, "stand-in") {
		t.Errorf("with the README's function, %s made %d calls to the endpoint and printed %q; want 1 call and the stand-in cluster", old, calls.Load(), got)
	}
}
