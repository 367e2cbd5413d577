package lb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http/httputil"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

// Sink is where the lb role reports what it observes: the health of each target, and
// the end of a target's drain (the target's record is then removed, which is what
// DeregisterTargets waits for).
type Sink interface {
	// PutHealth records a target's health at healthKey.
	PutHealth(ctx context.Context, healthKey string, h *storev1.TargetHealthRecord) error
	// RemoveTarget deletes the target record at targetKey if it is still at
	// modRevision, and its health record.
	RemoveTarget(ctx context.Context, targetKey string, modRevision int64, healthKey string) error
}

// Snapshot is the whole ELB configuration the lb role serves, as read from the store.
type Snapshot struct {
	// LoadBalancers are every load balancer.
	LoadBalancers []*storev1.LoadBalancerRecord
	// TargetGroups are every target group.
	TargetGroups []*storev1.TargetGroupRecord
	// Listeners are every listener.
	Listeners []*storev1.ListenerRecord
	// Rules are every non-default rule.
	Rules []*storev1.RuleRecord
	// Targets are every registered or draining target, by target group ARN.
	Targets map[string][]Target
}

// Target is one target record with its keys.
type Target struct {
	// Key is the target record's key; HealthKey its health record's.
	Key, HealthKey string
	// ModRevision is the record's revision, for RemoveTarget.
	ModRevision int64
	// Record is the target.
	Record *storev1.TargetRecord
	// Health is the last health the lb role published, if any: a restarted lb role
	// resumes from it instead of sending every target back to initial.
	Health *storev1.TargetHealthRecord
}

// Config configures a Server.
type Config struct {
	// ListenHost is the address listeners bind on ("" for every address).
	ListenHost string
	// Sink receives health and drain completions.
	Sink Sink
	// Logger logs listener and target changes; nil discards.
	Logger *slog.Logger
}

// Server is the data plane of the lb role: it binds every listener, proxies to healthy
// targets, runs the health checks and completes drains. Apply hands it a new Snapshot;
// it changes only what differs.
type Server struct {
	cfg Config
	log *slog.Logger
	ctx context.Context

	mu        sync.Mutex
	groups    map[string]*group    // by target group ARN
	listeners map[string]*listener // by listener ARN
	proxy     *proxy
}

// New returns a Server whose health checks and drains run until ctx ends.
func New(ctx context.Context, cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, ctx: ctx, groups: map[string]*group{}, listeners: map[string]*listener{}, proxy: newProxy()}
}

// group is one target group as served.
type group struct {
	arn     string
	rec     atomic.Pointer[storev1.TargetGroupRecord]
	targets atomic.Pointer[[]*target] // for routing; replaced whole
	byKey   map[string]*target        // under Server.mu
	inUse   bool
	rr      atomic.Uint64
	rp      *httputil.ReverseProxy // sends to this group's targets (proxy.forGroup)
}

func (g *group) config() checkConfig { return checkConfigOf(g.rec.Load()) }

// pick returns a target to send one request or connection to, already acquired, or nil.
// It goes round robin over the healthy targets; when none is healthy it fails open over
// the unhealthy ones, as ELB does; initial, unused and draining targets get nothing.
// A target that just failed a request without an answer (target.held) is picked only
// when no other is left. Targets in skip are not picked (those a retry already tried).
func (g *group) pick(skip []*target) *target {
	list := g.targets.Load()
	if list == nil {
		return nil
	}
	n := len(*list)
	for _, pass := range [...]struct {
		class int32
		held  bool
	}{{routeHealthy, false}, {routeUnhealthy, false}, {routeHealthy, true}, {routeUnhealthy, true}} {
		start := int(g.rr.Add(1))
		for i := range n {
			t := (*list)[(start+i)%n]
			if t.route.Load() != pass.class || (!pass.held && t.held()) || slices.Contains(skip, t) {
				continue
			}
			if t.acquire() {
				return t
			}
		}
	}
	return nil
}

// weighted is one target group of a forward action and its weight.
type weighted struct {
	g      *group
	weight int
}

// action is a compiled forward action.
type action struct{ groups []weighted }

// pickGroup chooses a group in proportion to the weights; nil when every weight is 0.
func (a action) pickGroup() *group {
	total := 0
	for _, w := range a.groups {
		total += w.weight
	}
	if total == 0 {
		return nil
	}
	n := rand.IntN(total)
	for _, w := range a.groups {
		if n < w.weight {
			return w.g
		}
		n -= w.weight
	}
	return nil
}

// rule is one compiled listener rule.
type rule struct {
	priority int32
	conds    []condition
	act      action
}

// routes is a listener's compiled rules and default action.
type routes struct {
	rules []rule
	def   action
}

// route returns the action for a request's host and path: the first rule, by priority,
// whose conditions all match, else the default action.
func (r *routes) route(host, path string) action {
	for _, ru := range r.rules {
		ok := true
		for _, c := range ru.conds {
			if !c.match(host, path) {
				ok = false
				break
			}
		}
		if ok {
			return ru.act
		}
	}
	return r.def
}

// Apply makes the Server serve snap: new listeners are bound, removed ones closed
// (in-flight requests finish), targets added, drained or dropped, health checks started
// or stopped. A listener whose port cannot be bound is logged and tried again on the
// next Apply. It returns the errors of listeners that could not be bound.
func (s *Server) Apply(snap Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	lbs := map[string]*storev1.LoadBalancerRecord{}
	for _, lb := range snap.LoadBalancers {
		lbs[lb.GetLoadBalancerArn()] = lb
	}
	// Target groups.
	seen := map[string]bool{}
	for _, rec := range snap.TargetGroups {
		arn := rec.GetTargetGroupArn()
		seen[arn] = true
		g := s.groups[arn]
		if g == nil {
			g = &group{arn: arn, byKey: map[string]*target{}}
			g.rp = s.proxy.forGroup(g)
			s.groups[arn] = g
		}
		g.rec.Store(rec)
		g.inUse = false
	}
	for arn, g := range s.groups {
		if !seen[arn] {
			for _, t := range g.byKey {
				s.stopTarget(t)
			}
			delete(s.groups, arn)
		}
	}

	// Listeners and rules; what they forward to is in use.
	compile := func(acts []*storev1.ElbAction) action {
		var a action
		for _, act := range acts {
			if act.GetType() != "forward" {
				continue
			}
			for _, w := range act.GetTargetGroups() {
				if g := s.groups[w.GetTargetGroupArn()]; g != nil {
					weight := int(w.GetWeight())
					if len(act.GetTargetGroups()) == 1 && weight == 0 && act.GetPlainTargetGroupArn() {
						weight = 1
					}
					a.groups = append(a.groups, weighted{g: g, weight: weight})
					g.inUse = true
				}
			}
			break // forward is the last action; only one runs
		}
		return a
	}
	rulesOf := map[string][]*storev1.RuleRecord{}
	for _, r := range snap.Rules {
		rulesOf[r.GetListenerArn()] = append(rulesOf[r.GetListenerArn()], r)
	}
	var errs []error
	live := map[string]bool{}
	for _, rec := range snap.Listeners {
		lb := lbs[rec.GetLoadBalancerArn()]
		if lb == nil || lb.GetState() != "active" {
			continue
		}
		rt := &routes{def: compile(rec.GetDefaultActions())}
		rs := rulesOf[rec.GetListenerArn()]
		slices.SortFunc(rs, func(a, b *storev1.RuleRecord) int { return cmp.Compare(a.GetPriority(), b.GetPriority()) })
		for _, r := range rs {
			ru := rule{priority: r.GetPriority(), act: compile(r.GetActions())}
			for _, c := range r.GetConditions() {
				ru.conds = append(ru.conds, compileCondition(c.GetField(), c.GetValues()))
			}
			rt.rules = append(rt.rules, ru)
		}
		arn := rec.GetListenerArn()
		l := s.listeners[arn]
		if l != nil && (l.port != rec.GetPort() || l.protocol != rec.GetProtocol()) {
			l.close()
			delete(s.listeners, arn)
			l = nil
		}
		if l == nil {
			var err error
			l, err = s.listen(rec)
			if err != nil {
				errs = append(errs, err)
				s.log.Warn("listener not bound", "listener", arn, "port", rec.GetPort(), "err", err)
				continue
			}
			s.listeners[arn] = l
			s.log.Info("listener bound", "listener", arn, "protocol", rec.GetProtocol(), "addr", l.ln.Addr().String())
		}
		l.routes.Store(rt)
		live[arn] = true
	}
	for arn, l := range s.listeners {
		if !live[arn] {
			l.close()
			delete(s.listeners, arn)
			s.log.Info("listener closed", "listener", arn)
		}
	}

	// Targets.
	for arn, g := range s.groups {
		want := map[string]Target{}
		for _, t := range snap.Targets[arn] {
			want[t.Key] = t
		}
		for key, t := range g.byKey {
			if _, ok := want[key]; !ok {
				s.stopTarget(t)
				delete(g.byKey, key)
			}
		}
		for key, w := range want {
			t := g.byKey[key]
			if t == nil {
				t = &target{key: key, healthKey: w.HealthKey, addr: w.Record.GetAddress()}
				if h := w.Health; h != nil && w.Record.GetDeregisteredAt() == 0 {
					t.set(h.GetState(), h.GetReason(), h.GetDescription())
				} else {
					t.set(elb.StateInitial, elb.ReasonRegistrationInProgress, "")
				}
				g.byKey[key] = t
			}
			t.modRev.Store(w.ModRevision)
			if dereg := w.Record.GetDeregisteredAt(); dereg != 0 {
				if !t.draining.Load() || t.deregAt != dereg {
					t.deregAt = dereg
					s.startDrain(g, t)
				}
				continue
			}
			if t.draining.Load() {
				// Registered again while draining: serve it anew.
				s.stopTarget(t)
				t.draining.Store(false)
				t.set(elb.StateInitial, elb.ReasonRegistrationInProgress, "")
			}
			s.serveTarget(g, t)
		}
		list := make([]*target, 0, len(g.byKey))
		for _, t := range g.byKey {
			list = append(list, t)
		}
		slices.SortFunc(list, func(a, b *target) int { return cmp.Compare(a.key, b.key) })
		g.targets.Store(&list)
	}
	return errors.Join(errs...)
}

// serveTarget starts or stops t's health checks for whether its group is in use.
func (s *Server) serveTarget(g *group, t *target) {
	t.mu.Lock()
	running := t.cancel != nil
	t.mu.Unlock()
	switch {
	case !g.inUse:
		s.stopTarget(t)
		if t.set(elb.StateUnused, elb.ReasonNotInUse, "") {
			s.publish(t)
		}
	case !g.config().enabled:
		s.stopTarget(t)
		if t.set(elb.StateUnavailable, elb.ReasonHealthCheckDisabled, "") {
			s.publish(t)
		}
	case !running:
		t.mu.Lock()
		state := t.state
		t.mu.Unlock()
		if state != elb.StateHealthy && state != elb.StateUnhealthy {
			t.set(elb.StateInitial, elb.ReasonInitialHealthChecking, "")
			s.publish(t)
		}
		ctx, cancel := context.WithCancel(s.ctx)
		t.mu.Lock()
		t.cancel = cancel
		t.mu.Unlock()
		go s.checkLoop(ctx, g, t)
	}
}

// stopTarget stops t's health check or drain loop.
func (s *Server) stopTarget(t *target) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
}

// checkLoop checks t now and then every interval, until ctx ends.
func (s *Server) checkLoop(ctx context.Context, g *group, t *target) {
	for {
		c := g.config()
		ok, reason, desc := probe(ctx, c, c.checkAddr(t.addr))
		if ctx.Err() != nil {
			return
		}
		if t.observe(ok, reason, desc, c.healthy, c.unhealthy) {
			st := t.snapshot()
			s.log.Info("target health", "targetGroup", g.arn, "target", t.addr, "state", st.GetState(), "reason", st.GetReason())
			s.publish(t)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.interval):
		}
	}
}

// startDrain stops new traffic to t and, once nothing is in flight or the group's
// deregistration delay has passed since DeregisterTargets, removes the target. ELB
// completes a deregistration early when the target has no in-flight requests.
func (s *Server) startDrain(g *group, t *target) {
	s.stopTarget(t)
	t.draining.Store(true)
	t.set(elb.StateDraining, elb.ReasonDeregistrationInProgress, "")
	s.publish(t)
	deadline := time.Unix(0, int64(t.deregAt*float64(time.Second))).Add(g.config().deregistrationDelay)
	ctx, cancel := context.WithCancel(s.ctx)
	t.mu.Lock()
	t.cancel = cancel
	t.mu.Unlock()
	key, hkey := t.key, t.healthKey
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if t.inflight.Load() == 0 || !time.Now().Before(deadline) {
				if err := s.cfg.Sink.RemoveTarget(ctx, key, t.modRev.Load(), hkey); err != nil && ctx.Err() == nil {
					s.log.Warn("drain: remove target", "target", key, "err", err)
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// publish writes t's current health to the sink. Writes of one target are serialised
// and each writes the state current when it runs, so the last write wins with the
// latest state.
func (s *Server) publish(t *target) {
	if s.cfg.Sink == nil {
		return
	}
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	h := t.snapshot()
	h.UpdatedAt = float64(time.Now().UnixNano()) / 1e9
	if err := s.cfg.Sink.PutHealth(s.ctx, t.healthKey, h); err != nil && s.ctx.Err() == nil {
		s.log.Warn("publish target health", "target", t.key, "err", err)
	}
}

// Health returns the state and reason the Server holds for the target at key of the
// target group arn; ok is false when it holds no such target. For tests and the admin.
func (s *Server) Health(arn, key string) (state, reason string, ok bool) {
	s.mu.Lock()
	g := s.groups[arn]
	var t *target
	if g != nil {
		t = g.byKey[key]
	}
	s.mu.Unlock()
	if t == nil {
		return "", "", false
	}
	h := t.snapshot()
	return h.GetState(), h.GetReason(), true
}

// Addr returns the address the listener arn is bound to, or "" when it is not bound.
func (s *Server) Addr(arn string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.listeners[arn]; l != nil {
		return l.ln.Addr().String()
	}
	return ""
}

// Close closes every listener; in-flight HTTP requests get up to grace to finish.
func (s *Server) Close(grace time.Duration) {
	s.mu.Lock()
	ls := s.listeners
	s.listeners = map[string]*listener{}
	for _, g := range s.groups {
		for _, t := range g.byKey {
			s.stopTarget(t)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { l.shutdown(grace) })
	}
	wg.Wait()
}

func (s *Server) listen(rec *storev1.ListenerRecord) (*listener, error) {
	addr := net.JoinHostPort(s.cfg.ListenHost, strconv.Itoa(int(rec.GetPort())))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", rec.GetListenerArn(), err)
	}
	l := &listener{arn: rec.GetListenerArn(), port: rec.GetPort(), protocol: rec.GetProtocol(), ln: ln, log: s.log}
	switch rec.GetProtocol() {
	case "TCP", "TLS", "TCP_UDP":
		go l.serveTCP()
	default:
		l.serveHTTP()
	}
	return l, nil
}
