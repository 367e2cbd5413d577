package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Task cache tuning.
const (
	// taskCacheIdle is how long a cluster's cache lives without a DescribeTasks of the
	// cluster before its watch stops and its records are dropped.
	taskCacheIdle = 5 * time.Minute
	// taskCacheWait bounds how long DescribeTasks waits for a cluster's watch to reach
	// the revision it read before it reads the records from etcd instead.
	taskCacheWait = 250 * time.Millisecond
	// taskCacheRerequest is how long a progress request may go unanswered before
	// another is sent (etcd drops one that arrives while a watch of the stream is still
	// catching up).
	taskCacheRerequest = 20 * time.Millisecond
)

// taskCache holds, for each cluster DescribeTasks reads, the cluster's task records
// as a watch on the cluster's task prefix delivers them, so that DescribeTasks answers
// from memory instead of reading and decoding every record it names.
//
// Linearizability: a DescribeTasks after a write (on any replica) must see it. The
// caller first reads the cluster key (count only) with a linearizable Get, which it
// needs anyway to answer ClusterNotFoundException; the header revision R of that read
// is at least the revision of every write that completed before the call. The cache
// answers only once its watch has delivered every change up to R (watch responses and
// etcd progress notifications carry that revision; when the cache is behind, it asks
// etcd for a progress notification). A cache that does not reach R within
// taskCacheWait, is still loading, or has failed leaves the call to the direct read.
// The cluster's existence is thus read at R and the tasks at a revision ≥ R, both
// within the call.
//
// Records are decoded on the first DescribeTasks that names them, not on every watch
// event (a replica placing tasks sees many more writes than reads), and each decoded
// task is shared, read-only, by every response that names it.
type taskCache struct {
	cli store.Client
	log *slog.Logger
	// ctx carries the gRPC metadata that gives the cache's watches a stream of their
	// own (etcd answers a progress request only when every watch of the stream has
	// caught up; other watches of the process must not hold the cache's back), and
	// ends with close.
	ctx    context.Context //nolint:containedctx // lifetime of the watches, ended by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	clusters map[string]*clusterTasks

	// lastRequest is when the last progress request was sent (UnixNano).
	lastRequest atomic.Int64
	// served counts the calls the cache answered.
	served atomic.Int64
}

// clusterTasks is one cluster's cached task records.
type clusterTasks struct {
	ready   chan struct{} // closed once the first list is in, or the watch failed
	cancel  context.CancelFunc
	lastUse atomic.Int64 // UnixNano of the last DescribeTasks that used it

	mu      sync.Mutex
	err     error                  // set when the watch ended; the cache is unusable
	rev     int64                  // every change up to rev is applied
	changed chan struct{}          // closed (and replaced) when rev advances
	tasks   map[string]*cachedTask // by task key
}

// cachedTask is one task record as the watch delivered it, decoded on first use.
type cachedTask struct {
	raw []byte // the TaskRecord's encoding

	once   sync.Once
	plain  *ecsv1.Task // as DescribeTasks answers it without include TAGS
	tags   []*ecsv1.Tag
	err    error
	tonce  sync.Once
	tagged *ecsv1.Task // with include TAGS
}

func newTaskCache(cli store.Client, log *slog.Logger) *taskCache {
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "berth-watch", "describe-tasks"))
	return &taskCache{cli: cli, log: log, ctx: ctx, cancel: cancel, clusters: map[string]*clusterTasks{}}
}

// close stops every watch and waits for them to end.
func (c *taskCache) close() {
	c.cancel()
	c.wg.Wait()
}

// tasks returns the records of tasks ks (keys of one cluster's tasks; nil where the
// cluster has no such task) as of a revision ≥ rev, or ok false when the cache cannot
// answer for rev in time (the caller reads etcd). withTags selects the TAGS variant.
// The returned tasks are shared: nobody may change them.
func (c *taskCache) tasks(ctx context.Context, account keys.Scope, cluster string, rev int64, ks []string, withTags bool) ([]*ecsv1.Task, bool) {
	ct := c.cluster(account, cluster)
	ct.lastUse.Store(time.Now().UnixNano())
	select {
	case <-ct.ready:
	default:
		return nil, false // still loading: this call reads etcd
	}
	if !c.await(ctx, ct, rev) {
		return nil, false
	}
	entries := make([]*cachedTask, len(ks))
	ct.mu.Lock()
	for i, k := range ks {
		entries[i] = ct.tasks[k]
	}
	ct.mu.Unlock()
	out := make([]*ecsv1.Task, len(ks))
	for i, e := range entries {
		if e == nil {
			continue
		}
		t, err := e.task(withTags)
		if err != nil {
			c.log.Error("task cache: undecodable task record", "key", ks[i], "err", err)
			return nil, false
		}
		out[i] = t
	}
	c.served.Add(1)
	return out, true
}

// await waits until ct has applied every change up to rev, asking etcd for progress
// notifications while it is behind; false when ct failed or taskCacheWait passed.
func (c *taskCache) await(ctx context.Context, ct *clusterTasks, rev int64) bool {
	var deadline *time.Timer
	for {
		ct.mu.Lock()
		at, err, changed := ct.rev, ct.err, ct.changed
		ct.mu.Unlock()
		if err != nil {
			return false
		}
		if at >= rev {
			return true
		}
		c.requestProgress()
		if deadline == nil {
			deadline = time.NewTimer(taskCacheWait)
			defer deadline.Stop()
		}
		retry := time.NewTimer(taskCacheRerequest)
		select {
		case <-changed:
		case <-retry.C:
		case <-deadline.C:
			retry.Stop()
			return false
		case <-ctx.Done():
			retry.Stop()
			return false
		}
		retry.Stop()
	}
}

// requestProgress asks etcd for a progress notification on the cache's stream unless
// one was asked for within taskCacheRerequest: one answer serves every waiter of every
// cluster.
func (c *taskCache) requestProgress() {
	now := time.Now().UnixNano()
	last := c.lastRequest.Load()
	if now-last < int64(taskCacheRerequest) || !c.lastRequest.CompareAndSwap(last, now) {
		return
	}
	if err := store.RequestProgress(c.ctx, c.cli); err != nil && c.ctx.Err() == nil {
		c.log.Warn("task cache: progress request", "err", err)
	}
}

// cluster returns the cluster's cache, starting its watch on first use.
func (c *taskCache) cluster(account keys.Scope, cluster string) *clusterTasks {
	k := account.String() + "/" + cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if ct := c.clusters[k]; ct != nil {
		return ct
	}
	ctx, cancel := context.WithCancel(c.ctx)
	ct := &clusterTasks{ready: make(chan struct{}), cancel: cancel, changed: make(chan struct{}), tasks: map[string]*cachedTask{}}
	ct.lastUse.Store(time.Now().UnixNano())
	c.clusters[k] = ct
	if c.ctx.Err() != nil { // closed: an unusable cache, no watch
		ct.err = c.ctx.Err()
		close(ct.ready)
		cancel()
		return ct
	}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.watch(ctx, account, cluster, ct)
		cancel()
		c.mu.Lock()
		if c.clusters[k] == ct {
			delete(c.clusters, k)
		}
		c.mu.Unlock()
	}()
	go func() {
		defer c.wg.Done()
		c.expire(ctx, ct)
	}()
	return ct
}

// expire ends ct's watch once no DescribeTasks has used it for taskCacheIdle.
func (c *taskCache) expire(ctx context.Context, ct *clusterTasks) {
	t := time.NewTicker(taskCacheIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if time.Since(time.Unix(0, ct.lastUse.Load())) > taskCacheIdle {
				ct.cancel()
				return
			}
		}
	}
}

// watch keeps ct in step with the cluster's tasks until ctx ends or the watch fails;
// either way ct is unusable afterwards (its err is set) and the next call starts anew.
func (c *taskCache) watch(ctx context.Context, account keys.Scope, cluster string, ct *clusterTasks) {
	var once sync.Once
	markReady := func() { once.Do(func() { close(ct.ready) }) }
	// Values arrive as Empty, the record's bytes kept as unknown fields: they are
	// decoded only when a DescribeTasks names the task.
	err := store.Watch(ctx, c.cli, keys.Tasks(account, cluster), 0, func(ev store.Event[*emptypb.Empty]) error {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		switch ev.Type {
		case store.EventResync:
			ct.tasks = make(map[string]*cachedTask, len(ev.Items))
			for _, it := range ev.Items {
				ct.tasks[it.Key] = &cachedTask{raw: it.Value.ProtoReflect().GetUnknown()}
			}
			ct.advance(ev.Revision)
			markReady()
		case store.EventPut:
			ct.tasks[ev.Item.Key] = &cachedTask{raw: ev.Item.Value.ProtoReflect().GetUnknown()}
		case store.EventDelete:
			delete(ct.tasks, ev.Item.Key)
		case store.EventProgress:
			ct.advance(ev.Revision)
		}
		return nil
	}, store.WithProgress())
	if err == nil || errors.Is(err, context.Canceled) {
		err = errors.New("task cache closed")
	} else if c.ctx.Err() == nil {
		c.log.Error("task cache: watch ended", "account", account.String(), "cluster", cluster, "err", err)
	}
	ct.mu.Lock()
	ct.err = err
	ct.tasks = nil
	close(ct.changed)
	ct.changed = make(chan struct{})
	ct.mu.Unlock()
	markReady()
}

// advance records that every change up to rev is applied, waking the waiters. The
// caller holds ct.mu.
func (ct *clusterTasks) advance(rev int64) {
	if rev <= ct.rev {
		return
	}
	ct.rev = rev
	close(ct.changed)
	ct.changed = make(chan struct{})
}

// task returns the task as DescribeTasks answers it, with or without its tags, decoding
// the record on first use.
func (e *cachedTask) task(withTags bool) (*ecsv1.Task, error) {
	e.once.Do(func() {
		rec := &storev1.TaskRecord{}
		if err := proto.Unmarshal(e.raw, rec); err != nil {
			e.err = fmt.Errorf("decode task record: %w", err)
			return
		}
		t := rec.GetTask()
		if t == nil {
			t = &ecsv1.Task{}
		}
		e.tags = t.Tags
		e.plain = describeOwned(t, false)
		e.raw = nil
	})
	if e.err != nil || !withTags {
		return e.plain, e.err
	}
	e.tonce.Do(func() {
		t := proto.CloneOf(e.plain)
		t.Tags = e.tags
		e.tagged = describeOwned(t, true)
	})
	return e.tagged, nil
}
