package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// TestTaskRoleCredentialsDev runs a task with a taskRoleArn on `bin/berth dev` (real
// containerd; networkMode host, so the probe reaches the gateway on the host's loopback and
// gets AWS_CONTAINER_CREDENTIALS_FULL_URI; TestTaskRoleCredentialsBridgeDev is the bridge
// case). Inside
// it the test image's aws-probe, with the AWS SDK's default credential chain, gets the
// task role's credentials from the agent's endpoint, calls sts get-caller-identity (the
// assumed-role ARN of the task) and ecs list-clusters through Berth, and reads the task
// metadata endpoint v4. After the task stops its credentials are refused within a minute
// and the endpoint no longer serves them.
func TestTaskRoleCredentialsDev(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	// Credentials live 2 min here (the agent refreshes them at 1 min, so the ones served
	// have a minute left at least: time for the AWS CLI on a loaded machine), so their
	// expiry is seen end to end below.
	const lifetime = 2 * time.Minute
	env := append(devEnv(t, filepath.Join(dir, "data")), "BERTH_TASK_CREDENTIALS_LIFETIME="+lifetime.String())
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	gw := "http://" + envValue(env, "BERTH_GATEWAY_ADDR")
	c := ecs.New(ecs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(gw),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	})
	cli(t, root, env, "bin/berth", "image", "demo")
	const role = "arn:aws:iam::000000000000:role/app-role"
	// The task also gets a Secrets Manager secret and an SSM SecureString: with its
	// credentials, none may appear in any log of the stack (checked at the end).
	const smValue, ssmValue = "sm-v4lue-9f3a71c2", "ssm-v4lue-5d8e02b4"
	secretARN := cli(t, root, env, "aws", "secretsmanager", "create-secret", "--name", "probe/db", "--secret-string", smValue, "--query", "ARN", "--output", "text")
	cli(t, root, env, "aws", "ssm", "put-parameter", "--name", "/probe/key", "--value", ssmValue, "--type", "SecureString")
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "creds", "--task-role-arn", role, "--network-mode", "host",
		"--container-definitions", fmt.Sprintf(`[{"name":"app","image":"%s/berth/demo:latest","memory":128,"command":["aws-probe"],`+
			`"environment":[{"name":"AWS_ENDPOINT_URL","value":"%s"},{"name":"AWS_REGION","value":"us-east-1"}],`+
			`"secrets":[{"name":"DB_PASSWORD","valueFrom":"%s"},{"name":"API_KEY","valueFrom":"/probe/key"}]}]`, reg, gw, secretARN))
	var secrets []string // every secret value the stack handled, for the log check
	secrets = append(secrets, smValue, ssmValue)
	t.Cleanup(func() { checkNoSecretInLogs(t, dir, secrets) })
	out := cli(t, root, env, "aws", "ecs", "run-task", "--task-definition", "creds", "--output", "json")
	var run struct {
		Tasks []struct {
			TaskArn string `json:"taskArn"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil || len(run.Tasks) != 1 {
		t.Fatalf("run-task: %v\n%s", err, out)
	}
	arn := run.Tasks[0].TaskArn
	taskID := arn[strings.LastIndex(arn, "/")+1:]
	describe := func() (string, bool) {
		d, err := c.DescribeTasks(context.Background(), &ecs.DescribeTasksInput{Tasks: []string{arn}})
		if err != nil || len(d.Tasks) != 1 {
			return fmt.Sprint(err), false
		}
		return aws.ToString(d.Tasks[0].LastStatus) + " " + aws.ToString(d.Tasks[0].StoppedReason), aws.ToString(d.Tasks[0].LastStatus) == "STOPPED"
	}
	t.Cleanup(func() {
		_, _ = c.StopTask(context.Background(), &ecs.StopTaskInput{Task: aws.String(arn)})
	})

	// The probe's output, through `berth logs`.
	lines := map[string]string{}
	waitFor(t, func() (string, bool) {
		cmd := exec.Command("bin/berth", "logs", taskID)
		cmd.Dir, cmd.Env = root, env
		b, _ := cmd.CombinedOutput()
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimPrefix(strings.TrimSpace(l), "app: ") // berth logs prefixes the container name
			if k, v, ok := strings.Cut(l, "="); ok {
				lines[k] = v
			}
		}
		if _, failed := lines["error"]; failed {
			t.Fatalf("aws-probe failed: %s\n%s", lines["error"], b)
		}
		if status, stopped := describe(); stopped {
			t.Fatalf("task stopped: %s\n%s", status, b)
		}
		return string(b), strings.Contains(string(b), "probe ok")
	})
	t.Logf("aws-probe output: %q", lines)
	if want := "arn:aws:sts::000000000000:assumed-role/app-role/" + taskID; lines["caller-arn"] != want {
		t.Errorf("caller-arn = %q, want %q", lines["caller-arn"], want)
	}
	if lines["caller-account"] != "000000000000" || lines["credentials-source"] != "CredentialsEndpointProvider" {
		t.Errorf("caller-account %q, credentials-source %q", lines["caller-account"], lines["credentials-source"])
	}
	if !strings.Contains(lines["clusters"], ":cluster/default") {
		t.Errorf("clusters = %q, want the default cluster", lines["clusters"])
	}
	if want := arn + " creds RUNNING containers=1"; lines["metadata-task"] != want {
		t.Errorf("metadata-task = %q, want %q", lines["metadata-task"], want)
	}
	if lines["metadata-container"] != "app RUNNING" || lines["metadata-stats"] != "cpu:true memory:true" || lines["metadata-task-stats"] != "1" {
		t.Errorf("metadata: container %q stats %q task stats %q", lines["metadata-container"], lines["metadata-stats"], lines["metadata-task-stats"])
	}

	// The credentials the task holds, read from the endpoint the probe was given.
	uri := lines["credentials-uri"]
	if !strings.HasPrefix(uri, "http://127.0.0.1:") || !strings.Contains(uri, "/v2/credentials/") {
		t.Fatalf("credentials-uri = %q", uri)
	}
	creds, status := fetchCredentials(t, uri)
	secrets = append(secrets, creds.SecretAccessKey, creds.Token)
	if status != http.StatusOK || !strings.HasPrefix(creds.AccessKeyID, "ASIA") || creds.Token == "" || creds.RoleArn != role {
		t.Fatalf("credentials endpoint: %d %+v", status, creds.RoleArn)
	}
	if _, st := fetchCredentials(t, uri[:strings.LastIndex(uri, "/")+1]+"0123456789abcdef0123456789abcdef"); st != http.StatusBadRequest {
		t.Errorf("a guessed credentials id answered %d, want 400", st)
	}
	stsWith := func(tok string) *sts.Client {
		return sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw), RetryMaxAttempts: 1,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: tok}, nil
			})})
	}
	if _, err := stsWith("not-the-token").GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{}); apiCode(err) != "InvalidClientTokenId" {
		t.Errorf("a wrong session token: %v, want InvalidClientTokenId", err)
	}
	if _, err := stsWith(creds.Token).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatalf("the task's credentials from the host: %v", err)
	}

	// The AWS CLI with the task's session credentials (the current ones: they are short).
	creds, _ = fetchCredentials(t, uri)
	secrets = append(secrets, creds.SecretAccessKey, creds.Token)
	cliEnv := append(append([]string(nil), env...), "AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"AWS_SESSION_TOKEN="+creds.Token, "AWS_ENDPOINT_URL="+gw)
	if got := cli(t, root, cliEnv, "aws", "sts", "get-caller-identity", "--query", "Arn", "--output", "text"); got != lines["caller-arn"] {
		t.Errorf("aws sts get-caller-identity with the task's credentials = %q, want %q", got, lines["caller-arn"])
	}

	// Expired: once the credentials the task holds pass their Expiration the gateway
	// refuses them (SigV4 with X-Amz-Security-Token, InvalidClientTokenId); the endpoint
	// serves the refreshed ones, which work.
	old, _ := fetchCredentials(t, uri)
	secrets = append(secrets, old.SecretAccessKey, old.Token)
	exp, err := time.Parse(time.RFC3339, old.Expiration)
	if err != nil {
		t.Fatalf("credentials Expiration %q: %v", old.Expiration, err)
	}
	if left := time.Until(exp); left <= 0 || left > lifetime+time.Second {
		t.Fatalf("credentials expire in %s, want within their %s lifetime", left, lifetime)
	}
	if _, err := stsWith(old.Token).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatalf("credentials before their expiration: %v", err)
	}
	time.Sleep(time.Until(exp) + time.Second)
	oldSTS := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw), RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: old.AccessKeyID, SecretAccessKey: old.SecretAccessKey, SessionToken: old.Token}, nil
		})})
	if _, err := oldSTS.GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{}); apiCode(err) != "InvalidClientTokenId" {
		t.Errorf("expired credentials: %v, want InvalidClientTokenId", err)
	}
	creds, _ = fetchCredentials(t, uri)
	secrets = append(secrets, creds.SecretAccessKey, creds.Token)
	if creds.AccessKeyID == old.AccessKeyID {
		t.Errorf("the endpoint still serves the expired credentials %s", old.AccessKeyID)
	}
	if _, err := stsWith(creds.Token).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatalf("the refreshed credentials: %v", err)
	}

	// Stop the task: the endpoint forgets them and the gateway refuses them within a minute.
	if _, err := c.StopTask(t.Context(), &ecs.StopTaskInput{Task: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, describe)
	stopped := time.Now()
	waitFor(t, func() (string, bool) {
		_, err := stsWith(creds.Token).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		return fmt.Sprint(err), apiCode(err) == "InvalidClientTokenId"
	})
	t.Logf("credentials refused %s after the task stopped", time.Since(stopped).Round(100*time.Millisecond))
	if _, st := fetchCredentials(t, uri); st != http.StatusBadRequest {
		t.Errorf("credentials endpoint after stop answered %d, want 400", st)
	}
}

// checkNoSecretInLogs fails t when any of secrets appears in a log of the dev stack under
// dir: berth dev's own log (gateway, scheduler, agent, registry) and every *.log file of
// its data dir (containerd's and the stack's own); the tasks' container output, which is
// the tasks' to print, is not read.
func checkNoSecretInLogs(t *testing.T, dir string, secrets []string) {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if p == filepath.Join(dir, "dev.log") || (strings.HasSuffix(p, ".log") && !strings.Contains(p, string(filepath.Separator)+"logs"+string(filepath.Separator))) {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Error("no log of the stack found to check")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for i, s := range secrets {
			if s != "" && strings.Contains(string(b), s) {
				t.Errorf("%s holds secret #%d (%d bytes)", f, i, len(s))
			}
		}
	}
	t.Logf("%d secret values absent from %d log files", len(secrets), len(files))
}

// TestTaskRoleCredentialsBridgeDev runs the aws-probe task of TestTaskRoleCredentialsDev
// without networkMode (bridge, the EC2 default: its own namespace) on `bin/berth dev`: it
// gets AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, which the SDK fetches from 169.254.170.2
// (the host redirects it to the agent, as on ECS), and metadata v4 on 169.254.170.2, then
// calls sts and ecs through Berth with the gateway on loopback: the agent gives the task
// AWS_ENDPOINT_URL=http://169.254.170.2 and relays its API calls to the gateway.
func TestTaskRoleCredentialsBridgeDev(t *testing.T) {
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("containernetworking-plugins not installed in /usr/lib/cni (make deps installs it)")
	}
	dir := t.TempDir()
	// The gateway stays on loopback: the task reaches Berth through the agent's relay on
	// 169.254.170.2 (AWS_ENDPOINT_URL, set by the agent for a task with a role).
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	reg := envValue(env, "BERTH_REGISTRY_ADDR")
	cli(t, root, env, "bin/berth", "image", "demo")
	const role = "arn:aws:iam::000000000000:role/bridge-role"
	cli(t, root, env, "aws", "ecs", "register-task-definition", "--family", "creds-bridge", "--task-role-arn", role,
		"--container-definitions", fmt.Sprintf(`[{"name":"app","image":"%s/berth/demo:latest","memory":128,"command":["aws-probe"],`+
			`"environment":[{"name":"AWS_REGION","value":"us-east-1"}]}]`, reg))
	out := cli(t, root, env, "aws", "ecs", "run-task", "--task-definition", "creds-bridge", "--query", "tasks[0].taskArn", "--output", "text")
	arn := strings.TrimSpace(out)
	taskID := arn[strings.LastIndex(arn, "/")+1:]
	stop := func() {
		cli(t, root, env, "aws", "ecs", "stop-task", "--task", arn, "--output", "text", "--query", "task.desiredStatus")
		waitFor(t, func() (string, bool) {
			st := cli(t, root, env, "aws", "ecs", "describe-tasks", "--tasks", arn, "--query", "tasks[0].lastStatus", "--output", "text")
			return st, strings.TrimSpace(st) == "STOPPED"
		})
	}
	lines := map[string]string{}
	waitFor(t, func() (string, bool) {
		cmd := exec.Command("bin/berth", "logs", taskID)
		cmd.Dir, cmd.Env = root, env
		b, _ := cmd.CombinedOutput()
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "app: "), "="); ok {
				lines[k] = v
			}
		}
		if _, failed := lines["error"]; failed {
			stop()
			t.Fatalf("aws-probe failed: %s\n%s", lines["error"], b)
		}
		return string(b), strings.Contains(string(b), "probe ok")
	})
	t.Logf("aws-probe output: %q", lines)
	if !strings.HasPrefix(lines["credentials-uri"], "/v2/credentials/") || lines["credentials-source"] != "CredentialsEndpointProvider" {
		t.Errorf("credentials-uri %q, credentials-source %q: want the relative URI", lines["credentials-uri"], lines["credentials-source"])
	}
	if lines["endpoint"] != "http://169.254.170.2" {
		t.Errorf("endpoint = %q, want http://169.254.170.2 (set by the agent)", lines["endpoint"])
	}
	if want := "arn:aws:sts::000000000000:assumed-role/bridge-role/" + taskID; lines["caller-arn"] != want {
		t.Errorf("caller-arn = %q, want %q", lines["caller-arn"], want)
	}
	if want := arn + " creds-bridge RUNNING containers=1"; lines["metadata-task"] != want {
		t.Errorf("metadata-task = %q, want %q", lines["metadata-task"], want)
	}
	if !strings.Contains(lines["clusters"], ":cluster/default") {
		t.Errorf("clusters = %q, want the default cluster", lines["clusters"])
	}
	stop()
}

type endpointCredentials struct {
	RoleArn, AccessKeyID, SecretAccessKey, Token, Expiration string
}

func fetchCredentials(t *testing.T, uri string) (endpointCredentials, int) {
	t.Helper()
	resp, err := http.Get(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw struct {
		RoleArn         string `json:"RoleArn"`
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string `json:"SecretAccessKey"`
		Token           string `json:"Token"`
		Expiration      string `json:"Expiration"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	return endpointCredentials(raw), resp.StatusCode
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestAssumeRoleWithSDK: STS AssumeRole issues session credentials of the caller's account
// that the gateway accepts for every service (GetCallerIdentity answers the assumed role,
// ECS answers the account's clusters); a role of another account is AccessDenied, members
// Berth cannot honour are refused, and a wrong session token is refused.
func TestAssumeRoleWithSDK(t *testing.T) {
	const a, b = "111111111111", "222222222222"
	stack := startAPIStack(t, a, b)
	ctx := t.Context()
	cfg := stack.awsConfig(a, "eu-west-1")
	c := sts.NewFromConfig(cfg)
	out, err := c.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + a + ":role/deploy"), RoleSessionName: aws.String("ci-run"), DurationSeconds: aws.Int32(900)})
	if err != nil {
		t.Fatal(err)
	}
	want := "arn:aws:sts::" + a + ":assumed-role/deploy/ci-run"
	cr := out.Credentials
	if aws.ToString(out.AssumedRoleUser.Arn) != want || !strings.HasSuffix(aws.ToString(out.AssumedRoleUser.AssumedRoleId), ":ci-run") ||
		!strings.HasPrefix(aws.ToString(cr.AccessKeyId), "ASIA") || cr.Expiration == nil ||
		cr.Expiration.Before(time.Now().Add(14*time.Minute)) || cr.Expiration.After(time.Now().Add(16*time.Minute)) {
		t.Fatalf("AssumeRole = %s %s %v", aws.ToString(out.AssumedRoleUser.Arn), aws.ToString(cr.AccessKeyId), cr.Expiration)
	}
	session := cfg.Copy()
	session.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: aws.ToString(cr.AccessKeyId), SecretAccessKey: aws.ToString(cr.SecretAccessKey), SessionToken: aws.ToString(cr.SessionToken)}, nil
	})
	id, err := sts.NewFromConfig(session).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(id.Arn) != want || aws.ToString(id.Account) != a {
		t.Fatalf("GetCallerIdentity with the assumed role: %v %v", id, err)
	}
	if _, err := ecs.NewFromConfig(session).ListClusters(ctx, &ecs.ListClustersInput{}); err != nil {
		t.Errorf("ECS with the assumed role: %v", err)
	}
	bad := session.Copy()
	bad.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: aws.ToString(cr.AccessKeyId), SecretAccessKey: aws.ToString(cr.SecretAccessKey), SessionToken: "forged"}, nil
	})
	if _, err := sts.NewFromConfig(bad).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); apiCode(err) != "InvalidClientTokenId" {
		t.Errorf("forged token: %v", err)
	}
	for _, tc := range []struct {
		in   *sts.AssumeRoleInput
		code string
	}{
		{&sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + b + ":role/deploy"), RoleSessionName: aws.String("x1")}, "AccessDenied"},
		{&sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + a + ":role/deploy"), RoleSessionName: aws.String("x")}, "ValidationError"},
		{&sts.AssumeRoleInput{RoleArn: aws.String("deploy"), RoleSessionName: aws.String("x1")}, "ValidationError"},
		{&sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + a + ":role/deploy"), RoleSessionName: aws.String("x1"), DurationSeconds: aws.Int32(60)}, "ValidationError"},
		{&sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + a + ":role/deploy"), RoleSessionName: aws.String("x1"), Policy: aws.String("{}")}, "ValidationError"},
	} {
		if _, err := c.AssumeRole(ctx, tc.in); apiCode(err) != tc.code {
			t.Errorf("AssumeRole(%s, %s): %v, want %s", aws.ToString(tc.in.RoleArn), aws.ToString(tc.in.RoleSessionName), err, tc.code)
		}
	}
}
