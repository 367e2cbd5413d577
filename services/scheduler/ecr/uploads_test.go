package ecr_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// The layer-upload actions' validation: each refusal names its field or is ECR's
// exception, an upload is reachable only from its own scope and repository, and a
// scheduler without the registry's blob directory says so.
func TestLayerUploadValidation(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	for _, n := range []string{"app", "other"} {
		if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s(n)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.h.InitiateLayerUpload(e.ctx, connect.NewRequest(&ecrv1.InitiateLayerUploadRequest{RepositoryName: s("app")}))
	wantErr(t, err, "ServerException", "--ecr-blob-dir")
	e.h.BlobDir = t.TempDir()
	_, err = e.h.InitiateLayerUpload(e.ctx, connect.NewRequest(&ecrv1.InitiateLayerUploadRequest{RepositoryName: s("nope")}))
	wantErr(t, err, "RepositoryNotFoundException", "nope")
	up, err := e.h.InitiateLayerUpload(e.ctx, connect.NewRequest(&ecrv1.InitiateLayerUploadRequest{RepositoryName: s("app")}))
	if err != nil {
		t.Fatal(err)
	}
	id := up.Msg.GetUploadId()
	part := func(ctx *env, repo, id string, first, last int64, b []byte) error {
		_, err := e.h.UploadLayerPart(ctx.ctx, connect.NewRequest(&ecrv1.UploadLayerPartRequest{RepositoryName: s(repo), UploadId: s(id),
			PartFirstByte: first, PartLastByte: last, LayerPartBlob: b}))
		return err
	}
	wantErr(t, part(&e, "app", "not-an-id", 0, 0, []byte{1}), "UploadNotFoundException", "not-an-id")
	wantErr(t, part(&e, "other", id, 0, 0, []byte{1}), "UploadNotFoundException", id)
	otherAcct := e
	otherAcct.ctx = caller.With(t.Context(), caller.Identity{Account: "999988887777", Region: scope.Region})
	if _, err := otherAcct.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("app")}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, part(&otherAcct, "app", id, 0, 0, []byte{1}), "UploadNotFoundException", id)
	wantErr(t, part(&e, "app", id, 0, 0, nil), "InvalidLayerPartException", "empty")
	wantErr(t, part(&e, "app", id, 1, 1, []byte{1}), "InvalidLayerPartException", "last valid byte received is -1")
	wantErr(t, part(&e, "app", id, 0, 5, []byte{1}), "InvalidLayerPartException", "does not match")
	wantErr(t, part(&e, "app", id, 0, ecr.MaxPartSize, make([]byte, ecr.MaxPartSize+1)), "InvalidParameterException", "layerPartBlob")
	if err := part(&e, "app", id, 0, 2, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, part(&e, "app", id, 0, 2, []byte("abc")), "InvalidLayerPartException", "last valid byte received is 2")

	complete := func(digests ...string) error {
		_, err := e.h.CompleteLayerUpload(e.ctx, connect.NewRequest(&ecrv1.CompleteLayerUploadRequest{RepositoryName: s("app"), UploadId: s(id), LayerDigests: digests}))
		return err
	}
	wantErr(t, complete(), "InvalidParameterException", "layerDigests")
	wantErr(t, complete("md5:abc"), "InvalidParameterException", "layerDigests")
	// Any of the digests given may be the upload's.
	abc := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if err := complete("sha256:"+strings.Repeat("0", 64), abc); err != nil {
		t.Fatal(err)
	}

	_, err = e.h.GetDownloadUrlForLayer(e.ctx, connect.NewRequest(&ecrv1.GetDownloadUrlForLayerRequest{RepositoryName: s("app"), LayerDigest: s("latest")}))
	wantErr(t, err, "InvalidParameterException", "layerDigest")
}

// A download URL's token names its scope and layer, and expires after LayerURLLifetime.
func TestLayerURLToken(t *testing.T) {
	e := newEnv(t)
	d := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	tok, err := e.h.LayerURLToken(scope, "app", d)
	if err != nil {
		t.Fatal(err)
	}
	sc, repo, digest, err := e.h.VerifyLayerURL(tok)
	if err != nil || sc != (keys.Scope{Account: scope.Account, Region: scope.Region}) || repo != "app" || digest != d {
		t.Fatalf("VerifyLayerURL = %v %s %s %v", sc, repo, digest, err)
	}
	if _, _, _, err := e.h.VerifyLayerURL(tok[:len(tok)-2]); err != ecr.ErrBadLayerURL {
		t.Fatalf("altered token: %v", err)
	}
	// An authorization token is no download URL token (another associated data).
	pw, _, _ := e.h.IssueToken(scope)
	if _, _, _, err := e.h.VerifyLayerURL(pw); err != ecr.ErrBadLayerURL {
		t.Fatalf("authorization token as a URL token: %v", err)
	}
	*e.now = e.now.Add(ecr.LayerURLLifetime + time.Second)
	if _, _, _, err := e.h.VerifyLayerURL(tok); err != ecr.ErrLayerURLExpired {
		t.Fatalf("expired token: %v", err)
	}
}

// GetLifecyclePolicyPreview's page size and filter are checked.
func TestLifecyclePreviewValidation(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("app")}); err != nil {
		t.Fatal(err)
	}
	get := func(req *ecrv1.GetLifecyclePolicyPreviewRequest) error {
		req.RepositoryName = s("app")
		_, err := e.h.GetLifecyclePolicyPreview(e.ctx, connect.NewRequest(req))
		return err
	}
	wantErr(t, get(&ecrv1.GetLifecyclePolicyPreviewRequest{MaxResults: 101}), "InvalidParameterException", "maxResults")
	wantErr(t, get(&ecrv1.GetLifecyclePolicyPreviewRequest{Filter: &ecrv1.LifecyclePolicyPreviewFilter{TagStatus: s("SOME")}}), "InvalidParameterException", "filter.tagStatus")
	wantErr(t, get(&ecrv1.GetLifecyclePolicyPreviewRequest{MaxResults: 5, ImageIds: []*ecrv1.ImageIdentifier{{ImageTag: s("v1")}}}), "InvalidParameterException", "imageIds")
	wantErr(t, get(&ecrv1.GetLifecyclePolicyPreviewRequest{}), "LifecyclePolicyPreviewNotFoundException", "app")
	_, err := e.h.StartLifecyclePolicyPreview(e.ctx, connect.NewRequest(&ecrv1.StartLifecyclePolicyPreviewRequest{RepositoryName: s("app"), LifecyclePolicyText: s("{}")}))
	wantErr(t, err, "InvalidParameterException", "lifecyclePolicyText")
}
