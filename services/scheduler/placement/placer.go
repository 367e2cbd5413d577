package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Placed is one task placed by Placer: the instance chosen and its record as the commit
// writes it (with this call's reservations already taken).
type Placed struct {
	// Index is the task's position in the request, 0-based.
	Index int
	// InstanceID is the chosen container instance's id.
	InstanceID string
	// InstanceARN is its ARN.
	InstanceARN string
	// Instance is a private copy of the instance record as read, without this call's
	// reservations, shared by every task the call places on that instance: the Commit
	// hook reserves on it (placement.Reserve, as task.PlaceTxn does) and writes it under
	// InstanceRev. After the commit the Placer caches it, as changed, at the commit's
	// revision.
	Instance *storev1.ContainerInstanceRecord
	// InstanceRev is the ModRevision the instance was read at.
	InstanceRev int64
}

// CommitFunc adds to txn the writes that go with the placements: each placed instance
// (Placed.Instance, reserved on in place, under Placed.InstanceRev), task records, inbox
// entries, index keys, counters. It may run several times (once per attempt, each with a
// fresh txn and fresh placements) and must not Commit the txn. An error stops Place and
// is returned as is. The Placer writes nothing itself: an instance the hook does not
// write is not protected against over-commit.
type CommitFunc func(ctx context.Context, txn *store.Txn, placed []Placed) error

// PlaceRequest is one call to Placer.Place.
type PlaceRequest struct {
	// Account is the (account, region) scope and Cluster the cluster whose instances are
	// candidates; instances of another region are never candidates.
	Account keys.Scope
	Cluster string
	// Request is what to place (count, demand, constraints, strategy, named instances).
	Request Request
	// Commit adds the instance and task writes to the placement's txn. Required: Place
	// returns an error wrapping ErrInvalid without it.
	Commit CommitFunc
	// If adds compares to the txn.
	If []clientv3.Cmp
	// KV, when set, is what the txn commits through instead of the Placer's client: a
	// leader passes its term's store.FencedKV so that a deposed leader's placement fails.
	// Reads (the instance cache) stay on the Placer's client.
	KV clientv3.KV
}

// PlaceResult is what Place did.
type PlaceResult struct {
	// Placed has one entry per task placed, in request order.
	Placed []Placed
	// Failures explains why the rest could not be placed (AWS failures[] reasons).
	Failures []Failure
	// Revision is the etcd revision the placement committed at; 0 when nothing was
	// placed.
	Revision int64
}

// Placer places tasks on a cluster's container instances in etcd: it chooses with the
// Engine over a snapshot of the instances, then commits in one txn in which the caller's
// hook writes each chosen instance's reduced remainingResources under the ModRevision it
// was read at, together with the task writes. A concurrent placement on the same
// instance makes the txn fail; Placer re-reads the instances and tries again, so an
// instance is never over-committed. Within the process, a cluster's commits take turns
// under its commit lock, which lets a plan check that its instances did not change while
// it waited; callers that want several requests in one txn batch them themselves and call
// PlaceGroup, as control's RunTask queue does. Safe for concurrent use.
//
// Snapshots come from a per-cluster cache fed by a watch on the cluster's instances
// (started on the cluster's first placement, stopped by Close), so a placement costs one
// engine pass and one txn rather than a list of the cluster.
type Placer struct {
	cli      store.Client
	log      *slog.Logger
	attempts int
	noCache  bool
	metrics  *Metrics

	rngPool sync.Pool

	mu       sync.Mutex
	clusters map[clusterKey]*clusterCache
	ctx      context.Context //nolint:containedctx // lifetime of the background watches, ended by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// Option configures a Placer.
type Option func(*Placer)

// WithMaxAttempts bounds how many times Place retries after a revision conflict (default
// 32).
func WithMaxAttempts(n int) Option { return func(p *Placer) { p.attempts = max(n, 1) } }

// WithoutCache makes every Place list the cluster's instances instead of using the
// watch-fed cache (slower; for tests and tiny clusters).
func WithoutCache() Option { return func(p *Placer) { p.noCache = true } }

// NewPlacer returns a Placer over cli, logging to log (nil discards). Close it to stop
// its watches.
func NewPlacer(cli store.Client, log *slog.Logger, opts ...Option) *Placer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Placer{cli: cli, log: log, attempts: 32, clusters: map[clusterKey]*clusterCache{}, ctx: ctx, cancel: cancel}
	p.rngPool.New = func() any { return NewEngine(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))) }
	for _, o := range opts {
		o(p)
	}
	return p
}

// writer returns kv, or the Placer's client when kv is nil.
func (p *Placer) writer(kv clientv3.KV) clientv3.KV {
	if kv != nil {
		return kv
	}
	return p.cli
}

// Close stops the cache watches and waits for them to end.
func (p *Placer) Close() {
	p.cancel()
	p.wg.Wait()
}

// ErrConflicts is returned (wrapped) when Place gave up after too many revision
// conflicts; the caller may retry or report a ServerException.
var ErrConflicts = errors.New("placement: too many concurrent conflicts")

// Place chooses instances for req.Request and commits the reservations with req.Commit's
// writes in one txn. Tasks that cannot be placed are reported in Failures (no error). It
// returns an error wrapping ErrExpression or ErrInvalid for a bad constraint or strategy
// or a missing Commit, store.ErrPreconditionFailed when an If compare failed,
// ErrConflicts after too many conflicts, or the Commit hook's error.
func (p *Placer) Place(ctx context.Context, req PlaceRequest) (res PlaceResult, err error) {
	defer func(start time.Time) { p.metrics.observe(start, res, err) }(time.Now())
	if req.Commit == nil {
		return PlaceResult{}, fmt.Errorf("%w: PlaceRequest.Commit is required: it writes the instances", ErrInvalid)
	}
	// A group of one: the same planning, commit lock and retries as PlaceGroup.
	results, err := p.placeGroup(ctx, req.KV, req.Account, req.Cluster, []Request{req.Request}, func(ctx context.Context, txn *store.Txn, placed [][]Placed) error {
		txn.If(req.If...)
		return req.Commit(ctx, txn, placed[0])
	})
	if err != nil {
		return PlaceResult{}, err
	}
	return results[0], nil
}

// lock takes the cluster's in-process commit lock for a plan made on snap choosing
// instances ids, and reports whether snap is still current for those instances.
func (p *Placer) lock(account keys.Scope, cluster string, snap *snapshot, ids []string) (func(), bool) {
	if p.noCache {
		return func() {}, true
	}
	p.mu.Lock()
	cc := p.clusters[cacheKey(account, cluster)]
	p.mu.Unlock()
	if cc == nil {
		return func() {}, true
	}
	cc.commitMu.Lock()
	unlock := cc.commitMu.Unlock
	cur := cc.snapshot()
	for _, id := range ids {
		i, ok := cur.pos[id]
		if !ok || cur.entries[i].rev != snap.entry(id).rev {
			return unlock, false
		}
	}
	return unlock, true
}

// placedOn is the Placed of choice ch, task index i, over snap: its instance record is
// recs' copy, made from the snapshot's on the instance's first choice, so every task
// placed on one instance shares it.
func placedOn(snap *snapshot, recs map[string]*storev1.ContainerInstanceRecord, i int, ch Choice) (Placed, error) {
	id := ch.Instance.ID
	e := snap.entry(id)
	rec := recs[id]
	if rec == nil {
		if e.rec.GetContainerInstance() == nil {
			return Placed{}, fmt.Errorf("placement: instance %s has no container_instance", id)
		}
		rec = proto.Clone(e.rec).(*storev1.ContainerInstanceRecord)
		recs[id] = rec
	}
	return Placed{Index: i, InstanceID: id, InstanceARN: ch.Instance.ARN, Instance: rec, InstanceRev: e.rev}, nil
}

// Cache.

type entry struct {
	rec  *storev1.ContainerInstanceRecord // never modified once cached
	rev  int64
	view *Instance // never modified once cached (the engine clones)
}

// snapshot is an immutable view of a cluster's instances, sorted by id.
type snapshot struct {
	views   []*Instance
	entries []*entry
	pos     map[string]int // id → index; shared between snapshots with the same ids
}

func (s *snapshot) entry(id string) *entry { return s.entries[s.pos[id]] }

type clusterCache struct {
	ready chan struct{}

	commitMu sync.Mutex // serializes hook-written commits of the cluster

	mu      sync.Mutex
	err     error
	entries map[string]*entry
	snap    *snapshot // rebuilt lazily after a change
	// shared is set once snap has been handed out: a change then copies its slices;
	// until then changes (a commit's instances, one watch event each) swap in place.
	shared bool
}

// clusterKey names a cluster of an (account, region) scope: the key of Placer.clusters
// (a struct rather than a joined string, which cost an allocation a Place).
type clusterKey struct {
	scope   keys.Scope
	cluster string
}

func cacheKey(account keys.Scope, cluster string) clusterKey { return clusterKey{account, cluster} }

// snapshot returns the cluster's instances, first re-reading the stale ones.
func (p *Placer) snapshot(ctx context.Context, account keys.Scope, cluster string, stale []string) (*snapshot, error) {
	if p.noCache {
		return p.list(ctx, account, cluster)
	}
	cc, err := p.cache(ctx, account, cluster)
	if err != nil {
		return nil, err
	}
	for _, id := range stale {
		rec, rev, err := store.Get[*storev1.ContainerInstanceRecord](ctx, p.cli, keys.Instance(account, cluster, id))
		switch {
		case errors.Is(err, store.ErrNotFound):
			cc.remove(id)
		case err != nil:
			return nil, fmt.Errorf("placement: re-read instance %s: %w", id, err)
		default:
			cc.upsert(id, rec, rev)
		}
	}
	return cc.snapshot(), nil
}

func (p *Placer) list(ctx context.Context, account keys.Scope, cluster string) (*snapshot, error) {
	entries := map[string]*entry{}
	token := ""
	for {
		items, next, err := store.List[*storev1.ContainerInstanceRecord](ctx, p.cli, keys.Instances(account, cluster), store.MaxListLimit, token)
		if err != nil {
			return nil, fmt.Errorf("placement: list instances: %w", err)
		}
		for _, it := range items {
			id := lastSegment(it.Key)
			entries[id] = &entry{rec: it.Value, rev: it.ModRevision, view: FromRecord(id, it.Value, it.ModRevision)}
		}
		if next == "" {
			return buildSnapshot(entries), nil
		}
		token = next
	}
}

// buildSnapshot sorts entries by id into a new snapshot.
func buildSnapshot(entries map[string]*entry) *snapshot {
	s := &snapshot{views: make([]*Instance, 0, len(entries)), entries: make([]*entry, 0, len(entries)), pos: make(map[string]int, len(entries))}
	for _, e := range entries {
		s.entries = append(s.entries, e)
	}
	slices.SortFunc(s.entries, func(a, b *entry) int { return strings.Compare(a.view.ID, b.view.ID) })
	for i, e := range s.entries {
		s.views = append(s.views, e.view)
		s.pos[e.view.ID] = i
	}
	return s
}

func (p *Placer) cache(ctx context.Context, account keys.Scope, cluster string) (*clusterCache, error) {
	k := cacheKey(account, cluster)
	p.mu.Lock()
	cc := p.clusters[k]
	if cc == nil {
		cc = &clusterCache{ready: make(chan struct{}), entries: map[string]*entry{}}
		p.clusters[k] = cc
		p.wg.Add(1)
		go p.watch(account, cluster, cc)
	}
	p.mu.Unlock()
	select {
	case <-cc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cc.mu.Lock()
	err := cc.err
	cc.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return cc, nil
}

// watch keeps cc in step with the cluster's instances until Close.
func (p *Placer) watch(account keys.Scope, cluster string, cc *clusterCache) {
	defer p.wg.Done()
	var once sync.Once
	markReady := func() { once.Do(func() { close(cc.ready) }) }
	// The records arrive as Empty (every field kept unparsed) and are decoded only when
	// the cache does not hold them yet: most puts are this Placer's own commits, which
	// committed already cached.
	err := store.Watch(p.ctx, p.cli, keys.Instances(account, cluster), 0, func(ev store.Event[*emptypb.Empty]) error {
		switch ev.Type {
		case store.EventResync:
			entries := make(map[string]*entry, len(ev.Items))
			for _, it := range ev.Items {
				id := lastSegment(it.Key)
				rec, err := decodeInstance(it)
				if err != nil {
					return err
				}
				entries[id] = &entry{rec: rec, rev: it.ModRevision, view: FromRecord(id, rec, it.ModRevision)}
			}
			cc.mu.Lock()
			cc.entries = entries
			cc.snap = nil
			cc.mu.Unlock()
			markReady()
		case store.EventPut:
			id := lastSegment(ev.Item.Key)
			if cc.has(id, ev.Item.ModRevision) {
				return nil
			}
			rec, err := decodeInstance(ev.Item)
			if err != nil {
				return err
			}
			cc.upsert(id, rec, ev.Item.ModRevision)
		case store.EventDelete:
			cc.remove(lastSegment(ev.Item.Key))
		}
		return nil
	})
	if err != nil && p.ctx.Err() == nil {
		p.log.Error("placement: instance watch ended", "account", account, "cluster", cluster, "err", err)
		cc.mu.Lock()
		cc.err = fmt.Errorf("placement: instance watch: %w", err)
		cc.mu.Unlock()
		// Forget the cache so the next Place starts a new watch.
		p.mu.Lock()
		if p.clusters[cacheKey(account, cluster)] == cc {
			delete(p.clusters, cacheKey(account, cluster))
		}
		p.mu.Unlock()
	}
	markReady()
}

// committed records this process's own writes at once, so the next placement does not
// have to wait for the watch to see them.
func (p *Placer) committed(account keys.Scope, cluster string, placed []Placed, rev int64) {
	if p.noCache || len(placed) == 0 {
		return
	}
	p.mu.Lock()
	cc := p.clusters[cacheKey(account, cluster)]
	p.mu.Unlock()
	if cc == nil {
		return
	}
	cc.upsertMany(placed, rev)
}

// upsertMany is upsert of every instance of placed (each once) at rev, copying the
// snapshot's slices once for all of them rather than once per instance: a group commit
// touches a hundred instances of a cluster of a thousand.
func (cc *clusterCache) upsertMany(placed []Placed, rev int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, pl := range placed {
		id := pl.InstanceID
		cur, known := cc.entries[id]
		if known && cur.rev >= rev {
			continue // already taken (an instance placed on twice, or the watch was first)
		}
		e := &entry{rec: pl.Instance, rev: rev, view: FromRecord(id, pl.Instance, rev)}
		cc.entries[id] = e
		if !known || cc.snap == nil {
			cc.snap = nil
			continue
		}
		cc.own()
		i := cc.snap.pos[id]
		cc.snap.views[i], cc.snap.entries[i] = e.view, e
	}
}

// decodeInstance decodes an instance record the watch read as Empty.
func decodeInstance(it store.Item[*emptypb.Empty]) (*storev1.ContainerInstanceRecord, error) {
	rec := &storev1.ContainerInstanceRecord{}
	if err := proto.Unmarshal(it.Value.ProtoReflect().GetUnknown(), rec); err != nil {
		return nil, fmt.Errorf("placement: decode %s at revision %d: %w", it.Key, it.ModRevision, err)
	}
	return rec, nil
}

// has reports whether the cache holds instance id at revision rev or later.
func (cc *clusterCache) has(id string, rev int64) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cur := cc.entries[id]
	return cur != nil && cur.rev >= rev
}

func (cc *clusterCache) upsert(id string, rec *storev1.ContainerInstanceRecord, rev int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cur := cc.entries[id]; cur != nil && cur.rev >= rev {
		return
	}
	e := &entry{rec: rec, rev: rev, view: FromRecord(id, rec, rev)}
	_, known := cc.entries[id]
	cc.entries[id] = e
	if known && cc.snap != nil {
		// Same ids: swap one entry (cheap next to a rebuild, which sorts), in a copy of
		// the snapshot's slices when the snapshot is in use.
		cc.own()
		i := cc.snap.pos[id]
		cc.snap.views[i], cc.snap.entries[i] = e.view, e
		return
	}
	cc.snap = nil
}

// own makes cc.snap private to the cache (copying its slices when it was handed out),
// so that it can be changed in place. The caller holds mu.
func (cc *clusterCache) own() {
	if cc.shared {
		cc.snap = &snapshot{views: slices.Clone(cc.snap.views), entries: slices.Clone(cc.snap.entries), pos: cc.snap.pos}
		cc.shared = false
	}
}

func (cc *clusterCache) remove(id string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, ok := cc.entries[id]; ok {
		delete(cc.entries, id)
		cc.snap = nil
	}
}

func (cc *clusterCache) snapshot() *snapshot {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.snap == nil {
		cc.snap = buildSnapshot(cc.entries)
	}
	cc.shared = true
	return cc.snap
}

func lastSegment(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }
