// Package h2c is both sides of Berth's internal HTTP/2-without-TLS links (the gateway to
// the scheduler, an agent to the gateway): NewClient dials them, Serve listens. It imports
// nothing of the gateway's server, so an agent that only dials the gateway does not link
// the gateway itself, and the scheduler's, the gateway's and the all-in-one's listeners
// share one Serve. ServeTLS and NewTLSClient are the same links over TLS (HTTP/2 by ALPN),
// which every deployment outside `berth dev` uses.
package h2c

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Serve serves h on ln over HTTP/1.1 and h2c (HTTP/2 without TLS: Connect's streaming
// calls need HTTP/2) until ctx is done, then shuts down gracefully for up to 5 s. It
// returns the server's error, or nil after a shutdown ctx asked for.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	return serve(ctx, ln, h, nil)
}

// ServeTLS serves h on ln over TLS with cfg (see pki.Files.ServerConfig), offering HTTP/2
// and HTTP/1.1 by ALPN, until ctx is done, then shuts down as Serve does. Handlers see
// the client's verified certificate in r.TLS.
func ServeTLS(ctx context.Context, ln net.Listener, h http.Handler, cfg *tls.Config) error {
	return serve(ctx, ln, h, cfg)
}

func serve(ctx context.Context, ln net.Listener, h http.Handler, cfg *tls.Config) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if cfg == nil {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP2(true)
	}
	srv := &http.Server{Handler: h, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second, TLSConfig: cfg}
	errc := make(chan error, 1)
	go func() {
		if cfg != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	return nil
}

// dialer bounds connection setup, so a replica whose host is gone (no answer, not a
// refusal) is given up on in seconds and the call goes to another (package failover).
var dialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

// clientHTTP2 lets the peer send DATA frames of up to 256 KiB (HTTP/2's default, and Go's
// client's, is 16 KiB): Go's server writes each frame with a syscall of its own, so a
// DescribeTasks(100) answer (about 70 KB) took five where it now takes one. Not more: a
// connection keeps a read buffer as large as the largest frame it read, and one frame
// holds up the connection's other streams while it is written.
var clientHTTP2 = &http.HTTP2Config{MaxReadFrameSize: 256 << 10}

// NewClient returns an http.Client that speaks only HTTP/2 without TLS (h2c) to http://
// URLs: Connect's bidi streams (the agent session) need HTTP/2. It keeps up to 64 idle
// connections per host for 90 s.
func NewClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           &p,
		HTTP2:               clientHTTP2,
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// NewTLSClient returns an http.Client that speaks only HTTP/2 over TLS with cfg (see
// pki.Files.ClientConfig), for https:// URLs of the scheduler and the gateway: mTLS when
// cfg presents a client certificate.
func NewTLSClient(cfg *tls.Config) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           &p,
		HTTP2:               clientHTTP2,
		TLSClientConfig:     cfg,
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}
