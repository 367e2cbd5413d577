package ecr

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/gen/berth/ecr/v1/ecrv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Handler implements ecrv1connect.EcrServiceHandler over a Store.
type Handler struct {
	ecrv1connect.UnimplementedEcrServiceHandler
	// Logger receives the internal faults of its actions (errors that are not AWS
	// exceptions, which the client sees as ServerException); nil discards them.
	Logger *slog.Logger

	*Store
}

// New returns the handler over st.
func New(st *Store) *Handler { return &Handler{Store: st} }

// handle runs an ECR action through awsapi.Handle; without a registry every action
// answers ErrNoRegistry.
func handle[Req, Res any](ctx context.Context, h *Handler, req *connect.Request[Req], fn func(context.Context, keys.Scope, *Req) (*Res, error)) (*connect.Response[Res], error) {
	return awsapi.Handle(ctx, h.Logger, req, awsapi.Requires(h.host != "", ErrNoRegistry, fn))
}

// repositoryName is ECR's rule for repository names (the model's pattern, anchored).
var repositoryName = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)

// checkRepositoryName validates a repository name as ECR does.
func checkRepositoryName(name string) error {
	if len(name) < 2 || len(name) > 256 || !repositoryName.MatchString(name) {
		return invalidParameter("Invalid parameter at 'repositoryName' failed to satisfy constraint: 'must satisfy regular expression '(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*' and length between 2 and 256'")
	}
	return nil
}

// checkRegistry refuses a registryId other than the caller's account: the API actions
// serve only the caller's registry; other accounts' repositories are pulled from the
// registry itself, as their repository policies allow (docs/ecr.md).
func checkRegistry(s keys.Scope, id *string) error {
	if id != nil && *id != s.Account {
		return invalidParameter("Invalid parameter at 'registryId': Berth's ECR actions serve only the caller's own registry (%s); another account's repository is pulled from the registry as {host}/{account}/{name} when its repository policy allows it (docs/ecr.md).", s.Account)
	}
	return nil
}

// checkTags validates resource tags as ECR does (at most 50, keys 1–128 characters,
// values at most 256, no key twice, no aws: prefix).
func checkTags(tags []*ecrv1.Tag) error {
	if len(tags) > 50 {
		return awserr.New("TooManyTagsException", "A maximum of 50 tags is allowed per resource.")
	}
	seen := map[string]bool{}
	for _, t := range tags {
		k := t.GetKey()
		switch {
		case t.Key == nil || t.Value == nil:
			return awserr.New("InvalidTagParameterException", "Every tag needs a Key and a Value.")
		case len(k) < 1 || len(k) > 128:
			return awserr.New("InvalidTagParameterException", "Tag key %q must be between 1 and 128 characters.", k)
		case len(t.GetValue()) > 256:
			return awserr.New("InvalidTagParameterException", "The value of tag %q must be at most 256 characters.", k)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return awserr.New("InvalidTagParameterException", "Tag keys starting with 'aws:' are reserved.")
		case seen[k]:
			return awserr.New("InvalidTagParameterException", "Tag key %q is given more than once.", k)
		}
		seen[k] = true
	}
	return nil
}

// view returns a stored repository as the API answers it.
func (h *Handler) view(rec *storev1.EcrRepositoryRecord) *ecrv1.Repository {
	r := proto.CloneOf(rec.GetRepository())
	r.RepositoryUri = proto.String(h.URI(r.GetRepositoryName()))
	return r
}

// CreateRepository creates a repository in the caller's registry.
func (h *Handler) CreateRepository(ctx context.Context, req *connect.Request[ecrv1.CreateRepositoryRequest]) (*connect.Response[ecrv1.CreateRepositoryResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.CreateRepositoryRequest) (*ecrv1.CreateRepositoryResponse, error) {
		name := in.GetRepositoryName()
		if err := checkRepositoryName(name); err != nil {
			return nil, err
		}
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		mut := in.GetImageTagMutability()
		switch mut {
		case "":
			mut = Mutable
		case Mutable, Immutable:
		default:
			return nil, invalidParameter("Invalid parameter at 'imageTagMutability': %s is not supported by Berth; use MUTABLE or IMMUTABLE.", mut)
		}
		if len(in.GetImageTagMutabilityExclusionFilters()) > 0 {
			return nil, invalidParameter("Invalid parameter at 'imageTagMutabilityExclusionFilters': Berth does not support tag mutability exclusion filters.")
		}
		enc := in.GetEncryptionConfiguration()
		switch enc.GetEncryptionType() {
		case "", "AES256":
			if enc != nil && enc.KmsKey != nil {
				return nil, invalidParameter("Invalid parameter at 'encryptionConfiguration.kmsKey': a KMS key is only valid with encryptionType KMS.")
			}
		default:
			return nil, awserr.New("KmsException", "Invalid parameter at 'encryptionConfiguration.encryptionType': %s is not supported by Berth, which has no KMS; use AES256.", enc.GetEncryptionType())
		}
		if in.GetImageScanningConfiguration().GetScanOnPush() {
			return nil, invalidParameter("Invalid parameter at 'imageScanningConfiguration.scanOnPush': Berth does not scan images; set scanOnPush to false.")
		}
		if err := checkTags(in.GetTags()); err != nil {
			return nil, err
		}
		repo := &ecrv1.Repository{
			RepositoryName:             proto.String(name),
			RepositoryArn:              proto.String(ARN(s, name)),
			RegistryId:                 proto.String(s.Account),
			CreatedAt:                  proto.Float64(awsapi.Epoch(h.now())),
			ImageTagMutability:         proto.String(mut),
			ImageScanningConfiguration: &ecrv1.ImageScanningConfiguration{},
			EncryptionConfiguration:    &ecrv1.EncryptionConfiguration{EncryptionType: proto.String("AES256")},
		}
		rec := &storev1.EcrRepositoryRecord{Repository: repo, Tags: in.GetTags()}
		if _, err := store.Create(ctx, h.kv, keys.EcrRepository(s, name), rec); err != nil {
			if errors.Is(err, store.ErrExists) {
				return nil, awserr.New("RepositoryAlreadyExistsException", "The repository with name '%s' already exists in the registry with id '%s'", name, s.Account)
			}
			return nil, err
		}
		return &ecrv1.CreateRepositoryResponse{Repository: h.view(rec)}, nil
	})
}

// DescribeRepositories lists the caller's repositories, or the ones named.
func (h *Handler) DescribeRepositories(ctx context.Context, req *connect.Request[ecrv1.DescribeRepositoriesRequest]) (*connect.Response[ecrv1.DescribeRepositoriesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DescribeRepositoriesRequest) (*ecrv1.DescribeRepositoriesResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		out := &ecrv1.DescribeRepositoriesResponse{}
		if names := in.GetRepositoryNames(); len(names) > 0 {
			if in.GetMaxResults() != 0 || in.NextToken != nil {
				return nil, invalidParameter("Invalid parameter: maxResults and nextToken cannot be used with repositoryNames.")
			}
			if len(names) > 1000 {
				return nil, invalidParameter("Invalid parameter at 'repositoryNames': at most 1000 names.")
			}
			for _, n := range names {
				rec, _, err := h.Repository(ctx, s, n)
				if err != nil {
					return nil, err
				}
				out.Repositories = append(out.Repositories, h.view(rec))
			}
			return out, nil
		}
		limit, err := maxResults(in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		items, next, err := store.List[*storev1.EcrRepositoryRecord](ctx, h.kv, keys.EcrRepositories(s), limit, in.GetNextToken())
		if err != nil {
			if errors.Is(err, store.ErrInvalidToken) {
				return nil, invalidParameter("Invalid parameter at 'nextToken': the token is not valid.")
			}
			return nil, err
		}
		for _, it := range items {
			out.Repositories = append(out.Repositories, h.view(it.Value))
		}
		if next != "" {
			out.NextToken = proto.String(next)
		}
		return out, nil
	})
}

// maxResults checks a page size (1–1000; 0: not given, 100).
func maxResults(n int32) (int, error) {
	switch {
	case n == 0:
		return 100, nil
	case n < 1 || n > 1000:
		return 0, invalidParameter("Invalid parameter at 'maxResults' failed to satisfy constraint: 'Member must have value less than or equal to 1000 and greater than or equal to 1'")
	}
	return int(n), nil
}

// DeleteRepository deletes a repository: one holding images only with force, and then
// its images and tags with it, in one transaction.
func (h *Handler) DeleteRepository(ctx context.Context, req *connect.Request[ecrv1.DeleteRepositoryRequest]) (*connect.Response[ecrv1.DeleteRepositoryResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DeleteRepositoryRequest) (*ecrv1.DeleteRepositoryResponse, error) {
		name := in.GetRepositoryName()
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		for {
			rec, rev, err := h.Repository(ctx, s, name)
			if err != nil {
				return nil, err
			}
			repoKey, images, tags := keys.EcrRepository(s, name), keys.EcrImages(s, name), keys.EcrTags(s, name)
			conds := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(repoKey), "=", rev)}
			if !in.GetForce() {
				conds = append(conds, clientv3.Compare(clientv3.CreateRevision(images), "=", 0).WithPrefix())
			}
			resp, err := h.kv.Txn(ctx).If(conds...).Then(
				clientv3.OpDelete(repoKey), clientv3.OpDelete(images, clientv3.WithPrefix()), clientv3.OpDelete(tags, clientv3.WithPrefix()),
			).Commit()
			if err != nil {
				return nil, err
			}
			if resp.Succeeded {
				return &ecrv1.DeleteRepositoryResponse{Repository: h.view(rec)}, nil
			}
			if !in.GetForce() {
				n, err := h.kv.Get(ctx, images, clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					return nil, err
				}
				if n.Count > 0 {
					return nil, awserr.New("RepositoryNotEmptyException", "The repository with name '%s' in registry with id '%s' cannot be deleted because it still contains images", name, s.Account)
				}
			}
			// The repository changed under us: read it again.
		}
	})
}

// GetAuthorizationToken answers a token for the caller's registry: base64 of
// "AWS:{password}", expiring after TokenLifetime, and the registry's proxyEndpoint.
func (h *Handler) GetAuthorizationToken(ctx context.Context, req *connect.Request[ecrv1.GetAuthorizationTokenRequest]) (*connect.Response[ecrv1.GetAuthorizationTokenResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.GetAuthorizationTokenRequest) (*ecrv1.GetAuthorizationTokenResponse, error) {
		for _, id := range in.GetRegistryIds() {
			if err := checkRegistry(s, &id); err != nil {
				return nil, err
			}
		}
		pw, exp, err := h.IssueToken(s)
		if err != nil {
			return nil, err
		}
		return &ecrv1.GetAuthorizationTokenResponse{AuthorizationData: []*ecrv1.AuthorizationData{{
			AuthorizationToken: proto.String(base64.StdEncoding.EncodeToString([]byte("AWS:" + pw))),
			ExpiresAt:          proto.Float64(awsapi.Epoch(exp)),
			ProxyEndpoint:      proto.String(h.ProxyEndpoint()),
		}}}, nil
	})
}

// imageIDs returns an image's identifiers as ListImages answers them: one per tag, or
// the digest alone for an untagged image.
func imageIDs(img *storev1.EcrImageRecord) []*ecrv1.ImageIdentifier {
	if len(img.GetTags()) == 0 {
		return []*ecrv1.ImageIdentifier{{ImageDigest: proto.String(img.GetDigest())}}
	}
	out := make([]*ecrv1.ImageIdentifier, len(img.GetTags()))
	for i, t := range img.GetTags() {
		out[i] = &ecrv1.ImageIdentifier{ImageDigest: proto.String(img.GetDigest()), ImageTag: proto.String(t)}
	}
	return out
}

// tagStatus checks a filter's tagStatus (TAGGED, UNTAGGED, ANY; "" is ANY) and
// imageStatus (only ACTIVE images exist on Berth: ACTIVE and ANY match them).
func tagStatus(tag, status string) (func(*storev1.EcrImageRecord) bool, error) {
	switch status {
	case "", "ACTIVE", "ANY":
	default:
		return func(*storev1.EcrImageRecord) bool { return false }, nil
	}
	switch tag {
	case "", "ANY":
		return func(*storev1.EcrImageRecord) bool { return true }, nil
	case "TAGGED":
		return func(i *storev1.EcrImageRecord) bool { return len(i.GetTags()) > 0 }, nil
	case "UNTAGGED":
		return func(i *storev1.EcrImageRecord) bool { return len(i.GetTags()) == 0 }, nil
	}
	return nil, invalidParameter("Invalid parameter at 'filter.tagStatus': %s is not valid.", tag)
}

// listImages reads a page of a repository's images that keep passes.
func (h *Handler) listImages(ctx context.Context, s keys.Scope, repo string, max int32, token string, keep func(*storev1.EcrImageRecord) bool) ([]*storev1.EcrImageRecord, string, error) {
	if _, _, err := h.Repository(ctx, s, repo); err != nil {
		return nil, "", err
	}
	limit, err := maxResults(max)
	if err != nil {
		return nil, "", err
	}
	prefix := keys.EcrImages(s, repo)
	var out []*storev1.EcrImageRecord
	for {
		items, next, err := store.List[*storev1.EcrImageRecord](ctx, h.kv, prefix, limit-len(out), token)
		if err != nil {
			if errors.Is(err, store.ErrInvalidToken) {
				return nil, "", invalidParameter("Invalid parameter at 'nextToken': the token is not valid.")
			}
			return nil, "", err
		}
		for _, it := range items {
			if keep(it.Value) {
				out = append(out, it.Value)
			}
		}
		if next == "" || len(out) >= limit {
			return out, next, nil
		}
		token = next
	}
}

// ListImages lists a repository's image identifiers.
func (h *Handler) ListImages(ctx context.Context, req *connect.Request[ecrv1.ListImagesRequest]) (*connect.Response[ecrv1.ListImagesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.ListImagesRequest) (*ecrv1.ListImagesResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		keep, err := tagStatus(in.GetFilter().GetTagStatus(), in.GetFilter().GetImageStatus())
		if err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		limit, err := maxResults(in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		// maxResults counts image identifiers (one per tag), so a page ends before the
		// image whose identifiers would not fit, resuming right after the one before it.
		out := &ecrv1.ListImagesResponse{}
		prefix, token := keys.EcrImages(s, repo), in.GetNextToken()
		for {
			items, next, err := store.List[*storev1.EcrImageRecord](ctx, h.kv, prefix, limit, token)
			if err != nil {
				if errors.Is(err, store.ErrInvalidToken) {
					return nil, invalidParameter("Invalid parameter at 'nextToken': the token is not valid.")
				}
				return nil, err
			}
			for _, it := range items {
				if keep(it.Value) {
					ids := imageIDs(it.Value)
					if len(out.ImageIds) > 0 && len(out.ImageIds)+len(ids) > limit {
						out.NextToken = proto.String(token)
						return out, nil
					}
					out.ImageIds = append(out.ImageIds, ids...)
				}
				token = store.TokenAfter(it.Key)
			}
			if next == "" {
				return out, nil
			}
			if len(out.ImageIds) >= limit {
				out.NextToken = proto.String(next)
				return out, nil
			}
			token = next
		}
	})
}

// detail returns an image as DescribeImages answers it.
func detail(s keys.Scope, repo string, img *storev1.EcrImageRecord) *ecrv1.ImageDetail {
	d := &ecrv1.ImageDetail{
		RegistryId:             proto.String(s.Account),
		RepositoryName:         proto.String(repo),
		ImageDigest:            proto.String(img.GetDigest()),
		ImageTags:              slices.Clone(img.GetTags()),
		ImageSizeInBytes:       img.GetSize(),
		ImagePushedAt:          proto.Float64(img.GetPushedAt()),
		ImageManifestMediaType: proto.String(img.GetMediaType()),
		ImageStatus:            proto.String("ACTIVE"),
	}
	if img.GetArtifactMediaType() != "" {
		d.ArtifactMediaType = proto.String(img.GetArtifactMediaType())
	}
	return d
}

// checkImageID validates an image identifier: a digest "sha256:{64 hex}" and/or a tag.
func checkImageID(id *ecrv1.ImageIdentifier) (code, reason string) {
	if id.ImageDigest == nil && id.ImageTag == nil {
		return "MissingDigestAndTag", "Invalid request parameters: both tag and digest cannot be null"
	}
	if id.ImageDigest != nil && !digestPattern.MatchString(id.GetImageDigest()) {
		return "InvalidImageDigest", "Invalid request parameters: image digest should satisfy the regex '[a-zA-Z0-9-_+.]+:[a-fA-F0-9]+'"
	}
	if id.ImageTag != nil && !tagPattern.MatchString(id.GetImageTag()) {
		return "InvalidImageTag", "Invalid request parameters: image tag should satisfy the regex '[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}'"
	}
	return "", ""
}

var (
	digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	tagPattern    = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$`)
)

// ValidTag reports whether tag is a tag ECR and the distribution spec accept.
func ValidTag(tag string) bool { return tagPattern.MatchString(tag) }

// resolve finds the image an identifier names; ok false with a failure when none.
func (h *Handler) resolve(ctx context.Context, s keys.Scope, repo string, id *ecrv1.ImageIdentifier) (*storev1.EcrImageRecord, int64, *ecrv1.ImageFailure, error) {
	fail := func(code, reason string) *ecrv1.ImageFailure {
		return &ecrv1.ImageFailure{ImageId: id, FailureCode: proto.String(code), FailureReason: proto.String(reason)}
	}
	if code, reason := checkImageID(id); code != "" {
		return nil, 0, fail(code, reason), nil
	}
	ref := id.GetImageDigest()
	if ref == "" {
		ref = id.GetImageTag()
	}
	img, rev, err := h.Image(ctx, s, repo, ref)
	var ae *awserr.Error
	if errors.As(err, &ae) && ae.Type == "ImageNotFoundException" {
		return nil, 0, fail("ImageNotFound", "Requested image not found"), nil
	}
	if err != nil {
		return nil, 0, nil, err
	}
	if id.ImageTag != nil && id.ImageDigest != nil && !slices.Contains(img.GetTags(), id.GetImageTag()) {
		return nil, 0, fail("ImageTagDoesNotMatchDigest", "Invalid request parameters: given tag does not map to the given digest"), nil
	}
	return img, rev, nil, nil
}

// DescribeImages describes a repository's images, or the ones named.
func (h *Handler) DescribeImages(ctx context.Context, req *connect.Request[ecrv1.DescribeImagesRequest]) (*connect.Response[ecrv1.DescribeImagesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DescribeImagesRequest) (*ecrv1.DescribeImagesResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		out := &ecrv1.DescribeImagesResponse{}
		if ids := in.GetImageIds(); len(ids) > 0 {
			if in.GetMaxResults() != 0 || in.NextToken != nil || in.Filter != nil {
				return nil, invalidParameter("Invalid parameter: maxResults, nextToken and filter cannot be used with imageIds.")
			}
			if _, _, err := h.Repository(ctx, s, repo); err != nil {
				return nil, err
			}
			for _, id := range ids {
				img, _, fail, err := h.resolve(ctx, s, repo, id)
				if err != nil {
					return nil, err
				}
				if fail != nil {
					if fail.GetFailureCode() == "ImageNotFound" || fail.GetFailureCode() == "ImageTagDoesNotMatchDigest" {
						return nil, awserr.New("ImageNotFoundException", "The image with imageId {imageDigest:'%s', imageTag:'%s'} does not exist within the repository with name '%s' in the registry with id '%s'", id.GetImageDigest(), id.GetImageTag(), repo, s.Account)
					}
					return nil, invalidParameter("%s", fail.GetFailureReason())
				}
				out.ImageDetails = append(out.ImageDetails, detail(s, repo, img))
			}
			return out, nil
		}
		keep, err := tagStatus(in.GetFilter().GetTagStatus(), in.GetFilter().GetImageStatus())
		if err != nil {
			return nil, err
		}
		imgs, next, err := h.listImages(ctx, s, repo, in.GetMaxResults(), in.GetNextToken(), keep)
		if err != nil {
			return nil, err
		}
		for _, img := range imgs {
			out.ImageDetails = append(out.ImageDetails, detail(s, repo, img))
		}
		if next != "" {
			out.NextToken = proto.String(next)
		}
		return out, nil
	})
}

// BatchGetImage answers the manifests of the images named.
func (h *Handler) BatchGetImage(ctx context.Context, req *connect.Request[ecrv1.BatchGetImageRequest]) (*connect.Response[ecrv1.BatchGetImageResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.BatchGetImageRequest) (*ecrv1.BatchGetImageResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		if n := len(in.GetImageIds()); n < 1 || n > 100 {
			return nil, invalidParameter("Invalid parameter at 'imageIds' failed to satisfy constraint: 'Member must have length less than or equal to 100 and greater than or equal to 1'")
		}
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		out := &ecrv1.BatchGetImageResponse{}
		for _, id := range in.GetImageIds() {
			img, _, fail, err := h.resolve(ctx, s, repo, id)
			if err != nil {
				return nil, err
			}
			if fail == nil && len(in.GetAcceptedMediaTypes()) > 0 && !slices.Contains(in.GetAcceptedMediaTypes(), img.GetMediaType()) {
				fail = &ecrv1.ImageFailure{ImageId: id, FailureCode: proto.String("ImageNotFound"),
					FailureReason: proto.String("The image's manifest is " + img.GetMediaType() + ", not one of acceptedMediaTypes; Berth does not convert manifests")}
			}
			if fail != nil {
				out.Failures = append(out.Failures, fail)
				continue
			}
			imgID := &ecrv1.ImageIdentifier{ImageDigest: proto.String(img.GetDigest())}
			if id.ImageTag != nil {
				imgID.ImageTag = proto.String(id.GetImageTag())
			}
			out.Images = append(out.Images, &ecrv1.Image{
				RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), ImageId: imgID,
				ImageManifest: proto.String(string(img.GetManifest())), ImageManifestMediaType: proto.String(img.GetMediaType()),
			})
		}
		return out, nil
	})
}

// BatchDeleteImage deletes images by digest (with all their tags) or removes tags
// (deleting an image whose last tag goes), each in one transaction.
func (h *Handler) BatchDeleteImage(ctx context.Context, req *connect.Request[ecrv1.BatchDeleteImageRequest]) (*connect.Response[ecrv1.BatchDeleteImageResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.BatchDeleteImageRequest) (*ecrv1.BatchDeleteImageResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		if n := len(in.GetImageIds()); n < 1 || n > 100 {
			return nil, invalidParameter("Invalid parameter at 'imageIds' failed to satisfy constraint: 'Member must have length less than or equal to 100 and greater than or equal to 1'")
		}
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		out := &ecrv1.BatchDeleteImageResponse{}
		for _, id := range in.GetImageIds() {
			var deleted []*ecrv1.ImageIdentifier
			var fail *ecrv1.ImageFailure
			err := awsapi.Retry(ctx, func() error {
				img, rev, f, err := h.resolve(ctx, s, repo, id)
				if err != nil || f != nil {
					fail = f
					return err
				}
				txn := store.NewTxn(h.kv)
				imgKey := keys.EcrImage(s, repo, img.GetDigest())
				if id.ImageDigest == nil {
					// By tag: the tag goes, and the image with its last tag.
					tag := id.GetImageTag()
					txn.Delete(keys.EcrTag(s, repo, tag))
					rest := slices.DeleteFunc(slices.Clone(img.GetTags()), func(t string) bool { return t == tag })
					if len(rest) == 0 {
						txn.IfModRevision(imgKey, rev).Delete(imgKey)
					} else {
						img.Tags = rest
						txn.Update(imgKey, rev, img)
					}
					deleted = []*ecrv1.ImageIdentifier{{ImageDigest: proto.String(img.GetDigest()), ImageTag: proto.String(tag)}}
				} else {
					txn.IfModRevision(imgKey, rev).Delete(imgKey)
					for _, t := range img.GetTags() {
						txn.Delete(keys.EcrTag(s, repo, t))
					}
					deleted = imageIDs(img)
				}
				_, err = txn.Commit(ctx)
				return err
			})
			if err != nil {
				return nil, err
			}
			if fail != nil {
				out.Failures = append(out.Failures, fail)
				continue
			}
			out.ImageIds = append(out.ImageIds, deleted...)
		}
		return out, nil
	})
}

// PutImage records a manifest (and tag) as the registry's push does: the retagging
// half of `aws ecr batch-get-image | aws ecr put-image`, or a manifest whose blobs were
// pushed to the registry.
func (h *Handler) PutImage(ctx context.Context, req *connect.Request[ecrv1.PutImageRequest]) (*connect.Response[ecrv1.PutImageResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.PutImageRequest) (*ecrv1.PutImageResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		body := []byte(in.GetImageManifest())
		if len(body) == 0 || len(body) > MaxManifestSize {
			return nil, invalidParameter("Invalid parameter at 'imageManifest': between 1 and %d bytes.", MaxManifestSize)
		}
		tag := in.GetImageTag()
		if in.ImageTag != nil && !ValidTag(tag) {
			return nil, invalidParameter("Invalid parameter at 'imageTag' failed to satisfy constraint: 'must satisfy regular expression '[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}''")
		}
		if in.ImageDigest != nil && !digestPattern.MatchString(in.GetImageDigest()) {
			return nil, invalidParameter("Invalid parameter at 'imageDigest': %s is not a sha256 digest.", in.GetImageDigest())
		}
		// The blobs of an image the repository already holds were checked when it was
		// pushed, and garbage collection keeps what an image references.
		known := func(ctx context.Context, d string) bool { _, ok := h.blob(ctx, s, d); return ok }
		m, err := h.CheckManifest(ctx, s, repo, body, in.GetImageManifestMediaType(), known)
		var me *ManifestError
		if errors.As(err, &me) {
			if _, _, ierr := h.Image(ctx, s, repo, m.Digest); ierr == nil && me.Code == "MANIFEST_BLOB_UNKNOWN" {
				err = nil
			}
		}
		if errors.As(err, &me) {
			switch me.Code {
			case "MANIFEST_BLOB_UNKNOWN":
				return nil, awserr.New("LayersNotFoundException", "Layers with digests '[%s]' required for pushing image into repository with name '%s' in the registry with id '%s' do not exist", strings.Join(me.Missing, ", "), repo, s.Account)
			case "MANIFEST_UNKNOWN":
				return nil, awserr.New("ReferencedImagesNotFoundException", "Manifests with digests '[%s]' referenced by the image do not exist in the repository with name '%s' in the registry with id '%s'", strings.Join(me.Missing, ", "), repo, s.Account)
			}
			return nil, invalidParameter("Invalid parameter at 'imageManifest': %s", me.Message)
		}
		if err != nil {
			return nil, err
		}
		if in.ImageDigest != nil && in.GetImageDigest() != m.Digest {
			return nil, awserr.New("ImageDigestDoesNotMatchException", "Provided digest '%s' does not match the digest of the manifest '%s'", in.GetImageDigest(), m.Digest)
		}
		if img, _, err := h.Image(ctx, s, repo, m.Digest); err == nil && (tag == "" || slices.Contains(img.GetTags(), tag)) {
			return nil, awserr.New("ImageAlreadyExistsException", "Image with digest '%s' and tag '%s' already exists in the repository with name '%s' in registry with id '%s'", m.Digest, tag, repo, s.Account)
		}
		if err := h.PutManifest(ctx, s, repo, tag, m); err != nil {
			return nil, err
		}
		id := &ecrv1.ImageIdentifier{ImageDigest: proto.String(m.Digest)}
		if tag != "" {
			id.ImageTag = proto.String(tag)
		}
		return &ecrv1.PutImageResponse{Image: &ecrv1.Image{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), ImageId: id,
			ImageManifest: proto.String(string(body)), ImageManifestMediaType: proto.String(m.MediaType)}}, nil
	})
}

// blob returns the size of a blob pushed in scope s that the registry still holds.
func (h *Handler) blob(ctx context.Context, s keys.Scope, digest string) (int64, bool) {
	if h.Blobs == nil {
		return 0, false
	}
	if ok, err := h.HasBlob(ctx, s, digest); err != nil || !ok {
		return 0, false
	}
	return h.Blobs(ctx, digest)
}

// BatchCheckLayerAvailability answers which of the layers named the caller's account
// has pushed (the registry's blobs of its scope).
func (h *Handler) BatchCheckLayerAvailability(ctx context.Context, req *connect.Request[ecrv1.BatchCheckLayerAvailabilityRequest]) (*connect.Response[ecrv1.BatchCheckLayerAvailabilityResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.BatchCheckLayerAvailabilityRequest) (*ecrv1.BatchCheckLayerAvailabilityResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		if n := len(in.GetLayerDigests()); n < 1 || n > 100 {
			return nil, invalidParameter("Invalid parameter at 'layerDigests' failed to satisfy constraint: 'Member must have length less than or equal to 100 and greater than or equal to 1'")
		}
		if _, _, err := h.Repository(ctx, s, in.GetRepositoryName()); err != nil {
			return nil, err
		}
		out := &ecrv1.BatchCheckLayerAvailabilityResponse{}
		for _, d := range in.GetLayerDigests() {
			if !digestPattern.MatchString(d) {
				out.Failures = append(out.Failures, &ecrv1.LayerFailure{LayerDigest: proto.String(d), FailureCode: proto.String("InvalidLayerDigest"),
					FailureReason: proto.String("Invalid layer digest: want sha256:{64 hex digits}")})
				continue
			}
			size, ok := h.blob(ctx, s, d)
			if !ok {
				out.Failures = append(out.Failures, &ecrv1.LayerFailure{LayerDigest: proto.String(d), FailureCode: proto.String("MissingLayerDigest"),
					FailureReason: proto.String("Could not find the requested layer")})
				continue
			}
			out.Layers = append(out.Layers, &ecrv1.Layer{LayerDigest: proto.String(d), LayerAvailability: proto.String("AVAILABLE"), LayerSize: size})
		}
		return out, nil
	})
}
