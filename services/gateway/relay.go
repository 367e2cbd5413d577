package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/berthhq/berth/services/gateway/awsquery"
	"github.com/berthhq/berth/services/gateway/rpcv2cbor"
	"github.com/berthhq/berth/services/gateway/sigv4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// message lets one generic Connect client carry any request message: the embedded
// proto.Message is the concrete generated type of the method's input, and *message
// satisfies proto.Message through it.
type message struct{ proto.Message }

// wireMessage is a response as the scheduler encoded it (protobuf binary), kept by
// wireCodec in a pooled buffer: the gateway writes AWS JSON straight from these bytes
// (awsjson.MarshalWirePooled) and decodes them only for the query protocol and the
// console.
type wireMessage struct{ buf *[]byte }

// bytes returns the response's encoding (empty for an empty message).
func (w *wireMessage) bytes() []byte {
	if w.buf == nil {
		return nil
	}
	return *w.buf
}

// release returns the buffer to the pool; the bytes are not to be used after.
func (w *wireMessage) release() {
	if w.buf != nil && cap(*w.buf) <= maxPooledWire {
		wireBuffers.Put(w.buf)
	}
	w.buf = nil
}

// wireBuffers holds response buffers between calls; maxPooledWire (bytes) bounds what it
// keeps.
var wireBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledWire = 1 << 20

// wireCodec is the operations' Connect codec ("proto", binary protobuf): requests are
// marshaled as connect's own codec does, and a *wireMessage response keeps the bytes
// (copied: Connect reuses its read buffer) instead of decoding them. Connect asks a
// custom "proto" codec to handle any other protobuf message too (its own, for some
// protocols); those are decoded with proto.Unmarshal.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (c wireCodec) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

func (wireCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("gateway: cannot marshal %T: not a protobuf message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (wireCodec) Unmarshal(data []byte, m any) error {
	switch v := m.(type) {
	case *wireMessage:
		bp := wireBuffers.Get().(*[]byte)
		*bp = append((*bp)[:0], data...)
		v.buf = bp
		return nil
	case proto.Message:
		return proto.Unmarshal(data, v)
	}
	return fmt.Errorf("gateway: cannot unmarshal into %T: not a protobuf message", m)
}

// connectHTTPClient is the HTTP client the Connect clients use.
type connectHTTPClient = connect.HTTPClient

// operation is one action of an AWS service routed to the scheduler.
type operation struct {
	name   string
	input  protoreflect.MessageType
	output protoreflect.MessageType
	client *connect.Client[message, wireMessage]
}

// newOperations builds a Connect client for every method of the service descriptor sd.
func newOperations(sd protoreflect.ServiceDescriptor, httpClient connect.HTTPClient, baseURL string) (map[string]*operation, error) {
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
			client: connect.NewClient[message, wireMessage](httpClient, baseURL+procedure,
				connect.WithSchema(md), connect.WithCodec(wireCodec{})),
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

// bodyLimit returns the body limit of a request: Config.MaxBodyBytes, or the larger
// Service.MaxBodyBytes of the service its Authorization header's credential scope
// ({key}/{date}/{region}/{service}/aws4_request) names. The scope is only a hint here:
// the signature is verified over the body afterwards.
func (g *Gateway) bodyLimit(r *http.Request) int64 {
	limit := g.cfg.MaxBodyBytes
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return limit
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return limit
	}
	if svc := g.services[parts[3]]; svc != nil && svc.MaxBodyBytes > limit {
		return svc.MaxBodyBytes
	}
	return limit
}

// serveAWS serves one request to an AWS service: read (bounded), authenticate (the
// credential scope names the service), route (X-Amz-Target or Action), throttle, decode,
// call, encode — in the service's protocol.
func (g *Gateway) serveAWS(w http.ResponseWriter, r *http.Request, x *exchange) {
	// Until the signature names the service, errors take the protocol the request looks
	// like: query when it has no X-Amz-Target and is a form POST or a GET naming an Action.
	var svc *service
	query := r.Header.Get("X-Amz-Target") == "" &&
		((r.Method == http.MethodGet && r.URL.Query().Has("Action")) ||
			(r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")))
	// wp is the wire protocol of this request: the service's own, or for a service that
	// accepts several (RPCv2CBOR) the one the request uses.
	wp := JSON
	switch {
	case strings.HasPrefix(r.URL.Path, rpcv2cbor.PathPrefix):
		wp = RPCv2CBOR
	case query:
		wp = Query
	}
	fail := func(status int, typ, msg string) {
		x.errType = typ
		if svc != nil && svc.Protocol != RPCv2CBOR {
			wp = svc.Protocol
		}
		switch {
		case wp == Query:
			ns := "https://sts.amazonaws.com/doc/2011-06-15/"
			if svc != nil {
				ns = svc.XMLNamespace
			}
			writeXMLError(w, status, queryCode(typ), msg, ns, x.id)
		case wp == RPCv2CBOR || (svc != nil && svc.Protocol == RPCv2CBOR):
			writeCompatibleError(w, status, svc, wp, typ, msg)
		default:
			writeError(w, status, typ, msg)
		}
	}
	if r.Method != http.MethodPost && !(query && r.Method == http.MethodGet) {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "UnknownOperationException", "AWS requests are POST / with X-Amz-Target (JSON) or Action (query).")
		return
	}
	addr := g.cfg.ClientAddress(r)
	if wait, locked := g.lockout.locked(addr); locked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		fail(http.StatusBadRequest, "ThrottlingException", "Rate exceeded: too many failed authentication attempts from this address.")
		return
	}
	limit := g.bodyLimit(r)
	body, err := readBody(w, r, limit)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			fail(http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException",
				fmt.Sprintf("Request body exceeds the limit of %d bytes.", limit))
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
	svc = g.services[cred.Service]
	// The signature covers the body as sent; a compressed one (the SDKs gzip CloudWatch's
	// PutMetricData, whose model has the requestCompression trait) is decoded after.
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		if !strings.EqualFold(enc, "gzip") {
			fail(http.StatusUnsupportedMediaType, "SerializationException", fmt.Sprintf("Content-Encoding %q is not supported; send gzip or no encoding.", enc))
			return
		}
		if body, err = gunzip(body, g.cfg.MaxBodyBytes); err != nil {
			fail(http.StatusBadRequest, "SerializationException", "The request body is not valid gzip: "+err.Error())
			return
		}
	}
	if svc.Protocol != RPCv2CBOR {
		if wp == RPCv2CBOR {
			fail(http.StatusNotFound, "UnknownOperationException", fmt.Sprintf("The service %s does not speak rpc-v2-cbor.", svc.SigningName))
			return
		}
		wp = svc.Protocol
	}

	var action string
	var form url.Values
	switch wp {
	case RPCv2CBOR:
		name, a, ok := rpcv2cbor.SplitPath(r.URL.Path)
		if !ok || name != svc.CBORService || svc.ops[a] == nil {
			fail(http.StatusNotFound, "UnknownOperationException", fmt.Sprintf("Unknown operation %q.", r.URL.Path))
			return
		}
		if r.Header.Get(rpcv2cbor.ProtocolHeader) != rpcv2cbor.HeaderValue {
			fail(http.StatusBadRequest, "SerializationException", "rpc-v2-cbor requests must carry the header smithy-protocol: rpc-v2-cbor.")
			return
		}
		action = a
	case Query:
		form, err = url.ParseQuery(string(body))
		if r.Method == http.MethodGet {
			form, err = url.ParseQuery(r.URL.RawQuery)
		}
		if err != nil {
			fail(http.StatusBadRequest, "MalformedQueryString", "The request's parameters are not a valid form encoding.")
			return
		}
		action = form.Get("Action")
		if action == "" {
			fail(http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action.")
			return
		}
		if v := form.Get("Version"); v != "" && v != svc.Version {
			fail(http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s.", action, v))
			return
		}
		if svc.ops[action] == nil {
			fail(http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s.", action, svc.Version))
			return
		}
	default:
		target := r.Header.Get("X-Amz-Target")
		a, ok := cutPrefix(target, svc.TargetPrefix)
		if !ok || svc.ops[a] == nil {
			fail(http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("Unknown operation %q.", target))
			return
		}
		action = a
	}
	op := svc.ops[action]
	x.action = metricAction(svc, action)
	if cred.ContainerInstanceARN != "" && (svc.SigningName != SigningName || !agentActions[action]) {
		fail(http.StatusBadRequest, "AccessDeniedException",
			fmt.Sprintf("The credential of container instance %s is not authorized to perform: %s:%s", cred.ContainerInstanceARN, svc.SigningName, action))
		return
	}
	if !g.throttle.allow(cred.AccountID) {
		fail(http.StatusBadRequest, svc.Throttling, "Rate exceeded")
		return
	}
	in := op.input.New().Interface()
	if wp == RPCv2CBOR {
		if err := rpcv2cbor.Unmarshal(body, in); err != nil {
			var ae *awsjson.Error
			errors.As(err, &ae)
			fail(http.StatusBadRequest, ae.Type, ae.Message)
			return
		}
	} else if wp == Query {
		if err := awsquery.Unmarshal(form, in); err != nil {
			var qe *awsquery.Error
			errors.As(err, &qe)
			fail(http.StatusBadRequest, qe.Code, qe.Message)
			return
		}
	} else if err := awsjson.Unmarshal(body, in); err != nil {
		var ae *awsjson.Error
		errors.As(err, &ae)
		fail(http.StatusBadRequest, ae.Type, ae.Message)
		return
	}
	wire, err := g.callWire(r.Context(), op, in, cred, x.id, endpointOf(r))
	if err != nil {
		status, typ, msg := g.mapError(err, svc, action, x.id)
		fail(status, typ, msg)
		return
	}
	defer wire.release()
	var data []byte
	if wp == Query {
		out, err := op.decode(wire)
		if err != nil {
			status, typ, msg := g.mapError(err, svc, action, x.id)
			fail(status, typ, msg)
			return
		}
		data = awsquery.Marshal(action, out, svc.XMLNamespace, x.id)
		w.Header().Set("Content-Type", "text/xml")
	} else {
		var release func()
		data, release, err = awsjson.MarshalWirePooled(op.output, wire.bytes())
		if err != nil {
			status, typ, msg := g.mapError(fmt.Errorf("encode %s response: %w", action, err), svc, action, x.id)
			fail(status, typ, msg)
			return
		}
		defer release() // after the Write below: the body is written from the pooled buffer
		switch {
		case wp == RPCv2CBOR:
			data, err = rpcv2cbor.FromJSON(op.output.Descriptor(), data)
			if err != nil {
				status, typ, msg := g.mapError(fmt.Errorf("encode %s response: %w", action, err), svc, action, x.id)
				fail(status, typ, msg)
				return
			}
			w.Header().Set(rpcv2cbor.ProtocolHeader, rpcv2cbor.HeaderValue)
			w.Header().Set("Content-Type", rpcv2cbor.ContentType)
		case svc.Protocol == RPCv2CBOR:
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		default:
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// readBody reads r's body, at most limit bytes (a longer one is an *http.MaxBytesError),
// into one buffer sized from Content-Length when the client sent it, instead of
// io.ReadAll's repeated growth.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead free bytes to see EOF
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

// gunzip decompresses a gzip body, at most limit bytes of it.
func gunzip(body []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("it decompresses to more than %d bytes", limit)
	}
	return out, nil
}

// metricAction is an action's name in logs and metrics: the bare name for ECS (as before
// other services were served), "{service}:{Action}" for the others.
func metricAction(svc *service, action string) string {
	if svc.SigningName == SigningName {
		return action
	}
	return svc.SigningName + ":" + action
}

// queryErrorCodes are the query protocol's names of the authentication errors the JSON
// services call otherwise (STS's documented common errors).
var queryErrorCodes = map[string]string{
	"UnrecognizedClientException":         "InvalidClientTokenId",
	"InvalidSignatureException":           "SignatureDoesNotMatch",
	"MissingAuthenticationTokenException": "MissingAuthenticationToken",
	"IncompleteSignatureException":        "IncompleteSignature",
	"ServerException":                     "InternalFailure",
	"ThrottlingException":                 "Throttling",
	"SerializationException":              "MalformedQueryString",
	"UnknownOperationException":           "InvalidAction",
}

func queryCode(typ string) string {
	if c, ok := queryErrorCodes[typ]; ok {
		return c
	}
	return typ
}

// writeXMLError writes a query-protocol error: authentication failures are 403 as AWS
// answers them there.
func writeXMLError(w http.ResponseWriter, status int, code, message, xmlns, requestID string) {
	switch code {
	case "InvalidClientTokenId", "SignatureDoesNotMatch", "MissingAuthenticationToken", "AccessDenied", "AccessDeniedException":
		status = http.StatusForbidden
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(awsquery.MarshalError(status, code, message, xmlns, requestID))
}

// writeCompatibleError writes an error of a service whose model is query-compatible
// (awsQueryCompatible, as CloudWatch's) in RPC v2 CBOR (wire RPCv2CBOR) or AWS JSON 1.0:
// __type is the model's error shape, and the header x-amzn-query-error carries the query
// error code and fault ("InvalidParameterValue;Sender"), which the SDKs report as the
// error's code, as they do for the query protocol.
func writeCompatibleError(w http.ResponseWriter, status int, svc *service, wire Protocol, typ, message string) {
	code := typ
	switch typ {
	case "UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationTokenException", "IncompleteSignatureException", "ThrottlingException":
		code = queryCode(typ)
	}
	shape := code
	if svc != nil {
		if s, ok := svc.ErrorShapes[code]; ok {
			shape = s
		}
	}
	fault := "Sender"
	if status >= 500 {
		fault = "Receiver"
	}
	h := w.Header()
	h.Set("X-Amzn-Query-Error", code+";"+fault)
	h.Set("X-Amzn-ErrorType", shape)
	if wire == RPCv2CBOR {
		h.Set(rpcv2cbor.ProtocolHeader, rpcv2cbor.HeaderValue)
		h.Set("Content-Type", rpcv2cbor.ContentType)
		w.WriteHeader(status)
		_, _ = w.Write(rpcv2cbor.AppendError(shape, message))
		return
	}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	_, _ = w.Write(awsjson.AppendError(nil, shape, message))
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

// call invokes the operation on the scheduler (callWire) and returns its decoded
// response, a message of op.output's type.
func (g *Gateway) call(ctx context.Context, op *operation, in proto.Message, cred sigv4.Credential, requestID, endpoint string) (proto.Message, error) {
	wire, err := g.callWire(ctx, op, in, cred, requestID, endpoint)
	if err != nil {
		return nil, err
	}
	defer wire.release()
	return op.decode(wire)
}

// decode returns the response in wire as a message of op.output's type.
func (op *operation) decode(wire *wireMessage) (proto.Message, error) {
	out := op.output.New().Interface()
	if err := proto.Unmarshal(wire.bytes(), out); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", op.name, err)
	}
	return out, nil
}

// callWire invokes the operation on the scheduler with the caller's identity headers and
// the gateway's endpoint as the caller reached it (identity.EndpointHeader), and returns the
// response undecoded; the caller releases it.
func (g *Gateway) callWire(ctx context.Context, op *operation, in proto.Message, cred sigv4.Credential, requestID, endpoint string) (*wireMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	req := connect.NewRequest(&message{in})
	setIdentity(req.Header(), cred, requestID)
	injectTrace(ctx, req.Header())
	req.Header().Set(identity.EndpointHeader, endpoint)
	res, err := op.client.CallUnary(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// setIdentity replaces any identity headers with the authenticated caller's.
func setIdentity(h http.Header, cred sigv4.Credential, requestID string) {
	h.Set(identity.AccountHeader, cred.AccountID)
	h.Set(identity.RegionHeader, cred.Region)
	if cred.ContainerInstanceARN != "" {
		h.Set(identity.ContainerInstanceHeader, cred.ContainerInstanceARN)
	} else {
		h.Del(identity.ContainerInstanceHeader)
	}
	h.Set(identity.RequestIDHeader, requestID)
	arn, id := principal(cred)
	h.Set(identity.PrincipalARNHeader, arn)
	h.Set(identity.PrincipalIDHeader, id)
}

// principal returns the ARN and unique id of the credential's principal: its own when the
// key names one, else the account's root user (arn:aws:iam::{account}:root, whose
// GetCallerIdentity UserId is the account id).
func principal(cred sigv4.Credential) (arn, id string) {
	if cred.PrincipalARN != "" {
		return cred.PrincipalARN, cred.PrincipalID
	}
	return "arn:aws:iam::" + cred.AccountID + ":root", cred.AccountID
}

// mapError turns a scheduler error into an AWS error: the ecsv1.Exception detail gives the
// type and message (HTTP 400, 500 for ServerException, 503 for
// ServiceUnavailableException); an unimplemented method is
// the service's Unsupported error naming the action; anything else is ServerException with a
// generic message (the cause is logged, never returned).
func (g *Gateway) mapError(err error, svc *service, action, requestID string) (int, string, string) {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			v, derr := d.Value()
			if derr != nil {
				continue
			}
			if ex, ok := v.(*ecsv1.Exception); ok && ex.GetType() != "" {
				status := http.StatusBadRequest
				switch ex.GetType() {
				case "ServerException", "InternalServiceError", "InternalServerError", "InternalFailure":
					status = http.StatusInternalServerError
				case "ServiceUnavailableException":
					status = http.StatusServiceUnavailable // SDKs retry it
				}
				return status, ex.GetType(), ex.GetMessage()
			}
		}
		if ce.Code() == connect.CodeUnimplemented {
			return http.StatusBadRequest, svc.Unsupported,
				fmt.Sprintf("Berth does not support the action %s:%s yet.", svc.SigningName, action)
		}
	}
	g.log.Error("scheduler call failed", "request_id", requestID, "action", action, "error", err)
	return http.StatusInternalServerError, "ServerException", internalMessage
}
