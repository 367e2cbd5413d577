package testimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/berthhq/berth/pkg/demoimage"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// programPkg is the import path of the program the image runs.
const programPkg = "github.com/berthhq/berth/testkit/testimage/cmd/berth-testimage"

var cache struct {
	sync.Mutex
	img v1.Image
}

// Build returns the demo image (demoimage.Pack) for linux on this machine's
// architecture, around the program compiled from this module's source. The first successful call
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
	img, err := demoimage.Pack(bin, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	cache.img = img
	return img, nil
}

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

// Push uploads img to ref; see demoimage.Push.
func Push(ctx context.Context, img v1.Image, ref string) error { return demoimage.Push(ctx, img, ref) }
