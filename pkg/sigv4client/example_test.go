package sigv4client_test

import (
	"net/http"

	"github.com/berthhq/berth/pkg/sigv4client"
)

// An agent reaches the control plane through the gateway with its instance credential:
// every request, streams included, is signed over its headers. A Connect client takes
// the http.Client as it is (agentv1connect.NewAgentServiceClient(client, endpoint)).
func ExampleNew() {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true) // h2c on loopback; use TLS elsewhere
	base := &http.Transport{Protocols: &p}
	signing := sigv4client.New(base, sigv4client.StaticCredentials("AKIAEXAMPLE", "secret"), "us-east-1")
	client := &http.Client{Transport: signing}
	_ = client
}
