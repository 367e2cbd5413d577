// Package ociregistry serves an in-memory OCI distribution registry
// (go-containerregistry's pkg/registry) over plain HTTP: `berth dev`'s embedded registry,
// which the host's agent pulls from (loopback registries are plain HTTP to it), and, through
// testkit/registrytest, a test's registry.
package ociregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Option configures a Server.
type Option func(*options)

type options struct {
	requestLog io.Writer
}

// WithRequestLog writes one line per request the registry serves to w; by
// default nothing is logged.
func WithRequestLog(w io.Writer) Option {
	return func(o *options) { o.requestLog = w }
}

// Server is a running registry. Images pushed to it live in memory until it
// stops.
type Server struct {
	addr   string
	srv    *http.Server
	served chan struct{} // closed when Serve's loop has returned
}

// Serve listens on addr ("host:port"; port 0 picks a free one) and serves
// the registry until ctx is done or Shutdown is called. It returns once the
// listener is open, or an error if addr cannot be listened on.
func Serve(ctx context.Context, addr string, opts ...Option) (*Server, error) {
	o := options{requestLog: io.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("registry listen on %s: %w", addr, err)
	}
	s := &Server{
		addr: ln.Addr().String(),
		srv: &http.Server{
			Handler:           registry.New(registry.Logger(log.New(o.requestLog, "registry: ", 0))),
			ReadHeaderTimeout: 10 * time.Second,
		},
		served: make(chan struct{}),
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns ErrServerClosed on Shutdown or Close
	}()
	context.AfterFunc(ctx, func() { _ = s.srv.Close() })
	return s, nil
}

// Addr returns the address the registry listens on, "127.0.0.1:PORT" for
// a loopback listener: the registry host of image references.
func (s *Server) Addr() string { return s.addr }

// Shutdown stops accepting requests and waits for those in flight to finish
// or for ctx to be done, in which case it closes their connections and
// returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		_ = s.srv.Close()
	}
	<-s.served
	if err != nil {
		return fmt.Errorf("registry shutdown: %w", err)
	}
	return nil
}

// Close closes the listener and every connection at once, without waiting
// for requests in flight.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.served
	if err != nil {
		return fmt.Errorf("registry close: %w", err)
	}
	return nil
}
