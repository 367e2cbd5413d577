package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
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

	"github.com/berthhq/berth/testkit/registrytest"
	"github.com/berthhq/berth/testkit/shapecheck"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// ecrModelClient returns an ECR client of acct whose every answer is checked against
// the ECR model (required members, each error's __type among the operation's).
func ecrModelClient(t *testing.T, stack *apiStack, acct string) *ecr.Client {
	t.Helper()
	model, err := shapecheck.Load(filepath.Join(repoRoot(t), "api/ecr/ecr-2015-09-21.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := shapecheck.NewRecorder(model)
	t.Cleanup(func() {
		if err := rec.Err(); err != nil {
			t.Error(err)
		}
	})
	cfg := stack.awsConfig(acct, "us-east-1")
	cfg.HTTPClient = &http.Client{Transport: rec.Transport(nil)}
	return ecr.NewFromConfig(cfg)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// uploadLayer uploads b through InitiateLayerUpload / UploadLayerPart (parts of
// partSize) and answers CompleteLayerUpload's result for digest.
func uploadLayer(ctx context.Context, c *ecr.Client, repo string, b []byte, partSize int, digest string) (*ecr.CompleteLayerUploadOutput, error) {
	up, err := c.InitiateLayerUpload(ctx, &ecr.InitiateLayerUploadInput{RepositoryName: aws.String(repo)})
	if err != nil {
		return nil, err
	}
	for first := 0; first < len(b); first += partSize {
		last := min(first+partSize, len(b)) - 1
		out, err := c.UploadLayerPart(ctx, &ecr.UploadLayerPartInput{RepositoryName: aws.String(repo), UploadId: up.UploadId,
			PartFirstByte: aws.Int64(int64(first)), PartLastByte: aws.Int64(int64(last)), LayerPartBlob: b[first : last+1]})
		if err != nil {
			return nil, err
		}
		if aws.ToInt64(out.LastByteReceived) != int64(last) {
			return nil, fmt.Errorf("lastByteReceived %d, want %d", aws.ToInt64(out.LastByteReceived), last)
		}
	}
	return c.CompleteLayerUpload(ctx, &ecr.CompleteLayerUploadInput{RepositoryName: aws.String(repo), UploadId: up.UploadId, LayerDigests: []string{digest}})
}

// TestECRLayerUploadAPI pushes an image with ECR's layer-upload API through the gateway
// (the AWS SDK for Go v2): a layer uploaded in two parts, each refusal of ECR's
// (InvalidLayerPartException, InvalidLayerException leaving nothing behind,
// LayerAlreadyExistsException, EmptyUploadException, LayerPartTooSmallException,
// UploadNotFoundException), BatchCheckLayerAvailability, PutImage of a manifest of the
// uploaded blobs, GetDownloadUrlForLayer's URL downloaded and compared, and the image
// pulled from the registry with go-containerregistry.
func TestECRLayerUploadAPI(t *testing.T) {
	const owner = "111111111111"
	stack := startAPIStack(t, owner)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ecrModelClient(t, stack, owner)
	const repo = "up/layers"
	if _, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String(repo)}); err != nil {
		t.Fatal(err)
	}

	layer := make([]byte, 5<<20+4321)
	_, _ = rand.Read(layer)
	digest := sha(layer)

	up, err := c.InitiateLayerUpload(ctx, &ecr.InitiateLayerUploadInput{RepositoryName: aws.String(repo)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(up.PartSize) != 10<<20 || len(aws.ToString(up.UploadId)) != 36 {
		t.Fatalf("InitiateLayerUpload %+v", up)
	}
	part1 := layer[:5<<20]
	if _, err := c.UploadLayerPart(ctx, &ecr.UploadLayerPartInput{RepositoryName: aws.String(repo), UploadId: up.UploadId,
		PartFirstByte: aws.Int64(0), PartLastByte: aws.Int64(int64(len(part1) - 1)), LayerPartBlob: part1}); err != nil {
		t.Fatal(err)
	}
	// A part that does not follow the bytes received, or whose size is not its range's.
	var ilp *ecrtypes.InvalidLayerPartException
	_, err = c.UploadLayerPart(ctx, &ecr.UploadLayerPartInput{RepositoryName: aws.String(repo), UploadId: up.UploadId,
		PartFirstByte: aws.Int64(10), PartLastByte: aws.Int64(19), LayerPartBlob: layer[10:20]})
	if !errors.As(err, &ilp) {
		t.Fatalf("UploadLayerPart out of order: %v, want InvalidLayerPartException", err)
	}
	_, err = c.UploadLayerPart(ctx, &ecr.UploadLayerPartInput{RepositoryName: aws.String(repo), UploadId: up.UploadId,
		PartFirstByte: aws.Int64(5 << 20), PartLastByte: aws.Int64(5<<20 + 99), LayerPartBlob: layer[5<<20 : 5<<20+10]})
	if !errors.As(err, &ilp) {
		t.Fatalf("UploadLayerPart of a size not its range's: %v, want InvalidLayerPartException", err)
	}
	if _, err := c.UploadLayerPart(ctx, &ecr.UploadLayerPartInput{RepositoryName: aws.String(repo), UploadId: up.UploadId,
		PartFirstByte: aws.Int64(5 << 20), PartLastByte: aws.Int64(int64(len(layer) - 1)), LayerPartBlob: layer[5<<20:]}); err != nil {
		t.Fatal(err)
	}
	// A wrong digest: InvalidLayerException, and the upload is gone with its bytes.
	wrong := "sha256:" + strings.Repeat("ab", 32)
	_, err = c.CompleteLayerUpload(ctx, &ecr.CompleteLayerUploadInput{RepositoryName: aws.String(repo), UploadId: up.UploadId, LayerDigests: []string{wrong}})
	var ile *ecrtypes.InvalidLayerException
	if !errors.As(err, &ile) {
		t.Fatalf("CompleteLayerUpload with a wrong digest: %v, want InvalidLayerException", err)
	}
	var unf *ecrtypes.UploadNotFoundException
	_, err = c.CompleteLayerUpload(ctx, &ecr.CompleteLayerUploadInput{RepositoryName: aws.String(repo), UploadId: up.UploadId, LayerDigests: []string{digest}})
	if !errors.As(err, &unf) {
		t.Fatalf("CompleteLayerUpload after the refusal: %v, want UploadNotFoundException", err)
	}
	left, _ := filepath.Glob(filepath.Join(stack.ecrDir, "uploads", "*"))
	if len(left) != 0 {
		t.Fatalf("files left of the refused upload: %v", left)
	}
	if _, err := os.Stat(filepath.Join(stack.ecrDir, "sha256", strings.TrimPrefix(digest, "sha256:"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("blob of the refused upload: %v", err)
	}
	avail, err := c.BatchCheckLayerAvailability(ctx, &ecr.BatchCheckLayerAvailabilityInput{RepositoryName: aws.String(repo), LayerDigests: []string{digest}})
	if err != nil || len(avail.Failures) != 1 || avail.Failures[0].FailureCode != ecrtypes.LayerFailureCodeMissingLayerDigest {
		t.Fatalf("availability of the refused layer: %+v, %v", avail, err)
	}

	// The same layer, right, in two parts (5 MiB and the rest).
	done, err := uploadLayer(ctx, c, repo, layer, 5<<20, digest)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(done.LayerDigest) != digest {
		t.Fatalf("CompleteLayerUpload digest %s, want %s", aws.ToString(done.LayerDigest), digest)
	}
	avail, err = c.BatchCheckLayerAvailability(ctx, &ecr.BatchCheckLayerAvailabilityInput{RepositoryName: aws.String(repo), LayerDigests: []string{digest}})
	if err != nil || len(avail.Layers) != 1 || avail.Layers[0].LayerAvailability != ecrtypes.LayerAvailabilityAvailable || aws.ToInt64(avail.Layers[0].LayerSize) != int64(len(layer)) {
		t.Fatalf("availability of the uploaded layer: %+v, %v", avail, err)
	}
	var exists *ecrtypes.LayerAlreadyExistsException
	if _, err := uploadLayer(ctx, c, repo, layer, 10<<20, digest); !errors.As(err, &exists) {
		t.Fatalf("the same layer again: %v, want LayerAlreadyExistsException", err)
	}
	var empty *ecrtypes.EmptyUploadException
	if _, err := uploadLayer(ctx, c, repo, nil, 1, digest); !errors.As(err, &empty) {
		t.Fatalf("an upload of no parts: %v, want EmptyUploadException", err)
	}
	small := []byte("two parts, the first under 5 MiB")
	var tooSmall *ecrtypes.LayerPartTooSmallException
	if _, err := uploadLayer(ctx, c, repo, small, 10, sha(small)); !errors.As(err, &tooSmall) {
		t.Fatalf("parts under 5 MiB: %v, want LayerPartTooSmallException", err)
	}
	_, err = c.UploadLayerPart(ctx, &ecr.UploadLayerPartInput{RepositoryName: aws.String(repo), UploadId: aws.String("00000000-0000-4000-8000-000000000000"),
		PartFirstByte: aws.Int64(0), PartLastByte: aws.Int64(0), LayerPartBlob: []byte{1}})
	if !errors.As(err, &unf) {
		t.Fatalf("UploadLayerPart of an unknown upload: %v, want UploadNotFoundException", err)
	}

	// Not yet part of an image: LayerInaccessibleException; never uploaded: LayersNotFoundException.
	var inacc *ecrtypes.LayerInaccessibleException
	if _, err := c.GetDownloadUrlForLayer(ctx, &ecr.GetDownloadUrlForLayerInput{RepositoryName: aws.String(repo), LayerDigest: aws.String(digest)}); !errors.As(err, &inacc) {
		t.Fatalf("GetDownloadUrlForLayer of an unassociated layer: %v, want LayerInaccessibleException", err)
	}
	var lnf *ecrtypes.LayersNotFoundException
	if _, err := c.GetDownloadUrlForLayer(ctx, &ecr.GetDownloadUrlForLayerInput{RepositoryName: aws.String(repo), LayerDigest: aws.String(wrong)}); !errors.As(err, &lnf) {
		t.Fatalf("GetDownloadUrlForLayer of a missing layer: %v, want LayersNotFoundException", err)
	}

	// The config, one part; then the manifest with PutImage: an image made by the API alone.
	config := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["` + digest + `"]},"config":{}}`)
	if _, err := uploadLayer(ctx, c, repo, config, 1<<20, sha(config)); err != nil {
		t.Fatal(err)
	}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config), "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest, "size": len(layer)}},
	})
	if _, err := c.PutImage(ctx, &ecr.PutImageInput{RepositoryName: aws.String(repo), ImageManifest: aws.String(string(manifest)), ImageTag: aws.String("api")}); err != nil {
		t.Fatal(err)
	}
	dl, err := c.GetDownloadUrlForLayer(ctx, &ecr.GetDownloadUrlForLayerInput{RepositoryName: aws.String(repo), LayerDigest: aws.String(digest)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(dl.LayerDigest) != digest || !strings.HasPrefix(aws.ToString(dl.DownloadUrl), "http://"+stack.registry+"/") {
		t.Fatalf("GetDownloadUrlForLayer %+v", dl)
	}
	resp, err := http.Get(aws.ToString(dl.DownloadUrl))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, layer) {
		t.Fatalf("download: status %d, %d bytes (want %d), equal %v, %v", resp.StatusCode, len(got), len(layer), bytes.Equal(got, layer), err)
	}
	// A URL whose token was altered is refused.
	if resp, err := http.Get(aws.ToString(dl.DownloadUrl) + "x"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("altered URL: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}

	// The registry serves the image the API pushed.
	auth, _ := ecrLogin(t, ctx, c)
	pulled, err := remote.Image(must(name.ParseReference(stack.registry+"/"+repo+":api")), remote.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := pulled.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("pulled layers %d, %v", len(ls), err)
	}
	rc, err := ls[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, layer) {
		t.Fatalf("pulled layer: %d bytes, %v", len(got), err)
	}
}

// TestECRLifecyclePolicyPreview previews a lifecycle policy through the gateway (AWS SDK
// for Go v2): the images it would expire, paged and filtered, while every image stays.
func TestECRLifecyclePolicyPreview(t *testing.T) {
	const owner = "111111111111"
	stack := startAPIStack(t, owner)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ecrModelClient(t, stack, owner)
	const repo = "preview/web"
	if _, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String(repo)}); err != nil {
		t.Fatal(err)
	}
	var pnf *ecrtypes.LifecyclePolicyPreviewNotFoundException
	if _, err := c.GetLifecyclePolicyPreview(ctx, &ecr.GetLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo)}); !errors.As(err, &pnf) {
		t.Fatalf("GetLifecyclePolicyPreview before any: %v, want LifecyclePolicyPreviewNotFoundException", err)
	}
	var lnf *ecrtypes.LifecyclePolicyNotFoundException
	if _, err := c.StartLifecyclePolicyPreview(ctx, &ecr.StartLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo)}); !errors.As(err, &lnf) {
		t.Fatalf("StartLifecyclePolicyPreview of no policy: %v, want LifecyclePolicyNotFoundException", err)
	}
	var ipe *ecrtypes.InvalidParameterException
	if _, err := c.StartLifecyclePolicyPreview(ctx, &ecr.StartLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo),
		LifecyclePolicyText: aws.String(`{"rules":[{"rulePriority":1,"selection":{"tagStatus":"any","countType":"imageCountMoreThan","countNumber":1},"action":{"type":"archive"}}]}`)}); !errors.As(err, &ipe) {
		t.Fatalf("StartLifecyclePolicyPreview of a bad policy: %v, want InvalidParameterException", err)
	}

	// Four images: three tagged release-N (pushed in order), one untagged.
	auth, _ := ecrLogin(t, ctx, c)
	var digests []string
	for i := range 4 {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		tag := fmt.Sprintf("release-%d", i)
		ref := must(name.ParseReference(stack.registry + "/" + repo + ":" + tag))
		if i == 3 {
			ref = must(name.ParseReference(stack.registry + "/" + repo + "@" + must(img.Digest()).String()))
		}
		if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, must(img.Digest()).String())
		time.Sleep(20 * time.Millisecond) // distinct push times, so "most recent" is one image
	}
	policy := `{"rules":[` +
		`{"rulePriority":1,"description":"one release","selection":{"tagStatus":"tagged","tagPrefixList":["release-"],"countType":"imageCountMoreThan","countNumber":1},"action":{"type":"expire"}},` +
		`{"rulePriority":2,"description":"untagged after a day","selection":{"tagStatus":"untagged","countType":"sinceImagePushed","countUnit":"days","countNumber":1},"action":{"type":"expire"}}]}`
	start, err := c.StartLifecyclePolicyPreview(ctx, &ecr.StartLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo), LifecyclePolicyText: aws.String(policy)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(start.LifecyclePolicyText) != policy || start.Status == "" {
		t.Fatalf("StartLifecyclePolicyPreview %+v", start)
	}
	var prev *ecr.GetLifecyclePolicyPreviewOutput
	deadline := time.Now().Add(60 * time.Second)
	for {
		prev, err = c.GetLifecyclePolicyPreview(ctx, &ecr.GetLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo)})
		if err != nil {
			t.Fatal(err)
		}
		if prev.Status == ecrtypes.LifecyclePolicyPreviewStatusComplete || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if prev.Status != ecrtypes.LifecyclePolicyPreviewStatusComplete {
		t.Fatalf("preview status %s", prev.Status)
	}
	// release-0 and release-1 go (rule 1 keeps the newest, release-2); the untagged image
	// is younger than a day.
	want := map[string]bool{digests[0]: true, digests[1]: true}
	if prev.Summary == nil || aws.ToInt32(prev.Summary.ExpiringImageTotalCount) != 2 || len(prev.PreviewResults) != 2 {
		t.Fatalf("preview summary %+v results %d", prev.Summary, len(prev.PreviewResults))
	}
	for _, r := range prev.PreviewResults {
		if !want[aws.ToString(r.ImageDigest)] || r.AppliedRulePriority == nil || *r.AppliedRulePriority != 1 || r.Action == nil || r.Action.Type != ecrtypes.ImageActionTypeExpire || len(r.ImageTags) != 1 || r.ImagePushedAt == nil {
			t.Fatalf("preview result %+v", r)
		}
	}
	// Paged one by one; UNTAGGED filters them all out.
	page, err := c.GetLifecyclePolicyPreview(ctx, &ecr.GetLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo), MaxResults: aws.Int32(1)})
	if err != nil || len(page.PreviewResults) != 1 || page.NextToken == nil {
		t.Fatalf("first page %+v, %v", page, err)
	}
	page2, err := c.GetLifecyclePolicyPreview(ctx, &ecr.GetLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo), MaxResults: aws.Int32(1), NextToken: page.NextToken})
	if err != nil || len(page2.PreviewResults) != 1 || page2.NextToken != nil || aws.ToString(page2.PreviewResults[0].ImageDigest) == aws.ToString(page.PreviewResults[0].ImageDigest) {
		t.Fatalf("second page %+v, %v", page2, err)
	}
	untagged, err := c.GetLifecyclePolicyPreview(ctx, &ecr.GetLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo),
		Filter: &ecrtypes.LifecyclePolicyPreviewFilter{TagStatus: ecrtypes.TagStatusUntagged}})
	if err != nil || len(untagged.PreviewResults) != 0 {
		t.Fatalf("UNTAGGED preview %+v, %v", untagged, err)
	}
	// A preview expires nothing.
	list, err := c.ListImages(ctx, &ecr.ListImagesInput{RepositoryName: aws.String(repo)})
	if err != nil || len(list.ImageIds) != 4 {
		t.Fatalf("ListImages after the preview: %+v, %v", list, err)
	}
	// Without a text, the stored policy is previewed.
	if _, err := c.PutLifecyclePolicy(ctx, &ecr.PutLifecyclePolicyInput{RepositoryName: aws.String(repo), LifecyclePolicyText: aws.String(strings.Replace(policy, `"countNumber":1},"action":{"type":"expire"}},`, `"countNumber":2},"action":{"type":"expire"}},`, 1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartLifecyclePolicyPreview(ctx, &ecr.StartLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo)}); err != nil {
		t.Fatal(err)
	}
	prev, err = c.GetLifecyclePolicyPreview(ctx, &ecr.GetLifecyclePolicyPreviewInput{RepositoryName: aws.String(repo)})
	if err != nil || aws.ToInt32(prev.Summary.ExpiringImageTotalCount) != 1 || aws.ToString(prev.PreviewResults[0].ImageDigest) != digests[0] {
		t.Fatalf("preview of the stored policy: %+v, %v", prev, err)
	}
}

// TestECRRepositoryPolicy: SetRepositoryPolicy / GetRepositoryPolicy /
// DeleteRepositoryPolicy through the gateway (AWS SDK for Go v2), and their enforcement
// by the registry: a second account's token pulls the first account's repository,
// addressed as {registry}/{account}/{name} (go-containerregistry's remote client), only
// while the policy allows that account ecr:BatchGetImage and ecr:GetDownloadUrlForLayer.
func TestECRRepositoryPolicy(t *testing.T) {
	const owner, other, third = "111111111111", "222222222222", "333333333333"
	stack := startAPIStack(t, owner, other, third)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ecrModelClient(t, stack, owner)
	const repo = "shared/app"
	if _, err := c.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String(repo)}); err != nil {
		t.Fatal(err)
	}
	auth, _ := ecrLogin(t, ctx, c)
	img, err := random.Image(3000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(must(name.ParseReference(stack.registry+"/"+repo+":v1")), img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	otherAuth, _ := ecrLogin(t, ctx, ecr.NewFromConfig(stack.awsConfig(other, "us-east-1")))
	thirdAuth, _ := ecrLogin(t, ctx, ecr.NewFromConfig(stack.awsConfig(third, "us-east-1")))
	cross := must(name.ParseReference(stack.registry + "/" + owner + "/" + repo + ":v1"))
	// pull reads the image's manifest and every layer's bytes.
	pull := func(a *authn.Basic) error {
		got, err := remote.Image(cross, remote.WithAuth(a))
		if err != nil {
			return err
		}
		if must(got.Digest()) != must(img.Digest()) {
			return fmt.Errorf("digest %s", must(got.Digest()))
		}
		ls, err := got.Layers()
		if err != nil {
			return err
		}
		for _, l := range ls {
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	denied := func(what string, err error) {
		t.Helper()
		var te *transport.Error
		if !errors.As(err, &te) || te.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %v, want 403 DENIED", what, err)
		}
	}
	denied("pull without a policy", pull(otherAuth))

	var pnf *ecrtypes.RepositoryPolicyNotFoundException
	if _, err := c.GetRepositoryPolicy(ctx, &ecr.GetRepositoryPolicyInput{RepositoryName: aws.String(repo)}); !errors.As(err, &pnf) {
		t.Fatalf("GetRepositoryPolicy of none: %v, want RepositoryPolicyNotFoundException", err)
	}
	if _, err := c.DeleteRepositoryPolicy(ctx, &ecr.DeleteRepositoryPolicyInput{RepositoryName: aws.String(repo)}); !errors.As(err, &pnf) {
		t.Fatalf("DeleteRepositoryPolicy of none: %v, want RepositoryPolicyNotFoundException", err)
	}
	var ipe *ecrtypes.InvalidParameterException
	for _, bad := range []string{`{"Version":"2012-10-17","Statement":[`, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"ecr:BatchGetImage","Condition":{}}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ecs.amazonaws.com"},"Action":"ecr:BatchGetImage"}]}`} {
		if _, err := c.SetRepositoryPolicy(ctx, &ecr.SetRepositoryPolicyInput{RepositoryName: aws.String(repo), PolicyText: aws.String(bad)}); !errors.As(err, &ipe) {
			t.Fatalf("SetRepositoryPolicy %s: %v, want InvalidParameterException", bad, err)
		}
	}
	set := func(policy string) {
		t.Helper()
		out, err := c.SetRepositoryPolicy(ctx, &ecr.SetRepositoryPolicyInput{RepositoryName: aws.String(repo), PolicyText: aws.String(policy)})
		if err != nil || aws.ToString(out.PolicyText) != policy || aws.ToString(out.RegistryId) != owner {
			t.Fatalf("SetRepositoryPolicy: %+v, %v", out, err)
		}
	}
	// Manifests only: the layers stay out of reach.
	set(`{"Version":"2012-10-17","Statement":[{"Sid":"manifests","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + other + `:root"},"Action":"ecr:BatchGetImage"}]}`)
	if _, err := remote.Get(cross, remote.WithAuth(otherAuth)); err != nil {
		t.Fatalf("manifest with ecr:BatchGetImage allowed: %v", err)
	}
	denied("layers without ecr:GetDownloadUrlForLayer", pull(otherAuth))
	// Both actions for the other account: its pull succeeds, the third account's does not.
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"pull","Effect":"Allow","Principal":{"AWS":["` + other + `"]},"Action":["ecr:BatchGetImage","ecr:GetDownloadUrlForLayer","ecr:BatchCheckLayerAvailability"]}]}`
	set(policy)
	if err := pull(otherAuth); err != nil {
		t.Fatalf("pull allowed by the policy: %v", err)
	}
	denied("a third account's pull", pull(thirdAuth))
	// Pulls only: a push by the other account is refused whatever the policy says.
	img2, _ := random.Image(100, 1)
	denied("push into another account's repository", remote.Write(must(name.ParseReference(stack.registry+"/"+owner+"/"+repo+":v2")), img2, remote.WithAuth(otherAuth)))
	got, err := c.GetRepositoryPolicy(ctx, &ecr.GetRepositoryPolicyInput{RepositoryName: aws.String(repo)})
	if err != nil || aws.ToString(got.PolicyText) != policy {
		t.Fatalf("GetRepositoryPolicy %+v, %v", got, err)
	}
	// A Deny wins over an Allow.
	set(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"ecr:*"},{"Effect":"Deny","Principal":{"AWS":"` + other + `"},"Action":"ecr:GetDownloadUrlForLayer"}]}`)
	denied("pull denied by a Deny statement", pull(otherAuth))
	if err := pull(thirdAuth); err != nil {
		t.Fatalf("pull allowed to everyone: %v", err)
	}
	del, err := c.DeleteRepositoryPolicy(ctx, &ecr.DeleteRepositoryPolicyInput{RepositoryName: aws.String(repo)})
	if err != nil || !strings.Contains(aws.ToString(del.PolicyText), `"Deny"`) {
		t.Fatalf("DeleteRepositoryPolicy %+v, %v", del, err)
	}
	denied("pull after the policy's deletion", pull(thirdAuth))
	// The owner's own pulls never depended on it.
	if _, err := remote.Image(must(name.ParseReference(stack.registry+"/"+repo+":v1")), remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
}

// TestECRPullThroughCache: the pull-through cache rule actions through the gateway (AWS
// SDK for Go v2) with a second local registry (registrytest) as the upstream, and a pull
// of {prefix}/{repo}:{tag} from Berth's registry (go-containerregistry) that fetches the
// image (and an index with its images) from it, stores it — the repository created, the
// image listed — and serves it again after the upstream is gone.
func TestECRPullThroughCache(t *testing.T) {
	const owner = "111111111111"
	stack := startAPIStack(t, owner)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ecrModelClient(t, stack, owner)
	upstream := registrytest.Start(t)
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(must(name.ParseReference(upstream.Addr()+"/library/web:1.0")), img); err != nil {
		t.Fatal(err)
	}
	idx, err := random.Index(512, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(must(name.ParseReference(upstream.Addr()+"/library/multi:2")), idx); err != nil {
		t.Fatal(err)
	}

	var ipe *ecrtypes.InvalidParameterException
	for _, in := range []*ecr.CreatePullThroughCacheRuleInput{
		{EcrRepositoryPrefix: aws.String("UP"), UpstreamRegistryUrl: aws.String(upstream.Addr())},
		{EcrRepositoryPrefix: aws.String("up"), UpstreamRegistryUrl: aws.String("ftp://x/y")},
		{EcrRepositoryPrefix: aws.String("up"), UpstreamRegistryUrl: aws.String(upstream.Addr()), CredentialArn: aws.String("arn:aws:secretsmanager:us-east-1:111111111111:secret:ecr-pullthroughcache/x")},
	} {
		if _, err := c.CreatePullThroughCacheRule(ctx, in); !errors.As(err, &ipe) {
			t.Fatalf("CreatePullThroughCacheRule %+v: %v, want InvalidParameterException", in, err)
		}
	}
	created, err := c.CreatePullThroughCacheRule(ctx, &ecr.CreatePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("up"),
		UpstreamRegistryUrl: aws.String(upstream.Addr()), UpstreamRegistry: ecrtypes.UpstreamRegistryDockerHub})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(created.EcrRepositoryPrefix) != "up" || aws.ToString(created.UpstreamRepositoryPrefix) != "ROOT" || created.CreatedAt == nil || aws.ToString(created.RegistryId) != owner {
		t.Fatalf("CreatePullThroughCacheRule %+v", created)
	}
	var exists *ecrtypes.PullThroughCacheRuleAlreadyExistsException
	if _, err := c.CreatePullThroughCacheRule(ctx, &ecr.CreatePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("up"), UpstreamRegistryUrl: aws.String(upstream.Addr())}); !errors.As(err, &exists) {
		t.Fatalf("second rule of prefix up: %v, want PullThroughCacheRuleAlreadyExistsException", err)
	}
	desc, err := c.DescribePullThroughCacheRules(ctx, &ecr.DescribePullThroughCacheRulesInput{})
	if err != nil || len(desc.PullThroughCacheRules) != 1 || aws.ToString(desc.PullThroughCacheRules[0].UpstreamRegistryUrl) != upstream.Addr() {
		t.Fatalf("DescribePullThroughCacheRules %+v, %v", desc, err)
	}
	var nf *ecrtypes.PullThroughCacheRuleNotFoundException
	if _, err := c.DescribePullThroughCacheRules(ctx, &ecr.DescribePullThroughCacheRulesInput{EcrRepositoryPrefixes: []string{"nope"}}); !errors.As(err, &nf) {
		t.Fatalf("DescribePullThroughCacheRules nope: %v, want PullThroughCacheRuleNotFoundException", err)
	}
	valid, err := c.ValidatePullThroughCacheRule(ctx, &ecr.ValidatePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("up")})
	if err != nil || !valid.IsValid {
		t.Fatalf("ValidatePullThroughCacheRule %+v, %v", valid, err)
	}
	upd, err := c.UpdatePullThroughCacheRule(ctx, &ecr.UpdatePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("up")})
	if err != nil || upd.UpdatedAt == nil {
		t.Fatalf("UpdatePullThroughCacheRule %+v, %v", upd, err)
	}
	// A rule whose upstream does not answer is not valid.
	dead := harness.FreeAddr(t)
	if _, err := c.CreatePullThroughCacheRule(ctx, &ecr.CreatePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("dead"), UpstreamRegistryUrl: aws.String(dead)}); err != nil {
		t.Fatal(err)
	}
	if v, err := c.ValidatePullThroughCacheRule(ctx, &ecr.ValidatePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("dead")}); err != nil || v.IsValid || aws.ToString(v.Failure) == "" {
		t.Fatalf("ValidatePullThroughCacheRule of a dead upstream %+v, %v", v, err)
	}

	auth, _ := ecrLogin(t, ctx, c)
	ref := must(name.ParseReference(stack.registry + "/up/library/web:1.0"))
	got, err := remote.Image(ref, remote.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	if must(got.Digest()) != must(img.Digest()) {
		t.Fatalf("pulled %s, upstream has %s", must(got.Digest()), must(img.Digest()))
	}
	for _, l := range must(got.Layers()) {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	gotIdx, err := remote.Index(must(name.ParseReference(stack.registry+"/up/library/multi:2")), remote.WithAuth(auth))
	if err != nil || must(gotIdx.Digest()) != must(idx.Digest()) {
		t.Fatalf("index through the cache: %v", err)
	}
	repos, err := c.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{"up/library/web", "up/library/multi"}})
	if err != nil || len(repos.Repositories) != 2 {
		t.Fatalf("repositories the cache created: %+v, %v", repos, err)
	}
	imgs, err := c.DescribeImages(ctx, &ecr.DescribeImagesInput{RepositoryName: aws.String("up/library/web")})
	if err != nil || len(imgs.ImageDetails) != 1 || aws.ToString(imgs.ImageDetails[0].ImageDigest) != must(img.Digest()).String() {
		t.Fatalf("cached image: %+v, %v", imgs, err)
	}
	// A name no upstream has: 404, and no repository is left.
	var te *transport.Error
	if _, err := remote.Image(must(name.ParseReference(stack.registry+"/up/library/absent:1")), remote.WithAuth(auth)); !errors.As(err, &te) || te.StatusCode != 404 {
		t.Fatalf("pull of an upstream image that does not exist: %v, want 404", err)
	}
	if _, err := c.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{"up/library/absent"}}); err == nil {
		t.Fatal("a failed pull through the cache created its repository")
	}
	// Cached: served with the upstream gone and the rule deleted.
	if err := upstream.Close(); err != nil {
		t.Fatal(err)
	}
	del, err := c.DeletePullThroughCacheRule(ctx, &ecr.DeletePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("up")})
	if err != nil || aws.ToString(del.UpstreamRegistryUrl) != upstream.Addr() {
		t.Fatalf("DeletePullThroughCacheRule %+v, %v", del, err)
	}
	if again, err := remote.Image(ref, remote.WithAuth(auth)); err != nil || must(again.Digest()) != must(img.Digest()) {
		t.Fatalf("cached pull after the upstream is gone: %v", err)
	}
	if _, err := c.DeletePullThroughCacheRule(ctx, &ecr.DeletePullThroughCacheRuleInput{EcrRepositoryPrefix: aws.String("up")}); !errors.As(err, &nf) {
		t.Fatalf("second DeletePullThroughCacheRule: %v, want PullThroughCacheRuleNotFoundException", err)
	}
}
