// Package failover spreads a client's calls over every replica of a Berth role (the
// gateway's calls over the scheduler replicas, an agent's over the gateways): an
// http.RoundTripper that sends each request to the next healthy replica in turn, sets a
// replica aside for a moment when a request to it fails at the connection, and sends
// the request again to another replica when that cannot run it twice: always for
// idempotent calls (Describe*, List*, Get*, ResolveAccessKey), and for any call whose
// connection was never made (a refused dial, a name that no longer resolves). A
// non-idempotent call that dies in flight with its replica fails, and the gateway's
// caller sees ServerException, as AWS answers when it cannot say whether a write
// happened. A signing transport (SigV4) goes under it, so each attempt is signed for the
// replica it is sent to.
package failover

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDownFor is how long a replica whose connection failed is skipped (tried again
// only when every replica is set aside).
const DefaultDownFor = 2 * time.Second

// maxReplayBytes bounds the request body buffered so an idempotent call can be sent
// again (the gateway's own ECS body limit is 1 MiB).
const maxReplayBytes = 4 << 20

// Transport is the balancing RoundTripper; New builds it.
type Transport struct {
	base    http.RoundTripper
	targets []*target
	next    atomic.Uint64
	downFor time.Duration
	now     func() time.Time
}

type target struct {
	url *url.URL

	mu        sync.Mutex
	downUntil time.Time
}

// New returns a Transport over base that sends every request, whatever its URL's host,
// to one of replicas (base URLs such as "https://scheduler1:4567"; the request's path
// is kept, its Host header becomes the replica's). It fails when replicas is empty or a URL has no scheme or host.
func New(base http.RoundTripper, replicas []string) (*Transport, error) {
	if len(replicas) == 0 {
		return nil, errors.New("failover: no replica")
	}
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, downFor: DefaultDownFor, now: time.Now}
	for _, r := range replicas {
		u, err := url.Parse(strings.TrimRight(r, "/"))
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("failover: replica URL %q: want scheme://host:port", r)
		}
		t.targets = append(t.targets, &target{url: u})
	}
	return t, nil
}

// Idempotent reports whether the Connect procedure at urlPath may run twice without a
// different outcome: reads (Describe*, List*, Get*) and ResolveAccessKey.
func Idempotent(urlPath string) bool {
	m := path.Base(urlPath)
	return strings.HasPrefix(m, "Describe") || strings.HasPrefix(m, "List") || strings.HasPrefix(m, "Get") ||
		m == "ResolveAccessKey"
}

// order returns the targets to try: the healthy ones starting at the round-robin
// position, then those set aside, soonest back first.
func (t *Transport) order() []*target {
	now := t.now()
	start := int(t.next.Add(1) - 1)
	var up, down []*target
	for i := range t.targets {
		tg := t.targets[(start+i)%len(t.targets)]
		tg.mu.Lock()
		until := tg.downUntil
		tg.mu.Unlock()
		if now.Before(until) {
			down = append(down, tg)
		} else {
			up = append(up, tg)
		}
	}
	return append(up, down...)
}

func (tg *target) mark(until time.Time) {
	tg.mu.Lock()
	tg.downUntil = until
	tg.mu.Unlock()
}

// dialFailed reports whether err means no connection was made, so the request was never
// sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// RoundTrip implements http.RoundTripper: it tries the replicas in order() and returns
// the first response (whatever its status: an error status is the replica's answer), or
// the last error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	idem := Idempotent(req.URL.Path)
	if idem && req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxReplayBytes+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxReplayBytes {
			return nil, fmt.Errorf("failover: request body over %d bytes", maxReplayBytes)
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	var lastErr error
	for i, tg := range t.order() {
		out := req.Clone(req.Context())
		out.URL.Scheme, out.URL.Host, out.Host = tg.url.Scheme, tg.url.Host, tg.url.Host
		// Without GetBody the clone shares req.Body, which a refused dial left unread.
		if i > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, lastErr
			}
			out.Body = body
		}
		res, err := t.base.RoundTrip(out)
		if err == nil {
			tg.mark(time.Time{})
			return res, nil
		}
		lastErr = err
		if req.Context().Err() != nil {
			return nil, err
		}
		tg.mark(t.now().Add(t.downFor))
		// A retry must not run a write twice: only idempotent calls, and calls whose
		// connection was refused (nothing was sent, the body was not read), go on.
		if !idem && !dialFailed(err) {
			return nil, err
		}
	}
	return nil, lastErr
}
