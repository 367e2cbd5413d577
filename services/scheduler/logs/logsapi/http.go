package logsapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/berthhq/berth/services/scheduler/logs/logstore"
)

// maxBody bounds a request body: a full PutLogEvents batch with JSON escaping.
const maxBody = 8 << 20

// HTTP returns an http.Handler that serves the API as AWS does: POST with
// X-Amz-Target "Logs_20140328.<Operation>" and an application/x-amz-json-1.1 body;
// errors are {"__type", "message"} with their status. scope returns the caller's
// account and region (the caller must have authenticated the request), or an error
// answered as AccessDeniedException.
func (h *Handler) HTTP(scope func(*http.Request) (logstore.Scope, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix+".")
		if r.Method != http.MethodPost || !ok {
			writeError(w, &Error{Type: UnknownOperation, Message: "CloudWatch Logs requests are POST with X-Amz-Target " + TargetPrefix + ".<Operation>.", Status: 400})
			return
		}
		sc, err := scope(r)
		if err != nil {
			writeError(w, &Error{Type: "AccessDeniedException", Message: err.Error(), Status: 400})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, &Error{Type: "SerializationException", Message: "request body too large or unreadable", Status: 400})
			return
		}
		out, err := h.Serve(sc, action, body)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) {
				ae = &Error{Type: "ServiceUnavailableException", Message: "The service cannot complete the request.", Status: 500}
			}
			writeError(w, ae)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write(out)
	})
}

func writeError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", e.Type)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.Type, "message": e.Message})
}
