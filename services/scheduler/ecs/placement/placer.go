package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Placed is one task placed by Placer: the instance chosen and a copy of its record for
// the commit hook to reserve on and write.
type Placed struct {
	// Index is the task's position in the request, 0-based.
	Index int
	// InstanceID is the chosen container instance's id.
	InstanceID string
	// InstanceARN is its ARN.
	InstanceARN string
	// Instance is a copy of the instance record as read, without this call's
	// reservations, shared by every task the call places on that instance: the Commit
	// hook reserves on it (placement.Reserve, as task.PlaceTxn does) and writes it under
	// InstanceRev. When the commit is sent the Placer caches it, as changed, so that the
	// cluster's next placements plan on it. The copy's own are the record's fields, its
	// container_instance's fields and its remaining resources (each Resource and its
	// string set): the hook may set those fields, reserve on the remaining resources and
	// append to them, but must not write through anything else, which the Placer's cache
	// shares: attributes, registered resources and other messages or lists, and the
	// values of optional fields (*string, *float64, …: replace the pointer instead).
	Instance *storev1.ContainerInstanceRecord
	// InstanceRev is the ModRevision the instance was read at, for the hook's
	// txn.Update. Before it commits the txn, the Placer sets that compare to the
	// instance's state in its cache (store.Txn.Recheck): the ModRevision etcd holds it
	// at, or the bytes a commit still in flight writes.
	InstanceRev int64
}

// CommitFunc adds to txn the writes that go with the placements: each placed instance
// (Placed.Instance, reserved on in place, under Placed.InstanceRev), task records, inbox
// entries, index keys, counters. It may run several times (once per attempt, each with a
// fresh txn and fresh placements) and must not Commit the txn. An error stops Place and
// is returned as is. The Placer writes nothing itself: the hook must write every placed
// instance with txn.Update (the Placer then sets that compare, see InstanceRev); a plan
// whose hook did not fails with an error.
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
// hook writes each chosen instance's reduced remainingResources, compared with what the
// Placer's cache holds, together with the task writes. A concurrent placement on the
// same instance makes the txn fail; Placer re-reads the instances and tries again, so an
// instance is never over-committed. Callers that want several requests in one txn batch
// them themselves and call PlaceGroup, as control's RunTask queue does. Safe for
// concurrent use.
//
// A cluster's commits in this process overlap rather than take turns on etcd's round
// trip: a commit's instance records are cached as it writes them when it is sent, and
// the next plan sees them. A commit whose instances are all settled in etcd is sent at
// once; one that chose an instance a commit in flight writes is sent when that commit
// lands (concurrent txns reach etcd's raft log in any order), comparing the instance's
// value with the bytes that commit wrote. When a commit fails, the cache goes back to
// what it planned on and the commits chained on it plan again too. A plan whose
// instances changed in the cache before its commit was sent plans again at once,
// without a round trip.
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
	// A group of one: the same planning, chaining and retries as PlaceGroup.
	results, err := p.placeGroup(ctx, req.KV, req.Account, req.Cluster, []Request{req.Request}, func(ctx context.Context, txn *store.Txn, placed [][]Placed) error {
		txn.If(req.If...)
		return req.Commit(ctx, txn, placed[0])
	})
	if err != nil {
		return PlaceResult{}, err
	}
	return results[0], nil
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
		rec = writableCopy(e.rec)
		recs[id] = rec
	}
	return Placed{Index: i, InstanceID: id, InstanceARN: ch.Instance.ARN, Instance: rec, InstanceRev: e.rev}, nil
}

// writableCopy returns the copy of rec that Placed.Instance describes: the record's own
// fields, its container_instance's own fields and its remaining resources (each Resource
// and its string set copied) are the copy's; the rest is rec's, shared and never to be
// changed, so a hook that changes what task.PlaceTxn changes (active_tasks, the
// instance's version, its remaining resources) leaves rec as it was. It copies far less
// than proto.Clone, whose cost grew with the instance's attributes (make bench's
// profile: 4 µs of a placement's ~110 µs of CPU with one attribute).
func writableCopy(rec *storev1.ContainerInstanceRecord) *storev1.ContainerInstanceRecord {
	out := shallowCopy(rec)
	if ci := rec.GetContainerInstance(); ci != nil {
		c := shallowCopy(ci)
		c.RemainingResources = make([]*ecsv1.Resource, len(ci.GetRemainingResources()))
		for i, r := range ci.GetRemainingResources() {
			rc := shallowCopy(r)
			rc.StringSetValue = slices.Clone(r.GetStringSetValue())
			c.RemainingResources[i] = rc
		}
		out.ContainerInstance = c
	}
	return out
}

// shallowCopy returns a new message holding m's fields (and unknown fields) as they are:
// a message, list or string field of the copy is the same message, list or string as
// m's, and so is the value an optional field points to. It sets the generated struct's
// exported fields (with the open struct API
// protoc-gen-go generates, one per field or oneof of the message), which costs a
// fraction of protoreflect's Set (that allocates each optional scalar anew), and leaves
// the message's internal state alone (its size cache may be being written by a Marshal
// of m). P is a generated message's pointer; TestShallowCopyEveryField checks that the
// copy is equal.
func shallowCopy[M any, P interface {
	*M
	proto.Message
}](m P) P {
	out := P(new(M))
	src, dst := reflect.ValueOf(m).Elem(), reflect.ValueOf(out).Elem()
	for _, i := range exportedFields(src.Type()) {
		dst.Field(i).Set(src.Field(i))
	}
	if u := m.ProtoReflect().GetUnknown(); len(u) > 0 {
		out.ProtoReflect().SetUnknown(slices.Clip(u))
	}
	return out
}

// exportedFieldsOf caches exportedFields by struct type.
var exportedFieldsOf sync.Map // reflect.Type → []int

// exportedFields returns the indices of struct type t's exported fields.
func exportedFields(t reflect.Type) []int {
	if v, ok := exportedFieldsOf.Load(t); ok {
		return v.([]int)
	}
	var idx []int
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			idx = append(idx, i)
		}
	}
	exportedFieldsOf.Store(t, idx)
	return idx
}

// Cache.

// entry is one instance in a cluster's cache: as read from etcd, or as a commit of this
// Placer writes it. The latter is cached when the commit is sent, not when etcd answers,
// so that the next group plans on top of it while it is in flight and is sent as soon as
// it lands, chaining on the value it writes (see begin and await).
type entry struct {
	rec  *storev1.ContainerInstanceRecord // never modified once cached
	view *Instance                        // never modified once cached (the engine clones)
	// rev is the ModRevision the record was read at; for a written entry, that of the
	// entry below it (what a hook's compare holds until begin sets the real one).
	rev int64

	// Set on an entry a commit writes:
	flight *flight // the commit
	value  []byte  // the bytes it puts: what a commit planned on this entry compares
	// below is the entry the commit planned on, until it lands (under the cache's mu):
	// when the commit fails the cache goes back to it.
	below *entry
}

// flight is one group commit of this Placer: sent, then landed or failed.
type flight struct {
	state   flightState       // under the cache's mu
	rev     int64             // landed: the revision it committed at
	entries map[string]*entry // by instance id: what it writes
	// after are the commits in flight at begin whose writes this one compares: etcd
	// must apply them first.
	after []*flight
	done  chan struct{} // closed when it settles
	cc    *clusterCache // the cache its entries are in, whose mu guards state
}

type flightState int

const (
	inFlight flightState = iota
	landed
	failed
)

// settledCopy returns e, written by a commit that landed, as an entry read at the
// commit's revision: its view no longer busy. The caller holds the cache's mu.
func (e *entry) settledCopy() *entry {
	v := *e.view // its maps are shared: a view is never modified
	v.Busy, v.Revision = false, e.flight.rev
	return &entry{rec: e.rec, view: &v, rev: e.flight.rev}
}

// settled returns the ModRevision etcd holds e at and true when that is known: e was
// read, or written by a commit that landed; false while e's commit is in flight. The
// caller holds the cache's mu.
func (e *entry) settled() (int64, bool) {
	switch {
	case e.flight == nil:
		return e.rev, true
	case e.flight.state == landed:
		return e.flight.rev, true
	}
	return 0, false
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

	mu      sync.Mutex
	err     error
	entries map[string]*entry
	// newer holds what the watch or a re-read found for an instance while a commit of
	// ours on it was in flight and that is not that commit's own write: applied when the
	// commit settles, if it is later.
	newer map[string]*entry
	// reread holds the instances of commits that failed without a failed compare: etcd
	// may hold their writes, and the watch may have passed them over as ours (known).
	// The next snapshot re-reads them.
	reread map[string]bool
	snap   *snapshot // rebuilt lazily after a change
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

// cached returns the cluster's cache, or nil when it has none (yet, or WithoutCache).
func (p *Placer) cached(account keys.Scope, cluster string) *clusterCache {
	if p.noCache {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clusters[cacheKey(account, cluster)]
}

// snapshot returns the cluster's instances, first re-reading the stale ones (but those a
// commit of ours is writing: that commit settles them).
func (p *Placer) snapshot(ctx context.Context, account keys.Scope, cluster string, stale []string) (*snapshot, error) {
	if p.noCache {
		return p.list(ctx, account, cluster)
	}
	cc, err := p.cache(ctx, account, cluster)
	if err != nil {
		return nil, err
	}
	// One Get after another, not one multi-key read: under a stream of the agents' state
	// changes a re-read this fast sent the group back to planning while the watch was
	// still delivering those changes, and its plans went stale over and over (make bench
	// with the agents reporting RUNNING, when that still wrote the instance records: 1,101
	// stale plans and 367 failed commits for 255 that landed, against 130 and 160 for 330).
	for _, id := range cc.settledOnly(append(stale, cc.takeReread()...)) {
		rec, rev, err := store.Get[*storev1.ContainerInstanceRecord](ctx, p.cli, keys.Instance(account, cluster, id))
		switch {
		case errors.Is(err, store.ErrNotFound):
			cc.remove(id)
		case err != nil:
			return nil, fmt.Errorf("placement: re-read instance %s: %w", id, err)
		default:
			cc.observe(id, rec, rev)
		}
	}
	return cc.snapshot(), nil
}

// takeReread returns and forgets the instances marked for a re-read.
func (cc *clusterCache) takeReread() []string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	ids := make([]string, 0, len(cc.reread))
	for id := range cc.reread {
		ids = append(ids, id)
	}
	clear(cc.reread)
	return ids
}

// settledOnly returns the ids of ids whose cached entry is not being written by a commit
// in flight.
func (cc *clusterCache) settledOnly(ids []string) []string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var out []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if e := cc.entries[id]; e == nil {
			out = append(out, id)
		} else if _, ok := e.settled(); ok {
			out = append(out, id)
		}
	}
	return out
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
		cc = &clusterCache{ready: make(chan struct{}), entries: map[string]*entry{}, newer: map[string]*entry{}, reread: map[string]bool{}}
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
	// are cached already.
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
			cc.newer = map[string]*entry{}
			cc.snap = nil
			cc.mu.Unlock()
			markReady()
		case store.EventPut:
			id := lastSegment(ev.Item.Key)
			if cc.known(id, ev.Item.ModRevision, ev.Item.Value.ProtoReflect().GetUnknown()) {
				return nil
			}
			rec, err := decodeInstance(ev.Item)
			if err != nil {
				return err
			}
			cc.observe(id, rec, ev.Item.ModRevision)
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

// errHookSkipped is begin's error when a commit hook did not write an instance it was
// given.
var errHookSkipped = errors.New("placement: the commit hook did not write the instance record")

// begin makes txn, planned on snap and writing recs (the records of the instances
// chosen, in order, with the group's reservations taken), the cluster's next commit:
// it reports false when one of those instances changed in the cache since snap (plan
// again), and otherwise sets each instance's compare in txn and caches recs as written
// by the returned flight, which the caller settles with settle once etcd answers. The
// compare is on the ModRevision etcd holds the instance at, or, when a commit still in
// flight writes it, on the bytes that commit writes: this commit then lands only if that
// one landed first and nothing else wrote the instance since. It returns errHookSkipped
// (wrapped) when txn does not put an instance; nothing is cached then. With no cache it
// returns a nil flight and true (WithoutCache); when the cluster's cache was dropped
// since snap (its watch failed), false.
func (p *Placer) begin(account keys.Scope, cluster string, snap *snapshot, order []string, recs map[string]*storev1.ContainerInstanceRecord, txn *store.Txn) (*flight, bool, error) {
	if p.noCache {
		return nil, true, nil
	}
	cc := p.cached(account, cluster)
	if cc == nil {
		return nil, false, nil
	}
	f := &flight{entries: make(map[string]*entry, len(order)), done: make(chan struct{}), cc: cc}
	// The views are built outside the lock: FromRecord allocates.
	for _, id := range order {
		key := keys.Instance(account, cluster, id)
		value, ok := txn.Written(key)
		if !ok {
			return nil, false, fmt.Errorf("%w: %s", errHookSkipped, id)
		}
		// The written record shares its attributes with the one it was copied from
		// (writableCopy): so does its view.
		view := fromRecord(id, recs[id], 0, sharedAttributes(snap.entry(id), recs[id]))
		view.Busy = true
		f.entries[id] = &entry{rec: recs[id], view: view, flight: f, value: value}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, id := range order {
		// The same record is the same state: an entry that landed since is replaced by
		// its settled copy (see settle).
		if cur := cc.entries[id]; cur == nil || cur.rec != snap.entry(id).rec {
			return nil, false, nil
		}
	}
	for _, id := range order {
		cur, e := cc.entries[id], f.entries[id]
		key := keys.Instance(account, cluster, id)
		if rev, ok := cur.settled(); ok {
			txn.Recheck(key, rev, nil)
		} else {
			txn.Recheck(key, 0, cur.value)
			if !slices.Contains(f.after, cur.flight) {
				f.after = append(f.after, cur.flight)
			}
		}
		e.rev, e.view.Revision, e.below = cur.rev, cur.rev, cur
		cc.set(id, e)
	}
	return f, true, nil
}

// sharedAttributes returns the attributes of e's view when rec holds e's record's
// attributes (the same list), else nil.
func sharedAttributes(e *entry, rec *storev1.ContainerInstanceRecord) map[string]string {
	a, b := e.rec.GetContainerInstance().GetAttributes(), rec.GetContainerInstance().GetAttributes()
	if len(a) != len(b) || (len(a) > 0 && &a[0] != &b[0]) {
		return nil
	}
	return e.view.Attributes
}

// settle records how f's commit ended: landed at rev when err is nil, else failed, when
// the cache goes back, for each instance f wrote, to the entry below f's (and the
// commits planned on f's entries, which compare its bytes, fail in their turn). When
// err is not a failed compare (a timeout, say), etcd may have applied the txn after
// all: the next plan re-reads those instances.
func settle(f *flight, rev int64, err error) {
	if f == nil {
		return
	}
	cc := f.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	defer close(f.done)
	if err == nil {
		f.state, f.rev = landed, rev
		for id, e := range f.entries {
			e.below = nil
			if cc.entries[id] == e {
				cc.set(id, e.settledCopy())
				cc.applyNewer(id, rev)
			}
		}
		return
	}
	f.state = failed
	compareFailed := errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrPreconditionFailed)
	for id, e := range f.entries {
		if !compareFailed {
			cc.reread[id] = true
		}
		above := false
		for x := cc.entries[id]; x != nil; x = x.below {
			if x == e {
				above = true
				break
			}
		}
		if !above {
			continue // the entry was replaced meanwhile (a resync, a delete)
		}
		b := e.below
		for b != nil && b.flight != nil && b.flight.state == failed {
			b = b.below
		}
		if b == nil {
			cc.removeLocked(id)
			continue
		}
		if b.flight != nil && b.flight.state == landed {
			b = b.settledCopy()
		}
		cc.set(id, b)
		if r, ok := b.settled(); ok {
			cc.applyNewer(id, r)
		}
	}
}

// await waits until the commits f chains on (f.after) have settled, so that etcd
// applies f's txn after theirs, and reports whether they all landed; false when one
// failed (f's compares on its writes would fail: plan again) or ctx ended.
func await(ctx context.Context, f *flight) bool {
	if f == nil {
		return true
	}
	return landedAll(ctx, f.after)
}

// landedAll waits until every flight of fs (all of one cache) has settled and reports
// whether they all landed; false when one failed or ctx ended first.
func landedAll(ctx context.Context, fs []*flight) bool {
	if len(fs) == 0 {
		return true
	}
	for _, a := range fs {
		select {
		case <-a.done:
		case <-ctx.Done():
			return false
		}
	}
	cc := fs[0].cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, a := range fs {
		if a.state != landed {
			return false
		}
	}
	return true
}

// busyFlights returns the commits, in flight when snap was taken, whose writes snap
// holds (each once).
func (s *snapshot) busyFlights() []*flight {
	var fs []*flight
	for _, e := range s.entries {
		if e.view.Busy && e.flight != nil && !slices.Contains(fs, e.flight) {
			fs = append(fs, e.flight)
		}
	}
	return fs
}

// applyNewer replaces instance id's entry, just settled at rev, with what the watch or a
// re-read found meanwhile when that is later. The caller holds mu.
func (cc *clusterCache) applyNewer(id string, rev int64) {
	n := cc.newer[id]
	if n == nil {
		return
	}
	delete(cc.newer, id)
	if n.rev > rev {
		cc.set(id, n)
	}
}

// known reports whether the cache holds instance id at revision rev or later, or holds
// it as written by a commit of ours in flight that puts value (its own write, seen by the
// watch before etcd's answer): the watch need not decode it.
func (cc *clusterCache) known(id string, rev int64, value []byte) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for x := cc.entries[id]; x != nil; x = x.below {
		if r, ok := x.settled(); ok {
			return r >= rev
		}
		if string(x.value) == string(value) {
			return true
		}
	}
	return false
}

// observe caches rec, read at rev, as instance id's entry unless the cache holds it at rev
// or later; while a commit of ours on the instance is in flight, it is kept in newer
// until that commit settles.
func (cc *clusterCache) observe(id string, rec *storev1.ContainerInstanceRecord, rev int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cur := cc.entries[id]
	if cur != nil {
		r, ok := cur.settled()
		switch {
		case ok && r >= rev:
			return
		case !ok:
			if n := cc.newer[id]; n == nil || n.rev < rev {
				cc.newer[id] = &entry{rec: rec, rev: rev, view: FromRecord(id, rec, rev)}
			}
			return
		}
	}
	cc.set(id, &entry{rec: rec, rev: rev, view: FromRecord(id, rec, rev)})
}

// set makes e instance id's entry. The caller holds mu.
func (cc *clusterCache) set(id string, e *entry) {
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

// decodeInstance decodes an instance record the watch read as Empty.
func decodeInstance(it store.Item[*emptypb.Empty]) (*storev1.ContainerInstanceRecord, error) {
	rec := &storev1.ContainerInstanceRecord{}
	if err := proto.Unmarshal(it.Value.ProtoReflect().GetUnknown(), rec); err != nil {
		return nil, fmt.Errorf("placement: decode %s at revision %d: %w", it.Key, it.ModRevision, err)
	}
	return rec, nil
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
	cc.removeLocked(id)
}

// removeLocked is remove; the caller holds mu.
func (cc *clusterCache) removeLocked(id string) {
	delete(cc.newer, id)
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
