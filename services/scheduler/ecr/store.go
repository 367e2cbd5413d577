package ecr

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Tag mutability settings (Repository.imageTagMutability) Berth serves.
const (
	Mutable   = "MUTABLE"
	Immutable = "IMMUTABLE"
)

// TokenLifetime is how long a GetAuthorizationToken token is accepted: 12 hours, as
// ECR's.
const TokenLifetime = 12 * time.Hour

// MaxManifestSize is the largest manifest the registry stores (bytes): manifests live
// in their etcd record, whose value etcd caps at 1.5 MiB by default.
const MaxManifestSize = 1 << 20

// Store is ECR's model: repositories, images and tags in etcd, and the tokens of the
// registry. The API handler and the registry (package registry) share it.
type Store struct {
	kv   clientv3.KV
	ring *seal.Keyring
	now  func() time.Time
	// host is the registry's host[:port], the host of every repositoryUri.
	host string

	// Blobs tells PutImage and BatchCheckLayerAvailability whether the registry holds a
	// blob, and its size (DiskBlobs of the
	// registry's directory); nil: no blob counts as present, so PutImage only tags
	// images the repository already holds.
	Blobs BlobSize
	// BlobDir is the registry's blob directory, shared with this scheduler: where the
	// layer-upload actions write (uploads.go). "" disables them.
	BlobDir string
	// HTTPS says the registry serves HTTPS (`berth scheduler` with --tls-cert), so
	// GetAuthorizationToken's proxyEndpoint is https://{host}; else http://{host}.
	HTTPS bool
}

// NewStore returns the model over kv. ring seals the authorization tokens (nil: no
// tokens, so GetAuthorizationToken and the registry refuse everything); host is the
// registry's address as clients name it ("127.0.0.1:5000"), the host of repositoryUri
// and proxyEndpoint ("" when no registry runs: every action answers ErrNoRegistry);
// now is the clock (time.Now when nil).
func NewStore(kv clientv3.KV, ring *seal.Keyring, host string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{kv: kv, ring: ring, host: host, now: now}
}

// Host returns the registry's host[:port] (the host of every repositoryUri).
func (s *Store) Host() string { return s.host }

// ProxyEndpoint returns the registry's URL as GetAuthorizationToken answers it:
// https://{host} when the registry serves HTTPS, else http://{host}.
func (s *Store) ProxyEndpoint() string {
	if s.HTTPS {
		return "https://" + s.host
	}
	return "http://" + s.host
}

// ErrNoRegistry answers every action when this Berth serves no registry.
var ErrNoRegistry = awserr.New("ServerException", "ECR is disabled on this Berth: it serves no registry (berth dev's BERTH_ECR_ADDR; see docs/ecr.md).")

// ErrNoKeyring answers GetAuthorizationToken when the scheduler has no secrets key to
// seal tokens with.
var ErrNoKeyring = awserr.New("ServerException", "ECR authorization tokens are disabled on this Berth: the scheduler has no secrets key (--secrets-key-file or BERTH_SECRETS_KEY; see docs/secrets.md).")

func invalidParameter(format string, args ...any) *awserr.Error {
	return awserr.New("InvalidParameterException", format, args...)
}

// RepositoryNotFound is the error of a repository that does not exist.
func RepositoryNotFound(s keys.Scope, name string) *awserr.Error {
	return awserr.New("RepositoryNotFoundException", "The repository with name '%s' does not exist in the registry with id '%s'", name, s.Account)
}

// ARN returns a repository's ARN: arn:aws:ecr:{region}:{account}:repository/{name}.
func ARN(s keys.Scope, name string) string {
	return fmt.Sprintf("arn:%s:ecr:%s:%s:repository/%s", keys.Partition, s.Region, s.Account, name)
}

// URI returns a repository's repositoryUri: {registry host}/{name}. The registry tells
// accounts and regions apart by the token a client signs in with (docs/ecr.md).
func (s *Store) URI(name string) string { return s.host + "/" + name }

// Repository reads a repository; RepositoryNotFoundException when there is none.
func (s *Store) Repository(ctx context.Context, sc keys.Scope, name string) (*storev1.EcrRepositoryRecord, int64, error) {
	rec, rev, err := store.Get[*storev1.EcrRepositoryRecord](ctx, s.kv, keys.EcrRepository(sc, name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, RepositoryNotFound(sc, name)
	}
	return rec, rev, err
}

// token is the sealed content of an authorization token.
type token struct {
	Account string `json:"a"`
	Region  string `json:"r"`
	Expires int64  `json:"e"` // Unix seconds
}

const tokenAD = "berth-ecr-authorization-token"

// IssueToken returns the password of an authorization token for sc (docker's password
// for user AWS) and when it expires: the account, region and expiry sealed with the
// keyring, so only this Berth's registry can read or forge it.
func (s *Store) IssueToken(sc keys.Scope) (string, time.Time, error) {
	if s.ring == nil {
		return "", time.Time{}, ErrNoKeyring
	}
	exp := s.now().Add(TokenLifetime).Truncate(time.Second)
	b, err := json.Marshal(token{Account: sc.Account, Region: sc.Region, Expires: exp.Unix()})
	if err != nil {
		return "", time.Time{}, err
	}
	return base64.RawURLEncoding.EncodeToString(s.ring.Seal(b, []byte(tokenAD))), exp, nil
}

// Errors of VerifyToken.
var (
	// ErrBadToken: the token was not issued by this Berth's keyring (or is not a token).
	ErrBadToken = errors.New("ecr: authorization token invalid")
	// ErrTokenExpired: the token was issued here but its 12 hours have passed.
	ErrTokenExpired = errors.New("ecr: authorization token expired")
)

// VerifyToken returns the scope a token's password was issued for; ErrBadToken when it
// was not issued by this Berth's keyring, ErrTokenExpired when it has expired.
func (s *Store) VerifyToken(password string) (keys.Scope, error) {
	if s.ring == nil {
		return keys.Scope{}, ErrBadToken
	}
	sealed, err := base64.RawURLEncoding.DecodeString(password)
	if err != nil {
		return keys.Scope{}, ErrBadToken
	}
	b, err := s.ring.Open(sealed, []byte(tokenAD))
	if err != nil {
		return keys.Scope{}, ErrBadToken
	}
	var t token
	if err := json.Unmarshal(b, &t); err != nil || t.Account == "" || t.Region == "" {
		return keys.Scope{}, ErrBadToken
	}
	if !s.now().Before(time.Unix(t.Expires, 0)) {
		return keys.Scope{}, ErrTokenExpired
	}
	return keys.Scope{Account: t.Account, Region: t.Region}, nil
}

// Image reads an image of a repository by its manifest digest or by one of its tags
// (ref "sha256:…" or a tag). It answers ImageNotFoundException when there is none, and
// RepositoryNotFoundException when the repository does not exist.
func (s *Store) Image(ctx context.Context, sc keys.Scope, repo, ref string) (*storev1.EcrImageRecord, int64, error) {
	digest := ref
	switch {
	case strings.Contains(ref, ":") && !digestPattern.MatchString(ref):
		return nil, 0, s.imageNotFound(ctx, sc, repo, ref, "")
	case !strings.Contains(ref, ":") && !ValidTag(ref):
		return nil, 0, s.imageNotFound(ctx, sc, repo, "", ref)
	}
	if !strings.Contains(ref, ":") {
		tag, _, err := store.Get[*storev1.EcrTagRecord](ctx, s.kv, keys.EcrTag(sc, repo, ref))
		if errors.Is(err, store.ErrNotFound) {
			return nil, 0, s.imageNotFound(ctx, sc, repo, "", ref)
		}
		if err != nil {
			return nil, 0, err
		}
		digest = tag.GetDigest()
	}
	rec, rev, err := store.Get[*storev1.EcrImageRecord](ctx, s.kv, keys.EcrImage(sc, repo, digest))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, s.imageNotFound(ctx, sc, repo, digest, "")
	}
	return rec, rev, err
}

// imageNotFound answers RepositoryNotFoundException when the repository is missing,
// else ImageNotFoundException.
func (s *Store) imageNotFound(ctx context.Context, sc keys.Scope, repo, digest, tag string) error {
	if _, _, err := s.Repository(ctx, sc, repo); err != nil {
		return err
	}
	return awserr.New("ImageNotFoundException", "The image with imageId {imageDigest:'%s', imageTag:'%s'} does not exist within the repository with name '%s' in the registry with id '%s'", digest, tag, repo, sc.Account)
}

// ImageTagAlreadyExists is the error of a tag pushed again to an IMMUTABLE repository.
func ImageTagAlreadyExists(repo, tag string) *awserr.Error {
	return awserr.New("ImageTagAlreadyExistsException", "The image tag '%s' already exists in the '%s' repository and cannot be overwritten because the repository is immutable.", tag, repo)
}

// Manifest is a pushed manifest: what PutManifest records.
type Manifest struct {
	// Digest is the manifest bytes' digest ("sha256:…").
	Digest string
	// MediaType is the manifest's media type.
	MediaType string
	// ArtifactMediaType is its config's media type ("" for an index).
	ArtifactMediaType string
	// Bytes are the manifest as pushed.
	Bytes []byte
	// Size is the image's size: the layers' sizes summed.
	Size int64
}

// PutManifest records manifest m in repository repo and, when tag is not "", points
// tag at it, in one etcd transaction. A tag of an IMMUTABLE repository that names
// another image already answers ImageTagAlreadyExistsException; pushing the same image
// under the same tag again is a no-op. A tag moved off an image of a MUTABLE repository
// leaves that image untagged, as ECR does.
func (s *Store) PutManifest(ctx context.Context, sc keys.Scope, repo, tag string, m Manifest) error {
	return awsapi.Retry(ctx, func() error { return s.putManifest(ctx, sc, repo, tag, m) })
}

func (s *Store) putManifest(ctx context.Context, sc keys.Scope, repo, tag string, m Manifest) error {
	rrec, rrev, err := s.Repository(ctx, sc, repo)
	if err != nil {
		return err
	}
	txn := store.NewTxn(s.kv).IfModRevision(keys.EcrRepository(sc, repo), rrev)
	imgKey := keys.EcrImage(sc, repo, m.Digest)
	img, irev, err := store.Get[*storev1.EcrImageRecord](ctx, s.kv, imgKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		img = &storev1.EcrImageRecord{Digest: m.Digest, MediaType: m.MediaType, Manifest: m.Bytes, Size: m.Size,
			PushedAt: awsapi.Epoch(s.now()), ArtifactMediaType: m.ArtifactMediaType}
		irev = 0
	case err != nil:
		return err
	}
	if tag != "" {
		tagKey := keys.EcrTag(sc, repo, tag)
		old, trev, err := store.Get[*storev1.EcrTagRecord](ctx, s.kv, tagKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
			txn.Create(tagKey, &storev1.EcrTagRecord{Digest: m.Digest})
		case err != nil:
			return err
		case old.GetDigest() == m.Digest:
			txn.IfModRevision(tagKey, trev)
		case rrec.GetRepository().GetImageTagMutability() == Immutable:
			return ImageTagAlreadyExists(repo, tag)
		default:
			txn.Update(tagKey, trev, &storev1.EcrTagRecord{Digest: m.Digest})
			if err := untag(ctx, s.kv, txn, sc, repo, old.GetDigest(), tag); err != nil {
				return err
			}
		}
		if !slices.Contains(img.GetTags(), tag) {
			img = proto.CloneOf(img)
			img.Tags = append(img.Tags, tag)
			slices.Sort(img.Tags)
		}
	}
	if irev == 0 {
		txn.Create(imgKey, img)
	} else {
		txn.Update(imgKey, irev, img)
	}
	_, err = txn.Commit(ctx)
	if errors.Is(err, store.ErrNotFound) {
		// The repository was deleted since it was read.
		return RepositoryNotFound(sc, repo)
	}
	return err
}

// untag adds to txn the removal of tag from the image digest names (if it still exists).
func untag(ctx context.Context, kv clientv3.KV, txn *store.Txn, sc keys.Scope, repo, digest, tag string) error {
	key := keys.EcrImage(sc, repo, digest)
	img, rev, err := store.Get[*storev1.EcrImageRecord](ctx, kv, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	img.Tags = slices.DeleteFunc(img.Tags, func(t string) bool { return t == tag })
	txn.Update(key, rev, img)
	return nil
}

// Tags returns tags of a repository in order, after the tag last ("" for the first
// page): up to limit of them (all when limit is 0), and whether more follow.
func (s *Store) Tags(ctx context.Context, sc keys.Scope, repo string, limit int, last string) ([]string, bool, error) {
	prefix := keys.EcrTags(sc, repo)
	token := ""
	if last != "" {
		token = store.TokenAfter(prefix + last)
	}
	var out []string
	for {
		page := store.MaxListLimit
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		ks, next, err := store.ListKeys(ctx, s.kv, prefix, page, token)
		if err != nil {
			return nil, false, err
		}
		for _, k := range ks {
			out = append(out, strings.TrimPrefix(k, prefix))
		}
		if next == "" {
			return out, false, nil
		}
		if limit > 0 && len(out) >= limit {
			return out, true, nil
		}
		token = next
	}
}

// ReferencedBlobs returns the digest of every blob (config and layer) an image of any
// account references: what the registry's garbage collection keeps.
func (s *Store) ReferencedBlobs(ctx context.Context) (map[string]bool, error) {
	refs := map[string]bool{}
	token := ""
	for {
		items, next, err := store.List[*storev1.EcrImageRecord](ctx, s.kv, keys.EcrAllImages(), store.MaxListLimit, token)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			blobs, err := manifestBlobs(it.Value.GetManifest())
			if err != nil {
				return nil, fmt.Errorf("ecr: image %s: manifest: %w", it.Key, err)
			}
			for _, d := range blobs {
				refs[d] = true
			}
		}
		if next == "" {
			return refs, nil
		}
		token = next
	}
}

// manifestBlobs returns the blobs an image manifest references: its config and layers
// (none for an index).
func manifestBlobs(manifest []byte) ([]string, error) {
	var m struct {
		Config *struct {
			Digest string `json:"digest"`
		} `json:"config"`
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, err
	}
	var out []string
	if m.Config != nil {
		out = append(out, m.Config.Digest)
	}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out, nil
}

// AddBlob records that a blob was pushed (or found by digest at its upload) in scope sc,
// so the registry serves it there.
func (s *Store) AddBlob(ctx context.Context, sc keys.Scope, digest string) error {
	_, err := s.kv.Put(ctx, keys.EcrBlob(sc, digest), "")
	return err
}

// HasBlob reports whether a blob was pushed in scope sc.
func (s *Store) HasBlob(ctx context.Context, sc keys.Scope, digest string) (bool, error) {
	resp, err := s.kv.Get(ctx, keys.EcrBlob(sc, digest), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

// ForgetBlobs deletes the index keys of every scope for the blobs gone returns true
// for (garbage collection removed their files), and returns how many it deleted.
func (s *Store) ForgetBlobs(ctx context.Context, gone func(digest string) bool) (int, error) {
	token, n := "", 0
	for {
		ks, next, err := store.ListKeys(ctx, s.kv, keys.EcrAllBlobs(), store.MaxListLimit, token)
		if err != nil {
			return n, err
		}
		for _, k := range ks {
			if d := k[strings.LastIndexByte(k, '/')+1:]; gone(d) {
				if _, err := s.kv.Delete(ctx, k); err != nil {
					return n, err
				}
				n++
			}
		}
		if next == "" {
			return n, nil
		}
		token = next
	}
}
