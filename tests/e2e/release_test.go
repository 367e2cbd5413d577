package e2e

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMakeRelease runs `make release` for this machine's architecture (berth only, twice,
// into two directories): the binary is a static ELF (no PT_INTERP, so no dynamic loader),
// `berth version` and `berth --version` print the stamped VERSION and COMMIT, SHA256SUMS
// holds its digest, and the second build is byte for byte the first (reproducible).
func TestMakeRelease(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found (apt-get install make)")
	}
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum not found (apt-get install coreutils)")
	}
	const version, commit = "v0.0.0-releasetest", "0123456789abcdef0123456789abcdef01234567"
	name := "berth-linux-" + runtime.GOARCH
	build := func() (dist string, bin []byte) {
		t.Helper()
		dist = t.TempDir()
		cmd := exec.Command("make", "release", "DIST="+dist, "RELEASE_ARCHES="+runtime.GOARCH, "RELEASE_BINARIES=berth",
			"VERSION="+version, "COMMIT="+commit)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make release: %v\n%s", err, out)
		}
		bin, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		return dist, bin
	}
	dist, first := build()
	path := filepath.Join(dist, name)

	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", name, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a PT_INTERP program header: dynamically linked", name)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s imports shared libraries %v", name, libs)
	}
	f.Close()

	want := "berth " + version + " (commit " + commit + ", " + runtime.Version() + " linux/" + runtime.GOARCH + ")"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(path, args...).Output()
		if err != nil {
			t.Fatalf("%s %s: %v", name, args[0], err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("%s %s = %q, want %q", name, args[0], got, want)
		}
	}

	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(first)
	if got, want := strings.TrimSpace(string(sums)), hex.EncodeToString(sum[:])+"  "+name; got != want {
		t.Errorf("SHA256SUMS = %q, want %q", got, want)
	}

	if _, again := build(); !bytes.Equal(first, again) {
		t.Errorf("two release builds of one commit differ: not reproducible")
	}
}
