package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/services/agent/network"
)

// TestMakeDeps runs tools/deps.sh (make deps, the first step of make run and make test)
// on a machine arranged in temp dirs: PATH holds stubs of the tools it checks, a plugin
// dir the CNI plugins and BERTH_DEPS_ROOT stands for / (no /usr/bin/aws or python3 there).
// With everything there it prints nothing, calls no apt-get and exits 0; with pieces
// missing it prints one line per piece naming the package, and exits 1 — with
// BERTH_NO_INSTALL=1 without installing, and as root after one apt-get update and one
// apt-get install of exactly the missing packages.
func TestMakeDeps(t *testing.T) {
	t.Parallel()
	script := filepath.Join(repoRoot(t), "tools", "deps.sh")
	bin, cni, root := t.TempDir(), t.TempDir(), t.TempDir()
	aptLog := filepath.Join(t.TempDir(), "apt.log")
	stub := func(dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "xtables-nft-multi", "tini-static", "jq", "curl", "chromium"} {
		stub(bin, n, "exit 0")
	}
	stub(bin, "aws", "echo aws-cli/2.15.0 Python/3.11.6")
	stub(bin, "python3", "exit 0") // import boto3 works
	// apt-get records its arguments: the install path must not fix anything, so the
	// check after it still fails.
	stub(bin, "apt-get", `echo "$*" >>`+aptLog)
	// The script checks the plugins the agent runs.
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if want := "for p in " + strings.Join(network.PluginsNeeded(), " ") + "; do"; !strings.Contains(string(src), want) {
		t.Errorf("tools/deps.sh does not check the CNI plugins the agent runs: no line %q", want)
	}
	for _, p := range network.PluginsNeeded() {
		stub(cni, p, "exit 0")
	}
	run := func(t *testing.T, what string, env ...string) (lines []string, code int) {
		t.Helper()
		cmd := exec.Command("/bin/bash", script, what)
		cmd.Env = append([]string{"PATH=" + bin, "BERTH_CNI_PLUGIN_DIR=" + cni, "BERTH_DEPS_ROOT=" + root}, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if stdout.Len() > 0 {
			t.Errorf("deps.sh %s printed on stdout: %q", what, stdout.String())
		}
		out := strings.TrimSpace(stderr.String())
		if out == "" {
			return nil, code
		}
		return strings.Split(out, "\n"), code
	}
	aptCalls := func() []string {
		b, err := os.ReadFile(aptLog)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}

	for _, what := range []string{"run", "test"} {
		for _, env := range [][]string{{"BERTH_NO_INSTALL=1"}, nil} {
			if lines, code := run(t, what, env...); code != 0 || len(lines) != 0 {
				t.Fatalf("deps.sh %s %v with everything there: exit %d, printed %q", what, env, code, lines)
			}
		}
	}
	if calls := aptCalls(); calls != nil {
		t.Fatalf("deps.sh called apt-get with nothing missing: %q", calls)
	}
	// An AWS CLI that ignores AWS_ENDPOINT_URL (before 2.13 / 1.29; Debian 12's awscli)
	// is named in one line, and fails nothing: no Debian package is newer.
	for _, old := range []string{"aws-cli/2.9.19 Python/3.11.2 Linux/6.1.0 source/x86_64.debian.12", "aws-cli/2.12.7 Python/3.11.4"} {
		stub(bin, "aws", "echo "+old)
		lines, code := run(t, "test", "BERTH_NO_INSTALL=1")
		v := strings.Fields(old)[0]
		if code != 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "make test: "+v+" (the aws first on PATH) ignores AWS_ENDPOINT_URL, honoured from AWS CLI 2.13 and 1.29") {
			t.Errorf("deps.sh test with %s: exit %d, printed %q; want exit 0 and one line naming AWS_ENDPOINT_URL", v, code, lines)
		}
	}
	stub(bin, "aws", "echo aws-cli/2.15.0 Python/3.11.6")

	// Take away runc, the portmap plugin, jq and boto3; make aws a version 1.
	for _, p := range []string{filepath.Join(bin, "runc"), filepath.Join(cni, "portmap"), filepath.Join(bin, "jq")} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	stub(bin, "python3", "exit 1")
	stub(bin, "aws", "echo aws-cli/1.45.11 Python/3.11.7")
	runLines := []string{
		"make run: missing runc: containerd's shim runs containers with it; install it with: apt-get install -y runc",
		"make run: missing CNI plugin portmap (in " + cni + "): task networking (networkMode bridge, awsvpc, none) runs it; install it with: apt-get install -y containernetworking-plugins",
	}
	testLines := []string{
		"make test: missing runc: containerd's shim runs containers with it; install it with: apt-get install -y runc",
		"make test: missing CNI plugin portmap (in " + cni + "): task networking (networkMode bridge, awsvpc, none) runs it; install it with: apt-get install -y containernetworking-plugins",
		"make test: missing AWS CLI version 2: the e2e tests drive Berth with it (aws logs tail needs version 2); install it with: apt-get install -y awscli",
		"make test: missing jq: the deploy-tool e2e test's shell loop parses the CLI's JSON with it; install it with: apt-get install -y jq",
		"make test: missing python3 with boto3: the deploy-tool e2e test drives Berth with boto3; install it with: apt-get install -y python3-boto3",
	}
	for what, want := range map[string][]string{"run": runLines, "test": testLines} {
		lines, code := run(t, what, "BERTH_NO_INSTALL=1")
		if code != 1 || !slices.Equal(lines, want) {
			t.Errorf("deps.sh %s, BERTH_NO_INSTALL=1: exit %d, printed\n%s\nwant exit 1 and\n%s", what, code, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	}
	if calls := aptCalls(); calls != nil {
		t.Fatalf("deps.sh called apt-get with BERTH_NO_INSTALL=1: %q", calls)
	}

	lines, code := run(t, "test")
	if os.Geteuid() != 0 {
		// Not root: the same lines, with sudo.
		want := make([]string, len(testLines))
		for i, l := range testLines {
			want[i] = strings.Replace(l, "with: apt-get", "with: sudo apt-get", 1)
		}
		if code != 1 || !slices.Equal(lines, want) {
			t.Errorf("deps.sh test as uid %d: exit %d, printed\n%s\nwant exit 1 and\n%s", os.Geteuid(), code, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		return
	}
	// Root: one update, one install of each missing package once; the stub installs
	// nothing, so the check after it reports them and fails.
	wantCalls := []string{"update -q", "install -y -q runc containernetworking-plugins awscli jq python3-boto3"}
	if calls := aptCalls(); !slices.Equal(calls, wantCalls) {
		t.Errorf("apt-get calls: %q, want %q", calls, wantCalls)
	}
	want := append(append([]string{"make test: installing runc containernetworking-plugins awscli jq python3-boto3 (apt-get; BERTH_NO_INSTALL=1 only reports)"},
		testLines...), "make test: still missing after apt-get install")
	if code != 1 || !slices.Equal(lines, want) {
		t.Errorf("deps.sh test as root: exit %d, printed\n%s\nwant exit 1 and\n%s", code, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
