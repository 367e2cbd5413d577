package sigv4_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/berthhq/berth/services/gateway/sigv4"
)

var (
	now  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	good = sigv4.Credential{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", AccountID: "123456789012"}
)

func resolver(ctx context.Context, id string) (sigv4.Credential, error) {
	switch id {
	case good.AccessKeyID:
		return good, nil
	case "BROKEN":
		return sigv4.Credential{}, errors.New("admin service down")
	}
	return sigv4.Credential{}, sigv4.ErrUnknownKey
}

// server verifies every request it receives and answers the error type ("OK" on success)
// in X-Result and the message in the body.
func server(t *testing.T, unsigned bool) *httptest.Server {
	t.Helper()
	v, err := sigv4.New(sigv4.Options{Service: "ecs", Now: func() time.Time { return now }, Resolver: sigv4.ResolverFunc(resolver)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hash := sigv4.UnsignedPayload
		if !unsigned {
			sum := sha256.Sum256(body)
			hash = hex.EncodeToString(sum[:])
		}
		cred, err := v.Verify(r.Context(), r, hash)
		var ae *awsjson.Error
		switch {
		case err == nil:
			w.Header().Set("X-Result", "OK")
			_, _ = io.WriteString(w, cred.AccountID+" "+cred.Region)
		case errors.As(err, &ae):
			w.Header().Set("X-Result", ae.Type)
			_, _ = io.WriteString(w, ae.Message)
		default:
			w.Header().Set("X-Result", "internal")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type signSpec struct {
	key, secret, region, service string
	at                           time.Time
	unsigned                     bool
}

func newRequest(t *testing.T, url string, body string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.ListClusters")
	return req
}

func sign(t *testing.T, req *http.Request, body string, s signSpec) {
	t.Helper()
	if s.key == "" {
		s.key, s.secret = good.AccessKeyID, good.SecretAccessKey
	}
	if s.region == "" {
		s.region = "us-east-1"
	}
	if s.service == "" {
		s.service = "ecs"
	}
	if s.at.IsZero() {
		s.at = now
	}
	hash := sigv4.UnsignedPayload
	if s.unsigned {
		req.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
	} else {
		sum := sha256.Sum256([]byte(body))
		hash = hex.EncodeToString(sum[:])
	}
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: s.key, SecretAccessKey: s.secret}, req, hash, s.service, s.region, s.at)
	if err != nil {
		t.Fatal(err)
	}
}

func TestVerifyTable(t *testing.T) {
	const body = `{"maxResults":10}`
	for _, tc := range []struct {
		name     string
		spec     signSpec
		mutate   func(r *http.Request)
		newBody  string
		unsigned bool
		want     string
		contains string
	}{
		{name: "valid", want: "OK", contains: " us-east-1"},
		{name: "another public region", spec: signSpec{region: "eu-west-1"}, want: "OK", contains: " eu-west-1"},
		{name: "newest public region", spec: signSpec{region: "mx-central-1"}, want: "OK", contains: " mx-central-1"},
		{name: "no authorization", mutate: func(r *http.Request) { r.Header.Del("Authorization") }, want: "MissingAuthenticationTokenException", contains: "Missing Authentication Token"},
		{name: "unknown key", spec: signSpec{key: "AKIDUNKNOWN", secret: "x"}, want: "UnrecognizedClientException", contains: "security token included in the request is invalid"},
		{name: "wrong secret", spec: signSpec{key: good.AccessKeyID, secret: "wrong"}, want: "InvalidSignatureException", contains: "does not match the signature you provided"},
		{name: "body tampered", newBody: `{"maxResults":11}`, want: "InvalidSignatureException", contains: "does not match"},
		{name: "signed header tampered", mutate: func(r *http.Request) {
			r.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.DeleteCluster")
		}, want: "InvalidSignatureException"},
		{name: "signed header removed", mutate: func(r *http.Request) { r.Header.Del("X-Amz-Target") }, want: "InvalidSignatureException"},
		{name: "signature tampered", mutate: func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:len(a)-1]+string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", a[len(a)-1])+1)%16]))
		}, want: "InvalidSignatureException"},
		{name: "expired", spec: signSpec{at: now.Add(-16 * time.Minute)}, want: "InvalidSignatureException",
			contains: "Signature expired: 20261130T114400Z is now earlier than 20261130T114500Z (20261130T120000Z - 15 min.)"},
		{name: "within skew", spec: signSpec{at: now.Add(-14 * time.Minute)}, want: "OK"},
		{name: "future", spec: signSpec{at: now.Add(16 * time.Minute)}, want: "InvalidSignatureException",
			contains: "Signature not yet current: 20261130T121600Z is still later than 20261130T121500Z (20261130T120000Z + 15 min.)"},
		{name: "unknown region", spec: signSpec{region: "xx-nowhere-1"}, want: "InvalidSignatureException", contains: "Credential should be scoped to a valid region, not 'xx-nowhere-1'."},
		{name: "other partition", spec: signSpec{region: "cn-north-1"}, want: "InvalidSignatureException", contains: "Credential should be scoped to a valid region, not 'cn-north-1'."},
		{name: "wrong service", spec: signSpec{service: "s3"}, want: "InvalidSignatureException", contains: "Credential should be scoped to correct service: 'ecs', not 's3'."},
		{name: "scope date mismatch", mutate: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/20261130/", "/20261129/", 1))
		}, want: "InvalidSignatureException", contains: "Date in Credential scope does not match"},
		{name: "malformed authorization", mutate: func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE") }, want: "IncompleteSignatureException", contains: "requires 'Signature' parameter"},
		{name: "short credential", mutate: func(r *http.Request) {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130, SignedHeaders=host, Signature=00")
		}, want: "IncompleteSignatureException", contains: "5 slash-delimited"},
		{name: "other algorithm", mutate: func(r *http.Request) { r.Header.Set("Authorization", "AWS AKIDEXAMPLE:abc") }, want: "IncompleteSignatureException"},
		{name: "no date", mutate: func(r *http.Request) { r.Header.Del("X-Amz-Date") }, want: "IncompleteSignatureException", contains: "X-Amz-Date"},
		{name: "resolver down", spec: signSpec{key: "BROKEN", secret: "x"}, want: "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := server(t, tc.unsigned)
			req := newRequest(t, srv.URL, body)
			sign(t, req, body, tc.spec)
			if tc.newBody != "" {
				req.Body = io.NopCloser(strings.NewReader(tc.newBody))
				req.ContentLength = int64(len(tc.newBody))
			}
			if tc.mutate != nil {
				tc.mutate(req)
			}
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if got := res.Header.Get("X-Result"); got != tc.want {
				t.Fatalf("result = %s (%s), want %s", got, msg, tc.want)
			}
			if !bytes.Contains(msg, []byte(tc.contains)) {
				t.Errorf("message %q lacks %q", msg, tc.contains)
			}
		})
	}
}

// TestVerifyRegionAllowList: a configured allow-list replaces the public regions; a
// region outside it is refused even when AWS has it; a name that cannot be a region is
// refused at configuration.
func TestVerifyRegionAllowList(t *testing.T) {
	for _, bad := range []string{"EU-WEST-1", "eu/west", ""} {
		if _, err := sigv4.New(sigv4.Options{Service: "ecs", Regions: []string{bad}, Resolver: sigv4.ResolverFunc(resolver)}); err == nil {
			t.Errorf("allow-list %q accepted", bad)
		}
	}
	v, err := sigv4.New(sigv4.Options{Service: "ecs", Regions: []string{"eu-west-1"}, Now: func() time.Time { return now }, Resolver: sigv4.ResolverFunc(resolver)})
	if err != nil {
		t.Fatal(err)
	}
	for region, want := range map[string]string{"eu-west-1": "", "us-east-1": "Credential should be scoped to a valid region, not 'us-east-1'."} {
		req := newRequest(t, "http://127.0.0.1/", "{}")
		sign(t, req, "{}", signSpec{region: region})
		sum := sha256.Sum256([]byte("{}"))
		cred, err := v.Verify(t.Context(), req, hex.EncodeToString(sum[:]))
		var ae *awsjson.Error
		switch {
		case want == "" && (err != nil || cred.Region != region):
			t.Errorf("%s: %+v, %v; want allowed", region, cred, err)
		case want != "" && (!errors.As(err, &ae) || ae.Type != sigv4.InvalidSignature || ae.Message != want):
			t.Errorf("%s: %v; want InvalidSignatureException %q", region, err, want)
		}
	}
}

func TestVerifyUnsignedPayload(t *testing.T) {
	srv := server(t, true)
	// Signed with UNSIGNED-PAYLOAD: any body passes.
	req := newRequest(t, srv.URL, "streamed bytes")
	sign(t, req, "", signSpec{unsigned: true})
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Result"); got != "OK" {
		t.Fatalf("unsigned payload: %s", got)
	}
	// A body-hash signature presented where only UNSIGNED-PAYLOAD is accepted fails.
	req = newRequest(t, srv.URL, "x")
	sign(t, req, "x", signSpec{})
	res, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Result"); got != "InvalidSignatureException" {
		t.Fatalf("hashed payload on unsigned route: %s", got)
	}
}

// TestSessionToken: session credentials (a task role's) verify only with their token in
// X-Amz-Security-Token; a missing or wrong token is UnrecognizedClientException, as AWS
// answers "The security token included in the request is invalid."
func TestSessionToken(t *testing.T) {
	sum := sha256.Sum256([]byte("the-token"))
	sess := sigv4.Credential{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "s3cret", AccountID: "123456789012",
		PrincipalARN: "arn:aws:sts::123456789012:assumed-role/app/task", SessionTokenSHA256: sum[:]}
	v, err := sigv4.New(sigv4.Options{Service: "ecs", Now: func() time.Time { return now }, Resolver: sigv4.ResolverFunc(
		func(context.Context, string) (sigv4.Credential, error) { return sess, nil })})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, want string
	}{{"the-token", ""}, {"", "UnrecognizedClientException"}, {"other-token", "UnrecognizedClientException"}} {
		body := "{}"
		req := newRequest(t, "http://ecs.local", body)
		sumBody := sha256.Sum256([]byte(body))
		creds := aws.Credentials{AccessKeyID: sess.AccessKeyID, SecretAccessKey: sess.SecretAccessKey, SessionToken: tc.token}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sumBody[:]), "ecs", "us-east-1", now); err != nil {
			t.Fatal(err)
		}
		cred, err := v.Verify(context.Background(), req, hex.EncodeToString(sumBody[:]))
		var ae *awsjson.Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("token %q: %v", tc.token, err)
		case tc.want == "" && cred.PrincipalARN != sess.PrincipalARN:
			t.Errorf("principal %q", cred.PrincipalARN)
		case tc.want != "" && (!errors.As(err, &ae) || ae.Type != tc.want || ae.Message != "The security token included in the request is invalid."):
			t.Errorf("token %q: %v, want %s", tc.token, err, tc.want)
		}
	}
}
