package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// AWS's session-manager-plugin, built from its public source for the ECS Exec tests
// (docs/exec.md). The Go module proxy serves the repository (it has no go.mod, so as a
// pseudo-version without its GOPATH-era vendor directory); its dependencies are pinned
// below to versions the proxy serves, and github.com/twinj/uuid, whose pre-module API
// the plugin uses and the proxy no longer serves, is replaced by the few functions the
// plugin calls (twinjUUIDShim). Nothing of the plugin's own code is changed.
const (
	pluginModule  = "github.com/aws/session-manager-plugin"
	pluginVersion = "v0.0.0-20260401221635-b79d06c1d3a2" // plugin 1.3.0.0
)

// pluginGoMod pins the plugin's dependencies.
const pluginGoMod = `module github.com/aws/session-manager-plugin

go 1.24

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/config v1.33.21
	github.com/aws/aws-sdk-go-v2/service/kms v1.63.0
	github.com/aws/aws-sdk-go-v2/service/ssm v1.83.0
	github.com/cihub/seelog v0.0.0-20170130134532-f561c5e57575
	github.com/fsnotify/fsnotify v1.10.1
	github.com/gorilla/websocket v1.5.3
	github.com/twinj/uuid v1.0.0
	github.com/xtaci/smux v1.5.58
	golang.org/x/crypto v0.59.0
	golang.org/x/sync v0.25.0
	golang.org/x/sys v0.50.0
)

replace github.com/twinj/uuid => ./twinjuuid
`

// twinjUUIDShim is the part of github.com/twinj/uuid's early API the plugin calls: UUID as
// an interface (the plugin compares it with nil), New from 16 bytes, NewV4, Parse and the
// hyphenated String form (SwitchFormat(CleanHyphen), which the plugin always selects).
const twinjUUIDShim = `package uuid

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
)

type Format string

const CleanHyphen Format = "%x-%x-%x-%x-%x"

func SwitchFormat(Format) {}

type UUID interface {
	Bytes() []byte
	String() string
}

type id [16]byte

func (u id) Bytes() []byte { return u[:] }

func (u id) String() string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func New(b []byte) UUID { var u id; copy(u[:], b); return u }

func NewV4() UUID {
	var u id
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func Parse(s string) (UUID, error) {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		return nil, errors.New("uuid: invalid")
	}
	return New(b), nil
}
`

// sessionManagerPlugin returns a directory holding session-manager-plugin, built once per
// machine into the user cache directory. It skips the test when the module proxy cannot
// serve the plugin's source.
func sessionManagerPlugin(t testing.TB) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "berth-e2e", "session-manager-plugin-"+pluginVersion)
	bin := filepath.Join(dir, "session-manager-plugin")
	if _, err := os.Stat(bin); err == nil {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := func(dir string, env []string, name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, &cmdError{err: err, stderr: stderr.String()}
		}
		return out, nil
	}
	out, err := run(t.TempDir(), []string{"GOFLAGS=-mod=mod", "GOWORK=off"}, "go", "mod", "download", "-json", pluginModule+"@"+pluginVersion)
	if err != nil {
		t.Skipf("the Go module proxy does not serve %s@%s: %v", pluginModule, pluginVersion, err)
	}
	var dl struct{ Dir string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download: %s", out)
	}
	src := filepath.Join(t.TempDir(), "src")
	if _, err := run("", nil, "cp", "-r", dl.Dir, src); err != nil {
		t.Fatal(err)
	}
	if _, err := run("", nil, "chmod", "-R", "u+w", src); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", pluginGoMod)
	write("twinjuuid/go.mod", "module github.com/twinj/uuid\n\ngo 1.21\n")
	write("twinjuuid/uuid.go", twinjUUIDShim)
	env := []string{"GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0"}
	if _, err := run(src, env, "go", "mod", "tidy", "-e"); err != nil {
		t.Fatalf("go mod tidy for the plugin: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := bin + ".tmp"
	if _, err := run(src, env, "go", "build", "-o", tmp, "./src/sessionmanagerplugin-main"); err != nil {
		t.Fatalf("building session-manager-plugin: %v", err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return dir
}

type cmdError struct {
	err    error
	stderr string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }
