// Package h2c is the client side of Berth's internal HTTP/2-without-TLS links (the
// gateway to the scheduler, an agent to the gateway). It imports nothing of the gateway's
// server, so an agent that only dials the gateway does not link the gateway itself.
package h2c

import (
	"net/http"
	"time"
)

// NewClient returns an http.Client that speaks only HTTP/2 without TLS (h2c) to http://
// URLs: Connect's bidi streams (the agent session) need HTTP/2. It keeps up to 64 idle
// connections per host for 90 s.
func NewClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           &p,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}
