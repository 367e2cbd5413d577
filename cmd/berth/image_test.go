package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/pkg/demoimage/demoimagetest"
)

// TestImageDemoRefusesDynamicBinary: `berth image demo --binary` with a dynamically
// linked program (an ELF with a PT_INTERP, demoimagetest.DynamicELF) fails before pushing
// anything, saying to build it with CGO_ENABLED=0; the registry address given is never
// dialled (nothing listens there).
func TestImageDemoRefusesDynamicBinary(t *testing.T) {
	sh := filepath.Join(t.TempDir(), "dynamic")
	if err := os.WriteFile(sh, demoimagetest.DynamicELF("/lib64/ld-linux-x86-64.so.2"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := imageDemoCommand(&registryAuth{})
	cmd.SetArgs([]string{"--binary", sh, "127.0.0.1:1/demo:1"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("berth image demo --binary %s: %v, want a refusal saying to build with CGO_ENABLED=0", sh, err)
	}
}
