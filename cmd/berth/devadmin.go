package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berthhq/berth/services/scheduler/admin"
)

// The files `berth dev` keeps in its data dir for `berth admin`.
const (
	// devAdminTokenFile holds the dev admin token (mode 0600): every AdminService call to
	// the dev stack's internal listener needs it.
	devAdminTokenFile = "admin-token"
	// devSchedulerURLFile holds the URL of the running dev stack's internal listener (a
	// loopback port chosen at each start); removed when `berth dev` stops.
	devSchedulerURLFile = "scheduler-url"
)

// devAdminToken returns the dev admin token of dataDir, generating it (mode 0600) at the
// first start. A token file another user could read is refused: the token is the
// AdminService's only credential in `berth dev`.
func devAdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, devAdminTokenFile)
	tok, err := readDevAdminToken(path)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	tok, err = admin.NewToken()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("dev admin token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("dev admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("dev admin token: %w", err)
	}
	return tok, nil
}

// readDevAdminToken reads a dev admin token file; an error wrapping fs.ErrNotExist when
// there is none.
func readDevAdminToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("dev admin token %s has mode %v: other users can read it; chmod 600 it (or delete it for a new one)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("dev admin token %s is empty; delete it for a new one", path)
	}
	return tok, nil
}

// writeDevSchedulerURL records the dev stack's internal listener URL in dataDir.
func writeDevSchedulerURL(dataDir, url string) error {
	if err := os.WriteFile(filepath.Join(dataDir, devSchedulerURLFile), []byte(url+"\n"), 0o644); err != nil {
		return fmt.Errorf("dev scheduler url: %w", err)
	}
	return nil
}

// devAdminTarget is what `berth admin` uses when talking to a running `berth dev` whose
// data dir is dataDir: its internal listener's URL and its admin token. ok is false when
// no `berth dev` runs there (no URL file) or its token is unreadable.
func devAdminTarget(dataDir string) (url, token string, ok bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, devSchedulerURLFile))
	if err != nil {
		return "", "", false
	}
	url = strings.TrimSpace(string(b))
	token, err = readDevAdminToken(filepath.Join(dataDir, devAdminTokenFile))
	if err != nil || url == "" {
		return "", "", false
	}
	return url, token, true
}
