// Package changefeed serves ConsoleService.WatchChanges: one etcd watch over the ECS
// state of the caller's (account, region), merged into coalesced notices, so the web
// console refreshes its pages when something changes instead of every browser polling.
package changefeed

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"

	consolev1 "github.com/berthhq/berth/gen/berth/console/v1"
	"github.com/berthhq/berth/gen/berth/console/v1/consolev1connect"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Kinds are the record kinds a notice names; each is the first part of its etcd keys.
var Kinds = []string{"clusters", "services", "tasks", "instances", "task-definitions"}

// Coalescing bounds, in milliseconds.
const (
	defaultCoalesce = 500
	minCoalesce     = 100
	maxCoalesce     = 10000
)

// Service implements consolev1connect.ConsoleServiceHandler over an etcd client.
type Service struct {
	watcher clientv3.Watcher
	kv      clientv3.KV
	log     *slog.Logger
}

var _ consolev1connect.ConsoleServiceHandler = (*Service)(nil)

// New returns the service; log may be nil.
func New(w clientv3.Watcher, kv clientv3.KV, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{watcher: w, kv: kv, log: log}
}

// WatchChanges implements ConsoleService.WatchChanges. The caller's identity (account and
// region) comes from the context (caller.Interceptor); without one it answers
// CodeUnauthenticated. It returns when the client goes away or the watch fails.
func (s *Service) WatchChanges(ctx context.Context, req *connect.Request[consolev1.WatchChangesRequest], stream *connect.ServerStream[consolev1.WatchChangesResponse]) error {
	id, ok := caller.From(ctx)
	if !ok {
		return connect.NewError(connect.CodeUnauthenticated, caller.ErrNoAccount)
	}
	coalesce := time.Duration(clampCoalesce(req.Msg.GetCoalesceMillis())) * time.Millisecond
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// The current revision: watches start after it, and the first notice carries it.
	res, err := s.kv.Get(ctx, store.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithLimit(1))
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	rev := res.Header.Revision
	if err := stream.Send(&consolev1.WatchChangesResponse{Revision: rev}); err != nil {
		return err
	}
	type event struct {
		kind string
		rev  int64
		err  error
	}
	events := make(chan event, 64)
	for _, kind := range Kinds {
		prefix := store.MustKeyPrefix(kind, id.Account, id.Region)
		wch := s.watcher.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithKeysOnly())
		go func() {
			for wr := range wch {
				if err := wr.Err(); err != nil {
					select {
					case events <- event{err: err}:
					case <-ctx.Done():
					}
					return
				}
				if len(wr.Events) == 0 {
					continue
				}
				select {
				case events <- event{kind: kind, rev: wr.Header.Revision}:
				case <-ctx.Done():
					return
				}
			}
			if ctx.Err() == nil {
				select {
				case events <- event{err: errors.New("watch closed")}:
				case <-ctx.Done():
				}
			}
		}()
	}
	var pending []string
	var last int64
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			if ev.err != nil {
				s.log.Warn("change feed watch failed", "account", id.Account, "region", id.Region, "err", ev.err)
				return connect.NewError(connect.CodeUnavailable, ev.err)
			}
			if !slices.Contains(pending, ev.kind) {
				pending = append(pending, ev.kind)
			}
			last = max(last, ev.rev)
			if timer == nil {
				timer = time.After(coalesce)
			}
		case <-timer:
			timer = nil
			slices.SortFunc(pending, strings.Compare)
			if err := stream.Send(&consolev1.WatchChangesResponse{Revision: last, Kinds: pending}); err != nil {
				return err
			}
			pending = nil
		}
	}
}

func clampCoalesce(ms uint32) uint32 {
	switch {
	case ms == 0:
		return defaultCoalesce
	case ms < minCoalesce:
		return minCoalesce
	case ms > maxCoalesce:
		return maxCoalesce
	}
	return ms
}
