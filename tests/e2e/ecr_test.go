package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/berthhq/berth/testkit/shapecheck"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ecrLogin calls GetAuthorizationToken with c and returns the Basic credentials its
// token decodes to, and the proxy endpoint.
func ecrLogin(t *testing.T, ctx context.Context, c *ecr.Client) (*authn.Basic, string) {
	t.Helper()
	out, err := c.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		t.Fatal(err)
	}
	d := out.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(d.AuthorizationToken))
	if err != nil {
		t.Fatal(err)
	}
	user, pw, _ := strings.Cut(string(raw), ":")
	if user != "AWS" {
		t.Fatalf("token user %q, want AWS", user)
	}
	if left := time.Until(aws.ToTime(d.ExpiresAt)); left < 11*time.Hour+59*time.Minute || left > 12*time.Hour {
		t.Fatalf("token expires in %v, want 12 h", left)
	}
	return &authn.Basic{Username: user, Password: pw}, aws.ToString(d.ProxyEndpoint)
}

// TestECRWithSDK drives ECR with the AWS SDK for Go v2 through the gateway, and the
// registry with go-containerregistry's client signed in with the SDK's token: the
// repositories' rules and errors, a push and pull, the images as the API lists them,
// tag immutability, one account's token reaching none of another's repositories, and
// DeleteRepository's RepositoryNotEmptyException unless force.
func TestECRWithSDK(t *testing.T) {
	const owner, other = "111111111111", "222222222222"
	stack := startAPIStack(t, owner, other)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Every answer the owner's client gets is checked against the ECR model: required
	// members of successful responses, and each error's __type among the operation's.
	model, err := shapecheck.Load(filepath.Join(repoRoot(t), "api/ecr/ecr-2015-09-21.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := shapecheck.NewRecorder(model)
	t.Cleanup(func() {
		t.Logf("shapecheck: ECR responses checked per operation: %v; errors seen: %v", rec.Checked(), rec.ErrorsSeen())
		if err := rec.Err(); err != nil {
			t.Error(err)
		}
	})
	cfg := stack.awsConfig(owner, "us-east-1")
	cfg.HTTPClient = &http.Client{Transport: rec.Transport(nil)}
	c := ecr.NewFromConfig(cfg)

	_, err = c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("Bad_Name")})
	var ipe *ecrtypes.InvalidParameterException
	if !errors.As(err, &ipe) {
		t.Fatalf("CreateRepository Bad_Name: %v, want InvalidParameterException", err)
	}
	_, err = c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("scanned"),
		ImageScanningConfiguration: &ecrtypes.ImageScanningConfiguration{ScanOnPush: true}})
	if !errors.As(err, &ipe) || !strings.Contains(err.Error(), "scanOnPush") {
		t.Fatalf("scanOnPush=true: %v, want InvalidParameterException naming scanOnPush", err)
	}
	created, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("team/web"),
		ImageTagMutability: ecrtypes.ImageTagMutabilityImmutable, Tags: []ecrtypes.Tag{{Key: aws.String("team"), Value: aws.String("web")}}})
	if err != nil {
		t.Fatal(err)
	}
	uri := aws.ToString(created.Repository.RepositoryUri)
	if uri != stack.registry+"/team/web" || aws.ToString(created.Repository.RepositoryArn) != "arn:aws:ecr:us-east-1:"+owner+":repository/team/web" {
		t.Fatalf("created %+v", created.Repository)
	}
	_, err = c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("team/web")})
	var exists *ecrtypes.RepositoryAlreadyExistsException
	if !errors.As(err, &exists) {
		t.Fatalf("second CreateRepository: %v, want RepositoryAlreadyExistsException", err)
	}
	for i := range 3 {
		if _, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String(fmt.Sprintf("svc%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	pages := ecr.NewDescribeRepositoriesPaginator(c, &ecr.DescribeRepositoriesInput{MaxResults: aws.Int32(2)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Repositories {
			all = append(all, aws.ToString(r.RepositoryName))
		}
	}
	if len(all) != 4 {
		t.Fatalf("DescribeRepositories paged: %v, want 4", all)
	}
	_, err = c.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{"nope"}})
	var rnf *ecrtypes.RepositoryNotFoundException
	if !errors.As(err, &rnf) {
		t.Fatalf("DescribeRepositories nope: %v, want RepositoryNotFoundException", err)
	}

	// Push and pull with the token, as docker would.
	auth, proxy := ecrLogin(t, ctx, c)
	if proxy != "http://"+stack.registry {
		t.Fatalf("proxyEndpoint %q", proxy)
	}
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(uri + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	pulled, err := remote.Image(ref, remote.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pulled.Digest(); d != digest {
		t.Fatalf("pulled %s, pushed %s", d, digest)
	}
	// IMMUTABLE: v1 with another image is refused.
	img2, _ := random.Image(100, 1)
	err = remote.Write(ref, img2, remote.WithAuth(auth))
	var te *transport.Error
	if !errors.As(err, &te) || te.StatusCode != 400 || !strings.Contains(err.Error(), "cannot be overwritten because the repository is immutable") {
		t.Fatalf("second push of v1: %v, want 400 TAG_INVALID", err)
	}
	// Another account's token reaches none of owner's repositories.
	otherAuth, _ := ecrLogin(t, ctx, ecr.NewFromConfig(stack.awsConfig(other, "us-east-1")))
	if _, err := remote.Image(ref, remote.WithAuth(otherAuth)); !errors.As(err, &te) || te.StatusCode != 404 {
		t.Fatalf("other account's pull: %v, want 404 NAME_UNKNOWN", err)
	}

	images, err := c.DescribeImages(ctx, &ecr.DescribeImagesInput{RepositoryName: aws.String("team/web")})
	if err != nil {
		t.Fatal(err)
	}
	if len(images.ImageDetails) != 1 || aws.ToString(images.ImageDetails[0].ImageDigest) != digest.String() ||
		len(images.ImageDetails[0].ImageTags) != 1 || images.ImageDetails[0].ImageTags[0] != "v1" || images.ImageDetails[0].ImagePushedAt == nil {
		t.Fatalf("DescribeImages %+v", images.ImageDetails)
	}
	list, err := c.ListImages(ctx, &ecr.ListImagesInput{RepositoryName: aws.String("team/web")})
	if err != nil || len(list.ImageIds) != 1 || aws.ToString(list.ImageIds[0].ImageTag) != "v1" {
		t.Fatalf("ListImages %+v, %v", list, err)
	}
	got, err := c.BatchGetImage(ctx, &ecr.BatchGetImageInput{RepositoryName: aws.String("team/web"),
		ImageIds: []ecrtypes.ImageIdentifier{{ImageTag: aws.String("v1")}, {ImageTag: aws.String("v9")}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := img.RawManifest()
	if len(got.Images) != 1 || aws.ToString(got.Images[0].ImageManifest) != string(raw) || len(got.Failures) != 1 || got.Failures[0].FailureCode != ecrtypes.ImageFailureCodeImageNotFound {
		t.Fatalf("BatchGetImage images %d failures %+v", len(got.Images), got.Failures)
	}
	// PutImage: the retag of batch-get-image | put-image; the same again is
	// ImageAlreadyExistsException, a manifest of layers never pushed LayersNotFoundException.
	put, err := c.PutImage(ctx, &ecr.PutImageInput{RepositoryName: aws.String("team/web"), ImageManifest: got.Images[0].ImageManifest,
		ImageManifestMediaType: got.Images[0].ImageManifestMediaType, ImageTag: aws.String("release")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(put.Image.ImageId.ImageDigest) != digest.String() {
		t.Fatalf("PutImage digest %s, want %s", aws.ToString(put.Image.ImageId.ImageDigest), digest)
	}
	if pulled, err := remote.Image(ref.Context().Tag("release"), remote.WithAuth(auth)); err != nil || must(pulled.Digest()) != digest {
		t.Fatalf("pull of the PutImage tag: %v", err)
	}
	_, err = c.PutImage(ctx, &ecr.PutImageInput{RepositoryName: aws.String("team/web"), ImageManifest: got.Images[0].ImageManifest, ImageTag: aws.String("release")})
	var already *ecrtypes.ImageAlreadyExistsException
	if !errors.As(err, &already) {
		t.Fatalf("PutImage again: %v, want ImageAlreadyExistsException", err)
	}
	stranger, _ := random.Image(64, 1)
	strangerManifest, _ := stranger.RawManifest()
	_, err = c.PutImage(ctx, &ecr.PutImageInput{RepositoryName: aws.String("team/web"), ImageManifest: aws.String(string(strangerManifest)), ImageTag: aws.String("x")})
	var layers *ecrtypes.LayersNotFoundException
	if !errors.As(err, &layers) {
		t.Fatalf("PutImage of unpushed layers: %v, want LayersNotFoundException", err)
	}
	// Its blobs pushed (here through another repository: blobs are content-addressed),
	// the same PutImage succeeds.
	if err := remote.Write(must(name.ParseReference(stack.registry+"/svc0:s")), stranger, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutImage(ctx, &ecr.PutImageInput{RepositoryName: aws.String("team/web"), ImageManifest: aws.String(string(strangerManifest)), ImageTag: aws.String("x")}); err != nil {
		t.Fatalf("PutImage once its layers are pushed: %v", err)
	}
	_, err = c.PutImage(ctx, &ecr.PutImageInput{RepositoryName: aws.String("team/web"), ImageManifest: got.Images[0].ImageManifest, ImageTag: aws.String("other"),
		ImageDigest: aws.String("sha256:" + strings.Repeat("0", 64))})
	var mismatch *ecrtypes.ImageDigestDoesNotMatchException
	if !errors.As(err, &mismatch) {
		t.Fatalf("PutImage with a wrong imageDigest: %v, want ImageDigestDoesNotMatchException", err)
	}

	// BatchCheckLayerAvailability: a pushed layer with its size, a missing one a failure.
	imgLayers, _ := img.Layers()
	ld, _ := imgLayers[0].Digest()
	lsize, _ := imgLayers[0].Size()
	missing := "sha256:" + strings.Repeat("1", 64)
	avail, err := c.BatchCheckLayerAvailability(ctx, &ecr.BatchCheckLayerAvailabilityInput{RepositoryName: aws.String("team/web"), LayerDigests: []string{ld.String(), missing}})
	if err != nil {
		t.Fatal(err)
	}
	if len(avail.Layers) != 1 || avail.Layers[0].LayerAvailability != ecrtypes.LayerAvailabilityAvailable || aws.ToInt64(avail.Layers[0].LayerSize) != lsize ||
		len(avail.Failures) != 1 || avail.Failures[0].FailureCode != ecrtypes.LayerFailureCodeMissingLayerDigest {
		t.Fatalf("BatchCheckLayerAvailability layers %+v failures %+v", avail.Layers, avail.Failures)
	}
	// A lifecycle policy, stored and read back; a second delete is LifecyclePolicyNotFound.
	policy := `{"rules":[{"rulePriority":1,"description":"keep 10 releases","selection":{"tagStatus":"tagged","tagPrefixList":["v"],"countType":"imageCountMoreThan","countNumber":10},"action":{"type":"expire"}}]}`
	if _, err := c.PutLifecyclePolicy(ctx, &ecr.PutLifecyclePolicyInput{RepositoryName: aws.String("team/web"), LifecyclePolicyText: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	if lp, err := c.GetLifecyclePolicy(ctx, &ecr.GetLifecyclePolicyInput{RepositoryName: aws.String("team/web")}); err != nil || aws.ToString(lp.LifecyclePolicyText) != policy {
		t.Fatalf("GetLifecyclePolicy %+v, %v", lp, err)
	}
	if _, err := c.DeleteLifecyclePolicy(ctx, &ecr.DeleteLifecyclePolicyInput{RepositoryName: aws.String("team/web")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteLifecyclePolicy(ctx, &ecr.DeleteLifecyclePolicyInput{RepositoryName: aws.String("team/web")})
	var noPolicy *ecrtypes.LifecyclePolicyNotFoundException
	if !errors.As(err, &noPolicy) {
		t.Fatalf("second DeleteLifecyclePolicy: %v, want LifecyclePolicyNotFoundException", err)
	}

	_, err = c.DeleteRepository(ctx, &ecr.DeleteRepositoryInput{RepositoryName: aws.String("team/web")})
	var notEmpty *ecrtypes.RepositoryNotEmptyException
	if !errors.As(err, &notEmpty) {
		t.Fatalf("DeleteRepository with an image: %v, want RepositoryNotEmptyException", err)
	}
	del, err := c.BatchDeleteImage(ctx, &ecr.BatchDeleteImageInput{RepositoryName: aws.String("team/web"), ImageIds: []ecrtypes.ImageIdentifier{{ImageDigest: aws.String(digest.String())}}})
	if err != nil || len(del.ImageIds) != 2 { // v1 and release (x stays)
		t.Fatalf("BatchDeleteImage %+v, %v", del, err)
	}
	if _, err := remote.Image(ref, remote.WithAuth(auth)); !errors.As(err, &te) || te.StatusCode != 404 {
		t.Fatalf("pull after BatchDeleteImage: %v, want 404", err)
	}
	if err := remote.Write(ref, img2, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push of v1 after its image was deleted: %v", err)
	}
	if _, err := c.DeleteRepository(ctx, &ecr.DeleteRepositoryInput{RepositoryName: aws.String("team/web"), Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(ref, remote.WithAuth(auth)); !errors.As(err, &te) || te.StatusCode != 404 {
		t.Fatalf("pull after DeleteRepository: %v, want 404 NAME_UNKNOWN", err)
	}
}

// TestECRDockerLoginPush: docker login with the token GetAuthorizationToken answers,
// docker push of an image imported from a tarball (no base image needed), docker pull
// of it again after removing it locally. Skips when docker cannot be used here.
func TestECRDockerLoginPush(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker not installed")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("docker daemon not reachable: %v: %s", err, out)
	}
	const owner = "111111111111"
	stack := startAPIStack(t, owner)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ecr.NewFromConfig(stack.awsConfig(owner, "us-east-1"))
	created, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("docker/hello")})
	if err != nil {
		t.Fatal(err)
	}
	uri := aws.ToString(created.Repository.RepositoryUri)
	auth, proxy := ecrLogin(t, ctx, c)
	cfgDir := t.TempDir() // docker's credentials go here, not into ~/.docker
	docker := func(stdin []byte, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "docker", append([]string{"--config", cfgDir}, args...)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// An image with one file, imported from a tar: no base image to pull.
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	content := []byte("hello from berth ecr " + time.Now().String() + "\n")
	_ = tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(content))})
	_, _ = tw.Write(content)
	_ = tw.Close()
	tag := uri + ":t" + fmt.Sprint(time.Now().UnixNano())
	if out, err := docker(tarball.Bytes(), "import", "-", tag); err != nil {
		t.Skipf("docker import: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = docker(nil, "rmi", "-f", tag) })

	if out, err := docker(nil, "push", tag); err == nil {
		t.Fatalf("docker push without login succeeded: %s", out)
	}
	out, err := docker([]byte(auth.Password), "login", "--username", "AWS", "--password-stdin", strings.TrimPrefix(proxy, "http://"))
	if err != nil {
		if strings.Contains(out, "connection refused") {
			t.Skipf("the docker daemon cannot reach the registry at %s (another network namespace?): %s", proxy, out)
		}
		t.Fatalf("docker login: %v: %s", err, out)
	}
	if out, err := docker(nil, "push", tag); err != nil {
		t.Fatalf("docker push: %v: %s", err, out)
	}
	if out, err := docker(nil, "rmi", tag); err != nil {
		t.Fatalf("docker rmi: %v: %s", err, out)
	}
	if out, err := docker(nil, "pull", tag); err != nil {
		t.Fatalf("docker pull: %v: %s", err, out)
	}
	images, err := c.DescribeImages(ctx, &ecr.DescribeImagesInput{RepositoryName: aws.String("docker/hello")})
	if err != nil || len(images.ImageDetails) != 1 || aws.ToString(images.ImageDetails[0].ImageManifestMediaType) != "application/vnd.docker.distribution.manifest.v2+json" {
		t.Fatalf("DescribeImages after docker push: %+v, %v", images, err)
	}
	_ = os.Remove(filepath.Join(cfgDir, "config.json"))
}

// TestDevECRTaskAfterRestart: on `berth dev`, the AWS CLI creates an ECR repository and
// gets a login password, `berth image demo --password-stdin` pushes the demo image to the
// repositoryUri with it, `berth dev` restarts, and a task whose image is that repositoryUri runs and
// exits 0 (the agent pulls with the token the scheduler gives it): the image survived the
// restart on disk and in etcd. A task whose repositoryCredentials hold a wrong password
// cannot pull.
func TestDevECRTaskAfterRestart(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	dev := startDev(t, root, env, filepath.Join(dir, "dev.log"))
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	uri := aws("ecr", "create-repository", "--repository-name", "team/demo", "--query", "repository.repositoryUri", "--output", "text")
	if uri != envValue(env, "BERTH_ECR_ADDR")+"/team/demo" {
		t.Fatalf("repositoryUri %q, want BERTH_ECR_ADDR/team/demo", uri)
	}
	password := aws("ecr", "get-login-password")
	auth := &authn.Basic{Username: "AWS", Password: password}
	// `berth image demo` pushes the demo image into ECR with the password on stdin, as
	// `docker login --password-stdin` takes it; without it the registry refuses the push.
	berthImage := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "bin/berth"), append([]string{"image", "demo"}, args...)...)
		cmd.Dir, cmd.Env, cmd.Stdin = root, env, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := berthImage("", uri+":v1"); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("berth image demo without a password: %v: %s; want a 401 refusal", err, out)
	}
	if out, err := berthImage(password+"\n", "--username", "AWS", "--password-stdin", uri+":v1"); err != nil {
		t.Fatalf("berth image demo --password-stdin: %v: %s", err, out)
	}
	dst, err := name.ParseReference(uri + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(dst, remote.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()

	dev.stop(t)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))

	if got := aws("ecr", "describe-images", "--repository-name", "team/demo", "--query", "imageDetails[0].imageDigest", "--output", "text"); got != digest.String() {
		t.Fatalf("after restart, describe-images digest %q, want %s", got, digest)
	}
	// The token issued before the restart still signs in (the keyring is in the data dir).
	if _, err := remote.Image(dst, remote.WithAuth(auth)); err != nil {
		t.Fatalf("pull after restart: %v", err)
	}
	// The agent pulls the ECR image with a token of the task's account that the scheduler
	// hands it with the task, as ECS agents pull with the execution role.
	def := fmt.Sprintf(`[{"name":"app","image":%q,"memory":32,"essential":true,"command":["echo","hello-from-ecr","to-stderr"]}]`, uri+":v1")
	aws("ecs", "register-task-definition", "--family", "ecr-demo", "--container-definitions", def)
	task := aws("ecs", "run-task", "--task-definition", "ecr-demo", "--query", "tasks[0].taskArn", "--output", "text")
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	if code := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].containers[0].exitCode", "--output", "text"); code != "0" {
		t.Fatalf("container exit code %s: %s", code, aws("ecs", "describe-tasks", "--tasks", task))
	}
	waitFor(t, func() (string, bool) {
		s := cli(t, root, env, "bin/berth", "logs", task)
		return s, strings.Contains(s, "hello-from-ecr")
	})
	// repositoryCredentials win over that token: a wrong password there is refused by the
	// registry, and the task stops with CannotPullContainerError. (A tag of its own, so
	// no image cached by the pull above could stand in.)
	if err := remote.Tag(dst.Context().Tag("v2"), img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	bad := aws("secretsmanager", "create-secret", "--name", "ecr-wrong",
		"--secret-string", `{"username":"AWS","password":"not-a-token"}`, "--query", "ARN", "--output", "text")
	aws("ecs", "register-task-definition", "--family", "ecr-anon", "--container-definitions",
		fmt.Sprintf(`[{"name":"app","image":%q,"memory":32,"essential":true,"command":["exit","0"],"repositoryCredentials":{"credentialsParameter":%q}}]`, uri+":v2", bad))
	anon := aws("ecs", "run-task", "--task-definition", "ecr-anon", "--query", "tasks[0].taskArn", "--output", "text")
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", anon, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "STOPPED"
	})
	if reason := aws("ecs", "describe-tasks", "--tasks", anon, "--query", "tasks[0].stoppedReason", "--output", "text"); !strings.Contains(reason, "CannotPullContainerError") {
		t.Fatalf("task with a wrong password stopped with %q, want CannotPullContainerError", reason)
	}
}
