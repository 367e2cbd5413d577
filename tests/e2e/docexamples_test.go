package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// docCommands returns the commands of the first ```sh block of the doc at path, one per
// command (continuation lines joined), comments dropped.
func docCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block", path)
	}
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	cur := ""
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, " #")
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur += cont + " "
			continue
		}
		if cur += line; strings.TrimSpace(cur) != "" {
			cmds = append(cmds, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return cmds
}

// TestLoadBalancingDocExampleWithCLI runs the `aws elbv2` commands of
// docs/load-balancing.md's first example, as written, with the AWS CLI against the
// gateway (LB=$(…) and TG=$(…) set the variables the later commands use): every one must
// be accepted, so the example a reader copies runs (issue 35: its target group once had
// a 5 s interval with the default 5 s timeout, which ELBv2 refuses).
func TestLoadBalancingDocExampleWithCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (aws) is not installed; make deps installs awscli")
	}
	const acct = "111111111111"
	st := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k := st.keys[acct]
	env := append(os.Environ(), "AWS_ENDPOINT_URL="+st.url, "AWS_ACCESS_KEY_ID="+k[0], "AWS_SECRET_ACCESS_KEY="+k[1],
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	vars := map[string]string{}
	ran := 0
	for _, c := range docCommands(t, "../../docs/load-balancing.md") {
		assign := ""
		if name, inner, ok := strings.Cut(c, "=$("); ok && !strings.Contains(name, " ") {
			assign, c = name, strings.TrimSuffix(inner, ")")
		}
		if !strings.HasPrefix(c, "aws elbv2 ") {
			continue
		}
		// The words of the command; the example quotes only --query's JMESPath.
		var args []string
		for i, part := range strings.Split(c, "'") {
			if i%2 == 1 {
				args = append(args, part)
				continue
			}
			args = append(args, strings.Fields(part)...)
		}
		for i := range args {
			for name, v := range vars {
				args[i] = strings.ReplaceAll(args[i], "$"+name, v)
			}
		}
		cmd := exec.CommandContext(ctx, "aws", args[1:]...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("the documented %q fails: %v\n%s%s", c, err, out, stderr)
		}
		ran++
		if assign != "" {
			vars[assign] = strings.TrimSpace(string(out))
		}
	}
	if ran != 3 || !strings.HasPrefix(vars["LB"], "arn:aws:elasticloadbalancing:") || !strings.HasPrefix(vars["TG"], "arn:aws:elasticloadbalancing:") {
		t.Fatalf("ran %d aws elbv2 commands of the example (want 3), LB=%q TG=%q", ran, vars["LB"], vars["TG"])
	}
	cmd := exec.CommandContext(ctx, "aws", "elbv2", "describe-listeners", "--load-balancer-arn", vars["LB"], "--output", "json")
	cmd.Env = env
	out, err := cmd.Output()
	var l struct{ Listeners []struct{ Port int } }
	if err != nil || json.Unmarshal(out, &l) != nil || len(l.Listeners) != 1 || l.Listeners[0].Port != 8000 {
		t.Errorf("the example's listener: %v %s", err, out)
	}
}
