package lb

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// listener is one bound listener.
type listener struct {
	arn      string
	port     int32
	protocol string
	ln       net.Listener
	log      *slog.Logger
	routes   atomic.Pointer[routes]

	srv    *http.Server // HTTP listeners
	closed atomic.Bool
	conns  sync.WaitGroup // TCP connections
}

// errNoTarget: the target group has no target to send to (503 on ELB).
var errNoTarget = errors.New("lb: no routable target")

// proxy is the HTTP data plane shared by every HTTP listener: one transport (one pool
// of keep-alive connections to the targets) and, per target group, a ReverseProxy whose
// transport picks the group's target, so retries and in-flight counting live in one
// place. The handler hands the request to its group's ReverseProxy as it came: no
// per-request context or request copy carries the group.
type proxy struct {
	base         *http.Transport
	rewrite      func(*httputil.ProxyRequest)
	errorHandler func(http.ResponseWriter, *http.Request, error)
}

func newProxy() *proxy {
	base := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       60 * time.Second,
		ExpectContinueTimeout: time.Second,
		// The client's Accept-Encoding goes to the target as it is, and the answer comes
		// back as the target encoded it: the proxy neither asks for gzip nor unpacks it.
		DisableCompression: true,
	}
	return &proxy{
		base: base,
		// X-Forwarded-Port is set by the listener's handler on the incoming request
		// (ReverseProxy copies it; it removes only X-Forwarded-For, -Host and -Proto).
		rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "target" // the transport sets the picked target
			pr.Out.Host = pr.In.Host   // ELB passes the client's Host header through
			pr.SetXForwarded()
		},
		errorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ne net.Error
			switch {
			case errors.Is(err, errNoTarget):
				w.WriteHeader(http.StatusServiceUnavailable)
			case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
				w.WriteHeader(http.StatusGatewayTimeout)
			default:
				w.WriteHeader(http.StatusBadGateway)
			}
		},
	}
}

// forGroup returns the reverse proxy that sends to g's targets.
func (p *proxy) forGroup(g *group) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:      p.rewrite,
		Transport:    &pickTransport{base: p.base, g: g},
		BufferPool:   bufferPool{},
		ErrorHandler: p.errorHandler,
	}
}

// bufferPool lends the 32 KiB buffers ReverseProxy copies bodies with, from a bounded
// free list: unlike a sync.Pool of slices, taking and returning a buffer allocates
// nothing, and the list is not emptied by every garbage collection.
type bufferPool struct{}

// buffers holds up to 1,024 free buffers (32 MiB).
var buffers = make(chan []byte, 1024)

// Get implements httputil.BufferPool.
func (bufferPool) Get() []byte {
	select {
	case b := <-buffers:
		return b
	default:
		return make([]byte, 32*1024)
	}
}

// Put implements httputil.BufferPool.
func (bufferPool) Put(b []byte) {
	select {
	case buffers <- b:
	default:
	}
}

// pickTransport sends each request to a target of its group.
// A request whose connection to the target could not even be made (nothing was sent),
// or an idempotent one (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; RFC 9110 9.2.2) whose
// target gave no answer, is tried on another target, up to three in all, and the failed
// target is passed over for a moment: that is how a target that died between two health
// checks costs no client request.
type pickTransport struct {
	base *http.Transport
	g    *group
}

// RoundTrip implements http.RoundTripper.
func (p *pickTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := p.g
	var triedBuf [3]*target
	tried := triedBuf[:0]
	var lastErr error = errNoTarget
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for range 3 {
		t := g.pick(tried)
		if t == nil {
			break
		}
		tried = append(tried, t)
		// req is the ReverseProxy's own outgoing copy (its URL cloned too): it is
		// pointed at the target in place, saving two allocations a request.
		req.URL.Host = t.addr
		if len(tried) > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				t.release()
				return nil, err
			}
			req.Body = body
		}
		resp, err := p.base.RoundTrip(req)
		if err != nil {
			t.release()
			lastErr = err
			if req.Context().Err() != nil {
				return nil, err
			}
			t.failed()
			if replayable && (isDialError(err) || idempotent[req.Method]) {
				continue
			}
			return nil, err
		}
		resp.Body = &releaseBody{ReadCloser: resp.Body, t: t}
		return resp, nil
	}
	return nil, lastErr
}

// idempotent are the methods whose request may be sent again (RFC 9110 9.2.2).
var idempotent = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true, http.MethodTrace: true,
	http.MethodPut: true, http.MethodDelete: true,
}

// isDialError reports whether err happened while connecting, before any byte of the
// request went out.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// releaseBody releases the target's in-flight count when the response is done.
type releaseBody struct {
	io.ReadCloser
	t    *target
	once sync.Once
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.t.release)
	return err
}

// Write forwards to the body when it is writable (a 101 Switching Protocols upgrade).
func (b *releaseBody) Write(p []byte) (int, error) {
	if w, ok := b.ReadCloser.(io.Writer); ok {
		return w.Write(p)
	}
	return 0, errors.New("lb: response body is not writable")
}

func (l *listener) serveHTTP() {
	// X-Forwarded-Port: the listener's port, one shared value (ReverseProxy's header
	// copy reads it; nothing writes it).
	port := []string{strconv.Itoa(int(l.port))}
	l.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			g := l.routes.Load().route(host, r.URL.Path).pickGroup()
			if g == nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			r.Header["X-Forwarded-Port"] = port
			g.rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 60 * time.Second,
		IdleTimeout:       60 * time.Second, // ELB's default idle_timeout.timeout_seconds
	}
	go func() { _ = l.srv.Serve(l.ln) }()
}

// serveTCP splices each accepted connection to a target of the default action.
func (l *listener) serveTCP() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.closed.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		l.conns.Add(1)
		go func() {
			defer l.conns.Done()
			l.splice(c)
		}()
	}
}

func (l *listener) splice(c net.Conn) {
	defer c.Close()
	g := l.routes.Load().def.pickGroup()
	if g == nil {
		return
	}
	var tried []*target
	var up net.Conn
	var t *target
	for range 3 {
		t = g.pick(tried)
		if t == nil {
			return
		}
		tried = append(tried, t)
		var err error
		up, err = net.DialTimeout("tcp", t.addr, 10*time.Second)
		if err == nil {
			break
		}
		t.failed()
		t.release()
		t, up = nil, nil
	}
	if up == nil {
		return
	}
	defer t.release()
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c) // splice(2) between TCP sockets on Linux
		closeWrite(up)
		close(done)
	}()
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// close stops accepting; in-flight work finishes in the background.
func (l *listener) close() { go l.shutdown(5 * time.Minute) }

// shutdown stops accepting and waits up to grace for in-flight requests (HTTP) or
// connections (TCP) to end.
func (l *listener) shutdown(grace time.Duration) {
	l.closed.Store(true)
	if l.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := l.srv.Shutdown(ctx); err != nil {
			_ = l.srv.Close()
		}
		return
	}
	_ = l.ln.Close()
	done := make(chan struct{})
	go func() { l.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
}

// String names the listener for logs.
func (l *listener) String() string { return l.protocol + ":" + strconv.Itoa(int(l.port)) }
