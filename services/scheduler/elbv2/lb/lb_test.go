package lb

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

// memSink records what the Server reports.
type memSink struct {
	mu      sync.Mutex
	health  map[string]*storev1.TargetHealthRecord
	removed map[string]bool
}

func newMemSink() *memSink {
	return &memSink{health: map[string]*storev1.TargetHealthRecord{}, removed: map[string]bool{}}
}

func (m *memSink) PutHealth(_ context.Context, key string, h *storev1.TargetHealthRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.health[key] = h
	return nil
}

func (m *memSink) RemoveTarget(_ context.Context, key string, _ int64, healthKey string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removed[key] = true
	delete(m.health, healthKey)
	return nil
}

func (m *memSink) get(key string) *storev1.TargetHealthRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.health[key]
}

func (m *memSink) isRemoved(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removed[key]
}

// backend is a test target that answers with its name and counts requests.
type backend struct {
	name    string
	srv     *httptest.Server
	status  atomic.Int32 // health check answer
	hits    atomic.Int64
	delay   atomic.Int64 // ns to wait before answering /slow
	lastHdr atomic.Pointer[http.Header]
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{name: name}
	b.status.Store(200)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.WriteHeader(int(b.status.Load()))
			return
		}
		b.hits.Add(1)
		h := r.Header.Clone()
		h.Set("Host", r.Host)
		b.lastHdr.Store(&h)
		if r.URL.Path == "/slow" {
			time.Sleep(time.Duration(b.delay.Load()))
		}
		fmt.Fprint(w, b.name)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// newBackendFunc serves h on loopback until the test ends and returns its host:port.
func newBackendFunc(t testing.TB, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func (b *backend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

func freePort(t testing.TB) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

const (
	lbArn = "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/app/web/1"
	lnArn = "arn:aws:elasticloadbalancing:us-east-1:000000000000:listener/app/web/1/2"
)

func tgArn(name string) string {
	return "arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/" + name + "/1"
}

func tg(name, protocol string) *storev1.TargetGroupRecord {
	return &storev1.TargetGroupRecord{
		TargetGroupArn: tgArn(name), TargetGroupName: name, Protocol: protocol, Port: 80, TargetType: "ip",
		HealthCheckEnabled: true, HealthCheckProtocol: protocol, HealthCheckPath: "/health", HealthCheckPort: "traffic-port",
		// The data plane takes whatever the API allowed; tests use sub-second intervals.
		HealthyThresholdCount: 2, UnhealthyThresholdCount: 2, MatcherHttpCode: "200",
		Attributes: map[string]string{"deregistration_delay.timeout_seconds": "2"},
	}
}

func fwd(weights map[string]int32) []*storev1.ElbAction {
	a := &storev1.ElbAction{Type: "forward"}
	for name, w := range weights {
		a.TargetGroups = append(a.TargetGroups, &storev1.ElbWeightedTargetGroup{TargetGroupArn: tgArn(name), Weight: w})
	}
	return []*storev1.ElbAction{a}
}

func targetOf(group string, b *backend, deregAt float64) Target {
	key := "/berth/v1/elb/targets/0/us-east-1/" + group + "/" + b.addr()
	host, port, _ := net.SplitHostPort(b.addr())
	var p int32
	fmt.Sscan(port, &p)
	return Target{Key: key, HealthKey: "/berth/v1/elb-health/0/us-east-1/" + group + "/" + b.addr(), ModRevision: 1,
		Record: &storev1.TargetRecord{Id: host, Port: p, Address: b.addr(), DeregisteredAt: deregAt}}
}

// fastChecks makes the Server check every 50ms (the API's floor is 5s; the data plane
// takes the group's settings as they are).
func fastChecks(g *storev1.TargetGroupRecord) *storev1.TargetGroupRecord {
	g.HealthCheckIntervalSeconds = 0
	return g
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func init() {
	// Groups without an interval (fastChecks) are checked every 50ms in tests.
	defaultInterval = 50 * time.Millisecond
}

func TestHTTPRoutesOnlyToHealthyTargetsAndFollowsRules(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newMemSink()
	s := New(ctx, Config{ListenHost: "127.0.0.1", Sink: sink})
	defer s.Close(time.Second)

	a, b, api := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "api")
	b.status.Store(500) // b fails its checks
	port := freePort(t)
	snap := Snapshot{
		LoadBalancers: []*storev1.LoadBalancerRecord{{LoadBalancerArn: lbArn, Type: "application", State: "active"}},
		TargetGroups:  []*storev1.TargetGroupRecord{fastChecks(tg("web", "HTTP")), fastChecks(tg("api", "HTTP"))},
		Listeners:     []*storev1.ListenerRecord{{ListenerArn: lnArn, LoadBalancerArn: lbArn, Protocol: "HTTP", Port: port, DefaultActions: fwd(map[string]int32{"web": 1})}},
		Rules: []*storev1.RuleRecord{
			{ListenerArn: lnArn, Priority: 10, Conditions: []*storev1.ElbRuleCondition{{Field: "path-pattern", Values: []string{"/api/*"}}}, Actions: fwd(map[string]int32{"api": 1})},
			{ListenerArn: lnArn, Priority: 20, Conditions: []*storev1.ElbRuleCondition{{Field: "host-header", Values: []string{"API.example.*"}}}, Actions: fwd(map[string]int32{"api": 1})},
		},
		Targets: map[string][]Target{
			tgArn("web"): {targetOf("web", a, 0), targetOf("web", b, 0)},
			tgArn("api"): {targetOf("api", api, 0)},
		},
	}
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Before any check passed, targets are initial and get nothing.
	if st, reason, _ := s.Health(tgArn("web"), targetOf("web", a, 0).Key); st != elb.StateInitial {
		t.Fatalf("a starts %s/%s, want initial", st, reason)
	}
	waitFor(t, "a healthy", func() bool {
		st, _, _ := s.Health(tgArn("web"), targetOf("web", a, 0).Key)
		return st == elb.StateHealthy
	})
	waitFor(t, "b unhealthy", func() bool {
		st, _, _ := s.Health(tgArn("web"), targetOf("web", b, 0).Key)
		return st == elb.StateUnhealthy
	})
	if _, reason, _ := s.Health(tgArn("web"), targetOf("web", b, 0).Key); reason != elb.ReasonResponseCodeMismatch {
		t.Errorf("b's reason = %s, want %s", reason, elb.ReasonResponseCodeMismatch)
	}
	if h := sink.get(targetOf("web", b, 0).HealthKey); h.GetDescription() != "Health checks failed with these codes: [500]" {
		t.Errorf("b's published description = %q", h.GetDescription())
	}
	for range 20 {
		if code, body := get(t, url+"/", ""); code != 200 || body != "a" {
			t.Fatalf("GET / = %d %q, want 200 from a only", code, body)
		}
	}
	waitFor(t, "api healthy", func() bool {
		st, _, _ := s.Health(tgArn("api"), targetOf("api", api, 0).Key)
		return st == elb.StateHealthy
	})
	if _, body := get(t, url+"/api/v1/x", ""); body != "api" {
		t.Errorf("path-pattern rule: got %q", body)
	}
	if _, body := get(t, url+"/other", "api.EXAMPLE.com:8080"); body != "api" {
		t.Errorf("host-header rule: got %q", body)
	}
	if _, body := get(t, url+"/apix", ""); body != "a" {
		t.Errorf("default action: got %q", body)
	}
	h := *a.lastHdr.Load()
	if h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Port") != fmt.Sprint(port) {
		t.Errorf("forwarded headers: %v", h)
	}

	// a fails, b recovers: traffic moves to b.
	a.status.Store(503)
	b.status.Store(200)
	waitFor(t, "b healthy", func() bool {
		st, _, _ := s.Health(tgArn("web"), targetOf("web", b, 0).Key)
		return st == elb.StateHealthy
	})
	waitFor(t, "a unhealthy", func() bool {
		st, _, _ := s.Health(tgArn("web"), targetOf("web", a, 0).Key)
		return st == elb.StateUnhealthy
	})
	if _, body := get(t, url+"/", ""); body != "b" {
		t.Errorf("after failover got %q, want b", body)
	}
	// Every target unhealthy: ELB fails open.
	b.status.Store(500)
	waitFor(t, "b unhealthy", func() bool {
		st, _, _ := s.Health(tgArn("web"), targetOf("web", b, 0).Key)
		return st == elb.StateUnhealthy
	})
	if code, _ := get(t, url+"/", ""); code != 200 {
		t.Errorf("fail open: got %d", code)
	}

	// A group no listener uses: unused / Target.NotInUse, no checks.
	snap.Rules = nil
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	if st, reason, _ := s.Health(tgArn("api"), targetOf("api", api, 0).Key); st != elb.StateUnused || reason != elb.ReasonNotInUse {
		t.Errorf("api after rules removed: %s/%s, want unused/%s", st, reason, elb.ReasonNotInUse)
	}
}

func TestWeightedForward(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(ctx, Config{ListenHost: "127.0.0.1", Sink: newMemSink()})
	defer s.Close(time.Second)
	blue, green := newBackend(t, "blue"), newBackend(t, "green")
	port := freePort(t)
	snap := Snapshot{
		LoadBalancers: []*storev1.LoadBalancerRecord{{LoadBalancerArn: lbArn, State: "active"}},
		TargetGroups:  []*storev1.TargetGroupRecord{fastChecks(tg("blue", "HTTP")), fastChecks(tg("green", "HTTP"))},
		Listeners:     []*storev1.ListenerRecord{{ListenerArn: lnArn, LoadBalancerArn: lbArn, Protocol: "HTTP", Port: port, DefaultActions: fwd(map[string]int32{"blue": 3, "green": 1})}},
		Targets:       map[string][]Target{tgArn("blue"): {targetOf("blue", blue, 0)}, tgArn("green"): {targetOf("green", green, 0)}},
	}
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both healthy", func() bool {
		x, _, _ := s.Health(tgArn("blue"), targetOf("blue", blue, 0).Key)
		y, _, _ := s.Health(tgArn("green"), targetOf("green", green, 0).Key)
		return x == elb.StateHealthy && y == elb.StateHealthy
	})
	count := map[string]int{}
	for range 400 {
		_, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", port), "")
		count[body]++
	}
	// 3:1 of 400 is 300:100; allow a wide band for randomness.
	if count["blue"] < 240 || count["blue"] > 360 || count["blue"]+count["green"] != 400 {
		t.Errorf("weighted 3:1 split = %v", count)
	}
}

func TestDrainLetsInFlightFinishAndSendsNothingNew(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newMemSink()
	s := New(ctx, Config{ListenHost: "127.0.0.1", Sink: sink})
	defer s.Close(time.Second)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	a.delay.Store(int64(600 * time.Millisecond))
	port := freePort(t)
	group := fastChecks(tg("web", "HTTP"))
	group.Attributes["deregistration_delay.timeout_seconds"] = "30"
	snap := Snapshot{
		LoadBalancers: []*storev1.LoadBalancerRecord{{LoadBalancerArn: lbArn, State: "active"}},
		TargetGroups:  []*storev1.TargetGroupRecord{group},
		Listeners:     []*storev1.ListenerRecord{{ListenerArn: lnArn, LoadBalancerArn: lbArn, Protocol: "HTTP", Port: port, DefaultActions: fwd(map[string]int32{"web": 1})}},
		Targets:       map[string][]Target{tgArn("web"): {targetOf("web", a, 0)}},
	}
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	ta := targetOf("web", a, 0)
	waitFor(t, "a healthy", func() bool { st, _, _ := s.Health(tgArn("web"), ta.Key); return st == elb.StateHealthy })
	slow := make(chan string)
	go func() {
		_, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/slow", port), "")
		slow <- body
	}()
	waitFor(t, "request in flight", func() bool { return a.hits.Load() == 1 })

	// Deregister a, register b.
	snap.Targets[tgArn("web")] = []Target{targetOf("web", a, float64(time.Now().UnixNano())/1e9), targetOf("web", b, 0)}
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	if st, reason, _ := s.Health(tgArn("web"), ta.Key); st != elb.StateDraining || reason != elb.ReasonDeregistrationInProgress {
		t.Errorf("a after deregistration: %s/%s", st, reason)
	}
	if sink.isRemoved(ta.Key) {
		t.Fatal("a removed while a request is in flight")
	}
	if body := <-slow; body != "a" {
		t.Errorf("in-flight request got %q, want it finished by a", body)
	}
	// Nothing in flight: the drain completes long before the 30s delay.
	waitFor(t, "a removed", func() bool { return sink.isRemoved(ta.Key) })
	waitFor(t, "b healthy", func() bool {
		st, _, _ := s.Health(tgArn("web"), targetOf("web", b, 0).Key)
		return st == elb.StateHealthy
	})
	if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", port), ""); code != 200 || body != "b" {
		t.Errorf("after drain: %d %q", code, body)
	}
	if a.hits.Load() != 1 {
		t.Errorf("draining target got %d requests, want only the one in flight", a.hits.Load())
	}
}

func TestDeadTargetBetweenChecksCostsNoRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(ctx, Config{ListenHost: "127.0.0.1", Sink: newMemSink()})
	defer s.Close(time.Second)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	port := freePort(t)
	group := tg("web", "HTTP")
	group.HealthCheckIntervalSeconds = 300 // no check notices the death in this test
	snap := Snapshot{
		LoadBalancers: []*storev1.LoadBalancerRecord{{LoadBalancerArn: lbArn, State: "active"}},
		TargetGroups:  []*storev1.TargetGroupRecord{group},
		Listeners:     []*storev1.ListenerRecord{{ListenerArn: lnArn, LoadBalancerArn: lbArn, Protocol: "HTTP", Port: port, DefaultActions: fwd(map[string]int32{"web": 1})}},
		Targets:       map[string][]Target{tgArn("web"): {targetOf("web", a, 0), targetOf("web", b, 0)}},
	}
	// Start healthy, as a restarted lb role does from the published health.
	ts := snap.Targets[tgArn("web")]
	for i := range ts {
		ts[i].Health = &storev1.TargetHealthRecord{State: elb.StateHealthy}
	}
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	a.srv.Close() // a dies; b serves every request
	for range 20 {
		if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", port), ""); code != 200 || body != "b" {
			t.Fatalf("got %d %q", code, body)
		}
	}
}

func TestTCPListenerSplices(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newMemSink()
	s := New(ctx, Config{ListenHost: "127.0.0.1", Sink: sink})
	defer s.Close(time.Second)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	port := freePort(t)
	group := fastChecks(tg("tcp", "TCP"))
	addr := echo.Addr().String()
	tt := Target{Key: "/berth/v1/elb/targets/0/us-east-1/tcp/x", HealthKey: "/berth/v1/elb-health/0/us-east-1/tcp/x", ModRevision: 1,
		Record: &storev1.TargetRecord{Id: "127.0.0.1", Address: addr}}
	snap := Snapshot{
		LoadBalancers: []*storev1.LoadBalancerRecord{{LoadBalancerArn: lbArn, Type: "network", State: "active"}},
		TargetGroups:  []*storev1.TargetGroupRecord{group},
		Listeners:     []*storev1.ListenerRecord{{ListenerArn: lnArn, LoadBalancerArn: lbArn, Protocol: "TCP", Port: port, DefaultActions: fwd(map[string]int32{"tcp": 1})}},
		Targets:       map[string][]Target{tgArn("tcp"): {tt}},
	}
	if err := s.Apply(snap); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "tcp target healthy", func() bool { st, _, _ := s.Health(tgArn("tcp"), tt.Key); return st == elb.StateHealthy })
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	if string(got) != "ping" {
		t.Errorf("echo through NLB listener = %q", got)
	}
	// The echo server goes away: the TCP check fails with Target.FailedHealthChecks.
	echo.Close()
	waitFor(t, "tcp target unhealthy", func() bool { st, _, _ := s.Health(tgArn("tcp"), tt.Key); return st == elb.StateUnhealthy })
	if _, reason, _ := s.Health(tgArn("tcp"), tt.Key); reason != elb.ReasonFailedHealthChecks {
		t.Errorf("reason %s", reason)
	}
}

func TestMatchCodeAndWildcards(t *testing.T) {
	for _, c := range []struct {
		m    string
		code int
		want bool
	}{{"200", 200, true}, {"200", 204, false}, {"200-299", 204, true}, {"200,302", 302, true}, {"200,302", 301, false}} {
		if got := matchCode(c.m, c.code); got != c.want {
			t.Errorf("matchCode(%q, %d) = %v", c.m, c.code, got)
		}
	}
	if !compileCondition("path-pattern", []string{"/img/*.png"}).match("", "/img/a/b.png") {
		t.Error("* spans slashes")
	}
	if compileCondition("path-pattern", []string{"/A?"}).match("", "/a1") {
		t.Error("paths are case-sensitive")
	}
	if !compileCondition("host-header", []string{"*.Example.com"}).match("www.example.COM", "") {
		t.Error("hosts are case-insensitive")
	}
}
