package lb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

// Route classes a target's state puts it in.
const (
	routeNone      int32 = iota // initial, unused, draining: no new traffic
	routeHealthy                // healthy, or unavailable because checks are disabled
	routeUnhealthy              // unhealthy: only when a group has nothing healthy (fail open)
)

// target is one registered target as the lb role serves and checks it.
type target struct {
	key, healthKey string
	modRev         atomic.Int64
	addr           string // host:port for traffic
	deregAt        float64

	inflight atomic.Int64
	draining atomic.Bool
	route    atomic.Int32
	// failedUntil (Unix ns) holds the target out of routing for a moment after a
	// request to it failed without an answer (passive health): a task that died between
	// two health checks is not picked again until then, unless nothing else is left.
	failedUntil atomic.Int64

	mu                  sync.Mutex
	state, reason, desc string
	successes, failures int
	cancel              context.CancelFunc // the health or drain loop, nil when none runs

	pubMu sync.Mutex
}

// acquire counts a new request or connection on t unless t started draining meanwhile;
// it pairs with release. The counter goes up before draining is re-read, so a drain
// that saw zero in flight can never race a request onto the target.
func (t *target) acquire() bool {
	t.inflight.Add(1)
	if t.draining.Load() {
		t.inflight.Add(-1)
		return false
	}
	return true
}

func (t *target) release() { t.inflight.Add(-1) }

// failHold is how long a target that failed a request without an answer is passed over.
const failHold = 5 * time.Second

// failed holds t out of routing for failHold.
func (t *target) failed() { t.failedUntil.Store(time.Now().Add(failHold).UnixNano()) }

// held reports whether t failed a request less than failHold ago.
func (t *target) held() bool {
	u := t.failedUntil.Load()
	return u != 0 && time.Now().UnixNano() < u
}

// set changes the target's state and returns whether it changed.
func (t *target) set(state, reason string, desc string) bool {
	if desc == "" {
		desc = elb.Describe(reason)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := t.state != state || t.reason != reason || t.desc != desc
	t.state, t.reason, t.desc = state, reason, desc
	switch state {
	case elb.StateHealthy, elb.StateUnavailable:
		t.route.Store(routeHealthy)
	case elb.StateUnhealthy:
		t.route.Store(routeUnhealthy)
	default:
		t.route.Store(routeNone)
	}
	return changed
}

func (t *target) snapshot() *storev1.TargetHealthRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &storev1.TargetHealthRecord{State: t.state, Reason: t.reason, Description: t.desc}
}

// observe applies one health check result with the group's thresholds and returns
// whether the state changed. The thresholds count consecutive results, as ELB's do:
// healthy after healthyThreshold successes in a row (from initial or unhealthy), and
// unhealthy after unhealthyThreshold failures in a row (from initial or healthy).
func (t *target) observe(ok bool, reason, desc string, healthyThreshold, unhealthyThreshold int) bool {
	t.mu.Lock()
	if ok {
		t.successes++
		t.failures = 0
	} else {
		t.failures++
		t.successes = 0
	}
	state, succ, fail := t.state, t.successes, t.failures
	t.mu.Unlock()
	switch {
	case ok && state != elb.StateHealthy && succ >= healthyThreshold:
		return t.set(elb.StateHealthy, "", "")
	case !ok && state == elb.StateUnhealthy:
		return t.set(elb.StateUnhealthy, reason, desc) // a new reason replaces the old
	case !ok && fail >= unhealthyThreshold:
		return t.set(elb.StateUnhealthy, reason, desc)
	}
	return false
}

// defaultInterval is the check interval of a group that has none (the API always sets
// one; AWS's default is 30 seconds).
var defaultInterval = 30 * time.Second

// checkConfig is a target group's health check settings with defaults applied.
type checkConfig struct {
	enabled             bool
	protocol, path      string
	port                string
	interval, timeout   time.Duration
	healthy, unhealthy  int
	matcher             string
	deregistrationDelay time.Duration
}

func checkConfigOf(tg *storev1.TargetGroupRecord) checkConfig {
	c := checkConfig{
		enabled:   tg.GetHealthCheckEnabled(),
		protocol:  tg.GetHealthCheckProtocol(),
		path:      tg.GetHealthCheckPath(),
		port:      tg.GetHealthCheckPort(),
		interval:  time.Duration(tg.GetHealthCheckIntervalSeconds()) * time.Second,
		timeout:   time.Duration(tg.GetHealthCheckTimeoutSeconds()) * time.Second,
		healthy:   int(tg.GetHealthyThresholdCount()),
		unhealthy: int(tg.GetUnhealthyThresholdCount()),
		matcher:   tg.GetMatcherHttpCode(),
	}
	if c.protocol == "" {
		c.protocol = tg.GetProtocol()
	}
	if c.path == "" {
		c.path = "/"
	}
	if c.interval <= 0 {
		c.interval = defaultInterval
	}
	if c.timeout <= 0 {
		c.timeout = 5 * time.Second
	}
	c.healthy = max(c.healthy, 1)
	c.unhealthy = max(c.unhealthy, 1)
	if c.matcher == "" {
		c.matcher = "200"
	}
	c.deregistrationDelay = 300 * time.Second
	if v, ok := tg.GetAttributes()["deregistration_delay.timeout_seconds"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			c.deregistrationDelay = time.Duration(n) * time.Second
		}
	}
	return c
}

// checkAddr is where health checks go: the traffic address, or its host with the
// configured port.
func (c checkConfig) checkAddr(trafficAddr string) string {
	if c.port == "" || c.port == "traffic-port" {
		return trafficAddr
	}
	host, _, err := net.SplitHostPort(trafficAddr)
	if err != nil {
		return trafficAddr
	}
	return net.JoinHostPort(host, c.port)
}

// matchCode reports whether code is in an ELB matcher: "200", "200,202", "200-299".
func matchCode(matcher string, code int) bool {
	for part := range strings.SplitSeq(matcher, ",") {
		part = strings.TrimSpace(part)
		if lo, hi, ok := strings.Cut(part, "-"); ok {
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && code >= l && code <= h {
				return true
			}
			continue
		}
		if n, err := strconv.Atoi(part); err == nil && n == code {
			return true
		}
	}
	return false
}

// checkClient runs HTTP health checks: a new connection each time, so a dead target is
// not hidden behind a pooled connection, and no redirects followed (a 302 is a code to
// match, as on ELB).
var checkClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// probe runs one health check and returns whether it passed and, when not, the reason
// and its description.
func probe(ctx context.Context, c checkConfig, addr string) (bool, string, string) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.protocol == "TCP" {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return false, elb.ReasonTimeout, ""
			}
			return false, elb.ReasonFailedHealthChecks, ""
		}
		_ = conn.Close()
		return true, "", ""
	}
	scheme := "http"
	if c.protocol == "HTTPS" {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+c.path, nil)
	if err != nil {
		return false, elb.ReasonFailedHealthChecks, ""
	}
	req.Header.Set("User-Agent", "ELB-HealthChecker/2.0")
	resp, err := checkClient.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return false, elb.ReasonTimeout, ""
		}
		return false, elb.ReasonFailedHealthChecks, ""
	}
	resp.Body.Close()
	if !matchCode(c.matcher, resp.StatusCode) {
		return false, elb.ReasonResponseCodeMismatch, fmt.Sprintf("Health checks failed with these codes: [%d]", resp.StatusCode)
	}
	return true, "", ""
}
