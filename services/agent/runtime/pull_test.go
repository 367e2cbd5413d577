package runtime

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/berthhq/berth/testkit/registrytest"
)

// hubRedirect sends every request the resolver makes to Docker Hub's registry host
// (registry-1.docker.io, over HTTPS) to target over plain HTTP instead, and records the
// host each request was meant for: the resolver contacts, and its authorizer asks
// credentials for, the host it names, which this transport leaves on the request.
type hubRedirect struct {
	target string
	mu     sync.Mutex
	hosts  []string
}

func (h *hubRedirect) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, req.URL.Host)
	h.mu.Unlock()
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host = "http", h.target
	res, err := http.DefaultTransport.RoundTrip(out)
	if res != nil {
		res.Request = req
	}
	return res, err
}

// TestPullCredentialsForDockerHub: repositoryCredentials of an image named
// "docker.io/..." are filed under "docker.io" (the reference's domain), while
// containerd's resolver contacts registry-1.docker.io; the credentials must reach that
// host. Docker Hub is played by the in-process registry behind a proxy that answers 401
// with a Basic challenge unless the request carries the right user and password.
func TestPullCredentialsForDockerHub(t *testing.T) {
	reg := registrytest.Start(t)
	registrytest.PushTestImage(t, reg, "acme/private", "v1")
	var mu sync.Mutex
	var authorized, refused int
	backend := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: reg.Addr()})
	}}
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		mu.Lock()
		if ok && u == "hubuser" && p == "hubpass" {
			authorized++
			mu.Unlock()
			backend.ServeHTTP(w, r)
			return
		}
		refused++
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="hub"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
	})
	srv := newLoopbackServer(t, guard)

	for _, filed := range []string{"docker.io", "registry-1.docker.io", "index.docker.io"} {
		t.Run(filed, func(t *testing.T) {
			tr := &hubRedirect{target: srv}
			cfg := PullConfig{Credentials: map[string]Credential{filed: {Username: "hubuser", Password: "hubpass"}}}
			ref, err := NormalizeRef("docker.io/acme/private:v1")
			if err != nil {
				t.Fatal(err)
			}
			name, desc, err := newResolver(cfg, &http.Client{Transport: tr}).Resolve(t.Context(), ref)
			if err != nil {
				t.Fatalf("resolve %s with credentials filed under %s: %v", ref, filed, err)
			}
			if name != ref || desc.Digest == "" {
				t.Errorf("resolved %s %v", name, desc)
			}
			tr.mu.Lock()
			defer tr.mu.Unlock()
			for _, h := range tr.hosts {
				if h != "registry-1.docker.io" {
					t.Errorf("the resolver contacted %s; want registry-1.docker.io", h)
				}
			}
		})
	}
	mu.Lock()
	if authorized == 0 {
		t.Error("no request reached the registry with the credentials")
	}
	mu.Unlock()

	// Credentials for another host are not presented: the pull stays anonymous and fails.
	cfg := PullConfig{Credentials: map[string]Credential{"quay.io": {Username: "hubuser", Password: "hubpass"}}}
	ref, _ := NormalizeRef("acme/private:v1")
	if _, _, err := newResolver(cfg, &http.Client{Transport: &hubRedirect{target: srv}}).Resolve(t.Context(), ref); err == nil {
		t.Error("resolved without Docker Hub credentials")
	}
}

// newLoopbackServer serves h on a loopback port for the length of the test and returns
// its "127.0.0.1:PORT".
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestPullTrustsRootCAs: a registry serving HTTPS with a certificate of a private CA (as
// Berth's ECR registry behind `berth scheduler --tls-cert`) resolves when PullConfig.RootCAs
// holds that CA, and fails its certificate check with the system roots alone. The
// registry is named example.com (a host the resolver speaks HTTPS to, and the name
// httptest's certificate carries); the test dials it on loopback.
func TestPullTrustsRootCAs(t *testing.T) {
	reg := registrytest.Start(t)
	registrytest.PushTestImage(t, reg, "acme/app", "v1")
	srv := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: reg.Addr()})
	}})
	srv.StartTLS()
	t.Cleanup(srv.Close)
	toServer := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	ref, err := NormalizeRef("example.com/acme/app:v1")
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	client := registryClient(roots)
	client.Transport.(*http.Transport).DialContext = toServer
	if _, desc, err := newResolver(PullConfig{RootCAs: roots}, client).Resolve(t.Context(), ref); err != nil || desc.Digest == "" {
		t.Fatalf("resolve over HTTPS with the CA in RootCAs: %v %v", desc, err)
	}

	if registryClient(nil) != nil {
		t.Error("registryClient(nil) is not nil: pulls without RootCAs must use the default client (system roots)")
	}
	system := &http.Client{Transport: &http.Transport{DialContext: toServer}}
	_, _, err = newResolver(PullConfig{}, system).Resolve(t.Context(), ref)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("resolve with the system roots alone: %v; want x509.UnknownAuthorityError", err)
	}
}
