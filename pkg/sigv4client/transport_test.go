package sigv4client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// roundTripFunc records the request a Transport sends.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRoundTripSigns checks the signature's scope and headers on the request sent, and
// that the caller's request is left as it was. The gateway's sigv4 tests verify such a
// signature end to end (TestVerifierAcceptsSigv4client).
func TestRoundTripSigns(t *testing.T) {
	var sent *http.Request
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}), StaticCredentials("AKIAAGENT", "s3cret"), "eu-west-1")
	tr.Now = func() time.Time { return time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC) }
	req, _ := http.NewRequest(http.MethodPost, "http://gw.example/berth.agent.v1.AgentService/Register", strings.NewReader("payload"))
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	auth := sent.Header.Get("Authorization")
	for _, want := range []string{"AWS4-HMAC-SHA256 ", "Credential=AKIAAGENT/20261205/eu-west-1/ecs/aws4_request", "SignedHeaders=", "Signature="} {
		if !strings.Contains(auth, want) {
			t.Errorf("Authorization %q lacks %q", auth, want)
		}
	}
	if got := sent.Header.Get("X-Amz-Date"); got != "20261205T100000Z" {
		t.Errorf("X-Amz-Date = %q", got)
	}
	if got := sent.Header.Get("X-Amz-Content-Sha256"); got != UnsignedPayload {
		t.Errorf("X-Amz-Content-Sha256 = %q", got)
	}
	if req.Header.Get("Authorization") != "" || req.Header.Get("X-Amz-Date") != "" {
		t.Error("RoundTrip modified the caller's request")
	}

	tr.Service = "logs"
	if _, err := tr.RoundTrip(req.Clone(context.Background())); err != nil {
		t.Fatal(err)
	}
	if auth := sent.Header.Get("Authorization"); !strings.Contains(auth, "/eu-west-1/logs/aws4_request") {
		t.Errorf("Service logs: Authorization %q", auth)
	}
}

// TestRoundTripRefusesWithoutCredentials checks that nothing is sent without credentials
// or a region, or when the provider fails.
func TestRoundTripRefusesWithoutCredentials(t *testing.T) {
	sent := false
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("sent") })
	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, errors.New("no key") })
	for name, tr := range map[string]*Transport{
		"no credentials":  {Base: base, Region: "us-east-1"},
		"no region":       New(base, StaticCredentials("a", "b"), ""),
		"provider failed": New(base, failing, "us-east-1"),
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://gw.example/", nil)
		if _, err := tr.RoundTrip(req); err == nil || !strings.HasPrefix(err.Error(), "sigv4client: ") {
			t.Errorf("%s: err = %v, want a sigv4client error", name, err)
		}
	}
	if sent {
		t.Error("a request was sent")
	}
}
