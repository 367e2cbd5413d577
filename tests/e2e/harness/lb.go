package harness

import (
	"io"
	"net"
	"sync"
	"time"
)

// LB is the load balancer in front of the scheduler replicas: a TCP proxy (the gateway
// speaks h2c to it, so one TCP connection carries many calls and agent streams). Each new
// connection goes to the preferred backend, or the next one that accepts a connection when
// it is down. Killing a replica closes the connections through it; the gateway redials and
// lands on a live replica, as behind any TCP load balancer with health by connect.
type LB struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	prefer   int
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
	dialWait time.Duration
}

// NewLB listens on a loopback port and proxies to backends ("host:port").
func NewLB(backends []string) (*LB, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lb := &LB{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}, dialWait: 2 * time.Second}
	lb.wg.Add(1)
	go lb.serve()
	return lb, nil
}

// Addr returns the address to give the gateway.
func (lb *LB) Addr() string { return lb.ln.Addr().String() }

// Prefer makes backend i the first choice of new connections and closes the open ones,
// so clients reconnect to it.
func (lb *LB) Prefer(i int) {
	lb.mu.Lock()
	lb.prefer = i
	conns := make([]net.Conn, 0, len(lb.conns))
	for c := range lb.conns {
		conns = append(conns, c)
	}
	lb.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops listening and closes every proxied connection.
func (lb *LB) Close() {
	lb.mu.Lock()
	lb.closed = true
	for c := range lb.conns {
		_ = c.Close()
	}
	lb.mu.Unlock()
	_ = lb.ln.Close()
	lb.wg.Wait()
}

func (lb *LB) serve() {
	defer lb.wg.Done()
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			return
		}
		lb.wg.Add(1)
		go func() {
			defer lb.wg.Done()
			lb.proxy(c)
		}()
	}
}

func (lb *LB) track(c net.Conn, add bool) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if add {
		if lb.closed {
			return false
		}
		lb.conns[c] = struct{}{}
	} else {
		delete(lb.conns, c)
	}
	return true
}

func (lb *LB) proxy(client net.Conn) {
	defer client.Close()
	lb.mu.Lock()
	order := make([]string, 0, len(lb.backends))
	for i := range lb.backends {
		order = append(order, lb.backends[(lb.prefer+i)%len(lb.backends)])
	}
	lb.mu.Unlock()
	var backend net.Conn
	for _, addr := range order {
		c, err := net.DialTimeout("tcp", addr, lb.dialWait)
		if err == nil {
			backend = c
			break
		}
	}
	if backend == nil {
		return
	}
	defer backend.Close()
	if !lb.track(client, true) {
		return
	}
	defer lb.track(client, false)
	if !lb.track(backend, true) {
		return
	}
	defer lb.track(backend, false)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either side ending ends the pair: a dead replica must not leave the gateway
		// holding a half-open connection.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
}
