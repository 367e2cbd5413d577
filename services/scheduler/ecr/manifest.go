package ecr

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Media types of the manifests ECR stores.
const (
	DockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	DockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	OCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	OCIIndex       = "application/vnd.oci.image.index.v1+json"
)

// ManifestError is a manifest the registry and PutImage refuse. Code is the
// Distribution spec's error code the registry answers (MANIFEST_INVALID,
// MANIFEST_BLOB_UNKNOWN, MANIFEST_UNKNOWN); Missing the digests not found.
type ManifestError struct {
	Code    string
	Message string
	Missing []string
}

func (e *ManifestError) Error() string { return e.Message }

// BlobSize returns a blob's size and whether the registry holds it.
type BlobSize func(ctx context.Context, digest string) (int64, bool)

// DiskBlobs returns the BlobSize of a registry whose blobs are under dir
// ({dir}/{algorithm}/{hex}, package registry's layout).
func DiskBlobs(dir string) BlobSize {
	return func(_ context.Context, digest string) (int64, bool) {
		alg, hx, ok := strings.Cut(digest, ":")
		if !ok || alg != "sha256" || len(hx) != 64 || strings.ContainsAny(hx, "/.") {
			return 0, false
		}
		fi, err := os.Stat(filepath.Join(dir, alg, hx))
		if err != nil {
			return 0, false
		}
		return fi.Size(), true
	}
}

// CheckManifest reads a pushed manifest of repo: its digest, media type (mediaType, a
// Content-Type, wins over the body's), and that every blob it references (an image
// manifest's config and layers: blobs) or every manifest (an index's: images of repo)
// is present. A refusal is a *ManifestError.
func (s *Store) CheckManifest(ctx context.Context, sc keys.Scope, repo string, body []byte, mediaType string, blobs func(ctx context.Context, digest string) bool) (Manifest, error) {
	sum := sha256.Sum256(body)
	rec := Manifest{Digest: "sha256:" + hex.EncodeToString(sum[:]), Bytes: body}
	var m struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        *struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"config"`
		Layers []struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"layers"`
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.SchemaVersion != 2 {
		return rec, &ManifestError{Code: "MANIFEST_INVALID", Message: "manifest invalid: want a schemaVersion 2 Docker or OCI image manifest or index"}
	}
	rec.MediaType = m.MediaType
	if mediaType != "" {
		mt, _, err := mime.ParseMediaType(mediaType)
		if err != nil {
			return rec, &ManifestError{Code: "MANIFEST_INVALID", Message: fmt.Sprintf("manifest invalid: media type %q", mediaType)}
		}
		rec.MediaType = mt
	}
	switch rec.MediaType {
	case DockerManifest, OCIManifest:
		if m.Config == nil || m.Config.Digest == "" {
			return rec, &ManifestError{Code: "MANIFEST_INVALID", Message: "manifest invalid: no config"}
		}
		rec.ArtifactMediaType = m.Config.MediaType
		need := []string{m.Config.Digest}
		for _, l := range m.Layers {
			need = append(need, l.Digest)
			rec.Size += l.Size
		}
		var missing []string
		for _, d := range need {
			if !digestPattern.MatchString(d) {
				return rec, &ManifestError{Code: "MANIFEST_INVALID", Message: fmt.Sprintf("manifest invalid: %q is not a sha256 digest", d)}
			}
			if !blobs(ctx, d) {
				missing = append(missing, d)
			}
		}
		if len(missing) > 0 {
			return rec, &ManifestError{Code: "MANIFEST_BLOB_UNKNOWN", Message: "blob unknown to registry: " + strings.Join(missing, ", "), Missing: missing}
		}
	case DockerList, OCIIndex:
		var missing []string
		for _, c := range m.Manifests {
			if !digestPattern.MatchString(c.Digest) {
				return rec, &ManifestError{Code: "MANIFEST_INVALID", Message: fmt.Sprintf("manifest invalid: %q is not a sha256 digest", c.Digest)}
			}
			if _, _, err := s.Image(ctx, sc, repo, c.Digest); err != nil {
				missing = append(missing, c.Digest)
			}
		}
		if len(missing) > 0 {
			return rec, &ManifestError{Code: "MANIFEST_UNKNOWN", Message: "manifest unknown to repository: " + strings.Join(missing, ", "), Missing: missing}
		}
	default:
		return rec, &ManifestError{Code: "MANIFEST_INVALID", Message: fmt.Sprintf("manifest invalid: media type %q is not one of %s, %s, %s, %s", rec.MediaType, DockerManifest, DockerList, OCIManifest, OCIIndex)}
	}
	return rec, nil
}
