// Package registry is ECR's data plane: the OCI registry (Distribution spec v2) that
// docker, containerd and go-containerregistry push to and pull from, with ECR's
// semantics on top of go-containerregistry's registry (pkg/registry):
//
//   - every request signs in with Basic auth, user AWS and the password of an ECR
//     authorization token (GetAuthorizationToken), which names the account and region
//     whose repositories it reaches; a missing, foreign or expired token answers 401;
//   - a repository must exist (CreateRepository) or the request answers 404 NAME_UNKNOWN;
//   - blobs (layers, configs) are go-containerregistry's blob protocol over a disk
//     store, content-addressed under the data dir ({dir}/sha256/{hex}), so they survive
//     restarts; uploads are checked against their digest before they land;
//   - manifests are the images of the ecr model (ecr.Store.PutManifest): kept in etcd
//     with their tags, which is where DescribeImages, ListImages, BatchGetImage and
//     BatchDeleteImage read them, and where tag immutability is enforced (a tag of an
//     IMMUTABLE repository pushed again with another image answers 400 TAG_INVALID with
//     ECR's message).
//
// See docs/ecr.md.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Config configures the registry.
type Config struct {
	// Store is ECR's model: repositories, images, tokens.
	Store *ecr.Store
	// Dir is where blobs are kept (created if missing).
	Dir string
	// Logger receives internal faults; nil discards them.
	Logger *slog.Logger
}

// Registry is the registry's http.Handler.
type Registry struct {
	store *ecr.Store
	blobs http.Handler // go-containerregistry's registry, used for blob requests only
	disk  *diskBlobs
	log   *slog.Logger
}

// New returns the registry serving from cfg.Dir.
func New(cfg Config) (*Registry, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("registry blobs: %w", err)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	disk := &diskBlobs{dir: cfg.Dir}
	return &Registry{
		store: cfg.Store,
		disk:  disk,
		blobs: ggcr.New(ggcr.WithBlobHandler(disk), ggcr.Logger(log.New(io.Discard, "", 0))),
		log:   lg,
	}, nil
}

// diskBlobs keeps blobs content-addressed on disk, {dir}/sha256/{hex}, as
// go-containerregistry's disk blob handler does, but with a Stat that reads the file's
// size instead of hashing the whole blob on every HEAD (a blob only lands under its
// digest's name after its upload was checked against that digest) and a Put that leaves
// nothing behind when an upload fails.
type diskBlobs struct {
	dir string
}

func (d *diskBlobs) path(h v1.Hash) string { return filepath.Join(d.dir, h.Algorithm, h.Hex) }

// Stat returns a blob's size, or ggcr.ErrNotFound. It sets the file's modification
// time to now: a client that found the blob present will reference it from a manifest
// it is about to push, and CollectGarbage spares blobs touched within its grace.
func (d *diskBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	p := d.path(h)
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, ggcr.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now)
	return fi.Size(), nil
}

// Get opens a blob.
func (d *diskBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	rc, err := os.Open(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ggcr.ErrNotFound
	}
	return rc, err
}

// Put stores a blob: it lands under its digest's name only once rc has been read to
// its end, which the caller's reader answers with an error when the bytes do not match
// h; a failed upload leaves no file behind.
func (d *diskBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	if err := os.MkdirAll(filepath.Join(d.dir, h.Algorithm), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(d.dir, "upload-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), d.path(h))
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// layerURL serves a GetDownloadUrlForLayer URL: GET (with ranges) or HEAD of the layer
// its token names, without credentials (the token is them), while the token is valid
// and the layer is still the scope's. Refusals answer 403 as a presigned URL's do.
func (r *Registry) layerURL(w http.ResponseWriter, req *http.Request, tok string) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	scope, _, digest, err := r.store.VerifyLayerURL(tok)
	switch {
	case errors.Is(err, ecr.ErrLayerURLExpired):
		http.Error(w, "Request has expired", http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, "Access Denied", http.StatusForbidden)
		return
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		http.Error(w, "Access Denied", http.StatusForbidden)
		return
	}
	if ok, err := r.store.HasBlob(req.Context(), scope, digest); err != nil || !ok {
		http.Error(w, "The specified key does not exist.", http.StatusNotFound)
		return
	}
	f, err := os.Open(r.disk.path(h))
	if err != nil {
		http.Error(w, "The specified key does not exist.", http.StatusNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+digest+`"`)
	http.ServeContent(w, req, "", fi.ModTime(), f)
}

// regError writes a Distribution spec error.
func regError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

// ServeHTTP serves the Distribution API.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if tok, ok := strings.CutPrefix(req.URL.Path, ecr.LayerURLPath); ok {
		r.layerURL(w, req, tok)
		return
	}
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if req.URL.Path != "/v2" && !strings.HasPrefix(req.URL.Path, "/v2/") {
		regError(w, http.StatusNotFound, "UNSUPPORTED", "not a registry API path")
		return
	}
	scope, ok := r.authenticate(w, req)
	if !ok {
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, "/v2"), "/")
	if rest == "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
		return
	}
	name, kind, ref, ok := parse(rest)
	if !ok {
		regError(w, http.StatusNotFound, "UNSUPPORTED", "The operation is unsupported.")
		return
	}
	repo := name
	_, _, err := r.store.Repository(req.Context(), scope, name)
	if isNotFound(err) && kind == "manifests" && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		// A pull-through cache's first pull creates the repository.
		if fetched, perr := r.pullThrough(req.Context(), scope, name, ref); perr != nil {
			regError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", perr.Error())
			return
		} else if fetched {
			err = nil
		}
	}
	if err != nil {
		// Not the caller's: another account's repository as {account}/{name}, reached
		// only for what its repository policy allows the caller's account.
		owner, rest, ok := ecr.CrossAccount(scope, name)
		if !ok || !isNotFound(err) {
			r.answer(w, err, "")
			return
		}
		rec, _, oerr := r.store.Repository(req.Context(), owner, rest)
		if oerr != nil {
			r.answer(w, err, "")
			return
		}
		if !r.crossAccountAllowed(w, req, scope, owner, rec.GetRepository().GetRepositoryArn(), rec.GetPolicy(), kind) {
			return
		}
		scope, repo = owner, rest
	}
	switch kind {
	case "blobs":
		r.blob(w, req, scope, ref)
	case "manifests":
		r.manifest(w, req, scope, repo, ref)
	case "tags":
		r.tags(w, req, scope, repo)
	}
}

func isNotFound(err error) bool {
	var ae *awserr.Error
	return errors.As(err, &ae) && ae.Type == "RepositoryNotFoundException"
}

// crossAccountAllowed checks a request of caller's token on another account's
// repository against its policy: pulls only (GET and HEAD), a manifest needing
// ecr:BatchGetImage, a blob ecr:GetDownloadUrlForLayer, the tag list ecr:ListImages.
// A refusal answers 403 DENIED with IAM's wording.
func (r *Registry) crossAccountAllowed(w http.ResponseWriter, req *http.Request, caller, owner keys.Scope, arn, policy, kind string) bool {
	who := fmt.Sprintf("arn:%s:iam::%s:root", keys.Partition, caller.Account)
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		regError(w, http.StatusForbidden, "DENIED", fmt.Sprintf("User: %s is not authorized to push to %s: Berth serves other accounts' repositories for pulls only.", who, arn))
		return false
	}
	action := map[string]string{"manifests": "ecr:BatchGetImage", "blobs": "ecr:GetDownloadUrlForLayer", "tags": "ecr:ListImages"}[kind]
	if !ecr.PolicyAllows(policy, caller.Account, action) {
		regError(w, http.StatusForbidden, "DENIED", fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s because no resource-based policy allows the %s action", who, action, arn, action))
		return false
	}
	return true
}

// blob serves /v2/{name}/blobs/…: go-containerregistry's blob protocol, confined to
// the token's scope. A blob is served (GET, HEAD) only to a scope that pushed it; an
// upload that completes records its digest in the scope before the client hears of it.
func (r *Registry) blob(w http.ResponseWriter, req *http.Request, scope keys.Scope, ref string) {
	if req.Method == http.MethodDelete {
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "Deleting blobs is not supported: delete images with BatchDeleteImage.")
		return
	}
	if ref != "" && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		if _, err := v1.NewHash(ref); err != nil {
			regError(w, http.StatusBadRequest, "DIGEST_INVALID", "invalid digest: "+err.Error())
			return
		}
		ok, err := r.store.HasBlob(req.Context(), scope, ref)
		if err != nil {
			r.answer(w, err, ref)
			return
		}
		if !ok {
			regError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
			return
		}
	}
	r.blobs.ServeHTTP(&recordingWriter{ResponseWriter: w, ctx: req.Context(), r: r, scope: scope}, req)
}

// recordingWriter records, when an upload completes (201 with Docker-Content-Digest),
// the blob in the scope before the answer goes out; when it cannot, the client gets
// 500 instead, and pushes again.
type recordingWriter struct {
	http.ResponseWriter
	ctx         context.Context
	r           *Registry
	scope       keys.Scope
	wroteHeader bool
	failed      bool
}

// WriteHeader records a completed upload's blob, then writes the status.
func (rw *recordingWriter) WriteHeader(status int) {
	if rw.wroteHeader {
		return
	}
	rw.wroteHeader = true
	if d := rw.Header().Get("Docker-Content-Digest"); status == http.StatusCreated && d != "" {
		if err := rw.r.store.AddBlob(rw.ctx, rw.scope, d); err != nil {
			rw.r.log.Error("ecr registry: record blob", "digest", d, "err", err)
			rw.failed = true
			rw.Header().Del("Docker-Content-Digest")
			rw.Header().Del("Location")
			regError(rw.ResponseWriter, http.StatusInternalServerError, "UNKNOWN", "internal error")
			return
		}
	}
	rw.ResponseWriter.WriteHeader(status)
}

// Write writes the body, unless recording the blob failed.
func (rw *recordingWriter) Write(b []byte) (int, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.failed {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// parse splits a path after /v2/ into the repository name, the kind of request (blobs,
// manifests, tags) and the reference after it.
func parse(rest string) (name, kind, ref string, ok bool) {
	if n, ok := strings.CutSuffix(rest, "/tags/list"); ok {
		return n, "tags", "", true
	}
	if i := strings.LastIndex(rest, "/manifests/"); i > 0 {
		ref := rest[i+len("/manifests/"):]
		return rest[:i], "manifests", ref, ref != "" && !strings.Contains(ref, "/")
	}
	if i := strings.LastIndex(rest, "/blobs/uploads"); i > 0 {
		return rest[:i], "blobs", "", true
	}
	if i := strings.LastIndex(rest, "/blobs/"); i > 0 {
		return rest[:i], "blobs", rest[i+len("/blobs/"):], true
	}
	return "", "", "", false
}

// authenticate checks the Basic credentials (AWS and a token's password) and returns
// the scope the token names, or answers 401.
func (r *Registry) authenticate(w http.ResponseWriter, req *http.Request) (keys.Scope, bool) {
	user, pw, ok := req.BasicAuth()
	msg := "Not Authorized"
	if ok && user == "AWS" {
		scope, err := r.store.VerifyToken(pw)
		if err == nil {
			return scope, true
		}
		if errors.Is(err, ecr.ErrTokenExpired) {
			msg = "Your authorization token has expired. Reauthenticate and try again."
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="http://`+r.store.Host()+`",service="ecr.amazonaws.com"`)
	regError(w, http.StatusUnauthorized, "DENIED", msg)
	return keys.Scope{}, false
}

// answer writes the registry error of a model error.
func (r *Registry) answer(w http.ResponseWriter, err error, ref string) {
	var ae *awserr.Error
	if errors.As(err, &ae) {
		switch ae.Type {
		case "RepositoryNotFoundException":
			regError(w, http.StatusNotFound, "NAME_UNKNOWN", ae.Message)
			return
		case "ImageNotFoundException":
			regError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", fmt.Sprintf("Requested image not found: %s", ref))
			return
		case "ImageTagAlreadyExistsException":
			regError(w, http.StatusBadRequest, "TAG_INVALID", ae.Message)
			return
		}
	}
	r.log.Error("registry", "err", err)
	regError(w, http.StatusInternalServerError, "UNKNOWN", "internal error")
}

// manifest serves GET, HEAD and PUT of /v2/{name}/manifests/{ref}.
func (r *Registry) manifest(w http.ResponseWriter, req *http.Request, scope keys.Scope, name, ref string) {
	ctx := req.Context()
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		img, _, err := r.store.Image(ctx, scope, name, ref)
		var ae *awserr.Error
		if errors.As(err, &ae) && ae.Type == "ImageNotFoundException" {
			if fetched, perr := r.pullThrough(ctx, scope, name, ref); perr != nil {
				regError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", perr.Error())
				return
			} else if fetched {
				img, _, err = r.store.Image(ctx, scope, name, ref)
			}
		}
		if err != nil {
			r.answer(w, err, ref)
			return
		}
		w.Header().Set("Content-Type", img.GetMediaType())
		w.Header().Set("Docker-Content-Digest", img.GetDigest())
		w.Header().Set("Content-Length", strconv.Itoa(len(img.GetManifest())))
		if req.Method == http.MethodGet {
			_, _ = w.Write(img.GetManifest())
		}
	case http.MethodPut:
		r.putManifest(w, req, scope, name, ref)
	case http.MethodDelete:
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "Deleting manifests is not supported: delete images with BatchDeleteImage.")
	default:
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "The operation is unsupported.")
	}
}

// putManifest checks and records a pushed manifest: its digest, its media type, and
// that every blob (image manifest) or manifest (index) it references is present.
func (r *Registry) putManifest(w http.ResponseWriter, req *http.Request, scope keys.Scope, name, ref string) {
	ctx := req.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, ecr.MaxManifestSize))
	if err != nil {
		regError(w, http.StatusBadRequest, "SIZE_INVALID", fmt.Sprintf("manifest larger than %d bytes or unreadable", ecr.MaxManifestSize))
		return
	}
	tag := ""
	if !strings.Contains(ref, ":") {
		if !ecr.ValidTag(ref) {
			regError(w, http.StatusBadRequest, "TAG_INVALID", fmt.Sprintf("Invalid tag %q: a tag must match [a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}", ref))
			return
		}
		tag = ref
	}
	rec, err := r.store.CheckManifest(ctx, scope, name, body, req.Header.Get("Content-Type"), func(ctx context.Context, d string) bool {
		h, err := v1.NewHash(d)
		if err != nil {
			return false
		}
		if ok, err := r.store.HasBlob(ctx, scope, d); err != nil || !ok {
			return false
		}
		_, err = r.disk.Stat(ctx, name, h)
		return err == nil
	})
	var me *ecr.ManifestError
	if errors.As(err, &me) {
		regError(w, http.StatusBadRequest, me.Code, me.Message)
		return
	}
	if err != nil {
		r.answer(w, err, ref)
		return
	}
	if tag == "" && ref != rec.Digest {
		regError(w, http.StatusBadRequest, "DIGEST_INVALID", fmt.Sprintf("manifest digest %s does not match %s", rec.Digest, ref))
		return
	}
	digest := rec.Digest
	if err := r.store.PutManifest(ctx, scope, name, tag, rec); err != nil {
		r.answer(w, err, ref)
		return
	}
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Location", "/v2/"+name+"/manifests/"+digest)
	w.WriteHeader(http.StatusCreated)
}

// tags serves /v2/{name}/tags/list (with n and last).
func (r *Registry) tags(w http.ResponseWriter, req *http.Request, scope keys.Scope, name string) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "The operation is unsupported.")
		return
	}
	n := 0
	if s := req.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			regError(w, http.StatusBadRequest, "PAGINATION_NUMBER_INVALID", "invalid number of results requested")
			return
		}
		n = v
	}
	tags, more, err := r.store.Tags(req.Context(), scope, name, n, req.URL.Query().Get("last"))
	if err != nil {
		r.answer(w, err, "")
		return
	}
	if more {
		next := url.Values{"n": {strconv.Itoa(n)}, "last": {tags[len(tags)-1]}}
		w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?%s>; rel="next"`, name, next.Encode()))
	}
	if tags == nil {
		tags = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "tags": tags})
}

// GarbageGrace is how long CollectGarbage spares an unreferenced blob after it was last
// uploaded or found present: the time a push has between its blobs and its manifest.
const GarbageGrace = time.Hour

// CollectGarbage removes the blobs no image of any account references (config and
// layers of every stored manifest) and the leftovers of uploads, sparing what was
// written or found present within grace. It returns how many files and bytes it removed.
func (r *Registry) CollectGarbage(ctx context.Context, grace time.Duration) (files int, bytes int64, err error) {
	refs, err := r.store.ReferencedBlobs(ctx)
	if err != nil {
		return 0, 0, err
	}
	cutoff := time.Now().Add(-grace)
	err = filepath.WalkDir(r.disk.dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return nil
		}
		rel, _ := filepath.Rel(r.disk.dir, p)
		alg, hex, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if ok && refs[alg+":"+hex] {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		files++
		bytes += fi.Size()
		return nil
	})
	if err != nil {
		return files, bytes, err
	}
	// The scopes' index keys of blobs whose file is gone (removed above, or before).
	_, err = r.store.ForgetBlobs(ctx, func(digest string) bool {
		h, err := v1.NewHash(digest)
		if err != nil {
			return true
		}
		_, err = os.Stat(r.disk.path(h))
		return errors.Is(err, os.ErrNotExist)
	})
	return files, bytes, err
}

// RunBackground runs, every interval until ctx ends, the registry's background pass:
// the repositories' lifecycle policies (ecr.Store.ApplyLifecyclePolicies), then
// CollectGarbage, which removes the blobs of the images they expired once their grace
// has passed. It logs what each pass removed.
func (r *Registry) RunBackground(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		expired, err := r.store.ApplyLifecyclePolicies(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("ecr: lifecycle policies", "err", err)
		case expired > 0:
			r.log.Info("ecr: lifecycle policies expired images", "images", expired)
		}
		files, n, err := r.CollectGarbage(ctx, GarbageGrace)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("ecr registry: garbage collection", "err", err)
		case files > 0:
			r.log.Info("ecr registry: garbage collected", "files", files, "bytes", n)
		}
	}
}
