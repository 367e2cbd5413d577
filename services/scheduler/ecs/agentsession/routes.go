package agentsession

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// watchRoutes keeps the agent's list of peer task subnets current: it follows the
// cluster's routes (routeWatches: every instance that is not INACTIVE and has a task
// subnet and a host address) and sends TaskSubnetRoutes, without the agent's own
// instance, when the session opens with a non-empty list and whenever the list changes.
// It returns when ctx ends, a send fails or the cluster's watch failed.
func (ss *session) watchRoutes(ctx context.Context) error {
	w, changed, release := ss.srv.routes.subscribe(ss.account, ss.cluster)
	defer release()
	// Nothing is sent while the list is empty (a cluster without peers, every session of
	// the tests that read the stream message by message): an agent whose last peer went
	// away while it was disconnected removes that route with the next change.
	last := &agentv1.TaskSubnetRoutes{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-changed:
			all, ready, err := w.current()
			if !ok {
				return err
			}
			if !ready {
				continue
			}
			routes := peerRoutes(ss.instance, all)
			if proto.Equal(last, routes) {
				continue
			}
			if err := ss.send(&agentv1.SessionResponse{Message: &agentv1.SessionResponse_TaskSubnetRoutes{TaskSubnetRoutes: routes}}); err != nil {
				return err
			}
			last = routes
		}
	}
}

// routeWatches shares one etcd watch of a cluster's container instances among the
// sessions of that cluster on this replica. Every placement rewrites the instances it
// reserves on, so a watch per session decoded every such write once per agent: with
// 1,000 agents in a cluster that was most of the scheduler's CPU under a RunTask burst.
type routeWatches struct {
	cli store.Client

	mu        sync.Mutex
	byCluster map[string]*routeWatch // by account/cluster, under mu
}

// routeWatch is one cluster's shared watch: the current routes and who follows them.
type routeWatch struct {
	cancel context.CancelFunc
	refs   int // sessions subscribed, under routeWatches.mu

	mu     sync.Mutex
	ready  bool                       // the first listing arrived
	err    error                      // why the watch ended, once it did
	ended  bool                       // the watch ended; subscribers' channels are closed
	routes []route                    // replaced, never modified in place
	subs   map[chan struct{}]struct{} // one signal channel a session, capacity 1
	recs   map[string]routeFields     // by etcd key; watch goroutine only
}

// route is one instance's task subnet route with its instance id (to leave an agent's own
// out of its list).
type route struct {
	instanceID string
	route      *agentv1.TaskSubnetRoute
}

// subscribe returns the cluster's watch (starting it for the first subscriber), a
// channel that receives a signal whenever the routes may have changed (one at once; a
// first signal is pending when the watch is ready) and is closed when the watch ends, and
// the release function the session calls when it is done.
func (rw *routeWatches) subscribe(account keys.Scope, cluster string) (*routeWatch, <-chan struct{}, func()) {
	k := account.String() + "/" + cluster
	ch := make(chan struct{}, 1)
	rw.mu.Lock()
	if rw.byCluster == nil {
		rw.byCluster = map[string]*routeWatch{}
	}
	w := rw.byCluster[k]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &routeWatch{cancel: cancel, subs: map[chan struct{}]struct{}{}, recs: map[string]routeFields{}}
		rw.byCluster[k] = w
		go rw.run(ctx, k, account, cluster, w)
	}
	w.refs++
	rw.mu.Unlock()

	w.mu.Lock()
	switch {
	case w.ended:
		close(ch)
	default:
		w.subs[ch] = struct{}{}
		if w.ready {
			ch <- struct{}{}
		}
	}
	w.mu.Unlock()

	var once sync.Once
	return w, ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.subs, ch)
			w.mu.Unlock()
			rw.mu.Lock()
			w.refs--
			if w.refs == 0 {
				w.cancel()
				if rw.byCluster[k] == w {
					delete(rw.byCluster, k)
				}
			}
			rw.mu.Unlock()
		})
	}
}

// run is the watch of one cluster's instances until its last subscriber leaves; a
// failed watch is forgotten (the next session starts a new one) and its subscribers'
// channels closed.
func (rw *routeWatches) run(ctx context.Context, k string, account keys.Scope, cluster string, w *routeWatch) {
	// The records arrive as Empty (every field kept unparsed): only the route fields are
	// read out of them (routeFieldsOf).
	err := store.Watch(ctx, rw.cli, keys.Instances(account, cluster), 0, func(ev store.Event[*emptypb.Empty]) error {
		switch ev.Type {
		case store.EventResync:
			clear(w.recs)
			for _, it := range ev.Items {
				f, err := routeFieldsOf(it.Value.ProtoReflect().GetUnknown())
				if err != nil {
					return fmt.Errorf("decode %s at revision %d: %w", it.Key, it.ModRevision, err)
				}
				w.recs[it.Key] = f
			}
		case store.EventPut:
			f, err := routeFieldsOf(ev.Item.Value.ProtoReflect().GetUnknown())
			if err != nil {
				return fmt.Errorf("decode %s at revision %d: %w", ev.Item.Key, ev.Item.ModRevision, err)
			}
			prev, had := w.recs[ev.Item.Key]
			w.recs[ev.Item.Key] = f
			// Most puts are resource or status bookkeeping (every placement updates its
			// instance): only a change of what a route is made of rebuilds the list.
			if had && prev == f {
				return nil
			}
		case store.EventDelete:
			delete(w.recs, ev.Item.Key)
		}
		w.publish(allRoutes(w.recs))
		return nil
	})
	if ctx.Err() == nil {
		err = fmt.Errorf("task subnet routes watch: %w", err)
		rw.mu.Lock()
		if rw.byCluster[k] == w {
			delete(rw.byCluster, k)
		}
		rw.mu.Unlock()
	}
	w.mu.Lock()
	w.ended, w.err = true, err
	for ch := range w.subs {
		close(ch)
	}
	clear(w.subs)
	w.mu.Unlock()
}

// publish makes routes current and signals every subscriber when they differ from the
// last ones (or are the first).
func (w *routeWatch) publish(routes []route) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready && slices.EqualFunc(w.routes, routes, func(a, b route) bool { return proto.Equal(a.route, b.route) }) {
		return
	}
	w.ready, w.routes = true, routes
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default: // a signal is pending: the session reads the newest routes then
		}
	}
}

// current returns the routes, whether the first listing arrived, and why the watch
// ended when it did.
func (w *routeWatch) current() ([]route, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.routes, w.ready, w.err
}

// allRoutes lists the routes to the task subnets of the instances in recs (keyed by
// etcd key) that are not INACTIVE and have a task subnet and a host address, sorted by
// subnet.
func allRoutes(recs map[string]routeFields) []route {
	var out []route
	for _, f := range recs {
		if f.inactive || f.subnet == "" || f.address == "" {
			continue
		}
		out = append(out, route{instanceID: instanceID(f.arn), route: &agentv1.TaskSubnetRoute{
			ContainerInstanceArn: f.arn,
			Subnet:               f.subnet,
			HostAddress:          f.address,
		}})
	}
	slices.SortFunc(out, func(a, b route) int { return strings.Compare(a.route.GetSubnet(), b.route.GetSubnet()) })
	return out
}

// peerRoutes is the list of all for the agent of instance self (an instance id or ARN):
// every route but its own instance's.
func peerRoutes(self string, all []route) *agentv1.TaskSubnetRoutes {
	out := &agentv1.TaskSubnetRoutes{}
	id := instanceID(self)
	for _, r := range all {
		if id != "" && r.instanceID == id {
			continue
		}
		out.Routes = append(out.Routes, r.route)
	}
	return out
}
