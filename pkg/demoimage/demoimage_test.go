package demoimage

import (
	"archive/tar"
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestPack checks the image's platform, config, media types and the layer's files, and
// that the same binary packs to the same digest.
func TestPack(t *testing.T) {
	bin := []byte("\x7fELF not really a program")
	img, err := Pack(bin, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "arm64" {
		t.Errorf("platform = %s/%s, want linux/arm64", cfg.OS, cfg.Architecture)
	}
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{Entrypoint}) || !slices.Equal(c.Cmd, DefaultCmd()) ||
		!slices.Equal(c.Env, []string{"PATH=/", ImageEnv}) || c.WorkingDir != WorkingDir || c.StopSignal != StopSignal {
		t.Errorf("config = %+v", c)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type = %s, %v; want %s", mt, err, types.OCIManifestSchema1)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
		if h.Name == Entrypoint[1:] && h.Mode != 0o755 {
			t.Errorf("%s mode %o, want 755", h.Name, h.Mode)
		}
	}
	for _, name := range []string{"etc/", "etc/passwd", "etc/group", "srv/", "tmp/"} {
		if _, ok := files[name]; !ok {
			t.Errorf("layer lacks %s", name)
		}
	}
	if !bytes.Equal(files[Entrypoint[1:]], bin) {
		t.Errorf("layer's %s is not the binary packed", Entrypoint)
	}

	again, err := Pack(bin, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("same binary packed to %s and %s", d1, d2)
	}
	other, _ := Pack(append(bin, '!'), "arm64")
	if d3, _ := other.Digest(); d3 == d1 {
		t.Error("a different binary packed to the same digest")
	}
}
