package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
)

// awsCLIv2 returns an AWS CLI version 2 (the one with `aws logs tail`): `aws` on PATH
// if it is one, else Debian's /usr/bin/aws; "" if there is none.
func awsCLIv2() string {
	for _, c := range []string{"aws", "/usr/bin/aws"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out, err := exec.Command(p, "--version").CombinedOutput()
		if err == nil && strings.HasPrefix(string(out), "aws-cli/2") {
			return p
		}
	}
	return ""
}

// cliEnv is the environment of an AWS CLI run with acct's key and nothing of the host's.
func cliEnv(stack *apiStack, acct string) []string {
	k := stack.keys[acct]
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return append(env, "AWS_ACCESS_KEY_ID="+k[0], "AWS_SECRET_ACCESS_KEY="+k[1], "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_PAGER=")
}

// TestLogsWithAWSCLI reads events through the AWS CLI against the gateway:
// get-log-events, filter-log-events with a quoted phrase, and (CLI v2) `aws logs tail`
// and `aws logs tail --follow`, which sees events put after it started.
func TestLogsWithAWSCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; make deps installs it")
	}
	ctx := t.Context()
	c, stack := newLogsClient(t)
	const acct = "123456789012"
	g, s := "/ecs/cli", "web/app/42"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: &g})
	must(err)
	_, err = c.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: &g, LogStreamName: &s})
	must(err)
	put := func(msgs ...string) {
		t.Helper()
		var evs []cwtypes.InputLogEvent
		for _, m := range msgs {
			evs = append(evs, cwtypes.InputLogEvent{Timestamp: aws.Int64(time.Now().UnixMilli()), Message: aws.String(m)})
		}
		_, err := c.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: &g, LogStreamName: &s, LogEvents: evs})
		must(err)
	}
	put("hello from the app", "user alice logged in", "user bob logged out")

	run := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--endpoint-url", stack.url, "--region", "us-east-1", "--output", "json")...)
		cmd.Env = cliEnv(stack, acct)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	var ge struct {
		Events []struct {
			Message   string
			Timestamp int64
		}
		NextForwardToken string
	}
	must(json.Unmarshal([]byte(run("aws", "logs", "get-log-events", "--log-group-name", g, "--log-stream-name", s, "--start-from-head")), &ge))
	if len(ge.Events) != 3 || ge.Events[0].Message != "hello from the app" || !strings.HasPrefix(ge.NextForwardToken, "f/") {
		t.Fatalf("get-log-events: %+v", ge)
	}
	var fe struct {
		Events []struct{ Message, LogStreamName string }
	}
	must(json.Unmarshal([]byte(run("aws", "logs", "filter-log-events", "--log-group-name", g, "--filter-pattern", `"logged in"`)), &fe))
	if len(fe.Events) != 1 || fe.Events[0].Message != "user alice logged in" || fe.Events[0].LogStreamName != s {
		t.Fatalf("filter-log-events: %+v", fe)
	}

	v2 := awsCLIv2()
	if v2 == "" {
		t.Skip("`aws logs tail` needs AWS CLI version 2 (Debian's awscli package; make deps installs it); get-log-events and filter-log-events passed")
	}
	if out := run(v2, "logs", "tail", g, "--since", "1h", "--format", "short"); !strings.Contains(out, "user bob logged out") {
		t.Fatalf("aws logs tail: %q", out)
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(fctx, v2, "logs", "tail", g, "--follow", "--since", "1h", "--endpoint-url", stack.url, "--region", "us-east-1")
	cmd.Env = cliEnv(stack, acct)
	stdout, err := cmd.StdoutPipe()
	must(err)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	must(cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	want := []string{"hello from the app", "user bob logged out", "after follow started"}
	putLater := time.After(2 * time.Second)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("aws logs tail --follow ended; still waiting for %q; stderr: %s", want, errb.String())
			}
			if strings.Contains(l, want[0]) {
				if !strings.Contains(l, s) {
					t.Errorf("tail line %q does not name the stream %s", l, s)
				}
				want = want[1:]
			}
		case <-putLater:
			put("after follow started")
		case <-fctx.Done():
			t.Fatalf("aws logs tail --follow: still waiting for %q; stderr: %s", want, errb.String())
		}
	}
	fmt.Fprintln(t.Output(), "aws logs tail --follow printed the event put after it started")
}
