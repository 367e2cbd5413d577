package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
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

// programPkg is the import path of the program the image runs.
const programPkg = "github.com/berthhq/berth/testkit/testimage/cmd/berth-testimage"

// epoch is the modification time of every file in the layer, so the image
// digest depends only on the program.
var epoch = time.Unix(0, 0)

var cache struct {
	sync.Mutex
	img v1.Image
}

// Build returns the test image for linux on this machine's architecture:
// one layer with the program at Entrypoint plus /srv, /tmp and a minimal
// /etc/passwd and /etc/group (root, nobody). The first successful call
// compiles the program with `go build` (CGO_ENABLED=0, so it needs the go
// command in PATH and the testkit source on disk); later calls return the
// same image. The image is the same byte for byte on every build from the
// same source and toolchain. Errors carry the compiler's output.
func Build(ctx context.Context) (v1.Image, error) {
	cache.Lock()
	defer cache.Unlock()
	if cache.img != nil {
		return cache.img, nil
	}
	bin, err := compile(ctx)
	if err != nil {
		return nil, err
	}
	img, err := pack(bin, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	cache.img = img
	return img, nil
}

// FromBinary packs an already-built berth-testimage binary (static, for linux/arch, e.g.
// bin/berth-testimage from `make build`) into the same image Build makes, without the go
// command. `berth image demo` uses it so `berth dev` compiles nothing at run time.
func FromBinary(bin []byte, arch string) (v1.Image, error) { return pack(bin, arch) }

// compile builds the program for linux/GOARCH and returns the binary.
func compile(ctx context.Context) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("build test image: go command not found: %w", err)
	}
	out, err := os.MkdirTemp("", "berth-testimage-")
	if err != nil {
		return nil, fmt.Errorf("build test image: %w", err)
	}
	defer os.RemoveAll(out)
	binPath := filepath.Join(out, "berth-testimage")

	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w", "-o", binPath)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if dir := sourceDir(); dir != "" {
		// Build from the package's own directory, whatever the
		// caller's working directory; testkit's go.mod alone resolves
		// its imports (the standard library and the AWS SDK).
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "GOWORK=off")
		cmd.Args = append(cmd.Args, ".")
	} else {
		cmd.Args = append(cmd.Args, programPkg)
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build test image: %s: %w\n%s", cmd, err, output)
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("build test image: %w", err)
	}
	return bin, nil
}

// sourceDir returns the program's source directory when this file was
// compiled with its absolute path (no -trimpath), else "".
func sourceDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	dir := filepath.Join(filepath.Dir(file), "cmd", "berth-testimage")
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		return ""
	}
	return dir
}

// pack makes the OCI image around bin, built for linux/arch.
func pack(bin []byte, arch string) (v1.Image, error) {
	layerTar, err := layerTar(bin)
	if err != nil {
		return nil, fmt.Errorf("pack test image: %w", err)
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("pack test image: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "berth testimage.Build", Created: v1.Time{Time: epoch}},
	})
	if err != nil {
		return nil, fmt.Errorf("pack test image: append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("pack test image: config: %w", err)
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
		return nil, fmt.Errorf("pack test image: set config: %w", err)
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

// Push uploads img to ref ("host:port/repo:tag") anonymously. Loopback and
// private-network registries (127.0.0.0/8, localhost, [::1], RFC 1918) are
// spoken to over plain HTTP, others over HTTPS. Errors name the reference.
func Push(ctx context.Context, img v1.Image, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push test image: %w", err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push test image to %s: %w", ref, err)
	}
	return nil
}
