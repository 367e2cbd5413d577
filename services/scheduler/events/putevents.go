package events

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// PutEvents puts custom events (1–10 entries) on the default bus and delivers each to
// the rules whose patterns match it, in the background as EventBridge does after it
// answers. An entry that is not valid fails alone, with AWS's entry error codes:
// InvalidArgument for a missing Source, DetailType or Detail, MalformedDetail for a
// Detail that is not a JSON object, NotAuthorizedForSourceException for an aws.* source
// (only AWS services emit those). EndpointId (global endpoints) and TraceHeader (X-Ray)
// are refused: Berth has neither.
func (h *Handler) PutEvents(ctx context.Context, req *connect.Request[eventsv1.PutEventsRequest]) (*connect.Response[eventsv1.PutEventsResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.PutEventsRequest) (*eventsv1.PutEventsResponse, error) {
		if m.EndpointId != nil {
			return nil, validation("Parameter EndpointId is not supported by Berth: it has no global endpoints.")
		}
		if len(m.Entries) == 0 || len(m.Entries) > 10 {
			return nil, validation("1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length between 1 and 10")
		}
		resp := &eventsv1.PutEventsResponse{Entries: make([]*eventsv1.PutEventsResultEntry, 0, len(m.Entries))}
		var ok []Event
		for _, e := range m.Entries {
			ev, code, msg := h.entryEvent(s, e)
			if code != "" {
				resp.FailedEntryCount++
				resp.Entries = append(resp.Entries, &eventsv1.PutEventsResultEntry{ErrorCode: proto.String(code), ErrorMessage: proto.String(msg)})
				continue
			}
			resp.Entries = append(resp.Entries, &eventsv1.PutEventsResultEntry{EventId: proto.String(ev["id"].(string))})
			ok = append(ok, ev)
		}
		if len(ok) > 0 {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			go func() {
				defer cancel()
				for _, ev := range ok {
					if err := Deliver(dctx, h.kv, h.ecs, h.log(), s, ev); err != nil {
						h.log().Warn("deliver PutEvents entry", "scope", s.String(), "event", ev["id"], "err", err)
					}
				}
			}()
		}
		return resp, nil
	})
}

// entryEvent builds the event of one PutEvents entry, or answers its error code and
// message.
func (h *Handler) entryEvent(s keys.Scope, e *eventsv1.PutEventsRequestEntry) (Event, string, string) {
	if _, err := bus(s, e.EventBusName); err != nil {
		return nil, "InvalidArgument", err.Error()
	}
	switch {
	case e.GetSource() == "":
		return nil, "InvalidArgument", "Parameter Source is not valid. Reason: Source is a required argument."
	case e.GetDetailType() == "":
		return nil, "InvalidArgument", "Parameter DetailType is not valid. Reason: DetailType is a required argument."
	case e.GetDetail() == "":
		return nil, "InvalidArgument", "Parameter Detail is not valid. Reason: Detail is a required argument."
	case strings.HasPrefix(e.GetSource(), "aws."):
		return nil, "NotAuthorizedForSourceException", "Not authorized for the source."
	case e.TraceHeader != nil:
		return nil, "InvalidArgument", "Parameter TraceHeader is not supported by Berth: it has no X-Ray."
	}
	detail, err := decodeEvent([]byte(e.GetDetail()))
	if _, isObj := detail.(map[string]any); err != nil || !isObj {
		return nil, "MalformedDetail", "Detail is malformed."
	}
	at := h.now()
	if e.Time != nil {
		at = fromEpoch(e.GetTime())
	}
	return newEvent(s, e.GetSource(), e.GetDetailType(), e.Resources, detail, at), "", ""
}
