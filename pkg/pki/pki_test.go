package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCreate: role certificates chain to their CA, carry exactly their role, and only
// gateways and schedulers get server authentication and loopback names.
func TestCreate(t *testing.T) {
	caCrt, caKey, err := CreateCA(CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := parse(t, caCrt)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, role := range Roles {
		crtPEM, _, err := CreateCert(caCrt, caKey, CertOptions{Role: role, DNSNames: []string{"x.example"}})
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		c := parse(t, crtPEM)
		if got := RolesOf(c); !slices.Equal(got, []Role{role}) {
			t.Errorf("%s: roles %v", role, got)
		}
		usage := x509.ExtKeyUsageClientAuth
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s: client chain: %v", role, err)
		}
		_, serverErr := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if serves := role == RoleGateway || role == RoleScheduler || role == RoleAgent; serves != (serverErr == nil) {
			t.Errorf("%s: verifies as server for localhost: %v", role, serverErr)
		}
	}
	if _, _, err := CreateCert(caCrt, caKey, CertOptions{Role: "root"}); err == nil {
		t.Error("unknown role accepted")
	}
	_, otherKey, _ := CreateCA(CAOptions{})
	if _, _, err := CreateCert(caCrt, otherKey, CertOptions{Role: RoleAgent}); err == nil {
		t.Error("a CA key that does not match the CA certificate was accepted")
	}
}

// TestReload: a server config serves the files' current key pair, a rotation is picked
// up at the next handshake, and a broken rotation keeps the last good pair.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	caCrt, caKey, _ := CreateCA(CAOptions{})
	write := func(name string, b []byte) {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	issue := func() *x509.Certificate {
		crt, key, err := CreateCert(caCrt, caKey, CertOptions{Role: RoleGateway})
		if err != nil {
			t.Fatal(err)
		}
		write("c.pem", crt)
		write("k.pem", key)
		return parse(t, crt)
	}
	write("ca.pem", caCrt)
	first := issue()
	cfg, err := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "c.pem"), Key: filepath.Join(dir, "k.pem")}.ServerConfig(tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	serving := func() *x509.Certificate {
		c, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(c.NextProtos, "h2") || c.ClientCAs == nil {
			t.Fatalf("config without h2 or client CAs: %v", c.NextProtos)
		}
		leaf, _ := x509.ParseCertificate(c.Certificates[0].Certificate[0])
		return leaf
	}
	if got := serving(); got.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("not serving the first certificate")
	}
	second := issue()
	if got := serving(); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Error("rotation not picked up")
	}
	write("c.pem", []byte("garbage"))
	if got := serving(); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Error("a broken rotation replaced the last good pair")
	}
}
