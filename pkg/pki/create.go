package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Role is what a certificate lets its holder be inside Berth. It is written into the
// certificate as a URI SAN "urn:berth:role:<role>" and read back by RolesOf.
type Role string

// The roles. A gateway, a scheduler and an agent serve TLS and are clients too (the
// gateway of the scheduler, the scheduler of etcd, the agent of the gateway; the agent
// serves its log service); clients and admins are clients only.
const (
	// RoleGateway is the ECS endpoint: the scheduler believes identity headers
	// (Berth-Account, …) only from a peer with this role, and answers it
	// AdminService.ResolveAccessKey.
	RoleGateway Role = "gateway"
	// RoleScheduler is a scheduler replica's server certificate.
	RoleScheduler Role = "scheduler"
	// RoleAgent is a host's agent: the gateway relays AgentService only for peers with
	// this role when it requires client certificates. Its certificate also serves the
	// agent's log service (`berth logs --agent https://…`).
	RoleAgent Role = "agent"
	// RoleClient is an ECS client (the AWS CLI, an SDK, `berth logs`); it grants nothing
	// beyond the TLS handshake: ECS calls are authorized by SigV4.
	RoleClient Role = "client"
	// RoleAdmin is an operator: the scheduler's AdminService accepts it as the admin
	// credential (as it does the bootstrap token).
	RoleAdmin Role = "admin"
)

// Roles lists every role, in the order `berth tls cert create --role` documents them.
var Roles = []Role{RoleGateway, RoleScheduler, RoleAgent, RoleClient, RoleAdmin}

// rolePrefix starts the URI SAN that carries a role.
const rolePrefix = "urn:berth:role:"

// Default validities, as `nomad tls` chooses them.
const (
	// DefaultCAValidity is a CA's lifetime (5 years).
	DefaultCAValidity = 5 * 365 * 24 * time.Hour
	// DefaultCertValidity is a role certificate's lifetime (1 year).
	DefaultCertValidity = 365 * 24 * time.Hour
)

// serves reports whether the role's holder serves TLS (and so needs ServerAuth and
// loopback names by default).
func (r Role) serves() bool { return r == RoleGateway || r == RoleScheduler || r == RoleAgent }

// ParseRole returns the role named s, or an error naming the valid ones.
func ParseRole(s string) (Role, error) {
	if slices.Contains(Roles, Role(s)) {
		return Role(s), nil
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return "", fmt.Errorf("unknown role %q: want one of %s", s, strings.Join(names, ", "))
}

// CAOptions describe a CA to create.
type CAOptions struct {
	// CommonName is the CA's subject; "Berth CA" when empty.
	CommonName string
	// Validity is the CA's lifetime; DefaultCAValidity when zero.
	Validity time.Duration
	// Now is the issue time; time.Now when nil.
	Now func() time.Time
}

// CreateCA returns a new self-signed CA certificate and its private key, both PEM
// ("CERTIFICATE", "PRIVATE KEY" in PKCS #8). The key is ECDSA P-256.
func CreateCA(o CAOptions) (certPEM, keyPEM []byte, err error) {
	if o.CommonName == "" {
		o.CommonName = "Berth CA"
	}
	if o.Validity <= 0 {
		o.Validity = DefaultCAValidity
	}
	now := nowOf(o.Now)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: o.CommonName, Organization: []string{"Berth"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(o.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

// CertOptions describe a role certificate to create.
type CertOptions struct {
	// Role is the certificate's role. Required.
	Role Role
	// CommonName is the subject; "<role>.berth" when empty.
	CommonName string
	// DNSNames and IPs are extra subject alternative names. Gateway, scheduler and agent
	// certificates always name "localhost", "<role>.berth", 127.0.0.1 and ::1 too.
	DNSNames []string
	IPs      []net.IP
	// Validity is the lifetime; DefaultCertValidity when zero.
	Validity time.Duration
	// Now is the issue time; time.Now when nil.
	Now func() time.Time
}

// CreateCert returns a certificate for o.Role signed by the CA (PEM certificate and
// PKCS #8 key, as CreateCA returns them) and its private key, both PEM. Gateway,
// scheduler and agent certificates are valid for server and client authentication, the
// other roles for client authentication only. It fails when the CA files do not parse, the key does
// not match, or the role is unknown.
func CreateCert(caCertPEM, caKeyPEM []byte, o CertOptions) (certPEM, keyPEM []byte, err error) {
	if _, err := ParseRole(string(o.Role)); err != nil {
		return nil, nil, err
	}
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	if o.CommonName == "" {
		o.CommonName = string(o.Role) + ".berth"
	}
	if o.Validity <= 0 {
		o.Validity = DefaultCertValidity
	}
	now := nowOf(o.Now)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	roleURI, _ := url.Parse(rolePrefix + string(o.Role))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: []string{"Berth"}, OrganizationalUnit: []string{string(o.Role)}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(o.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     slices.Clone(o.DNSNames),
		IPAddresses:  slices.Clone(o.IPs),
		URIs:         []*url.URL{roleURI},
	}
	if o.Role.serves() {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, n := range []string{"localhost", string(o.Role) + ".berth"} {
			if !slices.Contains(tmpl.DNSNames, n) {
				tmpl.DNSNames = append(tmpl.DNSNames, n)
			}
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	}
	if expires := ca.NotAfter; tmpl.NotAfter.After(expires) {
		tmpl.NotAfter = expires
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

// RolesOf returns the Berth roles a certificate carries (its "urn:berth:role:" URI SANs).
func RolesOf(c *x509.Certificate) []Role {
	if c == nil {
		return nil
	}
	var roles []Role
	for _, u := range c.URIs {
		if s := u.String(); strings.HasPrefix(s, rolePrefix) {
			roles = append(roles, Role(strings.TrimPrefix(s, rolePrefix)))
		}
	}
	return roles
}

// HasRole reports whether c carries role r.
func HasRole(c *x509.Certificate, r Role) bool { return slices.Contains(RolesOf(c), r) }

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, errors.New("pki: CA certificate: no PEM CERTIFICATE block")
	}
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("pki: CA certificate is not a CA")
	}
	k, _ := pem.Decode(keyPEM)
	if k == nil {
		return nil, nil, errors.New("pki: CA key: no PEM block")
	}
	var key any
	switch k.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(k.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(k.Bytes)
	default:
		err = fmt.Errorf("unsupported PEM type %q", k.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("pki: CA key cannot sign")
	}
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, errors.New("pki: CA key does not match the CA certificate")
	}
	return ca, signer, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) ([]byte, []byte, error) {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func nowOf(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}
