package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of one process's TLS identity. Each is read again when its
// modification time or size changes, at the next handshake that needs it, so replacing
// a file rotates the certificate without a restart. A file that fails to load keeps the
// last good version in use (and the handshake fails only when there is none).
type Files struct {
	// CA is the bundle that verifies peers (the Berth CA, `berth tls ca create`). For a
	// client, empty means the system roots.
	CA string
	// Cert and Key are this process's certificate and private key.
	Cert, Key string
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// nextProtos are the ALPN protocols Berth's listeners offer: HTTP/2 first (the agent's
// bidi stream needs it), then HTTP/1.1 for the AWS CLI and SDKs.
var nextProtos = []string{"h2", "http/1.1"}

// ServerConfig returns a tls.Config for a listener serving f.Cert/f.Key, verifying
// client certificates against f.CA as clientAuth says (tls.NoClientCert,
// tls.VerifyClientCertIfGiven, tls.RequireAndVerifyClientCert). The key pair and the CA
// reload when their files change. It fails when Cert or Key is missing, or CA is missing
// while clientAuth verifies, or a file does not load.
func (f Files) ServerConfig(clientAuth tls.ClientAuthType) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("pki: a TLS listener needs both a certificate and a key file")
	}
	verifies := clientAuth == tls.VerifyClientCertIfGiven || clientAuth == tls.RequireAndVerifyClientCert
	if verifies && f.CA == "" {
		return nil, errors.New("pki: verifying client certificates needs a CA file")
	}
	s := newSource(f)
	if _, err := s.keyPair(); err != nil {
		return nil, err
	}
	if verifies {
		if _, err := s.caPool(); err != nil {
			return nil, err
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, err := s.keyPair()
			if err != nil {
				return nil, err
			}
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   nextProtos,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   clientAuth,
			}
			if verifies {
				if c.ClientCAs, err = s.caPool(); err != nil {
					return nil, err
				}
			}
			return c, nil
		},
	}, nil
}

// ClientConfig returns a tls.Config for dialing Berth servers: the server's chain is
// verified against f.CA (reloaded when it changes; the system roots when CA is empty)
// and its name against the dialed host, and f.Cert/f.Key (when set) are presented as the
// client certificate, reloaded when they change. It fails when only one of Cert and Key
// is set or a file does not load.
func (f Files) ClientConfig() (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("pki: a client certificate needs both a certificate and a key file")
	}
	s := newSource(f)
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	if f.Cert != "" {
		if _, err := s.keyPair(); err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return s.keyPair() }
	}
	if f.CA != "" {
		if _, err := s.caPool(); err != nil {
			return nil, err
		}
		// Verification moves into VerifyConnection so the CA bundle can be reloaded: the
		// standard check (chain to the roots, server name) is done there, in full.
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			pool, err := s.caPool()
			if err != nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("pki: server presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				DNSName:       cs.ServerName,
				Roots:         pool,
				Intermediates: inter,
				KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			return err
		}
	}
	return c, nil
}

// PeerHasRole reports whether the connection's client presented a certificate that
// verified against the listener's CA and carries role r. Unverified certificates (a
// listener that does not verify) never count.
func PeerHasRole(cs *tls.ConnectionState, r Role) bool {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return false
	}
	return HasRole(cs.VerifiedChains[0][0], r)
}

// stamp identifies a version of a file.
type stamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{fi.ModTime(), fi.Size()}, nil
}

// source caches the files' contents and reloads them on change.
type source struct {
	f Files

	mu               sync.Mutex
	certAt, keyAt    stamp
	cert             *tls.Certificate
	caAt             stamp
	pool             *x509.CertPool
	lastKey, lastCrt []byte
}

func newSource(f Files) *source { return &source{f: f} }

// keyPair returns the current key pair, reloading it when either file changed.
func (s *source) keyPair() (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	certAt, err1 := stampOf(s.f.Cert)
	keyAt, err2 := stampOf(s.f.Key)
	if err := errors.Join(err1, err2); err != nil {
		if s.cert != nil {
			return s.cert, nil
		}
		return nil, fmt.Errorf("pki: %w", err)
	}
	if s.cert != nil && certAt == s.certAt && keyAt == s.keyAt {
		return s.cert, nil
	}
	crt, err1 := os.ReadFile(s.f.Cert)
	key, err2 := os.ReadFile(s.f.Key)
	if err := errors.Join(err1, err2); err != nil {
		if s.cert != nil {
			return s.cert, nil
		}
		return nil, fmt.Errorf("pki: %w", err)
	}
	if s.cert != nil && bytes.Equal(crt, s.lastCrt) && bytes.Equal(key, s.lastKey) {
		s.certAt, s.keyAt = certAt, keyAt
		return s.cert, nil
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		// A half-written rotation (new certificate, old key): keep the last good pair
		// and look again at the next handshake.
		if s.cert != nil {
			return s.cert, nil
		}
		return nil, fmt.Errorf("pki: load %s and %s: %w", s.f.Cert, s.f.Key, err)
	}
	s.cert, s.certAt, s.keyAt, s.lastCrt, s.lastKey = &pair, certAt, keyAt, crt, key
	return s.cert, nil
}

// caPool returns the CA bundle as a pool, reloading it when the file changed.
func (s *source) caPool() (*x509.CertPool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, err := stampOf(s.f.CA)
	if err != nil {
		if s.pool != nil {
			return s.pool, nil
		}
		return nil, fmt.Errorf("pki: %w", err)
	}
	if s.pool != nil && at == s.caAt {
		return s.pool, nil
	}
	b, err := os.ReadFile(s.f.CA)
	if err != nil {
		if s.pool != nil {
			return s.pool, nil
		}
		return nil, fmt.Errorf("pki: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		if s.pool != nil {
			return s.pool, nil
		}
		return nil, fmt.Errorf("pki: %s holds no PEM certificate", s.f.CA)
	}
	s.pool, s.caAt = pool, at
	return s.pool, nil
}
