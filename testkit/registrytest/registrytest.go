package registrytest

import (
	"context"
	"testing"

	"github.com/berthhq/berth/services/agent/ociregistry"
	"github.com/berthhq/berth/testkit/testimage"
)

// Server is a running registry (the product's ociregistry.Server).
type Server = ociregistry.Server

// Start serves a registry on a free loopback port for the length of the
// test, logging its requests to t.Output(). It fails the test if it cannot
// listen.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := ociregistry.Serve(context.WithoutCancel(t.Context()), "127.0.0.1:0", ociregistry.WithRequestLog(t.Output()))
	if err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	// Close, not Shutdown: a client's connection that never sent a
	// request would hold Shutdown for 5s, and a test that is over has no
	// requests worth finishing.
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("registrytest: %v", err)
		}
	})
	return s
}

// PushTestImage pushes the test image (testimage.Build) to reg as repo:tag
// and returns its reference, "ADDR/repo:tag". It fails the test on error.
func PushTestImage(t testing.TB, reg *Server, repo, tag string) string {
	t.Helper()
	img, err := testimage.Build(t.Context())
	if err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	ref := reg.Addr() + "/" + repo + ":" + tag
	if err := testimage.Push(t.Context(), img, ref); err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	return ref
}
