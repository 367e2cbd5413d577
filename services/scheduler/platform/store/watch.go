package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Client is what Watch needs from etcd; *clientv3.Client satisfies it.
type Client interface {
	clientv3.KV
	clientv3.Watcher
}

// EventType says what an Event reports.
type EventType int

// Event types.
const (
	// EventPut: a record was created or updated; Event.Item holds it.
	EventPut EventType = iota + 1
	// EventDelete: a record was deleted; Event.Item has the key and the
	// delete's revision as ModRevision, and no Value.
	EventDelete
	// EventResync: Event.Items is the full current set under the prefix;
	// the consumer replaces what it holds with it. Sent first when watching
	// from revision 0, and again whenever the history needed to resume was
	// compacted away.
	EventResync
	// EventProgress: every change up to Event.Revision has been delivered (a
	// progress notification, or the header of a response that carried
	// events). Sent only to a Watch given WithProgress.
	EventProgress
)

// String returns "put", "delete" or "resync".
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	case EventResync:
		return "resync"
	case EventProgress:
		return "progress"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change delivered by Watch.
type Event[T proto.Message] struct {
	// Type says which of Item or Items is set.
	Type EventType
	// Item is the record put or deleted, for EventPut and EventDelete.
	Item Item[T]
	// Items is every record under the prefix in key order, for EventResync.
	Items []Item[T]
	// Revision is the store revision the consumer is at after applying this
	// event: a restart can resume with Watch(fromRevision: Revision+1).
	// Several events may share a revision when one txn wrote several keys.
	Revision int64
}

// Watch delivers to handler every change to records under prefix, in
// revision order, each once, until ctx ends or handler returns an error;
// it returns that error, or ctx's.
//
// With fromRevision 0 it first lists the prefix and sends an EventResync,
// then watches from the list's revision + 1. With fromRevision > 0 it
// watches from that revision (changes at fromRevision included). If etcd has
// compacted the revisions it needs, it lists again and sends an EventResync
// instead of the lost events, then goes on. After a disconnect (an etcd
// restart, a lost leader: the watch requires one) it resumes after the last
// revision delivered, so nothing is skipped or repeated.
//
// handler runs on Watch's goroutine; while it runs, events queue in the
// client. A value that does not decode as T ends Watch with an error.
//
// Options: WithProgress makes Watch also deliver EventProgress, which says up to
// which store revision the consumer has seen every change (RequestProgress asks
// etcd for one at once).
func Watch[T proto.Message](ctx context.Context, c Client, prefix string, fromRevision int64, handler func(Event[T]) error, opts ...WatchOption) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	var wo watchOptions
	for _, o := range opts {
		o(&wo)
	}
	ctx = clientv3.WithRequireLeader(ctx)
	next := fromRevision // the first revision not yet delivered
	resync := fromRevision <= 0
	failures := 0
	for {
		if resync {
			items, rev, ok, err := resyncList[T](ctx, c, prefix, &failures)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if err := handler(Event[T]{Type: EventResync, Items: items, Revision: rev}); err != nil {
				return err
			}
			next, resync = rev+1, false
		}

		var err error
		var delivered bool
		next, resync, delivered, err = watchOnce(ctx, c, prefix, next, wo, handler)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if resync {
			continue
		}
		// The watch ended without a reason to resync: reconnect from next.
		if delivered {
			failures = 0
		}
		failures++
		if err := Sleep(ctx, watchBackoff(failures)); err != nil {
			return err
		}
	}
}

// resyncList lists prefix for an EventResync (snapshot): ok with the records and their
// revision, resetting *failures; after a transient failure it waits (watchBackoff of
// the failures so far) and reports !ok for the caller to list again. It returns ctx's
// error when ctx ends and a decode error as it is.
func resyncList[T proto.Message](ctx context.Context, c clientv3.KV, prefix string, failures *int) (items []Item[T], rev int64, ok bool, err error) {
	items, rev, err = snapshot[T](ctx, c, prefix)
	switch {
	case err == nil:
		*failures = 0
		return items, rev, true, nil
	case ctx.Err() != nil:
		return nil, 0, false, ctx.Err()
	case isDecodeError(err):
		return nil, 0, false, err
	}
	*failures++
	return nil, 0, false, Sleep(ctx, watchBackoff(*failures))
}

// watchOnce runs one etcd watch from revision next until it ends. It returns
// the next revision to watch from, whether a resync is needed (history
// compacted), whether any response arrived, and a handler or decode error.
func watchOnce[T proto.Message](ctx context.Context, c Client, prefix string, next int64, wo watchOptions, handler func(Event[T]) error) (int64, bool, bool, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	delivered := false
	wch := c.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return next, true, delivered, nil
		}
		if resp.Err() != nil {
			if errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				return next, true, delivered, nil
			}
			return next, false, delivered, nil
		}
		delivered = true
		if resp.IsProgressNotify() {
			// Every event up to the header revision has been sent.
			next = max(next, resp.Header.Revision+1)
			if wo.progress {
				if err := handler(Event[T]{Type: EventProgress, Revision: next - 1}); err != nil {
					return next, false, delivered, err
				}
			}
			continue
		}
		last := next - 1
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision < next {
				continue // already delivered before a reconnect
			}
			e, err := toEvent[T](ev)
			if err != nil {
				return next, false, delivered, err
			}
			if err := handler(e); err != nil {
				return next, false, delivered, err
			}
			last = ev.Kv.ModRevision
		}
		// A revision's events come in one response, so the next one starts
		// after the last revision seen.
		next = last + 1
		if wo.progress {
			// etcd sends a response once every change up to its header
			// revision has been sent.
			if err := handler(Event[T]{Type: EventProgress, Revision: max(resp.Header.Revision, next-1)}); err != nil {
				return next, false, delivered, err
			}
		}
	}
	return next, false, delivered, nil
}

// WatchOption adjusts Watch.
type WatchOption func(*watchOptions)

type watchOptions struct{ progress bool }

// WithProgress makes Watch deliver EventProgress events: after each etcd
// response (events or a progress notification), the store revision up to which
// every change under the prefix has been delivered. A consumer that caches the
// prefix uses it to tell whether the cache is as new as a revision it read.
func WithProgress() WatchOption { return func(o *watchOptions) { o.progress = true } }

// RequestProgress asks etcd for a progress notification on the watches ctx's
// Watch calls opened (those whose ctx carries the same gRPC metadata as ctx; a
// context without metadata shares the client's default stream): each Watch given
// WithProgress then delivers an EventProgress at the store's current revision,
// once every change up to it has been sent. etcd answers once every watch of the
// stream has caught up, so a consumer waiting for one should also time out.
func RequestProgress(ctx context.Context, w clientv3.Watcher) error {
	return w.RequestProgress(clientv3.WithRequireLeader(ctx))
}

func toEvent[T proto.Message](ev *clientv3.Event) (Event[T], error) {
	kv := ev.Kv
	if ev.Type == mvccpb.DELETE {
		return Event[T]{
			Type:     EventDelete,
			Item:     Item[T]{Key: string(kv.Key), ModRevision: kv.ModRevision},
			Revision: kv.ModRevision,
		}, nil
	}
	it, err := decodeItem[T](kv)
	if err != nil {
		return Event[T]{}, decodeError{err}
	}
	return Event[T]{Type: EventPut, Item: it, Revision: kv.ModRevision}, nil
}

// snapshot lists every record under prefix at one revision and returns them
// with that revision. It streams the range (etcd 3.7's RangeStream: chunked,
// one index walk) and falls back to pages read at a pinned revision on an
// older etcd. A compaction between pages starts it over at a new revision.
func snapshot[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string) ([]Item[T], int64, error) {
	items, rev, err := snapshotStream[T](ctx, kv, prefix)
	if status.Code(err) != codes.Unimplemented {
		return items, rev, err
	}
	for {
		items, rev, err := snapshotPaged[T](ctx, kv, prefix)
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		return items, rev, err
	}
}

func snapshotStream[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string) ([]Item[T], int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream if we stop reading early
	ch, err := kv.GetStream(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)))
	if err != nil {
		return nil, 0, fmt.Errorf("store: list %s: %w", prefix, err)
	}
	var items []Item[T]
	var rev int64
	for chunk := range ch {
		if err := chunk.Err(); err != nil {
			return nil, 0, fmt.Errorf("store: list %s: %w", prefix, err)
		}
		if h := chunk.Header; h != nil {
			rev = h.Revision
		}
		for _, kv := range chunk.Kvs {
			it, err := decodeItem[T](kv)
			if err != nil {
				return nil, 0, decodeError{err}
			}
			items = append(items, it)
		}
	}
	if rev == 0 {
		return nil, 0, fmt.Errorf("store: list %s: stream ended without a revision", prefix)
	}
	return items, rev, nil
}

func snapshotPaged[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string) ([]Item[T], int64, error) {
	var items []Item[T]
	var rev int64
	token := ""
	for {
		kvs, next, r, err := listPage(ctx, kv, prefix, MaxListLimit, token, false, rev)
		if err != nil {
			return nil, 0, err
		}
		if rev == 0 {
			rev = r
		}
		for _, kv := range kvs {
			it, err := decodeItem[T](kv)
			if err != nil {
				return nil, 0, decodeError{err}
			}
			items = append(items, it)
		}
		if next == "" {
			return items, rev, nil
		}
		token = next
	}
}

// decodeError marks a value that does not decode: retrying will not help.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }
func (e decodeError) Unwrap() error { return e.err }

func isDecodeError(err error) bool {
	var d decodeError
	return errors.As(err, &d)
}

// watchBackoff returns the pause before reconnect number n (1-based): 50ms
// doubling to 2s, with jitter.
func watchBackoff(n int) time.Duration {
	d := min(50*time.Millisecond<<min(n-1, 6), 2*time.Second)
	return d/2 + rand.N(d/2+1)
}
