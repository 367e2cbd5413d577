package store

import (
	"context"
	"errors"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// Hub shares one etcd watch of a prefix among many watchers of the parts under it
// (WatchShared): with a watch per part, etcd matches every write against each watcher's
// range and queues a response per watcher, which at a thousand agent sessions on one
// scheduler (an inbox each) cost more than the writes they watched. The hub's one
// watch receives a transaction's events in one response and hands each to the
// watchers of its part, undecoded; each watcher decodes only its own.
//
// Every event under the prefix reaches the hub, also those of parts no watcher here
// follows (with several scheduler replicas, each receives every inbox write); those are
// dropped by key, undecoded. The hub's watch runs while it has watchers. A Hub is safe
// for concurrent use.
type Hub struct {
	c      Client
	prefix string
	part   func(key string) string

	mu    sync.Mutex
	subs  map[string]map[*hubSub]struct{} // by part; a part without watchers has no entry
	w     *hubWatch                       // the running watch; nil when none runs
	ready chan struct{}                   // closed once w is established; replaced when a run starts and after a compaction
}

// hubWatch is one run of the shared watch, from a first watcher joining to the last
// leaving.
type hubWatch struct {
	ctx    context.Context //nolint:containedctx // the run's, cancelled under Hub.mu
	cancel context.CancelFunc
}

// NewHub returns a hub watching prefix (a key prefix, see checkPrefix) through c. part
// maps a key under prefix to the part it belongs to: the prefix a WatchShared call names
// (for an inbox key /…/inbox/{account}/{region}/{instance}/{task}, the key up to and
// including the instance's slash); a key whose part has no watcher is dropped.
func NewHub(c Client, prefix string, part func(key string) string) *Hub {
	return &Hub{c: c, prefix: prefix, part: part, subs: map[string]map[*hubSub]struct{}{}}
}

// hubSub is one WatchShared call's queue.
type hubSub struct {
	mu     sync.Mutex
	events []*clientv3.Event
	resync bool // list the part (again): at the start, and after the hub lost history
	wake   chan struct{}
}

func (s *hubSub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// WatchShared is Watch(ctx, c, part, 0, handler) served by h's shared watch: an
// EventResync with every record under part first, then each change to them, in revision
// order, each once, until ctx ends or handler returns an error (which it returns, or
// ctx's). part must be a prefix h's part function returns. When the shared watch cannot
// resume (history compacted) the watcher gets an EventResync again. A value that does
// not decode as T ends WatchShared with an error.
//
// Completeness: a watcher lists its part only once the shared watch is established, so
// every change after the list's revision reaches its queue; changes at or below that
// revision (already in the list) are dropped.
func WatchShared[T proto.Message](ctx context.Context, h *Hub, part string, handler func(Event[T]) error) error {
	if err := checkPrefix(part); err != nil {
		return err
	}
	if !strings.HasPrefix(part, h.prefix) || h.part(part+"x") != part {
		return errors.New("store: shared watch of " + part + ": not a part of " + h.prefix)
	}
	s := &hubSub{wake: make(chan struct{}, 1), resync: true}
	h.join(part, s)
	defer h.leave(part, s)
	ctx = clientv3.WithRequireLeader(ctx)
	var listed int64 // the revision of the last list; events at or below it are in it
	failures := 0
	for {
		s.mu.Lock()
		resync, events := s.resync, s.events
		s.resync, s.events = false, nil
		s.mu.Unlock()
		if resync {
			if err := h.waitReady(ctx); err != nil {
				return err
			}
			items, rev, ok, err := resyncList[T](ctx, h.c, part, &failures)
			if err != nil {
				return err
			}
			if !ok {
				s.mu.Lock()
				s.resync = true
				s.mu.Unlock()
				continue
			}
			listed = rev
			if err := handler(Event[T]{Type: EventResync, Items: items, Revision: rev}); err != nil {
				return err
			}
		}
		for _, ev := range events {
			if ev.Kv.ModRevision <= listed {
				continue
			}
			e, err := toEvent[T](ev)
			if err != nil {
				return err
			}
			if err := handler(e); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		}
	}
}

// waitReady waits until the shared watch is established (or ctx ends).
func (h *Hub) waitReady(ctx context.Context) error {
	h.mu.Lock()
	ready := h.ready
	h.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join adds s as a watcher of part, starting the shared watch when it is the first.
func (h *Hub) join(part string, s *hubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[part] == nil {
		h.subs[part] = map[*hubSub]struct{}{}
	}
	h.subs[part][s] = struct{}{}
	if h.w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.w = &hubWatch{ctx: ctx, cancel: cancel}
		h.ready = make(chan struct{})
		go h.run(h.w)
	}
}

// leave removes s, ending the shared watch when no watcher is left. A run that is
// ending delivers nothing more: its context is cancelled under h.mu, which deliver holds.
func (h *Hub) leave(part string, s *hubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[part], s)
	if len(h.subs[part]) == 0 {
		delete(h.subs, part)
	}
	if len(h.subs) == 0 && h.w != nil {
		h.w.cancel()
		h.w = nil
	}
}

// run keeps the shared watch w going until its context ends: from the store's current
// revision (watchers list once it is established, so nothing before it is needed),
// resumed after the last revision delivered when the watch breaks, and started over at
// the current revision, with every watcher told to list again once it is established,
// when the history to resume from was compacted away.
func (h *Hub) run(w *hubWatch) {
	ctx := clientv3.WithRequireLeader(w.ctx)
	next := int64(0) // 0: from the current revision
	failures := 0
	for ctx.Err() == nil {
		var delivered, compacted bool
		next, delivered, compacted = h.watchOnce(ctx, w, next)
		switch {
		case ctx.Err() != nil:
			return
		case compacted:
			next = 0
			h.mu.Lock()
			if w.ctx.Err() == nil {
				h.ready = make(chan struct{})
				for _, subs := range h.subs {
					for s := range subs {
						s.mu.Lock()
						s.resync, s.events = true, nil
						s.mu.Unlock()
						s.signal()
					}
				}
			}
			h.mu.Unlock()
			failures = 0
			continue
		case delivered:
			failures = 0
		}
		failures++
		if Sleep(ctx, watchBackoff(failures)) != nil {
			return
		}
	}
}

// watchOnce runs one etcd watch from revision next (0: the current one) until it ends,
// handing events to the watchers of their parts. It returns the next revision to watch
// from, whether any response arrived and whether the history was compacted.
func (h *Hub) watchOnce(ctx context.Context, w *hubWatch, next int64) (int64, bool, bool) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify()}
	if next > 0 {
		opts = append(opts, clientv3.WithRev(next))
	}
	delivered := false
	for resp := range h.c.Watch(wctx, h.prefix, opts...) {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return next, delivered, true
		}
		if resp.Err() != nil {
			return next, delivered, false
		}
		if resp.Created {
			if next == 0 {
				// Every change after the header's revision will be delivered.
				next = resp.Header.Revision + 1
			}
			h.mu.Lock()
			if w.ctx.Err() == nil {
				select {
				case <-h.ready: // already established
				default:
					close(h.ready)
				}
			}
			h.mu.Unlock()
			continue
		}
		// A response after the creation: the watch works (a watch that is created and
		// breaks again keeps backing off).
		delivered = true
		if resp.IsProgressNotify() {
			next = max(next, resp.Header.Revision+1)
			continue
		}
		h.deliver(w, resp.Events)
		for _, ev := range resp.Events {
			next = max(next, ev.Kv.ModRevision+1)
		}
	}
	return next, delivered, false
}

// deliver queues each event for the watchers of its part, unless w has ended.
func (h *Hub) deliver(w *hubWatch, events []*clientv3.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.ctx.Err() != nil {
		return
	}
	for _, ev := range events {
		for s := range h.subs[h.part(string(ev.Kv.Key))] {
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
			s.signal()
		}
	}
}
