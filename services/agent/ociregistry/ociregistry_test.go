package ociregistry_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/berthhq/berth/services/agent/ociregistry"
)

// TestServeAndShutdown: the registry answers the distribution API's version check on
// the address it reports, and stops answering after Shutdown.
func TestServeAndShutdown(t *testing.T) {
	reg, err := ociregistry.Serve(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + reg.Addr() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/: %s", resp.Status)
	}
	if err := reg.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Get("http://" + reg.Addr() + "/v2/"); err == nil {
		resp.Body.Close()
		t.Errorf("after Shutdown: GET /v2/ answered %s", resp.Status)
	}
	if _, err := ociregistry.Serve(t.Context(), "256.0.0.1:0"); err == nil {
		t.Error("Serve on an invalid address returned no error")
	}
}
