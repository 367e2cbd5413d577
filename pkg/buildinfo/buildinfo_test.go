package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

// TestString: the version line names the program, the version, the commit (or unknown),
// the Go version and the platform.
func TestString(t *testing.T) {
	v, c := Version, Commit
	t.Cleanup(func() { Version, Commit = v, c })
	Version, Commit = "dev", ""
	if got, want := String("berth"), "berth dev (commit unknown, "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+")"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	Version, Commit = "v1.2.3", "0123abcd"
	if got := String("berth-agent"); !strings.HasPrefix(got, "berth-agent v1.2.3 (commit 0123abcd, ") {
		t.Errorf("String = %q", got)
	}
}
