package testimage_test

import (
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/berthhq/berth/testkit/testimage"
)

func TestBuildConfig(t *testing.T) {
	img, err := testimage.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform = %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if got, want := cfg.Config.Entrypoint, []string{"/berth-testimage"}; !slices.Equal(got, want) {
		t.Errorf("Entrypoint = %q, want %q", got, want)
	}
	if got, want := cfg.Config.Cmd, []string{"sleep", "3600"}; !slices.Equal(got, want) {
		t.Errorf("Cmd = %q, want %q", got, want)
	}
	if !slices.Contains(cfg.Config.Env, "IMAGE_VAR=from-image") {
		t.Errorf("Env = %q, want it to hold IMAGE_VAR=from-image", cfg.Config.Env)
	}
	if cfg.Config.StopSignal != "SIGTERM" {
		t.Errorf("StopSignal = %q, want SIGTERM", cfg.Config.StopSignal)
	}

	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	if mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type = %s, want %s", mt, types.OCIManifestSchema1)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	size, err := layers[0].Size()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layer: %d bytes compressed", size)

	again, err := testimage.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if again != img {
		t.Error("second Build did not return the cached image")
	}
}
