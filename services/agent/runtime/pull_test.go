package runtime

import (
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
