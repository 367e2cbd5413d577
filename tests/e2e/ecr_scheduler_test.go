package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestECRStandaloneScheduler runs `berth scheduler --ecr-listen … --ecr-blob-dir …`
// (bin/berth) on its own etcd, behind a gateway: the ECR API answers with the
// registry's host in repositoryUri, and an image pushed with the API's token is pulled
// back, its blobs under --ecr-blob-dir.
func TestECRStandaloneScheduler(t *testing.T) {
	bins := harness.FindBinaries(t)
	dir := t.TempDir()
	client, peer, listen, ecrAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(keyFile, []byte("k1:"+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := "ecr-test-admin-" + rand.Text()
	blobs := filepath.Join(dir, "blobs")
	etcd := &harness.Proc{Name: "etcd", Path: bins.Etcd, LogPath: filepath.Join(dir, "etcd.log"), Args: []string{
		"--name", "e0", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "e0=http://" + peer, "--unsafe-no-fsync", "--log-level", "warn",
	}}
	sched := &harness.Proc{Name: "scheduler", Path: bins.Berth, LogPath: filepath.Join(dir, "scheduler.log"), Args: []string{
		"scheduler", "--etcd-endpoints", "http://" + client, "--listen", listen,
		"--log-dir", filepath.Join(dir, "cwlogs"), "--metrics-dir", filepath.Join(dir, "cwmetrics"), "--secrets-key-file", keyFile,
		"--ecr-listen", ecrAddr, "--ecr-blob-dir", blobs,
	}, Env: []string{"BERTH_ADMIN_TOKEN=" + token}}
	for _, p := range []*harness.Proc{etcd, sched} {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Stop()
			if t.Failed() {
				t.Logf("%s's log (end):\n%s", p.Name, p.LogTail(3000))
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The registry answers 401 to a request without credentials once it is up.
	if err := harness.Poll(ctx, time.Minute, func() error {
		resp, err := http.Get("http://" + ecrAddr + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("GET /v2/: %d", resp.StatusCode)
		}
		return nil
	}); err != nil {
		t.Fatalf("registry on %s: %v", ecrAddr, err)
	}
	const owner = "111111111111"
	admin := func(args ...string) string {
		var out string
		err := harness.Poll(ctx, time.Minute, func() error {
			cmd := exec.CommandContext(ctx, bins.Berth, append([]string{"admin", "--scheduler-url", "http://" + listen}, args...)...)
			cmd.Env = append(os.Environ(), "BERTH_ADMIN_TOKEN="+token)
			b, err := cmd.CombinedOutput()
			out = string(b)
			if err != nil {
				return fmt.Errorf("%v: %s", err, b)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("berth admin %v: %v", args, err)
		}
		return out
	}
	admin("account", "create", owner)
	id, secret, _ := strings.Cut(strings.TrimSpace(admin("key", "create", owner)), "\t")

	gw, err := gateway.New(gateway.Config{SchedulerURL: "http://" + listen, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	stack := &apiStack{url: srv.URL, keys: map[string][2]string{owner: {id, secret}}, registry: ecrAddr, ecrDir: blobs}
	c := ecrModelClient(t, stack, owner)
	created, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("prod/api")})
	if err != nil {
		t.Fatal(err)
	}
	uri := aws.ToString(created.Repository.RepositoryUri)
	if uri != ecrAddr+"/prod/api" {
		t.Fatalf("repositoryUri %s, want %s/prod/api", uri, ecrAddr)
	}
	auth, proxy := ecrLogin(t, ctx, c)
	if proxy != "http://"+ecrAddr {
		t.Fatalf("proxyEndpoint %s", proxy)
	}
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref := must(name.ParseReference(uri + ":v1"))
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref, remote.WithAuth(auth))
	if err != nil || must(pulled.Digest()) != must(img.Digest()) {
		t.Fatalf("pull: %v", err)
	}
	layers, _ := img.Layers()
	ld := must(layers[0].Digest())
	if _, err := os.Stat(filepath.Join(blobs, "sha256", ld.Hex)); err != nil {
		t.Fatalf("layer under --ecr-blob-dir: %v", err)
	}
	// The upload API writes where the registry reads (the same --ecr-blob-dir).
	avail, err := c.BatchCheckLayerAvailability(ctx, &ecr.BatchCheckLayerAvailabilityInput{RepositoryName: aws.String("prod/api"), LayerDigests: []string{ld.String()}})
	if err != nil || len(avail.Layers) != 1 {
		t.Fatalf("BatchCheckLayerAvailability %+v, %v", avail, err)
	}
	config := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{}}`)
	if _, err := uploadLayer(ctx, c, "prod/api", config, 1<<20, sha(config)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(blobs, strings.Replace(sha(config), ":", "/", 1))); err != nil {
		t.Fatalf("uploaded config under --ecr-blob-dir: %v", err)
	}
}

// TestDevECRCrossAccountTask: on `berth dev` (account 000000000000), a task whose image is
// another account's ECR repository ({registry}/111111111111/team/shared:v1) is pulled by
// the agent with the token the scheduler issues for the task's account, as ECS pulls with
// the execution role's credentials: without a repository policy allowing that account
// the task stops with CannotPullContainerError; once the owner's policy allows it
// ecr:BatchGetImage and ecr:GetDownloadUrlForLayer, the same task runs and exits 0.
func TestDevECRCrossAccountTask(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	const owner = "111111111111"
	cli(t, root, env, "bin/berth", "admin", "account", "create", owner)
	id, secret, _ := strings.Cut(cli(t, root, env, "bin/berth", "admin", "key", "create", owner), "\t")
	ownerEnv := append(slices.Clone(env), "AWS_ACCESS_KEY_ID="+strings.TrimSpace(id), "AWS_SECRET_ACCESS_KEY="+strings.TrimSpace(secret))
	awsOwner := func(args ...string) string { t.Helper(); return cli(t, root, ownerEnv, "aws", args...) }
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	uri := awsOwner("ecr", "create-repository", "--repository-name", "team/shared", "--query", "repository.repositoryUri", "--output", "text")
	password := awsOwner("ecr", "get-login-password")
	push := exec.Command(filepath.Join(root, "bin/berth"), "image", "demo", "--username", "AWS", "--password-stdin", uri+":v1")
	push.Dir, push.Env, push.Stdin = root, ownerEnv, strings.NewReader(password+"\n")
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("berth image demo into the owner's repository: %v: %s", err, out)
	}
	cross := envValue(env, "BERTH_ECR_ADDR") + "/" + owner + "/team/shared:v1"
	def := fmt.Sprintf(`[{"name":"app","image":%q,"memory":32,"essential":true,"command":["exit","0"]}]`, cross)
	aws("ecs", "register-task-definition", "--family", "ecr-cross", "--container-definitions", def)
	run := func() string {
		task := aws("ecs", "run-task", "--task-definition", "ecr-cross", "--query", "tasks[0].taskArn", "--output", "text")
		waitFor(t, func() (string, bool) {
			s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
			return s, s == "STOPPED"
		})
		return task
	}
	denied := run()
	if reason := aws("ecs", "describe-tasks", "--tasks", denied, "--query", "tasks[0].stoppedReason", "--output", "text"); !strings.HasPrefix(reason, "CannotPullContainerError") {
		t.Fatalf("task without the owner's permission stopped with %q, want CannotPullContainerError", reason)
	}
	awsOwner("ecr", "set-repository-policy", "--repository-name", "team/shared", "--policy-text",
		`{"Version":"2012-10-17","Statement":[{"Sid":"dev-pull","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":["ecr:BatchGetImage","ecr:GetDownloadUrlForLayer"]}]}`)
	allowed := run()
	if code := aws("ecs", "describe-tasks", "--tasks", allowed, "--query", "tasks[0].containers[0].exitCode", "--output", "text"); code != "0" {
		t.Fatalf("task with the owner's permission: exit code %s: %s", code, aws("ecs", "describe-tasks", "--tasks", allowed))
	}
}
