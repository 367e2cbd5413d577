package seal_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

func key(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, seal.KeySize))
}

func TestSealOpenRotation(t *testing.T) {
	old, err := seal.Parse("k1:" + key(1))
	if err != nil {
		t.Fatal(err)
	}
	ad := []byte("secret/123456789012/us-east-1/db/v1")
	c := old.Seal([]byte("hunter2"), ad)
	if bytes.Contains(c, []byte("hunter2")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	if p, err := old.Open(c, ad); err != nil || string(p) != "hunter2" {
		t.Fatalf("Open = %q, %v", p, err)
	}
	if _, err := old.Open(c, []byte("secret/123456789012/us-east-1/other/v1")); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("Open with other ad = %v, want ErrOpen", err)
	}
	// Rotation: a new primary key first, the old one kept: old values open, new ones use k2.
	rotated, err := seal.Parse("# comment\nk2:" + key(2) + "\n\nk1:" + key(1))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := rotated.Open(c, ad); err != nil || string(p) != "hunter2" {
		t.Fatalf("Open after rotation = %q, %v", p, err)
	}
	c2 := rotated.Seal([]byte("new"), ad)
	if seal.KeyID(c2) != "k2" || seal.KeyID(c) != "k1" {
		t.Fatalf("key ids %q %q", seal.KeyID(c2), seal.KeyID(c))
	}
	if _, err := old.Open(c2, ad); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("old ring opened a value of the new key: %v", err)
	}
	c[len(c)-1] ^= 1
	if _, err := rotated.Open(c, ad); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("tampered value opened: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, text := range []string{"", "k1", "k1:notbase64!", "k1:" + base64.StdEncoding.EncodeToString([]byte("short")), "k1:" + key(1) + ",k1:" + key(2), "bad id:" + key(1)} {
		if _, err := seal.Parse(text); err == nil {
			t.Errorf("Parse(%q) succeeded", text)
		}
	}
	if _, err := seal.Parse("a:" + key(1) + ",b:" + key(2)); err != nil {
		t.Errorf("comma-separated keyring: %v", err)
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "secrets.key")
	k1, err := seal.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v mode %v", err, st.Mode())
	}
	k2, err := seal.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	c := k1.Seal([]byte("v"), nil)
	if p, err := k2.Open(c, nil); err != nil || string(p) != "v" {
		t.Fatalf("reloaded ring: %q %v", p, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "k1:") {
		t.Fatalf("key file %q", data)
	}
}
