package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// pullThrough fetches image ref of repository repo of scope from the upstream of the
// pull-through cache rule repo falls under (ecr.Store.CacheRule), anonymously: its
// blobs land in the blob store and the scope, the repository is created if missing, and
// the manifest (an index with its images) is recorded under the tag ref names. It
// answers false when no rule applies, and an error naming the upstream when the fetch
// fails. A tag is fetched once: later pulls serve what was cached.
func (r *Registry) pullThrough(ctx context.Context, scope keys.Scope, repo, ref string) (bool, error) {
	rule, upRepo, ok, err := r.store.CacheRule(ctx, scope, repo)
	if err != nil || !ok {
		return false, err
	}
	host, plain := ecr.UpstreamHost(rule.GetUpstreamRegistryUrl())
	var opts []name.Option
	if plain {
		opts = append(opts, name.Insecure)
	}
	sep := ":"
	if strings.Contains(ref, ":") {
		sep = "@"
	}
	upRef, err := name.ParseReference(host+"/"+upRepo+sep+ref, opts...)
	if err != nil {
		return false, fmt.Errorf("pull through cache %s: %v", rule.GetEcrRepositoryPrefix(), err)
	}
	desc, err := remote.Get(upRef, remote.WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("pull through cache %s: upstream %s: %v", rule.GetEcrRepositoryPrefix(), upRef, err)
	}
	if err := r.store.EnsureRepository(ctx, scope, repo); err != nil {
		return false, err
	}
	tag := ""
	if sep == ":" {
		tag = ref
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return false, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return false, err
		}
		for _, m := range im.Manifests {
			if !m.MediaType.IsImage() {
				return false, fmt.Errorf("pull through cache: upstream index %s holds a %s, which Berth does not cache", upRef, m.MediaType)
			}
			img, err := idx.Image(m.Digest)
			if err != nil {
				return false, err
			}
			if err := r.cacheImage(ctx, scope, repo, "", img); err != nil {
				return false, err
			}
		}
		return true, r.record(ctx, scope, repo, tag, desc.Manifest, string(desc.MediaType))
	}
	img, err := desc.Image()
	if err != nil {
		return false, err
	}
	return true, r.cacheImage(ctx, scope, repo, tag, img)
}

// cacheImage stores img's config and layers (each checked against its digest) and
// records its manifest under tag ("" for none).
func (r *Registry) cacheImage(ctx context.Context, scope keys.Scope, repo, tag string, img v1.Image) error {
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(cfg); "sha256:"+hex.EncodeToString(sum[:]) != cfgName.String() {
		return fmt.Errorf("pull through cache: upstream config does not match its digest %s", cfgName)
	}
	if err := r.cacheBlob(ctx, scope, cfgName, io.NopCloser(bytes.NewReader(cfg))); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		if _, err := r.disk.Stat(ctx, repo, d); err == nil {
			if err := r.store.AddBlob(ctx, scope, d.String()); err != nil {
				return err
			}
			continue
		}
		// go-containerregistry's remote layer checks the bytes against d as they are read.
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		if err := r.cacheBlob(ctx, scope, d, rc); err != nil {
			return err
		}
	}
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	return r.record(ctx, scope, repo, tag, raw, string(mt))
}

// cacheBlob stores a blob and records it in scope.
func (r *Registry) cacheBlob(ctx context.Context, scope keys.Scope, d v1.Hash, rc io.ReadCloser) error {
	if err := r.disk.Put(ctx, "", d, rc); err != nil {
		return fmt.Errorf("pull through cache: blob %s: %w", d, err)
	}
	return r.store.AddBlob(ctx, scope, d.String())
}

// record checks and records a fetched manifest as a push would.
func (r *Registry) record(ctx context.Context, scope keys.Scope, repo, tag string, raw []byte, mediaType string) error {
	m, err := r.store.CheckManifest(ctx, scope, repo, raw, mediaType, func(ctx context.Context, d string) bool {
		ok, err := r.store.HasBlob(ctx, scope, d)
		return err == nil && ok
	})
	if err != nil {
		return fmt.Errorf("pull through cache: %w", err)
	}
	return r.store.PutManifest(ctx, scope, repo, tag, m)
}
