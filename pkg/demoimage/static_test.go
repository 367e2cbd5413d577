package demoimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/pkg/demoimage/demoimagetest"
)

// TestCheckStatic: a CGO_ENABLED=0 Go program passes; a dynamically linked program (an
// ELF with a PT_INTERP, demoimagetest.DynamicELF) is refused naming its loader and the static build; bytes that are not
// ELF are refused.
func TestCheckStatic(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	static, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(static); err != nil {
		t.Errorf("a CGO_ENABLED=0 program: %v", err)
	}

	if err := CheckStatic([]byte("#!/bin/sh\necho hi\n")); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a shell script: %v, want not an ELF", err)
	}

	bin := demoimagetest.DynamicELF("/lib64/ld-linux-x86-64.so.2")
	err = CheckStatic(bin)
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") || !strings.Contains(err.Error(), "ld-") {
		t.Errorf("a dynamically linked program: %v, want a refusal naming the loader and CGO_ENABLED=0", err)
	}
}
