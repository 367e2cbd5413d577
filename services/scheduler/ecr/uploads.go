package ecr

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Layer uploads through the API (InitiateLayerUpload, UploadLayerPart,
// CompleteLayerUpload) are files under the blob directory, {BlobDir}/uploads/{id} and
// its {id}.json (scope, repository, part sizes), so the registry's garbage collection
// removes an upload abandoned for longer than its grace like any unreferenced file.
// A completed upload is renamed to its digest's name, {BlobDir}/sha256/{hex}, the
// registry's layout, and recorded in the caller's scope (Store.AddBlob).

const (
	// PartSize is the partSize InitiateLayerUpload answers (bytes): the size clients
	// send their parts in.
	PartSize = 10 << 20
	// MinPartSize is the smallest part but the last that CompleteLayerUpload accepts
	// (bytes), as ECR's LayerPartTooSmallException: "Layer parts must be at least 5 MiB
	// in size."
	MinPartSize = 5 << 20
	// MaxPartSize is the largest layerPartBlob (bytes), the model's limit.
	MaxPartSize = 20 << 20
	// LayerURLLifetime is how long a GetDownloadUrlForLayer URL is served.
	LayerURLLifetime = time.Hour
	// LayerURLPath is the registry's path of download URLs: {LayerURLPath}{token}.
	LayerURLPath = "/_berth/ecr/layers/"
)

// upload is the {id}.json of an upload in progress.
type upload struct {
	Account string  `json:"account"`
	Region  string  `json:"region"`
	Repo    string  `json:"repository"`
	Parts   []int64 `json:"parts"` // sizes, in order
}

var uploadIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// uploadLocks serialises the parts of one upload (per id).
var uploadLocks sync.Map

func lockUpload(id string) func() {
	m, _ := uploadLocks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

func (s *Store) uploadPath(id string) string { return filepath.Join(s.BlobDir, "uploads", id) }

// errNoBlobDir answers the upload actions of a scheduler that does not share the
// registry's blob directory.
var errNoBlobDir = awserr.New("ServerException", "ECR layer uploads are disabled on this Berth: the scheduler has no registry blob directory (berth scheduler --ecr-blob-dir; see docs/ecr.md).")

func uploadNotFound(s keys.Scope, repo, id string) error {
	return awserr.New("UploadNotFoundException", "The upload with id '%s' does not exist in the repository with name '%s' in the registry with id '%s'", id, repo, s.Account)
}

// readUpload reads the state of upload id of (s, repo); UploadNotFoundException when
// there is none for them.
func (s *Store) readUpload(sc keys.Scope, repo, id string) (*upload, error) {
	if !uploadIDPattern.MatchString(id) {
		return nil, uploadNotFound(sc, repo, id)
	}
	b, err := os.ReadFile(s.uploadPath(id) + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, uploadNotFound(sc, repo, id)
	}
	if err != nil {
		return nil, err
	}
	var u upload
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("ecr: upload %s: %w", id, err)
	}
	if u.Account != sc.Account || u.Region != sc.Region || u.Repo != repo {
		return nil, uploadNotFound(sc, repo, id)
	}
	return &u, nil
}

// writeUpload replaces upload id's state.
func (s *Store) writeUpload(id string, u *upload) error {
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	tmp := s.uploadPath(id) + ".json.tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.uploadPath(id)+".json")
}

// dropUpload removes an upload's files.
func (s *Store) dropUpload(id string) {
	_ = os.Remove(s.uploadPath(id))
	_ = os.Remove(s.uploadPath(id) + ".json")
	uploadLocks.Delete(id)
}

// newUploadID returns a random UUID (version 4), ECR's uploadId form.
func newUploadID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// InitiateLayerUpload starts an upload of a layer into a repository: its uploadId, and
// the partSize parts are expected in.
func (h *Handler) InitiateLayerUpload(ctx context.Context, req *connect.Request[ecrv1.InitiateLayerUploadRequest]) (*connect.Response[ecrv1.InitiateLayerUploadResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.InitiateLayerUploadRequest) (*ecrv1.InitiateLayerUploadResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		if h.BlobDir == "" {
			return nil, errNoBlobDir
		}
		if err := os.MkdirAll(filepath.Join(h.BlobDir, "uploads"), 0o755); err != nil {
			return nil, err
		}
		id := newUploadID()
		if err := os.WriteFile(h.uploadPath(id), nil, 0o644); err != nil {
			return nil, err
		}
		if err := h.writeUpload(id, &upload{Account: s.Account, Region: s.Region, Repo: repo, Parts: []int64{}}); err != nil {
			h.dropUpload(id)
			return nil, err
		}
		return &ecrv1.InitiateLayerUploadResponse{UploadId: proto.String(id), PartSize: PartSize}, nil
	})
}

// invalidLayerPart is ECR's InvalidLayerPartException; its message names the last
// valid byte received (the exception's lastValidByteReceived).
func invalidLayerPart(last int64, format string, args ...any) error {
	return awserr.New("InvalidLayerPartException", format+" The last valid byte received is %d.", append(args, last)...)
}

// UploadLayerPart appends a part to an upload: partFirstByte must follow the bytes
// received so far, and partLastByte-partFirstByte+1 must be the part's length.
func (h *Handler) UploadLayerPart(ctx context.Context, req *connect.Request[ecrv1.UploadLayerPartRequest]) (*connect.Response[ecrv1.UploadLayerPartResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.UploadLayerPartRequest) (*ecrv1.UploadLayerPartResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo, id, blob := in.GetRepositoryName(), in.GetUploadId(), in.GetLayerPartBlob()
		if len(blob) > MaxPartSize {
			return nil, invalidParameter("Invalid parameter at 'layerPartBlob' failed to satisfy constraint: 'Member must have length less than or equal to %d'", MaxPartSize)
		}
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		if h.BlobDir == "" {
			return nil, errNoBlobDir
		}
		defer lockUpload(id)()
		u, err := h.readUpload(s, repo, id)
		if err != nil {
			return nil, err
		}
		var size int64
		for _, p := range u.Parts {
			size += p
		}
		first, last := in.GetPartFirstByte(), in.GetPartLastByte()
		switch {
		case len(blob) == 0:
			return nil, invalidLayerPart(size-1, "The layer part is empty.")
		case first != size:
			return nil, invalidLayerPart(size-1, "The layer part's first byte %d does not follow the last byte received, %d.", first, size-1)
		case last-first+1 != int64(len(blob)):
			return nil, invalidLayerPart(size-1, "The layer part's size %d does not match partFirstByte %d and partLastByte %d.", len(blob), first, last)
		}
		f, err := os.OpenFile(h.uploadPath(id), os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		// Write at the recorded size: a part whose state update failed is overwritten by
		// the client's retry rather than appended twice.
		_, err = f.WriteAt(blob, size)
		if err == nil {
			err = f.Truncate(size + int64(len(blob)))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		u.Parts = append(u.Parts, int64(len(blob)))
		if err := h.writeUpload(id, u); err != nil {
			return nil, err
		}
		return &ecrv1.UploadLayerPartResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo),
			UploadId: proto.String(id), LastByteReceived: last}, nil
	})
}

// CompleteLayerUpload checks an upload against its digest and stores it as a layer of
// the caller's registry. A refused upload (empty, a part too small, a digest mismatch,
// a layer already there) is removed: nothing of it is left behind.
func (h *Handler) CompleteLayerUpload(ctx context.Context, req *connect.Request[ecrv1.CompleteLayerUploadRequest]) (*connect.Response[ecrv1.CompleteLayerUploadResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.CompleteLayerUploadRequest) (*ecrv1.CompleteLayerUploadResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo, id, digests := in.GetRepositoryName(), in.GetUploadId(), in.GetLayerDigests()
		if n := len(digests); n < 1 || n > 100 {
			return nil, invalidParameter("Invalid parameter at 'layerDigests' failed to satisfy constraint: 'Member must have length less than or equal to 100 and greater than or equal to 1'")
		}
		for _, d := range digests {
			if !digestPattern.MatchString(d) {
				return nil, invalidParameter("Invalid parameter at 'layerDigests': %s is not a sha256 digest (sha256:{64 hex digits}).", d)
			}
		}
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		if h.BlobDir == "" {
			return nil, errNoBlobDir
		}
		defer lockUpload(id)()
		u, err := h.readUpload(s, repo, id)
		if err != nil {
			return nil, err
		}
		refuse := func(err error) (*ecrv1.CompleteLayerUploadResponse, error) {
			h.dropUpload(id)
			return nil, err
		}
		if len(u.Parts) == 0 {
			return refuse(awserr.New("EmptyUploadException", "The upload with id '%s' does not contain any layer parts.", id))
		}
		if slices.ContainsFunc(u.Parts[:len(u.Parts)-1], func(n int64) bool { return n < MinPartSize }) {
			return refuse(awserr.New("LayerPartTooSmallException", "Layer parts must be at least 5 MiB in size."))
		}
		f, err := os.Open(h.uploadPath(id))
		if err != nil {
			return nil, err
		}
		sum := sha256.New()
		_, err = io.Copy(sum, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		digest := "sha256:" + hex.EncodeToString(sum.Sum(nil))
		if !slices.Contains(digests, digest) {
			return refuse(awserr.New("InvalidLayerException", "The layer digest calculation performed by Amazon ECR upon receipt of the image layer does not match the digest specified: got %s.", digest))
		}
		if _, ok := h.blob(ctx, s, digest); ok {
			return refuse(awserr.New("LayerAlreadyExistsException", "The image layer '%s' already exists in the registry with id '%s'.", digest, s.Account))
		}
		dst := filepath.Join(h.BlobDir, "sha256", digest[len("sha256:"):])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(h.uploadPath(id), dst); err != nil {
			return nil, err
		}
		// Garbage collection spares it for its grace from now: the manifest follows.
		now := time.Now()
		_ = os.Chtimes(dst, now, now)
		if err := h.AddBlob(ctx, s, digest); err != nil {
			return nil, err
		}
		h.dropUpload(id)
		return &ecrv1.CompleteLayerUploadResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo),
			UploadId: proto.String(id), LayerDigest: proto.String(digest)}, nil
	})
}

// layerURL is the sealed content of a GetDownloadUrlForLayer URL's token.
type layerURL struct {
	Account string `json:"a"`
	Region  string `json:"r"`
	Repo    string `json:"n"`
	Digest  string `json:"d"`
	Expires int64  `json:"e"` // Unix seconds
}

const layerURLAD = "berth-ecr-layer-url"

// Errors of VerifyLayerURL.
var (
	// ErrBadLayerURL: the token was not issued by this Berth's keyring.
	ErrBadLayerURL = errors.New("ecr: layer URL invalid")
	// ErrLayerURLExpired: the URL's LayerURLLifetime has passed.
	ErrLayerURLExpired = errors.New("ecr: layer URL expired")
)

// LayerURLToken returns the token of a download URL of layer digest in repository repo
// of sc, valid for LayerURLLifetime: sealed with the keyring, so only this Berth can
// issue one.
func (s *Store) LayerURLToken(sc keys.Scope, repo, digest string) (string, error) {
	if s.ring == nil {
		return "", ErrNoKeyring
	}
	b, err := json.Marshal(layerURL{Account: sc.Account, Region: sc.Region, Repo: repo, Digest: digest, Expires: s.now().Add(LayerURLLifetime).Unix()})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.ring.Seal(b, []byte(layerURLAD))), nil
}

// VerifyLayerURL returns the scope, repository and digest a download URL's token was
// issued for; ErrBadLayerURL or ErrLayerURLExpired otherwise.
func (s *Store) VerifyLayerURL(tok string) (keys.Scope, string, string, error) {
	if s.ring == nil {
		return keys.Scope{}, "", "", ErrBadLayerURL
	}
	sealed, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return keys.Scope{}, "", "", ErrBadLayerURL
	}
	b, err := s.ring.Open(sealed, []byte(layerURLAD))
	if err != nil {
		return keys.Scope{}, "", "", ErrBadLayerURL
	}
	var u layerURL
	if err := json.Unmarshal(b, &u); err != nil || u.Account == "" || u.Digest == "" {
		return keys.Scope{}, "", "", ErrBadLayerURL
	}
	if !s.now().Before(time.Unix(u.Expires, 0)) {
		return keys.Scope{}, "", "", ErrLayerURLExpired
	}
	return keys.Scope{Account: u.Account, Region: u.Region}, u.Repo, u.Digest, nil
}

// references reports whether an image of repo references blob digest (as its config or
// one of its layers).
func (s *Store) references(ctx context.Context, sc keys.Scope, repo, digest string) (bool, error) {
	imgs, err := store.ListAll[*storev1.EcrImageRecord](ctx, s.kv, keys.EcrImages(sc, repo))
	if err != nil {
		return false, err
	}
	for _, it := range imgs {
		blobs, err := manifestBlobs(it.Value.GetManifest())
		if err != nil {
			continue
		}
		if slices.Contains(blobs, digest) {
			return true, nil
		}
	}
	return false, nil
}

// GetDownloadUrlForLayer answers a URL the registry serves the layer at, without
// credentials, for LayerURLLifetime. The layer must be one an image of the repository
// references (LayerInaccessibleException otherwise, as ECR's for unassociated layers).
func (h *Handler) GetDownloadUrlForLayer(ctx context.Context, req *connect.Request[ecrv1.GetDownloadUrlForLayerRequest]) (*connect.Response[ecrv1.GetDownloadUrlForLayerResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.GetDownloadUrlForLayerRequest) (*ecrv1.GetDownloadUrlForLayerResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo, d := in.GetRepositoryName(), in.GetLayerDigest()
		if !digestPattern.MatchString(d) {
			return nil, invalidParameter("Invalid parameter at 'layerDigest': %s is not a sha256 digest (sha256:{64 hex digits}).", d)
		}
		if _, _, err := h.Repository(ctx, s, repo); err != nil {
			return nil, err
		}
		if _, ok := h.blob(ctx, s, d); !ok {
			return nil, awserr.New("LayersNotFoundException", "The layer with digest '%s' does not exist in the registry with id '%s'", d, s.Account)
		}
		ok, err := h.references(ctx, s, repo, d)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, awserr.New("LayerInaccessibleException", "The specified layer is not available because it is not associated with an image. Unassociated image layers may be cleaned up at any time.")
		}
		tok, err := h.LayerURLToken(s, repo, d)
		if err != nil {
			return nil, err
		}
		return &ecrv1.GetDownloadUrlForLayerResponse{DownloadUrl: proto.String("http://" + h.host + LayerURLPath + tok), LayerDigest: proto.String(d)}, nil
	})
}
