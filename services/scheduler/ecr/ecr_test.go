package ecr_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

var scope = keys.Scope{Account: "111122223333", Region: "us-east-1"}

type env struct {
	h   *ecr.Handler
	ctx context.Context
	now *time.Time
}

func newRing(t *testing.T) *seal.Keyring {
	t.Helper()
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	ring, err := seal.New(seal.Key{ID: "t", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func newEnv(t *testing.T) env {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := ecr.NewStore(etcdtest.Start(t), newRing(t), "127.0.0.1:5000", func() time.Time { return now })
	return env{h: ecr.New(st), ctx: caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region}), now: &now}
}

func wantErr(t *testing.T, err error, typ, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", typ)
	}
	e, ok := awserr.FromConnect(err)
	if !ok {
		var ae *awserr.Error
		if !errors.As(err, &ae) {
			t.Fatalf("error %v carries no AWS exception, want %s", err, typ)
		}
		e = ae
	}
	if e.Type != typ || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = %s: %q, want %s containing %q", e.Type, e.Message, typ, msg)
	}
}

func (e env) create(t *testing.T, req *ecrv1.CreateRepositoryRequest) (*ecrv1.Repository, error) {
	t.Helper()
	res, err := e.h.CreateRepository(e.ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetRepository(), nil
}

// CreateRepository: ECR's name rule and the fields Berth refuses, each naming its field.
func TestCreateRepositoryValidation(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	for _, tc := range []struct {
		name string
		req  *ecrv1.CreateRepositoryRequest
		typ  string
		msg  string
	}{
		{"upper case", &ecrv1.CreateRepositoryRequest{RepositoryName: s("App")}, "InvalidParameterException", "repositoryName"},
		{"one char", &ecrv1.CreateRepositoryRequest{RepositoryName: s("a")}, "InvalidParameterException", "repositoryName"},
		{"leading slash", &ecrv1.CreateRepositoryRequest{RepositoryName: s("/app")}, "InvalidParameterException", "repositoryName"},
		{"double slash", &ecrv1.CreateRepositoryRequest{RepositoryName: s("a//b")}, "InvalidParameterException", "repositoryName"},
		{"trailing dash", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app-")}, "InvalidParameterException", "repositoryName"},
		{"too long", &ecrv1.CreateRepositoryRequest{RepositoryName: s(strings.Repeat("a", 257))}, "InvalidParameterException", "repositoryName"},
		{"kms", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app"), EncryptionConfiguration: &ecrv1.EncryptionConfiguration{EncryptionType: s("KMS")}}, "KmsException", "encryptionConfiguration.encryptionType"},
		{"kms key with AES256", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app"), EncryptionConfiguration: &ecrv1.EncryptionConfiguration{EncryptionType: s("AES256"), KmsKey: s("k")}}, "InvalidParameterException", "encryptionConfiguration.kmsKey"},
		{"scan on push", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app"), ImageScanningConfiguration: &ecrv1.ImageScanningConfiguration{ScanOnPush: true}}, "InvalidParameterException", "scanOnPush"},
		{"exclusion mutability", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app"), ImageTagMutability: s("IMMUTABLE_WITH_EXCLUSION")}, "InvalidParameterException", "imageTagMutability"},
		{"other registry", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app"), RegistryId: s("999999999999")}, "InvalidParameterException", "registryId"},
		{"tag twice", &ecrv1.CreateRepositoryRequest{RepositoryName: s("app"), Tags: []*ecrv1.Tag{{Key: s("k"), Value: s("1")}, {Key: s("k"), Value: s("2")}}}, "InvalidTagParameterException", "more than once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.create(t, tc.req)
			wantErr(t, err, tc.typ, tc.msg)
		})
	}
	// Nothing was written by the refusals.
	res, err := e.h.DescribeRepositories(e.ctx, connect.NewRequest(&ecrv1.DescribeRepositoriesRequest{}))
	if err != nil || len(res.Msg.GetRepositories()) != 0 {
		t.Fatalf("DescribeRepositories after refusals = %v, %v; want none", res, err)
	}
	for _, ok := range []string{"ab", "a/b", "team-a/app_x.y", "a__b", "a---b/c.d"} {
		if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s(ok)}); err != nil {
			t.Errorf("CreateRepository %q: %v", ok, err)
		}
	}
}

// Create, describe (by name and paged), already exists, not found; what is stored comes back.
func TestRepositoriesLifecycle(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	r, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("team/app"), ImageTagMutability: s("IMMUTABLE"),
		Tags: []*ecrv1.Tag{{Key: s("env"), Value: s("dev")}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetRepositoryUri() != "127.0.0.1:5000/team/app" || r.GetRepositoryArn() != "arn:aws:ecr:us-east-1:111122223333:repository/team/app" ||
		r.GetRegistryId() != scope.Account || r.GetImageTagMutability() != "IMMUTABLE" || r.GetEncryptionConfiguration().GetEncryptionType() != "AES256" {
		t.Fatalf("created %v", r)
	}
	_, err = e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("team/app")})
	wantErr(t, err, "RepositoryAlreadyExistsException", "The repository with name 'team/app' already exists in the registry with id '111122223333'")
	for i := range 4 {
		if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s(fmt.Sprintf("r%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	token := ""
	for pages := 0; ; pages++ {
		req := &ecrv1.DescribeRepositoriesRequest{MaxResults: 2}
		if token != "" {
			req.NextToken = s(token)
		}
		res, err := e.h.DescribeRepositories(e.ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Msg.GetRepositories()) > 2 {
			t.Fatalf("page of %d, want at most 2", len(res.Msg.GetRepositories()))
		}
		for _, r := range res.Msg.GetRepositories() {
			names = append(names, r.GetRepositoryName())
		}
		token = res.Msg.GetNextToken()
		if token == "" {
			break
		}
	}
	if len(names) != 5 {
		t.Fatalf("paged names %v, want 5", names)
	}
	_, err = e.h.DescribeRepositories(e.ctx, connect.NewRequest(&ecrv1.DescribeRepositoriesRequest{RepositoryNames: []string{"r1", "nope"}}))
	wantErr(t, err, "RepositoryNotFoundException", "The repository with name 'nope' does not exist in the registry with id '111122223333'")
	_, err = e.h.DescribeRepositories(e.ctx, connect.NewRequest(&ecrv1.DescribeRepositoriesRequest{MaxResults: 1001}))
	wantErr(t, err, "InvalidParameterException", "maxResults")
	_, err = e.h.DescribeRepositories(e.ctx, connect.NewRequest(&ecrv1.DescribeRepositoriesRequest{NextToken: s("garbage")}))
	wantErr(t, err, "InvalidParameterException", "nextToken")
}

func manifest(layer string) ecr.Manifest {
	b := []byte(`{"schemaVersion":2,"layers":[{"digest":"` + layer + `"}]}`)
	return ecr.Manifest{Digest: "sha256:" + strings.Repeat(layer[len(layer)-1:], 64), MediaType: "application/vnd.oci.image.manifest.v1+json", Bytes: b, Size: 10}
}

// Tags move in a MUTABLE repository (the old image is left untagged) and are refused
// in an IMMUTABLE one unless the same image is pushed again; DeleteRepository refuses a
// repository with images unless force, which removes its images and tags too.
func TestTagMutabilityAndDelete(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	st := e.h.Store
	for _, r := range []struct{ name, mut string }{{"mut", "MUTABLE"}, {"immut", "IMMUTABLE"}} {
		if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s(r.name), ImageTagMutability: s(r.mut)}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := manifest("sha256:a"), manifest("sha256:b")
	for _, repo := range []string{"mut", "immut"} {
		if err := st.PutManifest(e.ctx, scope, repo, "v1", a); err != nil {
			t.Fatal(err)
		}
		if err := st.PutManifest(e.ctx, scope, repo, "v1", a); err != nil {
			t.Fatalf("%s: same image, same tag again: %v", repo, err)
		}
	}
	if err := st.PutManifest(e.ctx, scope, "mut", "v1", b); err != nil {
		t.Fatal(err)
	}
	err := st.PutManifest(e.ctx, scope, "immut", "v1", b)
	wantErr(t, err, "ImageTagAlreadyExistsException", "The image tag 'v1' already exists in the 'immut' repository and cannot be overwritten because the repository is immutable.")
	// Nothing of b was written in immut.
	if _, _, err := st.Image(e.ctx, scope, "immut", b.Digest); err == nil {
		t.Fatal("refused push left its image behind")
	}
	list, err := e.h.ListImages(e.ctx, connect.NewRequest(&ecrv1.ListImagesRequest{RepositoryName: s("mut")}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, id := range list.Msg.GetImageIds() {
		got[id.GetImageDigest()] = id.GetImageTag()
	}
	if len(got) != 2 || got[a.Digest] != "" || got[b.Digest] != "v1" {
		t.Fatalf("ListImages mut = %v: want a untagged, b v1", got)
	}
	untagged, err := e.h.DescribeImages(e.ctx, connect.NewRequest(&ecrv1.DescribeImagesRequest{RepositoryName: s("mut"), Filter: &ecrv1.DescribeImagesFilter{TagStatus: s("UNTAGGED")}}))
	if err != nil || len(untagged.Msg.GetImageDetails()) != 1 || untagged.Msg.GetImageDetails()[0].GetImageDigest() != a.Digest {
		t.Fatalf("DescribeImages UNTAGGED = %v, %v", untagged, err)
	}
	_, err = e.h.DescribeImages(e.ctx, connect.NewRequest(&ecrv1.DescribeImagesRequest{RepositoryName: s("mut"), ImageIds: []*ecrv1.ImageIdentifier{{ImageTag: s("v9")}}}))
	wantErr(t, err, "ImageNotFoundException", "imageTag:'v9'")

	_, err = e.h.DeleteRepository(e.ctx, connect.NewRequest(&ecrv1.DeleteRepositoryRequest{RepositoryName: s("mut")}))
	wantErr(t, err, "RepositoryNotEmptyException", "cannot be deleted because it still contains images")
	del, err := e.h.BatchDeleteImage(e.ctx, connect.NewRequest(&ecrv1.BatchDeleteImageRequest{RepositoryName: s("immut"),
		ImageIds: []*ecrv1.ImageIdentifier{{ImageTag: s("v1")}, {ImageTag: s("nope")}, {}}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Msg.GetImageIds()) != 1 || len(del.Msg.GetFailures()) != 2 || del.Msg.GetFailures()[0].GetFailureCode() != "ImageNotFound" || del.Msg.GetFailures()[1].GetFailureCode() != "MissingDigestAndTag" {
		t.Fatalf("BatchDeleteImage = %v", del.Msg)
	}
	// Its last tag gone, the image went too: the repository is empty.
	if _, err := e.h.DeleteRepository(e.ctx, connect.NewRequest(&ecrv1.DeleteRepositoryRequest{RepositoryName: s("immut")})); err != nil {
		t.Fatalf("DeleteRepository of emptied immut: %v", err)
	}
	if _, err := e.h.DeleteRepository(e.ctx, connect.NewRequest(&ecrv1.DeleteRepositoryRequest{RepositoryName: s("mut"), Force: true})); err != nil {
		t.Fatal(err)
	}
	// Recreated, the repository holds nothing of before.
	if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("mut")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Image(e.ctx, scope, "mut", "v1"); err == nil {
		t.Fatal("force delete left tag v1 behind")
	}
	_, err = e.h.DeleteRepository(e.ctx, connect.NewRequest(&ecrv1.DeleteRepositoryRequest{RepositoryName: s("gone")}))
	wantErr(t, err, "RepositoryNotFoundException", "'gone'")
}

// GetAuthorizationToken: base64 "AWS:{password}", 12 h, the password verifies to the
// caller's scope until it expires; another keyring's token and garbage are refused.
func TestAuthorizationToken(t *testing.T) {
	e := newEnv(t)
	res, err := e.h.GetAuthorizationToken(e.ctx, connect.NewRequest(&ecrv1.GetAuthorizationTokenRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	d := res.Msg.GetAuthorizationData()[0]
	raw, err := base64.StdEncoding.DecodeString(d.GetAuthorizationToken())
	if err != nil {
		t.Fatal(err)
	}
	user, pw, ok := strings.Cut(string(raw), ":")
	if !ok || user != "AWS" {
		t.Fatalf("token %q: want AWS:{password}", raw)
	}
	if got := time.Unix(int64(d.GetExpiresAt()), 0); !got.Equal(e.now.Add(12 * time.Hour)) {
		t.Fatalf("expiresAt %v, want %v", got, e.now.Add(12*time.Hour))
	}
	if d.GetProxyEndpoint() != "http://127.0.0.1:5000" {
		t.Fatalf("proxyEndpoint %q", d.GetProxyEndpoint())
	}
	if sc, err := e.h.VerifyToken(pw); err != nil || sc != scope {
		t.Fatalf("VerifyToken = %v, %v; want %v", sc, err, scope)
	}
	other := ecr.NewStore(nil, newRing(t), "h", nil)
	if _, err := other.VerifyToken(pw); !errors.Is(err, ecr.ErrBadToken) {
		t.Fatalf("another keyring's VerifyToken: %v, want ErrBadToken", err)
	}
	if _, err := e.h.VerifyToken("garbage"); !errors.Is(err, ecr.ErrBadToken) {
		t.Fatalf("garbage: %v", err)
	}
	*e.now = e.now.Add(12 * time.Hour)
	if _, err := e.h.VerifyToken(pw); !errors.Is(err, ecr.ErrTokenExpired) {
		t.Fatalf("after 12 h: %v, want ErrTokenExpired", err)
	}
	_, err = e.h.GetAuthorizationToken(e.ctx, connect.NewRequest(&ecrv1.GetAuthorizationTokenRequest{RegistryIds: []string{"999999999999"}}))
	wantErr(t, err, "InvalidParameterException", "registryId")
}

// Lifecycle policies: ECR's rule checks at Put, Get/Delete with
// LifecyclePolicyNotFoundException, and the background pass expiring images by
// imageCountMoreThan (tagged, by prefix) and sinceImagePushed (untagged), each image taken
// by the first rule that selects it.
func TestLifecyclePolicies(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("app")}); err != nil {
		t.Fatal(err)
	}
	put := func(text string) error {
		_, err := e.h.PutLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.PutLifecyclePolicyRequest{RepositoryName: s("app"), LifecyclePolicyText: s(text)}))
		return err
	}
	pad := func(rules string) string { return `{"rules":[` + rules + `]}` + strings.Repeat(" ", 100) }
	rule := func(prio int, sel string) string {
		return fmt.Sprintf(`{"rulePriority":%d,"description":"r","selection":%s,"action":{"type":"expire"}}`, prio, sel)
	}
	for name, text := range map[string]string{
		"not json":          pad(`x`),
		"tagged no prefix":  pad(rule(1, `{"tagStatus":"tagged","countType":"imageCountMoreThan","countNumber":1}`)),
		"any not last":      pad(rule(1, `{"tagStatus":"any","countType":"imageCountMoreThan","countNumber":1}`) + "," + rule(2, `{"tagStatus":"untagged","countType":"imageCountMoreThan","countNumber":1}`)),
		"same priority":     pad(rule(1, `{"tagStatus":"untagged","countType":"imageCountMoreThan","countNumber":1}`) + "," + rule(1, `{"tagStatus":"untagged","countType":"imageCountMoreThan","countNumber":2}`)),
		"days without unit": pad(rule(1, `{"tagStatus":"untagged","countType":"sinceImagePushed","countNumber":1}`)),
		"unknown field":     pad(rule(1, `{"tagStatus":"untagged","countType":"imageCountMoreThan","countNumber":1,"storageClass":"archive"}`)),
	} {
		if err := put(text); err == nil {
			t.Errorf("%s: PutLifecyclePolicy accepted %s", name, text)
		} else {
			wantErr(t, err, "InvalidParameterException", "Lifecycle policy validation failure")
		}
	}
	_, err := e.h.GetLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.GetLifecyclePolicyRequest{RepositoryName: s("app")}))
	wantErr(t, err, "LifecyclePolicyNotFoundException", "'app'")

	// Seven images a day apart: rel-1..rel-4 tagged, u1..u3 untagged (pushed untagged).
	st := e.h.Store
	start := *e.now
	var untagged []string
	for i := range 7 {
		*e.now = start.Add(time.Duration(i) * 24 * time.Hour)
		m := manifest(fmt.Sprintf("sha256:%x", i+1))
		tag := ""
		if i < 4 {
			tag = fmt.Sprintf("rel-%d", i+1)
		} else {
			untagged = append(untagged, m.Digest)
		}
		if err := st.PutManifest(e.ctx, scope, "app", tag, m); err != nil {
			t.Fatal(err)
		}
	}
	*e.now = start.Add(7 * 24 * time.Hour)
	policy := pad(rule(1, `{"tagStatus":"tagged","tagPrefixList":["rel-"],"countType":"imageCountMoreThan","countNumber":2}`) + "," +
		rule(2, `{"tagStatus":"untagged","countType":"sinceImagePushed","countUnit":"days","countNumber":2}`))
	if err := put(policy); err != nil {
		t.Fatal(err)
	}
	n, err := st.ApplyLifecyclePolicies(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.h.ListImages(e.ctx, connect.NewRequest(&ecrv1.ListImagesRequest{RepositoryName: s("app")}))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, id := range list.Msg.GetImageIds() {
		if id.ImageTag != nil {
			left = append(left, id.GetImageTag())
		} else {
			left = append(left, id.GetImageDigest())
		}
	}
	// rel-1, rel-2 go (two newest kept); u1 (pushed day 4, 3 days old) goes; u2 (day 5,
	// 2 days old, not more than 2) and u3 stay.
	want := []string{untagged[1], untagged[2], "rel-3", "rel-4"}
	slices.Sort(left)
	slices.Sort(want)
	if n != 3 || !slices.Equal(left, want) {
		t.Fatalf("expired %d, left %v; want 3 expired, left %v", n, left, want)
	}
	got, err := e.h.GetLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.GetLifecyclePolicyRequest{RepositoryName: s("app")}))
	if err != nil || got.Msg.GetLifecyclePolicyText() != policy || got.Msg.GetLastEvaluatedAt() == 0 {
		t.Fatalf("GetLifecyclePolicy = %v, %v", got, err)
	}
	if _, err := e.h.DeleteLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.DeleteLifecyclePolicyRequest{RepositoryName: s("app")})); err != nil {
		t.Fatal(err)
	}
	_, err = e.h.DeleteLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.DeleteLifecyclePolicyRequest{RepositoryName: s("app")}))
	wantErr(t, err, "LifecyclePolicyNotFoundException", "'app'")
}

// ListImages' maxResults counts identifiers (one per tag): a page ends before an image
// whose identifiers would not fit, and paging returns each identifier once.
func TestListImagesPagesByIdentifiers(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("app")}); err != nil {
		t.Fatal(err)
	}
	st := e.h.Store
	a, b, c := manifest("sha256:a"), manifest("sha256:b"), manifest("sha256:c")
	for _, p := range []struct {
		m   ecr.Manifest
		tag string
	}{{a, "a1"}, {a, "a2"}, {b, "b1"}, {c, ""}} {
		if err := st.PutManifest(e.ctx, scope, "app", p.tag, p.m); err != nil {
			t.Fatal(err)
		}
	}
	for _, max := range []int32{1, 2, 3, 100} {
		var all []string
		var sizes []int
		token := ""
		for range 10 {
			req := &ecrv1.ListImagesRequest{RepositoryName: s("app"), MaxResults: max}
			if token != "" {
				req.NextToken = s(token)
			}
			res, err := e.h.ListImages(e.ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(res.Msg.GetImageIds()))
			for _, id := range res.Msg.GetImageIds() {
				all = append(all, id.GetImageDigest()[len(id.GetImageDigest())-1:]+id.GetImageTag())
			}
			if token = res.Msg.GetNextToken(); token == "" {
				break
			}
		}
		if strings.Join(all, ",") != "aa1,aa2,bb1,c" {
			t.Errorf("maxResults %d: paged %v (pages %v), want aa1,aa2,bb1,c", max, all, sizes)
		}
		for _, n := range sizes {
			if n > int(max) && n != 2 { // only a's two tags may exceed a page of 1
				t.Errorf("maxResults %d: a page of %d", max, n)
			}
		}
	}
}

// No client input makes an action panic or answer ServerException: every served action
// with empty, malformed and hostile members.
func TestNoServerErrorOnClientInput(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: s("app")}); err != nil {
		t.Fatal(err)
	}
	names := []string{"", "app", "a/../b", "%2F", "nope", strings.Repeat("a", 300), "a/b/"}
	ids := [][]*ecrv1.ImageIdentifier{nil, {{}}, {{ImageTag: s("x/y")}}, {{ImageDigest: s("sha256:../x")}}, {{ImageTag: s("")}},
		{{ImageDigest: s("sha256:" + strings.Repeat("a", 64)), ImageTag: s("t")}}}
	calls := 0
	check := func(what string, err error) {
		t.Helper()
		calls++
		if err == nil {
			return
		}
		e, ok := awserr.FromConnect(err)
		if !ok {
			var ae *awserr.Error
			if errors.As(err, &ae) {
				e, ok = ae, true
			}
		}
		if !ok || e.Type == "ServerException" {
			t.Errorf("%s: %v", what, err)
		}
	}
	for _, n := range names {
		for _, id := range ids {
			_, err := e.h.DescribeImages(e.ctx, connect.NewRequest(&ecrv1.DescribeImagesRequest{RepositoryName: s(n), ImageIds: id}))
			check("DescribeImages "+n, err)
			_, err = e.h.BatchGetImage(e.ctx, connect.NewRequest(&ecrv1.BatchGetImageRequest{RepositoryName: s(n), ImageIds: id}))
			check("BatchGetImage "+n, err)
			_, err = e.h.BatchDeleteImage(e.ctx, connect.NewRequest(&ecrv1.BatchDeleteImageRequest{RepositoryName: s(n), ImageIds: id}))
			check("BatchDeleteImage "+n, err)
		}
		_, err := e.h.ListImages(e.ctx, connect.NewRequest(&ecrv1.ListImagesRequest{RepositoryName: s(n), NextToken: s("x"), MaxResults: -1}))
		check("ListImages "+n, err)
		_, err = e.h.DescribeRepositories(e.ctx, connect.NewRequest(&ecrv1.DescribeRepositoriesRequest{RepositoryNames: []string{n}}))
		check("DescribeRepositories "+n, err)
		_, err = e.h.CreateRepository(e.ctx, connect.NewRequest(&ecrv1.CreateRepositoryRequest{RepositoryName: s(n), Tags: []*ecrv1.Tag{{}}}))
		check("CreateRepository "+n, err)
		for _, m := range []string{"", "{}", `{"schemaVersion":2}`, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"digest":"x/y"}]}`,
			`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"digest":"sha256:../../x"},"layers":[{"digest":"/"}]}`} {
			_, err = e.h.PutImage(e.ctx, connect.NewRequest(&ecrv1.PutImageRequest{RepositoryName: s(n), ImageManifest: s(m), ImageTag: s("t/t"), ImageDigest: s("x")}))
			check("PutImage "+n, err)
			_, err = e.h.PutImage(e.ctx, connect.NewRequest(&ecrv1.PutImageRequest{RepositoryName: s(n), ImageManifest: s(m)}))
			check("PutImage "+n, err)
		}
		_, err = e.h.BatchCheckLayerAvailability(e.ctx, connect.NewRequest(&ecrv1.BatchCheckLayerAvailabilityRequest{RepositoryName: s(n), LayerDigests: []string{"", "sha256:/", "x"}}))
		check("BatchCheckLayerAvailability "+n, err)
		_, err = e.h.PutLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.PutLifecyclePolicyRequest{RepositoryName: s(n), LifecyclePolicyText: s(strings.Repeat("{", 200))}))
		check("PutLifecyclePolicy "+n, err)
		_, err = e.h.GetLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.GetLifecyclePolicyRequest{RepositoryName: s(n)}))
		check("GetLifecyclePolicy "+n, err)
		_, err = e.h.DeleteLifecyclePolicy(e.ctx, connect.NewRequest(&ecrv1.DeleteLifecyclePolicyRequest{RepositoryName: s(n)}))
		check("DeleteLifecyclePolicy "+n, err)
		_, err = e.h.DeleteRepository(e.ctx, connect.NewRequest(&ecrv1.DeleteRepositoryRequest{RepositoryName: s(n + "x")}))
		check("DeleteRepository "+n, err)
	}
	if calls < 100 {
		t.Fatalf("only %d calls", calls)
	}
}
