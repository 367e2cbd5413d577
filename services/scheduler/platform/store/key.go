package store

import (
	"fmt"
	"strings"
)

// Prefix is the root of every key this package reads or writes.
const Prefix = "/berth/v1/"

// Key joins parts below Prefix: Key("tasks", acct, id) is
// "/berth/v1/tasks/{acct}/{id}". Nothing is escaped; a part that is empty or
// contains '/' is rejected with ErrInvalidKey, as is a call with no parts.
func Key(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", fmt.Errorf("store: key with no parts: %w", ErrInvalidKey)
	}
	if err := checkParts(parts); err != nil {
		return "", err
	}
	return Prefix + strings.Join(parts, "/"), nil
}

// MustKey is Key for constant parts; it panics where Key returns an error.
func MustKey(parts ...string) string {
	k, err := Key(parts...)
	if err != nil {
		panic(err)
	}
	return k
}

// KeyPrefix is Key with a trailing '/', for List, ListKeys and Watch:
// KeyPrefix("tasks", acct) is "/berth/v1/tasks/{acct}/". With no parts it is
// Prefix. Parts are checked as in Key.
func KeyPrefix(parts ...string) (string, error) {
	if len(parts) == 0 {
		return Prefix, nil
	}
	if err := checkParts(parts); err != nil {
		return "", err
	}
	return Prefix + strings.Join(parts, "/") + "/", nil
}

// MustKeyPrefix is KeyPrefix for constant parts; it panics where KeyPrefix
// returns an error.
func MustKeyPrefix(parts ...string) string {
	p, err := KeyPrefix(parts...)
	if err != nil {
		panic(err)
	}
	return p
}

func checkParts(parts []string) error {
	for i, p := range parts {
		if p == "" {
			return fmt.Errorf("store: key part %d is empty: %w", i, ErrInvalidKey)
		}
		if strings.Contains(p, "/") {
			return fmt.Errorf("store: key part %d %q contains '/': %w", i, p, ErrInvalidKey)
		}
	}
	return nil
}

// checkKey accepts a record key: below Prefix, no empty segment, no trailing
// '/'.
func checkKey(key string) error {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok || !segmentsOK(rest) {
		return fmt.Errorf("store: key %q: %w", key, ErrInvalidKey)
	}
	return nil
}

// checkPrefix accepts a list or watch prefix: Prefix itself or a key prefix
// ending in '/', so that "/tasks/a" cannot also match "/tasks/ab".
func checkPrefix(prefix string) error {
	rest, ok := strings.CutPrefix(prefix, Prefix)
	if !ok {
		return fmt.Errorf("store: prefix %q: %w", prefix, ErrInvalidKey)
	}
	if rest == "" {
		return nil
	}
	if rest, ok = strings.CutSuffix(rest, "/"); !ok || !segmentsOK(rest) {
		return fmt.Errorf("store: prefix %q: %w", prefix, ErrInvalidKey)
	}
	return nil
}

// segmentsOK reports whether s is one or more non-empty '/'-separated
// segments.
func segmentsOK(s string) bool {
	if s == "" {
		return false
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "" {
			return false
		}
	}
	return true
}
