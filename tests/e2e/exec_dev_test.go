package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/ssmchannel"
	"github.com/coder/websocket"
)

// execNotEnabled is AWS's InvalidParameterException text for ExecuteCommand on a task
// run without enableExecuteCommand or whose agent is not running.
const execNotEnabled = "The execute command failed because execute command was not enabled when the task was run or the execute command agent isn’t running."

// TestDevExecuteCommand runs `berth dev`, a task with --enable-execute-command, and
// `aws ecs execute-command --interactive` with AWS's session-manager-plugin built from its
// public source (issue 37): the plugin joins the session at the streamUrl the gateway
// serves, completes the data channel handshake, and prints the command's output, which
// ran in the container through the agent. The task shows the ExecuteCommandAgent managed
// agent RUNNING, and the gateway refuses with AWS's errors a task run without the flag,
// an unknown container, a non-interactive call and a stopped task.
func TestDevExecuteCommand(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	pluginDir := sessionManagerPlugin(t)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	logPath := filepath.Join(dir, "dev.log")
	startDev(t, root, env, logPath)
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	// The CLI calls the gateway itself here: the shape-checking proxy relays no WebSocket,
	// and the streamUrl names the address ExecuteCommand was called at.
	env = append(env, "AWS_ENDPOINT_URL=http://"+envValue(env, "BERTH_GATEWAY_ADDR"),
		"PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	def, _ := json.Marshal([]map[string]any{{
		"name": "app", "image": image, "memory": 32, "command": []string{"sleep", "600"}, "essential": true,
	}})
	aws("ecs", "register-task-definition", "--family", "exec", "--container-definitions", string(def))
	task := aws("ecs", "run-task", "--task-definition", "exec", "--enable-execute-command", "--query", "tasks[0].taskArn", "--output", "text")
	plain := aws("ecs", "run-task", "--task-definition", "exec", "--query", "tasks[0].taskArn", "--output", "text")
	defer aws("ecs", "stop-task", "--task", plain)
	for _, arn := range []string{task, plain} {
		waitFor(t, func() (string, bool) {
			s := aws("ecs", "describe-tasks", "--tasks", arn, "--query", "tasks[0].lastStatus", "--output", "text")
			return s, s == "RUNNING"
		})
	}
	agent := aws("ecs", "describe-tasks", "--tasks", task, "--query",
		"tasks[0].[enableExecuteCommand,containers[0].managedAgents[0].name,containers[0].managedAgents[0].lastStatus]", "--output", "text")
	if agent != "True\tExecuteCommandAgent\tRUNNING" {
		t.Errorf("enableExecuteCommand and managed agent of the task: %q, want True, ExecuteCommandAgent, RUNNING", agent)
	}

	// The command: the demo image has one program, whose echo mode prints its first
	// argument to stdout.
	out, err := execCommand(t, root, env, "--cluster", "default", "--task", task, "--container", "app",
		"--interactive", "--command", "/berth-testimage echo hello-from-exec to-stderr")
	if err != nil {
		t.Fatalf("aws ecs execute-command: %v\n%s", err, out)
	}
	for _, want := range []string{"Starting session with SessionId: ecs-execute-command-", "hello-from-exec", "to-stderr", "Exiting session with sessionId"} {
		if !strings.Contains(out, want) {
			t.Errorf("execute-command output lacks %q:\n%s", want, out)
		}
	}
	// Typing: what the plugin reads from its stdin reaches the command through its
	// terminal (which echoes it); ^D at the start of a line is the end of input.
	typed, err := execCommandInput(t, root, env, "hello-typed\n\x04", "--task", task, "--container", "app",
		"--interactive", "--command", "/berth-testimage read-stdin")
	if err != nil {
		t.Fatalf("aws ecs execute-command read-stdin: %v\n%s", err, typed)
	}
	for _, want := range []string{"reading stdin", "hello-typed", "stdin ended"} {
		if !strings.Contains(typed, want) {
			t.Errorf("typed session output lacks %q:\n%s", want, typed)
		}
	}
	// A join with a token ExecuteCommand did not issue: the gateway answers the plugin's
	// protocol with channel_closed and the reason, as the plugin prints it.
	if reason := joinWithToken(t, envValue(env, "BERTH_GATEWAY_ADDR"), "ecs-execute-command-00000000000000000", "000000000000.us-east-1.not-a-token"); !strings.Contains(reason, "The session token is not valid or has expired.") {
		t.Errorf("join with a bad token: channel_closed %q, want the token refused", reason)
	}
	logs, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logs), "ecs:ExecuteCommand") || !strings.Contains(string(logs), "hello-from-exec") {
		t.Errorf("berth dev's log has no ecs:ExecuteCommand event naming the command")
	}

	refused := func(want string, args ...string) {
		t.Helper()
		out, err := execCommand(t, root, env, args...)
		if err == nil || !strings.Contains(out, "InvalidParameterException") || !strings.Contains(out, want) {
			t.Errorf("execute-command %v: err %v, output %q; want InvalidParameterException %q", args, err, out, want)
		}
	}
	refused(execNotEnabled, "--task", plain, "--interactive", "--command", "/berth-testimage env")
	refused("The container nope was not found", "--task", task, "--container", "nope", "--interactive", "--command", "/berth-testimage env")
	refused("Interactive is the only mode supported currently.", "--task", task, "--non-interactive", "--command", "/berth-testimage env")
	aws("ecs", "stop-task", "--task", task)
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "[tasks[0].lastStatus,tasks[0].containers[0].managedAgents[0].lastStatus]", "--output", "text")
		return s, s == "STOPPED\tSTOPPED"
	})
	refused(execNotEnabled, "--task", task, "--interactive", "--command", "/berth-testimage env")
}

// joinWithToken dials the data channel of sessionID at the gateway as the plugin does,
// sends token, and returns the Output of the channel_closed message it gets.
func joinWithToken(t *testing.T, gateway, sessionID, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+gateway+"/v1/data-channel/"+sessionID+"?role=publish_subscribe", nil)
	if err != nil {
		t.Fatalf("dialing the data channel: %v", err)
	}
	defer c.CloseNow()
	open, _ := json.Marshal(ssmchannel.OpenDataChannelInput{MessageSchemaVersion: "1.0", RequestID: "r", TokenValue: token, ClientID: "c", ClientVersion: "test"})
	if err := c.Write(ctx, websocket.MessageText, open); err != nil {
		t.Fatal(err)
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("reading the data channel: %v", err)
		}
		m, err := ssmchannel.Unmarshal(b)
		if err != nil {
			t.Fatalf("a message the plugin could not read: %v", err)
		}
		if m.MessageType == ssmchannel.ChannelClosed {
			var cc ssmchannel.ChannelClosedContent
			if err := json.Unmarshal(m.Payload, &cc); err != nil {
				t.Fatal(err)
			}
			return cc.Output
		}
	}
}

// execCommand runs `aws ecs execute-command` with args and returns its stdout and stderr.
// Its stdin stays open (a pipe nothing is written to) until it exits: the plugin ends its
// session when stdin reaches its end.
func execCommand(t *testing.T, root string, env []string, args ...string) (string, error) {
	t.Helper()
	return execCommandInput(t, root, env, "", args...)
}

// execCommandInput is execCommand with input written to its stdin (which then stays open).
func execCommandInput(t *testing.T, root string, env []string, input string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "aws", append([]string{"ecs", "execute-command"}, args...)...)
	cmd.Dir = root
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if input != "" {
		if _, err := io.WriteString(stdin, input); err != nil {
			t.Errorf("writing to execute-command's stdin: %v", err)
		}
	}
	err = cmd.Wait()
	return out.String(), err
}
