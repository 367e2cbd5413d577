package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Cookie names. The session cookie is stateless: it names the access key, the region and
// an expiry, and is MACed with a key derived from the access key's secret, so any gateway
// replica can check it and deleting (or rotating) the key ends every session made with it.
const (
	sessionCookie = "berth_console"
	// preCookie carries the sign-in form's CSRF token (double submit) before a session
	// exists.
	preCookie = "berth_console_signin"
	// cookiePath scopes both cookies to the console.
	cookiePath = "/console"
)

// session is a signed-in browser.
type session struct {
	KeyID   string
	Region  string
	Expires time.Time
	Nonce   string
	key     []byte // derived MAC key
}

// errBadSession is returned for a cookie that does not parse or verify.
var errBadSession = errors.New("console: bad session")

// sessionKey derives the MAC key of sessions from an access key's secret.
func sessionKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("berth-console-session-v1"))
	return m.Sum(nil)
}

func (s *session) payload() string {
	return base64.RawURLEncoding.EncodeToString([]byte(s.KeyID)) + "." + s.Region + "." +
		strconv.FormatInt(s.Expires.Unix(), 10) + "." + s.Nonce
}

func (s *session) mac(msg string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// encode returns the cookie value.
func (s *session) encode() string {
	p := s.payload()
	return p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p))
}

// csrf returns the session's CSRF token, which forms carry in the "csrf" field.
func (s *session) csrf() string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf." + s.Nonce))
}

// checkCSRF reports whether token is the session's CSRF token.
func (s *session) checkCSRF(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf())) == 1
}

// parseSession splits a cookie value without verifying it: the caller resolves the key
// id, derives the key with sessionKey and calls verify.
func parseSession(v string) (*session, []byte, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 {
		return nil, nil, errBadSession
	}
	id, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(id) == 0 {
		return nil, nil, errBadSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return nil, nil, errBadSession
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[4])
	if err != nil {
		return nil, nil, errBadSession
	}
	return &session{KeyID: string(id), Region: parts[1], Expires: time.Unix(exp, 0), Nonce: parts[3]}, mac, nil
}

// verify checks the MAC with key and the expiry against now.
func (s *session) verify(key, mac []byte, now time.Time) error {
	s.key = key
	if !hmac.Equal(mac, s.mac(s.payload())) {
		return errBadSession
	}
	if !now.Before(s.Expires) {
		return errBadSession
	}
	return nil
}

// randomToken returns 16 random bytes, base64url.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// setCookie writes an HttpOnly, SameSite=Strict cookie scoped to the console; Secure when
// the request came over TLS. maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     cookiePath,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}
