package sigv4client_test

import (
	"net/http"

	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/services/gateway/sigv4client"
)

// An agent reaches the control plane through the gateway with its instance credential:
// every request, streams included, is signed over its headers.
func ExampleNew() {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true) // h2c on loopback; use TLS elsewhere
	base := &http.Transport{Protocols: &p}
	signing := sigv4client.New(base, sigv4client.StaticCredentials("AKIAEXAMPLE", "secret"), "us-east-1")
	client := agentv1connect.NewAgentServiceClient(&http.Client{Transport: signing}, "http://127.0.0.1:4566")
	_ = client
}
