package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

// The replica gzips no response by default, though its clients (the gateway, agents)
// accept gzip, and gzips responses from GzipMinBytes on when that is set.
func TestResponseCompression(t *testing.T) {
	cli := etcdtest.Start(t)
	for _, tc := range []struct {
		minBytes int
		want     string // the response's Content-Encoding
	}{{0, ""}, {1, "gzip"}} {
		a, err := New(Config{Etcd: cli, GzipMinBytes: tc.minBytes})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Admin().CreateAccount(context.Background(), connect.NewRequest(&adminv1.CreateAccountRequest{Id: "123456789012", Name: "gzip"})); err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatal(err)
		}
		if _, _, err := a.Bootstrap(context.Background(), "gzip-test-token"); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.Handler())
		// A Connect unary call as a Connect client sends it (it accepts gzip by default),
		// with an empty JSON body.
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/berth.admin.v1.AdminService/ListAccounts", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept-Encoding", "gzip")
		req.Header.Set("Authorization", "Bearer gzip-test-token")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GzipMinBytes %d: status %d", tc.minBytes, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Encoding"); got != tc.want {
			t.Errorf("GzipMinBytes %d: Content-Encoding %q, want %q", tc.minBytes, got, tc.want)
		}
	}
}
