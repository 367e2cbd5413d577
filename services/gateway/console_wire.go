package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	consolev1 "github.com/berthhq/berth/gen/berth/console/v1"
	"github.com/berthhq/berth/gen/berth/console/v1/consolev1connect"
	"github.com/berthhq/berth/services/gateway/console"
	"github.com/berthhq/berth/services/gateway/sigv4"
)

// ConsoleConfig turns on the web console at /console (package console).
type ConsoleConfig struct {
	// DefaultRegion fills the sign-in form's region; "us-east-1" when empty.
	DefaultRegion string
	// Logs is the task logs page's source; nil reads each task's logs from its agent,
	// found through its instance's berth.log-endpoint attribute (console.InstanceLogs),
	// over the gateway's HTTP client.
	Logs console.LogSource
}

// newConsole builds the console over the gateway's own parts: keys resolve through the
// same cache as SigV4 (the scheduler's AdminService lookup), ECS calls go through the
// same operation clients with the same identity headers as the API path, failed sign-ins
// count toward the same address lockout, and live updates come from the scheduler's
// ConsoleService.WatchChanges.
func (g *Gateway) newConsole(cc *ConsoleConfig) (*console.Console, error) {
	watch := consolev1connect.NewConsoleServiceClient(g.cfg.HTTPClient, g.cfg.SchedulerURL)
	allowed := g.cfg.Regions
	if len(allowed) == 0 {
		allowed = sigv4.PublicRegions
	}
	return console.New(console.Config{
		Resolve: func(ctx context.Context, id string) (console.Credential, error) {
			cred, err := g.keys.Resolve(ctx, id)
			if errors.Is(err, sigv4.ErrUnknownKey) {
				return console.Credential{}, console.ErrUnknownKey
			}
			if err != nil {
				return console.Credential{}, err
			}
			return console.Credential{AccountID: cred.AccountID, SecretAccessKey: cred.SecretAccessKey,
				InstanceScoped: cred.ContainerInstanceARN != ""}, nil
		},
		Call: func(ctx context.Context, who console.Identity, action string, in proto.Message) (proto.Message, error) {
			op := g.ops[action]
			if op == nil {
				return nil, &console.APIError{Type: "UnknownOperationException", Message: "Unknown operation " + action + "."}
			}
			if !g.throttle.allow(who.AccountID) {
				return nil, &console.APIError{Type: "ThrottlingException", Message: "Rate exceeded"}
			}
			id := newRequestID()
			cred := sigv4.Credential{AccessKeyID: who.AccessKeyID, AccountID: who.AccountID, Region: who.Region}
			start := time.Now()
			out, err := g.call(ctx, op, in, cred, id, "")
			status := http.StatusOK
			if err != nil {
				var typ, msg string
				status, typ, msg = g.mapError(err, g.services[SigningName], action, id)
				err = &console.APIError{Type: typ, Message: msg}
			}
			g.log.Info("console call", "request_id", id, "account", who.AccountID, "region", who.Region, "action", action, "status", status)
			g.metrics.observe(action, status, time.Since(start))
			return out, err
		},
		Watch: func(ctx context.Context, who console.Identity) (<-chan console.Change, error) {
			req := connect.NewRequest(&consolev1.WatchChangesRequest{})
			setIdentity(req.Header(), sigv4.Credential{AccountID: who.AccountID, Region: who.Region}, newRequestID())
			stream, err := watch.WatchChanges(ctx, req)
			if err != nil {
				return nil, err
			}
			if !stream.Receive() { // the first message says the watch is live
				err := stream.Err()
				stream.Close()
				if err == nil {
					err = errors.New("change feed ended at once")
				}
				return nil, err
			}
			ch := make(chan console.Change, 1)
			go func() {
				defer close(ch)
				defer stream.Close()
				for stream.Receive() {
					select {
					case ch <- console.Change{Kinds: stream.Msg().GetKinds()}:
					case <-ctx.Done():
						return
					}
				}
			}()
			return ch, nil
		},
		Logs:          cc.Logs,
		HTTPClient:    g.cfg.HTTPClient,
		RegionAllowed: func(r string) bool { return slices.Contains(allowed, r) },
		DefaultRegion: cc.DefaultRegion,
		Locked:        func(r *http.Request) (time.Duration, bool) { return g.lockout.locked(g.cfg.ClientAddress(r)) },
		Failed:        func(r *http.Request) { g.lockout.failure(g.cfg.ClientAddress(r)) },
		Succeeded:     func(r *http.Request) { g.lockout.success(g.cfg.ClientAddress(r)) },
		Logger:        g.log.With("component", "console"),
		Now:           g.cfg.Now,
	})
}
