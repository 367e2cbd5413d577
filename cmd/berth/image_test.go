package main

import (
	"debug/elf"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageDemoRefusesDynamicBinary: `berth image demo --binary` with a dynamically
// linked program (the host's /bin/sh) fails before pushing anything, saying to build it
// with CGO_ENABLED=0; the registry address given is never dialled (nothing listens there).
func TestImageDemoRefusesDynamicBinary(t *testing.T) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	f, err := elf.Open(sh)
	if err != nil {
		t.Skipf("/bin/sh is not ELF: %v", err)
	}
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	f.Close()
	if !dynamic {
		t.Skip("/bin/sh is statically linked here")
	}
	cmd := imageDemoCommand(&registryAuth{})
	cmd.SetArgs([]string{"--binary", sh, "127.0.0.1:1/demo:1"})
	err = cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("berth image demo --binary %s: %v, want a refusal saying to build with CGO_ENABLED=0", sh, err)
	}
}
