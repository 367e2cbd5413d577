package sigv4_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/gateway/sigv4"
)

// TestVerifierAcceptsSigv4client checks the two sides of the agent's credential against
// each other: what pkg/sigv4client signs, the gateway's verifier accepts, and a wrong
// secret it refuses.
func TestVerifierAcceptsSigv4client(t *testing.T) {
	v, err := sigv4.New(sigv4.Options{Service: "ecs", Resolver: sigv4.ResolverFunc(
		func(_ context.Context, id string) (sigv4.Credential, error) {
			if id != "AKIAAGENT" {
				return sigv4.Credential{}, sigv4.ErrUnknownKey
			}
			return sigv4.Credential{AccessKeyID: id, SecretAccessKey: "s3cret", AccountID: "000000000000"}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := v.Verify(r.Context(), r, sigv4.UnsignedPayload); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	client := &http.Client{Transport: sigv4client.New(nil, sigv4client.StaticCredentials("AKIAAGENT", "s3cret"), "us-east-1")}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/berth.agent.v1.AgentService/Register", strings.NewReader("payload"))
	req.Header.Set("Content-Type", "application/proto")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "payload" {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if req.Header.Get("Authorization") != "" || req.Header.Get("X-Amz-Date") != "" {
		t.Error("RoundTrip modified the caller's request")
	}

	wrong := &http.Client{Transport: sigv4client.New(nil, sigv4client.StaticCredentials("AKIAAGENT", "nope"), "us-east-1")}
	res, err = wrong.Post(srv.URL+"/x", "application/proto", strings.NewReader("p"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", res.StatusCode)
	}

	if _, err := (&http.Client{Transport: &sigv4client.Transport{}}).Get(srv.URL); err == nil {
		t.Error("a Transport without credentials sent a request")
	}
}
