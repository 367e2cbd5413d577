package registry_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/ecr/registry"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

var scope = keys.Scope{Account: "111122223333", Region: "us-east-1"}

type env struct {
	st   *ecr.Store
	h    *ecr.Handler
	ctx  context.Context
	host string
	auth authn.Authenticator
	now  *time.Time
	dir  string // the blobs' directory
}

// newEnv serves a registry over a fresh etcd, blobs in dir; repositories "app" (MUTABLE)
// and "locked" (IMMUTABLE) exist.
func newEnv(t *testing.T) env {
	t.Helper()
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	ring, err := seal.New(seal.Key{ID: "t", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	kv := etcdtest.Start(t)
	srv := httptest.NewUnstartedServer(nil)
	host := srv.Listener.Addr().String()
	st := ecr.NewStore(kv, ring, host, clock)
	dir := t.TempDir()
	reg, err := registry.New(registry.Config{Store: st, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = reg
	srv.Start()
	t.Cleanup(srv.Close)
	e := env{st: st, h: ecr.New(st), host: host, now: &now, dir: dir,
		ctx: caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region})}
	for _, r := range []struct{ name, mut string }{{"app", "MUTABLE"}, {"team/locked", "IMMUTABLE"}} {
		if _, err := e.h.CreateRepository(e.ctx, connect.NewRequest(&ecrv1.CreateRepositoryRequest{RepositoryName: proto.String(r.name), ImageTagMutability: proto.String(r.mut)})); err != nil {
			t.Fatal(err)
		}
	}
	e.auth = e.login(t)
	return e
}

// login answers the Basic credentials GetAuthorizationToken's token decodes to.
func (e env) login(t *testing.T) authn.Authenticator {
	t.Helper()
	pw, _, err := e.st.IssueToken(scope)
	if err != nil {
		t.Fatal(err)
	}
	return &authn.Basic{Username: "AWS", Password: pw}
}

func (e env) ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(e.host + "/" + s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantCode fails unless err is a registry error with the HTTP status and error code.
func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v, want HTTP %d %s", err, status, code)
	}
	if te.StatusCode != status {
		t.Fatalf("status %d (%v), want %d %s", te.StatusCode, err, status, code)
	}
	if code != "" && (len(te.Errors) == 0 || string(te.Errors[0].Code) != code) {
		t.Fatalf("errors %v, want %s", te.Errors, code)
	}
}

// A push with go-containerregistry's remote.Write, a pull of the same image, and the
// image as the ECR API lists it.
func TestPushPullListed(t *testing.T) {
	e := newEnv(t)
	img, err := random.Image(1024, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(e.ref(t, "app:v1"), img, remote.WithAuth(e.auth)); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	got, err := remote.Image(e.ref(t, "app:v1"), remote.WithAuth(e.auth))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Fatalf("pulled %s, pushed %s", d, want)
	}
	// Layers read back whole (remote.Image fetches lazily; Layers' Compressed checks digests).
	layers, _ := got.Layers()
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(rc); err != nil {
			t.Fatalf("layer: %v", err)
		}
		rc.Close()
	}
	res, err := e.h.DescribeImages(e.ctx, connect.NewRequest(&ecrv1.DescribeImagesRequest{RepositoryName: proto.String("app")}))
	if err != nil {
		t.Fatal(err)
	}
	det := res.Msg.GetImageDetails()
	if len(det) != 1 || det[0].GetImageDigest() != want.String() || strings.Join(det[0].GetImageTags(), ",") != "v1" || det[0].GetImageSizeInBytes() <= 3*1024 {
		t.Fatalf("DescribeImages = %v, want %s tagged v1", det, want)
	}
	bg, err := e.h.BatchGetImage(e.ctx, connect.NewRequest(&ecrv1.BatchGetImageRequest{RepositoryName: proto.String("app"), ImageIds: []*ecrv1.ImageIdentifier{{ImageTag: proto.String("v1")}}}))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := img.RawManifest()
	if len(bg.Msg.GetImages()) != 1 || bg.Msg.GetImages()[0].GetImageManifest() != string(raw) {
		t.Fatalf("BatchGetImage manifest differs from the pushed one")
	}
	for _, tag := range []string{"v2", "v3", "a0"} {
		if err := remote.Tag(e.ref(t, "app").Context().Tag(tag), img, remote.WithAuth(e.auth)); err != nil {
			t.Fatal(err)
		}
	}
	tags, err := remote.List(e.ref(t, "app").Context(), remote.WithAuth(e.auth))
	if err != nil || strings.Join(tags, ",") != "a0,v1,v2,v3" {
		t.Fatalf("tags/list = %v, %v", tags, err)
	}
	// Paged by n: go-containerregistry follows the Link header through every page.
	tags, err = remote.List(e.ref(t, "app").Context(), remote.WithAuth(e.auth), remote.WithPageSize(1))
	if err != nil || strings.Join(tags, ",") != "a0,v1,v2,v3" {
		t.Fatalf("tags/list paged by 1 = %v, %v", tags, err)
	}
	// BatchDeleteImage removes what the registry serves.
	if _, err := e.h.BatchDeleteImage(e.ctx, connect.NewRequest(&ecrv1.BatchDeleteImageRequest{RepositoryName: proto.String("app"), ImageIds: []*ecrv1.ImageIdentifier{{ImageDigest: proto.String(want.String())}}})); err != nil {
		t.Fatal(err)
	}
	_, err = remote.Image(e.ref(t, "app:v1"), remote.WithAuth(e.auth))
	wantCode(t, err, http.StatusNotFound, "MANIFEST_UNKNOWN")
}

// No token, a wrong user, another keyring's token and an expired one answer 401; a
// repository that does not exist answers 404 NAME_UNKNOWN.
func TestAuthAndUnknownRepository(t *testing.T) {
	e := newEnv(t)
	img, _ := random.Image(100, 1)
	err := remote.Write(e.ref(t, "app:v1"), img)
	wantCode(t, err, http.StatusUnauthorized, "")
	pw := e.auth.(*authn.Basic).Password
	err = remote.Write(e.ref(t, "app:v1"), img, remote.WithAuth(&authn.Basic{Username: "root", Password: pw}))
	wantCode(t, err, http.StatusUnauthorized, "")
	// A forged token: one character of the middle changed (every bit of a middle base64
	// character is significant, unlike the last one's, so the sealed bytes differ).
	forged := []byte(pw)
	if mid := len(forged) / 2; forged[mid] == 'A' {
		forged[mid] = 'B'
	} else {
		forged[mid] = 'A'
	}
	err = remote.Write(e.ref(t, "app:v1"), img, remote.WithAuth(&authn.Basic{Username: "AWS", Password: string(forged)}))
	wantCode(t, err, http.StatusUnauthorized, "")
	err = remote.Write(e.ref(t, "nope:v1"), img, remote.WithAuth(e.auth))
	wantCode(t, err, http.StatusNotFound, "NAME_UNKNOWN")
	// The same token 12 hours later.
	*e.now = e.now.Add(ecr.TokenLifetime)
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.host+"/v2/", nil)
	req.SetBasicAuth("AWS", pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body.String(), "Your authorization token has expired") || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("expired token: %d %s", resp.StatusCode, body.String())
	}
}

// An IMMUTABLE repository refuses a tag pushed again with another image (ECR's
// TAG_INVALID message), accepts the same image again, and keeps the first image.
func TestImmutableTag(t *testing.T) {
	e := newEnv(t)
	first, _ := random.Image(100, 1)
	second, _ := random.Image(100, 1)
	ref := e.ref(t, "team/locked:v1")
	if err := remote.Write(ref, first, remote.WithAuth(e.auth)); err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, first, remote.WithAuth(e.auth)); err != nil {
		t.Fatalf("same image again: %v", err)
	}
	err := remote.Write(ref, second, remote.WithAuth(e.auth))
	wantCode(t, err, http.StatusBadRequest, "TAG_INVALID")
	if !strings.Contains(err.Error(), "cannot be overwritten because the repository is immutable") {
		t.Fatalf("error %v lacks ECR's message", err)
	}
	got, err := remote.Image(ref, remote.WithAuth(e.auth))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != must(first.Digest()) {
		t.Fatal("v1 moved")
	}
}

func must(h v1.Hash, err error) v1.Hash {
	if err != nil {
		panic(err)
	}
	return h
}

// A blob whose bytes do not match the digest it is uploaded under is refused and not
// stored; a manifest naming a blob the registry lacks is refused.
func TestDigestMismatchAndMissingBlob(t *testing.T) {
	e := newEnv(t)
	pw := e.auth.(*authn.Basic).Password
	do := func(method, url string, body []byte) *http.Response {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.SetBasicAuth("AWS", pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	base := "http://" + e.host + "/v2/app"
	wrong := "sha256:" + strings.Repeat("0", 64)
	resp := do(http.MethodPost, base+"/blobs/uploads/?digest="+wrong, []byte("hello"))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("monolithic upload under a wrong digest: %d, want 400", resp.StatusCode)
	}
	if resp := do(http.MethodHead, base+"/blobs/"+wrong, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("HEAD of the refused blob: %d, want 404", resp.StatusCode)
	}
	for _, bad := range []string{"sha256:../../x", "sha256:abc/def", "md5:00", "x"} {
		if resp := do(http.MethodGet, base+"/blobs/"+bad, nil); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET of blob %q: %d, want 400 DIGEST_INVALID", bad, resp.StatusCode)
		}
	}
	// Chunked: the same bytes under a wrong digest at the end of a PATCH upload.
	start := do(http.MethodPost, base+"/blobs/uploads/", nil)
	loc := start.Header.Get("Location")
	if start.StatusCode != http.StatusAccepted || loc == "" {
		t.Fatalf("start upload: %d %q", start.StatusCode, loc)
	}
	if r := do(http.MethodPatch, "http://"+e.host+loc, []byte("hello")); r.StatusCode != http.StatusNoContent && r.StatusCode != http.StatusAccepted {
		t.Fatalf("PATCH: %d", r.StatusCode)
	}
	if r := do(http.MethodPut, "http://"+e.host+loc+"?digest="+wrong, nil); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT under a wrong digest: %d, want 400", r.StatusCode)
	}
	var left []string
	_ = filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Fatalf("refused uploads left files: %v", left)
	}
	m := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"` + wrong + `","size":5},"layers":[]}`
	req, _ := http.NewRequest(http.MethodPut, base+"/manifests/v1", strings.NewReader(m))
	req.SetBasicAuth("AWS", pw)
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("manifest with a missing blob: %d, want 400", resp.StatusCode)
	}
	// An index naming a "digest" with a '/' is refused, not a panic.
	idx := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"digest":"x/y"}]}`
	req, _ = http.NewRequest(http.MethodPut, base+"/manifests/v2", strings.NewReader(idx))
	req.SetBasicAuth("AWS", pw)
	req.Header.Set("Content-Type", "application/vnd.oci.image.index.v1+json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("index naming x/y: %d, want 400 MANIFEST_INVALID", resp.StatusCode)
	}
	list, _ := e.h.ListImages(e.ctx, connect.NewRequest(&ecrv1.ListImagesRequest{RepositoryName: proto.String("app")}))
	if len(list.Msg.GetImageIds()) != 0 {
		t.Fatalf("refused manifest listed: %v", list.Msg)
	}
}

// Garbage collection removes the blobs of a deleted image and nothing another image
// references, and spares everything within its grace.
func TestCollectGarbage(t *testing.T) {
	e := newEnv(t)
	keep, _ := random.Image(1024, 2)
	drop, _ := random.Image(1024, 2)
	for tag, img := range map[string]v1.Image{"keep": keep, "drop": drop} {
		if err := remote.Write(e.ref(t, "app:"+tag), img, remote.WithAuth(e.auth)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.h.BatchDeleteImage(e.ctx, connect.NewRequest(&ecrv1.BatchDeleteImageRequest{RepositoryName: proto.String("app"),
		ImageIds: []*ecrv1.ImageIdentifier{{ImageTag: proto.String("drop")}}})); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Store: e.st, Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	if files, _, err := reg.CollectGarbage(e.ctx, time.Hour); err != nil || files != 0 {
		t.Fatalf("within the grace: removed %d, %v; want 0", files, err)
	}
	files, n, err := reg.CollectGarbage(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if files != 3 || n <= 2*1024 { // drop's config and two layers
		t.Fatalf("removed %d files, %d bytes; want drop's 3 blobs", files, n)
	}
	got, err := remote.Image(e.ref(t, "app:keep"), remote.WithAuth(e.auth))
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := got.Layers()
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatalf("keep's layer after garbage collection: %v", err)
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(rc); err != nil {
			t.Fatalf("keep's layer after garbage collection: %v", err)
		}
		rc.Close()
	}
	if _, err := got.ConfigFile(); err != nil {
		t.Fatalf("keep's config after garbage collection: %v", err)
	}
	if files, _, _ := reg.CollectGarbage(e.ctx, 0); files != 0 {
		t.Fatalf("second pass removed %d", files)
	}
	// The account's index forgets drop's blobs and keeps keep's.
	dl, _ := drop.Layers()
	kl, _ := keep.Layers()
	dd, _ := dl[0].Digest()
	kd, _ := kl[0].Digest()
	if ok, _ := e.st.HasBlob(e.ctx, scope, dd.String()); ok {
		t.Fatal("a collected blob is still indexed")
	}
	if ok, _ := e.st.HasBlob(e.ctx, scope, kd.String()); !ok {
		t.Fatal("a kept blob is no longer indexed")
	}
}

// Blobs are content-addressed and shared on disk, but served only to the accounts that
// pushed them: another account's token cannot read a blob by its digest, nor reference
// it from a manifest, until it pushes the blob itself.
func TestBlobsConfinedToTheirAccount(t *testing.T) {
	e := newEnv(t)
	other := keys.Scope{Account: "444455556666", Region: "us-east-1"}
	octx := caller.With(t.Context(), caller.Identity{Account: other.Account, Region: other.Region})
	if _, err := e.h.CreateRepository(octx, connect.NewRequest(&ecrv1.CreateRepositoryRequest{RepositoryName: proto.String("app")})); err != nil {
		t.Fatal(err)
	}
	pw, _, err := e.st.IssueToken(other)
	if err != nil {
		t.Fatal(err)
	}
	otherAuth := &authn.Basic{Username: "AWS", Password: pw}
	img, _ := random.Image(1024, 1)
	if err := remote.Write(e.ref(t, "app:v1"), img, remote.WithAuth(e.auth)); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, "http://"+e.host+"/v2/app/blobs/"+ld.String(), nil)
		req.SetBasicAuth("AWS", pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s of another account's blob: %d, want 404", method, resp.StatusCode)
		}
	}
	raw, _ := img.RawManifest()
	mt, _ := img.MediaType()
	req, _ := http.NewRequest(http.MethodPut, "http://"+e.host+"/v2/app/manifests/v1", bytes.NewReader(raw))
	req.SetBasicAuth("AWS", pw)
	req.Header.Set("Content-Type", string(mt))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("manifest naming another account's blobs: %d, want 400 MANIFEST_BLOB_UNKNOWN", resp.StatusCode)
	}
	// Pushed by the other account itself, the same image is its own.
	if err := remote.Write(e.ref(t, "app:v1"), img, remote.WithAuth(otherAuth)); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(e.ref(t, "app:v1"), remote.WithAuth(otherAuth)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.st.HasBlob(e.ctx, other, ld.String()); !ok {
		t.Fatal("the other account's push did not record the layer")
	}
}

// Garbage collection spares an API layer upload in flight (its files touched by each
// part) and removes one abandoned for longer than the grace; a completed upload is a
// blob like any other, kept while an image references it.
func TestCollectGarbageUploads(t *testing.T) {
	e := newEnv(t)
	e.st.BlobDir = e.dir
	reg, err := registry.New(registry.Config{Store: e.st, Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	start := func() string {
		up, err := e.h.InitiateLayerUpload(e.ctx, connect.NewRequest(&ecrv1.InitiateLayerUploadRequest{RepositoryName: proto.String("app")}))
		if err != nil {
			t.Fatal(err)
		}
		id := up.Msg.GetUploadId()
		if _, err := e.h.UploadLayerPart(e.ctx, connect.NewRequest(&ecrv1.UploadLayerPartRequest{RepositoryName: proto.String("app"), UploadId: proto.String(id),
			PartFirstByte: 0, PartLastByte: 2, LayerPartBlob: []byte("abc")})); err != nil {
			t.Fatal(err)
		}
		return id
	}
	live, abandoned := start(), start()
	old := time.Now().Add(-2 * time.Hour)
	for _, f := range []string{abandoned, abandoned + ".json"} {
		if err := os.Chtimes(filepath.Join(e.dir, "uploads", f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if files, _, err := reg.CollectGarbage(e.ctx, time.Hour); err != nil || files != 2 {
		t.Fatalf("removed %d files, %v; want the abandoned upload's 2", files, err)
	}
	if _, err := e.h.UploadLayerPart(e.ctx, connect.NewRequest(&ecrv1.UploadLayerPartRequest{RepositoryName: proto.String("app"), UploadId: proto.String(abandoned),
		PartFirstByte: 3, PartLastByte: 3, LayerPartBlob: []byte("d")})); err == nil {
		t.Fatal("the abandoned upload still takes parts")
	}
	// The live one completes after the pass.
	if _, err := e.h.CompleteLayerUpload(e.ctx, connect.NewRequest(&ecrv1.CompleteLayerUploadRequest{RepositoryName: proto.String("app"), UploadId: proto.String(live),
		LayerDigests: []string{"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}})); err != nil {
		t.Fatalf("the upload in flight after garbage collection: %v", err)
	}
}
