package sigv4client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// UnsignedPayload is the X-Amz-Content-Sha256 value of a request signed without its body.
const UnsignedPayload = "UNSIGNED-PAYLOAD"

// Transport is an http.RoundTripper that signs each request with SigV4 (headers signed,
// payload unsigned) and passes it to Base. The request given to RoundTrip is not modified:
// a clone is signed and sent.
type Transport struct {
	// Base sends the signed request; http.DefaultTransport when nil. For Connect streams
	// use a transport that speaks HTTP/2 (TLS, or h2c via http.Protocols).
	Base http.RoundTripper
	// Credentials provides the access key; aws.NewCredentialsCache over a static provider
	// or any aws.CredentialsProvider.
	Credentials aws.CredentialsProvider
	// Region is the region of the credential scope, e.g. "us-east-1".
	Region string
	// Service is the signing name; "ecs" when empty.
	Service string
	// Now returns the signing time; time.Now when nil.
	Now func() time.Time

	signer *v4.Signer
}

// StaticCredentials returns a provider of a fixed access key.
func StaticCredentials(accessKeyID, secretAccessKey string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey, Source: "sigv4client"}, nil
	})
}

// New returns a Transport signing for region with the given credentials over base
// (http.DefaultTransport when nil), with signing name "ecs".
func New(base http.RoundTripper, creds aws.CredentialsProvider, region string) *Transport {
	return &Transport{Base: base, Credentials: creds, Region: region, Service: "ecs", signer: v4.NewSigner()}
}

// RoundTrip signs a clone of req and sends it. It returns an error, without sending, when
// the credentials cannot be retrieved or Region is empty.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Credentials == nil || t.Region == "" {
		closeBody(req)
		return nil, errors.New("sigv4client: Credentials and Region are required")
	}
	creds, err := t.Credentials.Retrieve(req.Context())
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("sigv4client: retrieve credentials: %w", err)
	}
	signed := req.Clone(req.Context())
	signed.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
	signed.Header.Del("Authorization")
	service := t.Service
	if service == "" {
		service = "ecs"
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	signer := t.signer
	if signer == nil {
		signer = v4.NewSigner()
	}
	if err := signer.SignHTTP(req.Context(), creds, signed, UnsignedPayload, service, t.Region, now()); err != nil {
		closeBody(req)
		return nil, fmt.Errorf("sigv4client: sign: %w", err)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(signed)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
