package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// hub shares one upstream watch per (account, region) among every browser of that scope:
// it starts when the first event stream subscribes and stops when the last leaves.
type hub struct {
	watch func(ctx context.Context, who Identity) (<-chan Change, error)
	log   *slog.Logger

	mu     sync.Mutex
	scopes map[string]*feed
}

// feed is one scope's upstream watch and its subscribers.
type feed struct {
	cancel context.CancelFunc
	subs   map[chan Change]struct{}
}

func newHub(watch func(ctx context.Context, who Identity) (<-chan Change, error), log *slog.Logger) *hub {
	return &hub{watch: watch, log: log, scopes: map[string]*feed{}}
}

// subscribe returns a channel of the scope's changes (buffered; a slow reader misses
// notices, never blocks the others) and the function that unsubscribes.
func (h *hub) subscribe(who Identity) (<-chan Change, func()) {
	key := who.AccountID + "/" + who.Region
	ch := make(chan Change, 4)
	h.mu.Lock()
	f := h.scopes[key]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{cancel: cancel, subs: map[chan Change]struct{}{}}
		h.scopes[key] = f
		go h.run(ctx, key, who, f)
	}
	f.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(f.subs, ch)
		if len(f.subs) == 0 && h.scopes[key] == f {
			delete(h.scopes, key)
			f.cancel()
		}
	}
}

// run keeps the scope's upstream watch open, reconnecting with a capped backoff, and
// fans its notices out; a reconnect is announced as a change of everything, since
// notices may have been missed.
func (h *hub) run(ctx context.Context, key string, who Identity, f *feed) {
	backoff := 250 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		ch, err := h.watch(ctx, Identity{AccountID: who.AccountID, Region: who.Region})
		if err == nil {
			if !first {
				h.broadcast(f, Change{Kinds: []string{"all"}})
			}
			first = false
			for c := range ch {
				backoff = 250 * time.Millisecond
				h.broadcast(f, c)
			}
		} else if ctx.Err() == nil {
			h.log.Warn("console change feed", "scope", key, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (h *hub) broadcast(f *feed, c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- c:
		default:
		}
	}
}

// events serves GET /console/events: a server-sent event stream with a "change" event
// (data: the changed kinds, comma-separated) whenever the account's state in the region
// changes, and a comment every 25 s to keep proxies from closing it.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	changes, stop := c.hub.subscribe(rq.who)
	defer stop()
	fmt.Fprint(w, "retry: 2000\n: live\n\n")
	_ = rc.Flush()
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
		case ch := <-changes:
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", strings.Join(ch.Kinds, ","))
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
