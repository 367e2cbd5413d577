package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/berthhq/berth/services/gateway/sigv4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// message lets one generic Connect client carry any request or response message: the
// embedded proto.Message is the concrete generated type of the method's input or output,
// and *message satisfies proto.Message through it.
type message struct{ proto.Message }

// operation is one ECS action routed to the scheduler.
type operation struct {
	name   string
	input  protoreflect.MessageType
	output protoreflect.MessageType
	client *connect.Client[message, message]
}

// newOperations builds a Connect client for every method of the EcsService descriptor.
func newOperations(httpClient connect.HTTPClient, baseURL string) (map[string]*operation, error) {
	sd := ecsv1.File_berth_ecs_v1_ecs_service_proto.Services().ByName("EcsService")
	if sd == nil {
		return nil, errors.New("gateway: EcsService descriptor not found")
	}
	methods := sd.Methods()
	ops := make(map[string]*operation, methods.Len())
	for i := 0; i < methods.Len(); i++ {
		md := methods.Get(i)
		in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
		if err != nil {
			return nil, fmt.Errorf("gateway: %s input: %w", md.Name(), err)
		}
		out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
		if err != nil {
			return nil, fmt.Errorf("gateway: %s output: %w", md.Name(), err)
		}
		procedure := "/" + string(sd.FullName()) + "/" + string(md.Name())
		ops[string(md.Name())] = &operation{
			name:   string(md.Name()),
			input:  in,
			output: out,
			client: connect.NewClient[message, message](httpClient, baseURL+procedure,
				connect.WithSchema(md),
				connect.WithResponseInitializer(func(_ connect.Spec, m any) error {
					m.(*message).Message = out.New().Interface()
					return nil
				}),
			),
		}
	}
	return ops, nil
}

// agentActions are the ECS actions an instance-scoped credential may call: those of the
// ECS container agent.
var agentActions = map[string]bool{
	"DiscoverPollEndpoint":         true,
	"RegisterContainerInstance":    true,
	"SubmitTaskStateChange":        true,
	"SubmitContainerStateChange":   true,
	"SubmitAttachmentStateChanges": true,
}

const internalMessage = "An internal error occurred."

// serveECS serves one AWS JSON 1.1 request: read (bounded), authenticate, route, throttle,
// decode, call, encode.
func (g *Gateway) serveECS(w http.ResponseWriter, r *http.Request, x *exchange) {
	fail := func(status int, typ, msg string) {
		x.errType = typ
		writeError(w, status, typ, msg)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "UnknownOperationException", "ECS requests are POST / with X-Amz-Target.")
		return
	}
	addr := g.cfg.ClientAddress(r)
	if wait, locked := g.lockout.locked(addr); locked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		fail(http.StatusBadRequest, "ThrottlingException", "Rate exceeded: too many failed authentication attempts from this address.")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			fail(http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException",
				fmt.Sprintf("Request body exceeds the limit of %d bytes.", g.cfg.MaxBodyBytes))
			return
		}
		fail(http.StatusBadRequest, "SerializationException", "The request body could not be read.")
		return
	}
	sum := sha256.Sum256(body)
	cred, err := g.verifier.Verify(r.Context(), r, hex.EncodeToString(sum[:]))
	if err != nil {
		var ae *awsjson.Error
		if errors.As(err, &ae) {
			g.lockout.failure(addr)
			fail(http.StatusBadRequest, ae.Type, ae.Message)
			return
		}
		g.log.Error("resolving access key", "request_id", x.id, "error", err)
		fail(http.StatusInternalServerError, "ServerException", internalMessage)
		return
	}
	g.lockout.success(addr)
	x.account = cred.AccountID

	target := r.Header.Get("X-Amz-Target")
	action, ok := cutPrefix(target, TargetPrefix)
	op := g.ops[action]
	if !ok || op == nil {
		fail(http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("Unknown operation %q.", target))
		return
	}
	x.action = action
	if cred.ContainerInstanceARN != "" && !agentActions[action] {
		fail(http.StatusBadRequest, "AccessDeniedException",
			fmt.Sprintf("The credential of container instance %s is not authorized to perform: ecs:%s", cred.ContainerInstanceARN, action))
		return
	}
	if !g.throttle.allow(cred.AccountID) {
		fail(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	}
	in := op.input.New().Interface()
	if err := awsjson.Unmarshal(body, in); err != nil {
		var ae *awsjson.Error
		errors.As(err, &ae)
		fail(http.StatusBadRequest, ae.Type, ae.Message)
		return
	}
	out, err := g.call(r.Context(), op, in, cred, x.id, endpointOf(r))
	if err != nil {
		status, typ, msg := g.mapError(err, action, x.id)
		fail(status, typ, msg)
		return
	}
	data, err := awsjson.Marshal(out)
	if err != nil {
		fail(http.StatusInternalServerError, "ServerException", internalMessage)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix):], true
}

// endpointOf is the base URL the caller reached the gateway at: http or https (the
// connection's TLS) and the Host header. DiscoverPollEndpoint answers it.
func endpointOf(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// call invokes the operation on the scheduler with the caller's identity headers and the
// gateway's endpoint as the caller reached it (EndpointHeader).
func (g *Gateway) call(ctx context.Context, op *operation, in proto.Message, cred sigv4.Credential, requestID, endpoint string) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	req := connect.NewRequest(&message{in})
	setIdentity(req.Header(), cred, requestID)
	injectTrace(ctx, req.Header())
	req.Header().Set(EndpointHeader, endpoint)
	res, err := op.client.CallUnary(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.Msg == nil || res.Msg.Message == nil {
		return op.output.New().Interface(), nil
	}
	return res.Msg.Message, nil
}

// setIdentity replaces any identity headers with the authenticated caller's.
func setIdentity(h http.Header, cred sigv4.Credential, requestID string) {
	h.Set(AccountHeader, cred.AccountID)
	h.Set(RegionHeader, cred.Region)
	if cred.ContainerInstanceARN != "" {
		h.Set(ContainerInstanceHeader, cred.ContainerInstanceARN)
	} else {
		h.Del(ContainerInstanceHeader)
	}
	h.Set(RequestIDHeader, requestID)
}

// mapError turns a scheduler error into an AWS error: the ecsv1.Exception detail gives the
// type and message (HTTP 400, or 500 for ServerException); an unimplemented method is
// UnsupportedFeatureException naming the action; anything else is ServerException with a
// generic message (the cause is logged, never returned).
func (g *Gateway) mapError(err error, action, requestID string) (int, string, string) {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			v, derr := d.Value()
			if derr != nil {
				continue
			}
			if ex, ok := v.(*ecsv1.Exception); ok && ex.GetType() != "" {
				status := http.StatusBadRequest
				if ex.GetType() == "ServerException" {
					status = http.StatusInternalServerError
				}
				return status, ex.GetType(), ex.GetMessage()
			}
		}
		if ce.Code() == connect.CodeUnimplemented {
			return http.StatusBadRequest, "UnsupportedFeatureException",
				fmt.Sprintf("Berth does not support the action %s yet.", action)
		}
	}
	g.log.Error("scheduler call failed", "request_id", requestID, "action", action, "error", err)
	return http.StatusInternalServerError, "ServerException", internalMessage
}
