package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
)

// serveHealth answers GET /_berth/health: 200 with the Health func's JSON once it reports
// ready, 503 with it before.
func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "UnknownOperationException", "Use GET /_berth/health.")
		return
	}
	var body any = map[string]any{"ready": true}
	ready := true
	if g.cfg.Health != nil {
		body, ready = g.cfg.Health(r.Context())
	}
	data, err := json.Marshal(body)
	if err != nil {
		data = []byte(`{"ready":false,"error":"health report is not JSON-encodable"}`)
		ready = false
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if ready {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(data)
}

// serveReset answers POST /_berth/reset by calling AdminService.ResetState: every
// account's ECS state is wiped, accounts and keys are kept.
func (g *Gateway) serveReset(w http.ResponseWriter, r *http.Request, x *exchange) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "UnknownOperationException", "Use POST /_berth/reset.")
		return
	}
	ctx, cancel := contextWithTimeout(r, time.Minute)
	defer cancel()
	req := connect.NewRequest(&adminv1.ResetStateRequest{})
	req.Header().Set(identity.RequestIDHeader, x.id)
	if _, err := g.admin.ResetState(ctx, req); err != nil {
		g.log.Error("reset failed", "request_id", x.id, "error", err)
		x.errType = "ServerException"
		writeError(w, http.StatusInternalServerError, "ServerException", "Reset failed.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"reset":true}`))
}
