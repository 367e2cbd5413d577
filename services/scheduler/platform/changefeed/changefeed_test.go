package changefeed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"

	consolev1 "github.com/berthhq/berth/gen/berth/console/v1"
	"github.com/berthhq/berth/gen/berth/console/v1/consolev1connect"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/changefeed"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TestWatchChanges: the feed sends its first notice at once, then one coalesced notice
// naming the kinds changed in the caller's account and region, and nothing for another
// account's or region's changes; without identity headers the call is refused.
func TestWatchChanges(t *testing.T) {
	cli := etcdtest.Start(t)
	mux := httptestMux(changefeed.New(cli, cli, nil))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Start()
	defer srv.Close()
	client := consolev1connect.NewConsoleServiceClient(srv.Client(), srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	noID, err := client.WatchChanges(ctx, connect.NewRequest(&consolev1.WatchChangesRequest{}))
	if err == nil {
		noID.Receive()
		err = noID.Err()
	}
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without identity: %v, want Unauthenticated", err)
	}

	req := connect.NewRequest(&consolev1.WatchChangesRequest{CoalesceMillis: 200})
	req.Header().Set(identity.AccountHeader, "111111111111")
	req.Header().Set(identity.RegionHeader, "eu-west-1")
	stream, err := client.WatchChanges(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("no first notice: %v", stream.Err())
	}
	first := stream.Msg()
	if first.GetRevision() == 0 || len(first.GetKinds()) != 0 {
		t.Fatalf("first notice %v", first)
	}
	put := func(parts ...string) {
		t.Helper()
		if _, err := cli.Put(ctx, store.MustKey(parts...), "x"); err != nil {
			t.Fatal(err)
		}
	}
	// Another account and another region first: they must not show.
	put("tasks", "222222222222", "eu-west-1", "default", "t0")
	put("tasks", "111111111111", "us-east-1", "default", "t0")
	put("tasks", "111111111111", "eu-west-1", "default", "t1")
	put("services", "111111111111", "eu-west-1", "default", "web")
	put("tasks", "111111111111", "eu-west-1", "default", "t2")
	if !stream.Receive() {
		t.Fatalf("no change notice: %v", stream.Err())
	}
	got := stream.Msg()
	if !slices.Equal(got.GetKinds(), []string{"services", "tasks"}) || got.GetRevision() <= first.GetRevision() {
		t.Fatalf("notice %v, want kinds [services tasks] after revision %d", got, first.GetRevision())
	}
}

func httptestMux(svc consolev1connect.ConsoleServiceHandler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(consolev1connect.NewConsoleServiceHandler(svc, connect.WithInterceptors(caller.Interceptor{})))
	return mux
}
