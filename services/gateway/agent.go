package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/berthhq/berth/services/gateway/sigv4"
)

// newAgentProxy returns the relay of the agent's Connect service to the scheduler: a
// streaming reverse proxy (flushing every write) over the scheduler HTTP client's
// transport, which must speak HTTP/2 for the bidi Session stream.
func (g *Gateway) newAgentProxy() (http.Handler, error) {
	target, err := url.Parse(g.cfg.SchedulerURL)
	if err != nil {
		return nil, fmt.Errorf("gateway: SchedulerURL: %w", err)
	}
	transport := g.cfg.HTTPClient.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.log.Error("agent relay failed", "request_id", w.Header().Get("X-Amzn-RequestId"), "path", r.URL.Path, "error", err)
			writeConnectError(w, connect.CodeUnavailable, "the control plane is unavailable")
		},
	}, nil
}

// serveAgent authenticates an agent call (SigV4 over headers, X-Amz-Content-Sha256:
// UNSIGNED-PAYLOAD), replaces any Berth-* headers with the caller's identity and relays
// it. Failures are Connect errors (the agent is a Connect client): unauthenticated for
// SigV4 failures, resource_exhausted when the address is locked out.
func (g *Gateway) serveAgent(w http.ResponseWriter, r *http.Request, x *exchange) {
	addr := g.cfg.ClientAddress(r)
	if wait, locked := g.lockout.locked(addr); locked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		x.errType = "ThrottlingException"
		writeConnectError(w, connect.CodeResourceExhausted, "too many failed authentication attempts from this address")
		return
	}
	cred, err := g.verifier.Verify(r.Context(), r, sigv4.UnsignedPayload)
	if err != nil {
		var ae *awsjson.Error
		if errors.As(err, &ae) {
			g.lockout.failure(addr)
			x.errType = ae.Type
			writeConnectError(w, connect.CodeUnauthenticated, ae.Type+": "+ae.Message)
			return
		}
		g.log.Error("resolving access key", "request_id", x.id, "error", err)
		x.errType = "ServerException"
		writeConnectError(w, connect.CodeUnavailable, "cannot verify credentials now")
		return
	}
	g.lockout.success(addr)
	x.account = cred.AccountID
	if len(cred.SessionTokenSHA256) > 0 {
		// Session credentials (a task role's) act for a task, never as an agent: otherwise a
		// task could ask for other tasks' credentials.
		x.errType = "AccessDeniedException"
		writeConnectError(w, connect.CodePermissionDenied, "AccessDeniedException: session credentials cannot act as an agent")
		return
	}
	if cred.Service != SigningName {
		x.errType = sigv4.InvalidSignature
		writeConnectError(w, connect.CodeUnauthenticated, fmt.Sprintf("%s: Credential should be scoped to correct service: '%s', not '%s'.", sigv4.InvalidSignature, SigningName, cred.Service))
		return
	}
	out := r.Clone(r.Context())
	for k := range out.Header {
		if strings.HasPrefix(strings.ToLower(k), "berth-") {
			delete(out.Header, k)
		}
	}
	out.Header.Del("Authorization")
	setIdentity(out.Header, cred, x.id)
	g.agent.ServeHTTP(w, out)
}

// writeConnectError writes a Connect protocol error (JSON body, HTTP status from the
// code), which Connect clients decode for unary calls and streams alike.
func writeConnectError(w http.ResponseWriter, code connect.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus(code))
	_ = json.NewEncoder(w).Encode(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code.String(), msg})
}

// httpStatus is the Connect protocol's HTTP status for a code.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}
