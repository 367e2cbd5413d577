// Package demoimage packs Berth's demo image: the static berth-testimage program (one
// binary with modes: sleep, exit N, env, echo, serve PORT, check URL, …) as a
// single-layer OCI image with go-containerregistry, and pushes it to a registry. `berth
// image demo` and the README's walkthrough use it; testkit's testimage compiles the same
// program for tests and packs it here, so tests and users run one image.
package demoimage

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image's config holds, for tests to assert against.
const (
	// Entrypoint is the program's path in the image and the image's
	// entrypoint.
	Entrypoint = "/berth-testimage"
	// ImageEnv is the one variable, besides PATH=/, the image sets.
	ImageEnv = "IMAGE_VAR=from-image"
	// WorkingDir is the image's working directory; it exists in the image.
	WorkingDir = "/srv"
	// StopSignal is the signal the image asks to be stopped with.
	StopSignal = "SIGTERM"
)

// DefaultCmd returns the image's Cmd: sleep for an hour.
func DefaultCmd() []string { return []string{"sleep", "3600"} }

// epoch is the modification time of every file in the layer, so the image
// digest depends only on the program.
var epoch = time.Unix(0, 0)

// Pack returns the demo image around bin, the static berth-testimage program built for
// linux/arch (bin/berth-testimage from `make build`, or what testkit's testimage.Build
// compiles): one layer with the program at Entrypoint plus /srv, /tmp and a minimal
// /etc/passwd and /etc/group (root, nobody), and the config of the constants above. The
// image is the same byte for byte for the same bin and arch. Errors say which step
// failed.
func Pack(bin []byte, arch string) (v1.Image, error) {
	layerTar, err := layerTar(bin)
	if err != nil {
		return nil, fmt.Errorf("pack demo image: %w", err)
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("pack demo image: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "berth demoimage.Pack", Created: v1.Time{Time: epoch}},
	})
	if err != nil {
		return nil, fmt.Errorf("pack demo image: append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("pack demo image: config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		Cmd:        DefaultCmd(),
		Env:        []string{"PATH=/", ImageEnv},
		WorkingDir: WorkingDir,
		StopSignal: StopSignal,
		Labels:     map[string]string{"org.opencontainers.image.title": "berth-testimage"},
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("pack demo image: set config: %w", err)
	}
	return img, nil
}

// layerTar returns the layer's uncompressed tar.
func layerTar(bin []byte) ([]byte, error) {
	entries := []struct {
		name string
		mode int64
		data []byte // nil for a directory
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/:/berth-testimage\nnobody:x:65534:65534:nobody:/:/berth-testimage\n")},
		{"srv/", 0o755, nil},
		{"tmp/", 0o1777, nil},
		{Entrypoint[1:], 0o755, bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		if e.data == nil {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Push uploads img to ref ("host:port/repo:tag") anonymously, as go-containerregistry's
// remote.Write does: loopback and private-network registries (127.0.0.0/8, localhost,
// [::1], RFC 1918) over plain HTTP, others over HTTPS. Errors name the reference.
func Push(ctx context.Context, img v1.Image, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push image: %w", err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push image to %s: %w", ref, err)
	}
	return nil
}

// CheckStatic returns an error unless bin is a statically linked ELF program: the demo
// image holds the program alone, without a dynamic loader or libc, so a dynamically
// linked one (a Go build with cgo on, Go's default where a C compiler is installed) could
// not start in it; every task would stop with "exec /berth-testimage: no such file or
// directory". The error says how to build it static.
func CheckStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("the demo program is not an ELF executable (%v): build berth-testimage for linux", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		interp := make([]byte, p.Filesz)
		_, _ = p.ReadAt(interp, 0)
		return fmt.Errorf("the demo program is dynamically linked (it needs the loader %s, which the image does not have, so no task could start it): build it static with CGO_ENABLED=0 go build ./testkit/testimage/cmd/berth-testimage (make build does)",
			strings.TrimRight(string(interp), "\x00"))
	}
	return nil
}
