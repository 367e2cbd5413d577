package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	present := filepath.Join(t.TempDir(), "healthy")
	if err := os.WriteFile(present, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{"exit", []string{"exit", "3"}, 3, "exiting with status 3\n", ""},
		{"env sorted", []string{"env"}, 0, "A=1\nB=2\n", ""},
		{"echo", []string{"echo", "out", "err"}, 0, "out\n", "err\n"},
		{"sleep", []string{"sleep", "0"}, 0, "sleeping 0s\n", ""},
		{"health-file present", []string{"health-file", present}, 0, "healthy\n", ""},
		{"write then cat", []string{"write", present + ".w", "hi"}, 0, "wrote " + present + ".w\n", ""},
		{"cat missing", []string{"cat", present + ".none"}, 1, "cat failed: open " + present + ".none: no such file or directory\n", ""},
		{"unknown mode", []string{"nope"}, exitUsage, "", "berth-testimage nope: unknown mode; want sleep, exit, env, tick, lines, echo, serve, ignore-sigterm, alloc, health-file, check, get, write, cat or aws-probe\n"},
		{"bad number", []string{"exit", "x"}, exitUsage, "", "berth-testimage exit: strconv.Atoi: parsing \"x\": invalid syntax\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := run(tt.args, []string{"B=2", "A=1"}, &stdout, &stderr)
			if got != tt.wantStatus {
				t.Errorf("status = %d, want %d", got, tt.wantStatus)
			}
			if stdout.String() != tt.wantOut {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantOut)
			}
			if stderr.String() != tt.wantErr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantErr)
			}
		})
	}
}

func TestHealthFileMissing(t *testing.T) {
	var stdout bytes.Buffer
	if got := run([]string{"health-file", filepath.Join(t.TempDir(), "absent")}, nil, &stdout, &stdout); got != exitFail {
		t.Errorf("status = %d, want %d (output %q)", got, exitFail, stdout.String())
	}
}

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	for path, want := range map[string]int{"/health": exitOK, "/down": exitFail} {
		var stdout bytes.Buffer
		if got := run([]string{"check", srv.URL + path}, nil, &stdout, &stdout); got != want {
			t.Errorf("check %s: status = %d, want %d (output %q)", path, got, want, stdout.String())
		}
	}
}

// TestGet: get expands environment variables in its URLs, prints each answer's status and
// body on one line, and exits 1 when one is not 200.
func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/credentials/abc" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("{\"AccessKeyId\": \"ASIA\"}\n"))
	}))
	defer srv.Close()
	env := []string{"TESTIMAGE_REL=/v2/credentials/abc"}
	var stdout bytes.Buffer
	if got := run([]string{"get", srv.URL + "${TESTIMAGE_REL}"}, env, &stdout, &stdout); got != exitOK || stdout.String() != srv.URL+"/v2/credentials/abc 200 {\"AccessKeyId\": \"ASIA\"}\n" {
		t.Errorf("status %d, output %q", got, stdout.String())
	}
	stdout.Reset()
	if got := run([]string{"get", srv.URL + "$TESTIMAGE_REL", srv.URL + "/other"}, env, &stdout, &stdout); got != exitFail || !bytes.Contains(stdout.Bytes(), []byte("/other 404 404 page not found\n")) {
		t.Errorf("status %d, output %q", got, stdout.String())
	}
	stdout.Reset()
	if got := run([]string{"get"}, nil, &stdout, &stdout); got != exitUsage {
		t.Errorf("get without URL: status %d, output %q", got, stdout.String())
	}
}

// TestNoArgumentsPrintsUsage: without a mode the program prints its modes to stderr and
// exits 2 at once (it used to sleep an hour without a word); the list is the package
// doc's, line for line.
func TestNoArgumentsPrintsUsage(t *testing.T) {
	var stdout, stderr strings.Builder
	if got := run(nil, nil, &stdout, &stderr); got != exitUsage {
		t.Errorf("no arguments: exit %d, want %d", got, exitUsage)
	}
	if stdout.Len() != 0 || stderr.String() != usageText {
		t.Errorf("no arguments: stdout %q, stderr %q; want the usage on stderr", stdout.String(), stderr.String())
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, mode := range []string{"sleep N", "exit N", "serve PORT", "get URL...", "aws-probe", "lines N SIZE"} {
		if !strings.Contains(usageText, "\n"+mode+" ") {
			t.Errorf("the usage does not list %q", mode)
		}
	}
	for _, l := range strings.Split(usageText, "\n") {
		if l != "" && !strings.HasPrefix(l, "usage:") && !strings.HasPrefix(l, "Modes that wait") && !strings.Contains(doc, strings.TrimSpace(l)) {
			t.Errorf("usage line %q is not in the package doc", l)
		}
	}
}
