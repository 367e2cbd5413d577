package sigv4

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/berthhq/berth/services/gateway/awsjson"
)

// Error codes of authentication failures, as AWS names them.
const (
	// MissingAuthenticationToken: the request has no Authorization header.
	MissingAuthenticationToken = "MissingAuthenticationTokenException"
	// IncompleteSignature: the Authorization header or X-Amz-Date is malformed or missing.
	IncompleteSignature = "IncompleteSignatureException"
	// UnrecognizedClient: the access key does not exist.
	UnrecognizedClient = "UnrecognizedClientException"
	// InvalidSignature: the signature does not match, the request is outside the allowed
	// clock skew, or the credential scope names another date, region or service.
	InvalidSignature = "InvalidSignatureException"
)

// UnsignedPayload is the payload hash of a request whose body is not signed, sent in
// X-Amz-Content-Sha256; the gateway accepts it only on the agent's streaming route.
const UnsignedPayload = "UNSIGNED-PAYLOAD"

// DefaultMaxSkew is how far a request's X-Amz-Date may be from the server's clock, as AWS
// allows.
const DefaultMaxSkew = 15 * time.Minute

const (
	algorithm  = "AWS4-HMAC-SHA256"
	timeFormat = "20060102T150405Z"
	dateFormat = "20060102"
	terminator = "aws4_request"
)

// Credential is an access key as the verifier needs it.
type Credential struct {
	// AccessKeyID is the public half.
	AccessKeyID string
	// SecretAccessKey is the secret half; never logged.
	SecretAccessKey string
	// AccountID is the 12-digit account the key acts for.
	AccountID string
	// ContainerInstanceARN is set when the key may act only as that instance's agent.
	ContainerInstanceARN string
	// Region is the region of the request's credential scope, set by Verify (a
	// Resolver leaves it empty): the region the request is served in.
	Region string
	// PrincipalARN is the ARN of the principal the key belongs to, and PrincipalID its
	// unique id (STS GetCallerIdentity's Arn and UserId); empty for an account access key,
	// which acts as the account's root user.
	PrincipalARN, PrincipalID string
	// Service is the signing name of the request's credential scope ("ecs", "sts", …), set
	// by Verify: the AWS service the request is for.
	Service string
	// SessionTokenSHA256, for session credentials, is the SHA-256 of the session token a
	// request must carry in X-Amz-Security-Token (or the X-Amz-Security-Token query
	// parameter); empty for a long-term key.
	SessionTokenSHA256 []byte
}

// ErrUnknownKey is returned by a Resolver for an access key that does not exist; Verify
// turns it into UnrecognizedClientException.
var ErrUnknownKey = errors.New("sigv4: unknown access key")

// Resolver finds an access key. It returns ErrUnknownKey (possibly wrapped) when the key
// does not exist and another error when it cannot tell.
type Resolver interface {
	Resolve(ctx context.Context, accessKeyID string) (Credential, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, accessKeyID string) (Credential, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, id string) (Credential, error) { return f(ctx, id) }

// Verifier checks SigV4 signatures for the signing names of a set of services and any
// region of an allow-list.
type Verifier struct {
	regions  map[string]bool
	services map[string]bool
	names    []string // the signing names, sorted, for error messages
	maxSkew  time.Duration
	now      func() time.Time
	resolver Resolver
	signer   *v4.Signer
}

// Options configure a Verifier.
type Options struct {
	// Regions is the allow-list of regions the credential scope may name; a request
	// scoped to another is refused as AWS refuses a region it does not serve
	// (InvalidSignatureException, "Credential should be scoped to a valid region, not
	// '…'."). Nil or empty means PublicRegions.
	Regions []string
	// Service is the signing name the scope must name, e.g. "ecs". Services, when set,
	// lists several instead (a request's scope must name one of them, and Verify reports
	// which in Credential.Service); at least one of the two is required.
	Service  string
	Services []string
	// MaxSkew is the clock skew allowed; DefaultMaxSkew when zero.
	MaxSkew time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Resolver finds access keys.
	Resolver Resolver
}

// regionName is the shape of a region name the scheduler accepts (its caller package):
// it becomes a key part and an ARN field.
var regionName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// New returns a Verifier. It returns an error when Service (or Services) or Resolver is
// missing, or when Regions holds a name that cannot be a region.
func New(o Options) (*Verifier, error) {
	names := append([]string(nil), o.Services...)
	if o.Service != "" {
		names = append(names, o.Service)
	}
	if len(names) == 0 || o.Resolver == nil {
		return nil, errors.New("sigv4: Service and Resolver are required")
	}
	services := make(map[string]bool, len(names))
	for _, n := range names {
		services[n] = true
	}
	names = names[:0]
	for n := range services {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(o.Regions) == 0 {
		o.Regions = PublicRegions
	}
	regions := make(map[string]bool, len(o.Regions))
	for _, r := range o.Regions {
		if !regionName.MatchString(r) || len(r) > 32 {
			return nil, fmt.Errorf("sigv4: %q is not a region name (lowercase words and digits joined by '-')", r)
		}
		regions[r] = true
	}
	if o.MaxSkew <= 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Verifier{regions: regions, services: services, names: names, maxSkew: o.MaxSkew, now: o.Now, resolver: o.Resolver, signer: v4.NewSigner()}, nil
}

func fail(typ, format string, args ...any) *awsjson.Error {
	return &awsjson.Error{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// authorization is a parsed Authorization header.
type authorization struct {
	accessKeyID, date, region, service, terminator string
	signedHeaders                                  string
	signature                                      string
}

// parseAuthorization parses "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
func parseAuthorization(h string) (authorization, *awsjson.Error) {
	var a authorization
	alg, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if alg != algorithm {
		return a, fail(IncompleteSignature, "Authorization header requires the '%s' algorithm.", algorithm)
	}
	var credential string
	var haveCred, haveSigned, haveSig bool
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Credential":
			credential, haveCred = v, true
		case "SignedHeaders":
			a.signedHeaders, haveSigned = v, true
		case "Signature":
			a.signature, haveSig = v, true
		}
	}
	var missing []string
	if !haveCred {
		missing = append(missing, "Authorization header requires 'Credential' parameter.")
	}
	if !haveSig {
		missing = append(missing, "Authorization header requires 'Signature' parameter.")
	}
	if !haveSigned {
		missing = append(missing, "Authorization header requires 'SignedHeaders' parameter.")
	}
	if len(missing) > 0 {
		return a, fail(IncompleteSignature, "%s", strings.Join(missing, " "))
	}
	parts := strings.Split(credential, "/")
	if len(parts) != 5 || parts[0] == "" {
		return a, fail(IncompleteSignature, "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got '%s'", credential)
	}
	a.accessKeyID, a.date, a.region, a.service, a.terminator = parts[0], parts[1], parts[2], parts[3], parts[4]
	return a, nil
}

// Verify checks r's signature. payloadHash is the hex SHA-256 of the body the caller has
// read, or UnsignedPayload for a request signed without its payload (then the request
// must carry X-Amz-Content-Sha256: UNSIGNED-PAYLOAD, and that header must be signed).
//
// It returns the access key, with Region set to the scope's region, on success. An authentication failure is an *awsjson.Error
// (see the package documentation); any other error means the resolver could not answer
// and the request should fail as a server error.
func (v *Verifier) Verify(ctx context.Context, r *http.Request, payloadHash string) (Credential, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Credential{}, fail(MissingAuthenticationToken, "Missing Authentication Token")
	}
	a, ferr := parseAuthorization(h)
	if ferr != nil {
		return Credential{}, ferr
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if amzDate == "" {
		return Credential{}, fail(IncompleteSignature, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	t, err := time.Parse(timeFormat, amzDate)
	if err != nil {
		return Credential{}, fail(IncompleteSignature, "X-Amz-Date must be in the ISO-8601 basic format yyyyMMdd'T'HHmmss'Z', got '%s'.", amzDate)
	}
	now := v.now().UTC()
	if earliest := now.Add(-v.maxSkew); t.Before(earliest) {
		return Credential{}, fail(InvalidSignature, "Signature expired: %s is now earlier than %s (%s - %s.)",
			t.Format(timeFormat), earliest.Format(timeFormat), now.Format(timeFormat), minutes(v.maxSkew))
	}
	if latest := now.Add(v.maxSkew); t.After(latest) {
		return Credential{}, fail(InvalidSignature, "Signature not yet current: %s is still later than %s (%s + %s.)",
			t.Format(timeFormat), latest.Format(timeFormat), now.Format(timeFormat), minutes(v.maxSkew))
	}
	if a.date != t.Format(dateFormat) {
		return Credential{}, fail(InvalidSignature, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", a.date, t.Format(dateFormat), amzDate)
	}
	if !v.regions[a.region] {
		return Credential{}, fail(InvalidSignature, "Credential should be scoped to a valid region, not '%s'.", a.region)
	}
	if !v.services[a.service] {
		return Credential{}, fail(InvalidSignature, "Credential should be scoped to correct service: '%s', not '%s'.", strings.Join(v.names, "' or '"), a.service)
	}
	if a.terminator != terminator {
		return Credential{}, fail(InvalidSignature, "Credential should be scoped with a valid terminator: '%s', not '%s'.", terminator, a.terminator)
	}
	if payloadHash == UnsignedPayload && r.Header.Get("X-Amz-Content-Sha256") != UnsignedPayload {
		return Credential{}, fail(InvalidSignature, "This endpoint requires X-Amz-Content-Sha256: %s.", UnsignedPayload)
	}
	cred, err := v.resolver.Resolve(ctx, a.accessKeyID)
	if errors.Is(err, ErrUnknownKey) {
		return Credential{}, fail(UnrecognizedClient, "The security token included in the request is invalid.")
	}
	if err != nil {
		return Credential{}, fmt.Errorf("sigv4: resolve access key: %w", err)
	}
	if len(cred.SessionTokenSHA256) > 0 {
		tok := r.Header.Get("X-Amz-Security-Token")
		if tok == "" {
			tok = r.URL.Query().Get("X-Amz-Security-Token")
		}
		sum := sha256.Sum256([]byte(tok))
		if tok == "" || subtle.ConstantTimeCompare(sum[:], cred.SessionTokenSHA256) != 1 {
			return Credential{}, fail(UnrecognizedClient, "The security token included in the request is invalid.")
		}
	}
	cred.Region = a.region
	cred.Service = a.service
	want, signed, err := v.recompute(ctx, r, a, cred, payloadHash, t)
	if err != nil {
		return Credential{}, fail(InvalidSignature, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	sigOK := subtle.ConstantTimeCompare([]byte(want), []byte(a.signature)) == 1
	if !sigOK || signed != a.signedHeaders {
		return Credential{}, fail(InvalidSignature, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return cred, nil
}

func minutes(d time.Duration) string {
	return fmt.Sprintf("%d min", int(d/time.Minute))
}

var errHeaderMissing = errors.New("signed header missing")

// recompute signs a copy of r holding only the headers the client says it signed and
// returns the signature and signed-headers list the SDK's signer computes.
func (v *Verifier) recompute(ctx context.Context, r *http.Request, a authorization, cred Credential, payloadHash string, t time.Time) (sig, signed string, err error) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	if u.Path == "" {
		u.Path = "/"
	}
	clone := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for _, name := range strings.Split(a.signedHeaders, ";") {
		switch name {
		case "host", "":
			continue
		case "content-length":
			clone.ContentLength = r.ContentLength
			continue
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		vals := r.Header[key]
		if len(vals) == 0 {
			return "", "", errHeaderMissing
		}
		clone.Header[key] = append([]string(nil), vals...)
	}
	creds := aws.Credentials{AccessKeyID: cred.AccessKeyID, SecretAccessKey: cred.SecretAccessKey}
	if err := v.signer.SignHTTP(ctx, creds, clone, payloadHash, a.service, a.region, t, func(o *v4.SignerOptions) {
		o.DisableSessionToken = true
	}); err != nil {
		return "", "", err
	}
	got, perr := parseAuthorization(clone.Header.Get("Authorization"))
	if perr != nil {
		return "", "", perr
	}
	return got.signature, got.signedHeaders, nil
}
