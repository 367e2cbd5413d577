// Package seal encrypts the values of secrets (Secrets Manager secrets, SSM parameters)
// before they are written to etcd, with keys that are never in etcd: AES-256-GCM (the
// standard library's AEAD) under a keyring read from a key file or the environment.
//
// A keyring holds one or more 32-byte keys, each with a short id. Seal always uses the
// first (primary) key and prefixes the ciphertext with its id; Open finds the key by that
// id, so values sealed before a rotation still open as long as their key stays in the
// ring. Every value is sealed with additional data naming where it is stored (account,
// region, resource, version), so a ciphertext copied to another record does not open.
//
// Key file format (BERTH_SECRETS_KEY_FILE, or the value of BERTH_SECRETS_KEY with lines
// separated by newlines or commas): one key per line, "{id}:{base64 of 32 bytes}", the
// primary first; blank lines and lines starting with '#' are ignored. Rotation: put a new
// key first, keep the old ones after it, restart the schedulers; new and updated values are
// sealed with the new key, and an old key may be removed once no stored value uses it
// (docs/secrets.md).
package seal

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// KeySize is the size of a key in bytes (AES-256).
const KeySize = 32

// ErrOpen is returned by Open for a ciphertext that does not open: a key id not in the
// ring, a wrong key, tampered bytes or other additional data.
var ErrOpen = errors.New("seal: value does not open with the keyring")

// Keyring seals and opens values. It is safe for concurrent use.
type Keyring struct {
	primary string
	aeads   map[string]cipher.AEAD
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// Key is one key of a ring.
type Key struct {
	// ID names the key in ciphertexts: 1-32 of [A-Za-z0-9_.-].
	ID string
	// Secret is the 32-byte AES-256 key.
	Secret []byte
}

// New returns a keyring of keys, the first one primary. It returns an error when keys is
// empty, an id is malformed or repeated, or a key is not KeySize bytes.
func New(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("seal: the keyring has no key")
	}
	k := &Keyring{primary: keys[0].ID, aeads: map[string]cipher.AEAD{}}
	for _, key := range keys {
		if !idPattern.MatchString(key.ID) {
			return nil, fmt.Errorf("seal: key id %q is not 1-32 of [A-Za-z0-9_.-]", key.ID)
		}
		if _, dup := k.aeads[key.ID]; dup {
			return nil, fmt.Errorf("seal: key id %q appears twice", key.ID)
		}
		if len(key.Secret) != KeySize {
			return nil, fmt.Errorf("seal: key %q is %d bytes, want %d", key.ID, len(key.Secret), KeySize)
		}
		block, err := aes.NewCipher(key.Secret)
		if err != nil {
			return nil, fmt.Errorf("seal: key %q: %w", key.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %q: %w", key.ID, err)
		}
		k.aeads[key.ID] = aead
	}
	return k, nil
}

// Parse reads a keyring in the key file format (see the package comment). Lines may also
// be separated by commas, for an environment variable.
func Parse(text string) (*Keyring, error) {
	var keys []Key
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); !strings.HasPrefix(line, "#") {
			lines = append(lines, strings.Split(line, ",")...)
		}
	}
	for n, line := range lines {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("seal: entry %d is not {id}:{base64 key}", n)
		}
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("seal: entry %d: key is not base64", n)
		}
		keys = append(keys, Key{ID: strings.TrimSpace(id), Secret: secret})
	}
	return New(keys...)
}

// Load reads a keyring from the key file at path.
func Load(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return Parse(string(data))
}

// LoadOrCreate reads the key file at path, or, when it does not exist, writes one with a
// new random key (id "k1", mode 0600) and returns that: for `berth dev`, whose data
// directory holds the key beside etcd's data but never in it.
func LoadOrCreate(path string) (*Keyring, error) {
	k, err := Load(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	secret := make([]byte, KeySize)
	if _, err := io.ReadFull(rand.Reader, secret); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	text := "# Berth secrets keyring: {id}:{base64 key}, primary first (see docs/secrets.md).\nk1:" + base64.StdEncoding.EncodeToString(secret) + "\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return Load(path) // another process created it first
	}
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return Parse(text)
}

// Primary returns the id of the key Seal uses.
func (k *Keyring) Primary() string { return k.primary }

// Seal encrypts plaintext bound to ad (where the value is stored) with the primary key:
// "{id}:" followed by the GCM nonce and ciphertext.
func (k *Keyring) Seal(plaintext, ad []byte) []byte {
	aead := k.aeads[k.primary]
	out := make([]byte, 0, len(k.primary)+1+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out = append(out, k.primary...)
	out = append(out, ':')
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		panic("seal: no randomness: " + err.Error())
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, ad)
}

// Open decrypts a value Seal returned for the same ad; ErrOpen when it does not open.
func (k *Keyring) Open(sealed, ad []byte) ([]byte, error) {
	i := strings.IndexByte(string(sealed[:min(len(sealed), 33)]), ':')
	if i <= 0 {
		return nil, ErrOpen
	}
	aead, ok := k.aeads[string(sealed[:i])]
	if !ok {
		return nil, ErrOpen
	}
	rest := sealed[i+1:]
	if len(rest) < aead.NonceSize() {
		return nil, ErrOpen
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// KeyID returns the id of the key a sealed value was sealed with ("" when malformed), to
// find values still under a retired key.
func KeyID(sealed []byte) string {
	i := strings.IndexByte(string(sealed[:min(len(sealed), 33)]), ':')
	if i <= 0 {
		return ""
	}
	return string(sealed[:i])
}
