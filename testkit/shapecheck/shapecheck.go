// Package shapecheck checks AWS JSON 1.1 responses against the ECS service model
// (api/ecs/ecs-2014-11-13.json, botocore's model): every structure in a response must hold
// each member its shape lists as "required", and no member the shape does not define; an
// error answer's "__type" must be one of the errors the model lists for the operation or
// one of CommonErrors (see CheckError). It
// reads the model itself rather than Berth's generated descriptors, so a generator mistake
// cannot hide a missing member. Tests put a Recorder in the path of every response they
// get: Transport for AWS SDK for Go clients, Handler in front of an in-process gateway, or
// Proxy in front of a gateway process for the AWS CLI and boto3.
package shapecheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// ModelPath is the ECS model's path relative to the repository root.
const ModelPath = "api/ecs/ecs-2014-11-13.json"

// Model is the part of a botocore service model the checker needs.
type Model struct {
	// TargetPrefix is the X-Amz-Target prefix of the service's actions, with its dot.
	TargetPrefix string
	operations   map[string]string          // operation name → output shape name
	errors       map[string]map[string]bool // operation name → its model error shapes
	shapes       map[string]*shape
}

type shape struct {
	Type     string            `json:"type"`
	Members  map[string]member `json:"members"`
	Required []string          `json:"required"`
	Member   *member           `json:"member"`
	Value    *member           `json:"value"`
}

type member struct {
	Shape string `json:"shape"`
}

// Load reads a botocore JSON service model from path.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Metadata struct {
			TargetPrefix string `json:"targetPrefix"`
		} `json:"metadata"`
		Operations map[string]struct {
			Output *member  `json:"output"`
			Errors []member `json:"errors"`
		} `json:"operations"`
		Shapes map[string]*shape `json:"shapes"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("shapecheck: %s: %w", path, err)
	}
	m := &Model{TargetPrefix: raw.Metadata.TargetPrefix + ".", operations: map[string]string{},
		errors: map[string]map[string]bool{}, shapes: raw.Shapes}
	for name, op := range raw.Operations {
		if op.Output != nil {
			m.operations[name] = op.Output.Shape
		}
		errs := map[string]bool{}
		for _, e := range op.Errors {
			errs[e.Shape] = true
		}
		m.errors[name] = errs
	}
	return m, nil
}

// LoadFromRepo finds ModelPath in the working directory or the nearest parent that has
// it (tests run in their package's directory) and loads it.
func LoadFromRepo() (*Model, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		p := filepath.Join(dir, ModelPath)
		if _, err := os.Stat(p); err == nil {
			return Load(p)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, errors.New("shapecheck: " + ModelPath + " not found in any parent directory")
		}
		dir = parent
	}
}

// Check decodes body, the response of operation (for example "DescribeServices"), and
// returns one line per violation: a required member missing or null, a member the shape
// does not define, or a JSON value of the wrong kind. Each line names the path, e.g.
// "DescribeServices: services[0].deploymentConfiguration.alarms: missing required member
// alarmNames (DeploymentAlarms)". An operation the model lacks is itself a violation.
func (m *Model) Check(operation string, body []byte) []string {
	out, ok := m.operations[operation]
	if !ok {
		return []string{fmt.Sprintf("%s: no such operation with an output in the model", operation)}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []string{fmt.Sprintf("%s: response is not JSON: %v", operation, err)}
	}
	w := walker{m: m, op: operation}
	w.value(out, v, "")
	return w.violations
}

// CommonErrors are the error types any operation may answer besides the ones its model
// lists, limited to those Berth's gateway emits, each with the AWS source that documents
// it. AWS's "Common Errors" page (errors "common to API actions of all AWS services",
// e.g. docs.aws.amazon.com/awsconsolehelpdocs/latest/gsg/common-errors.html) lists
// AccessDeniedException (an agent credential calling a non-agent action),
// IncompleteSignature, MissingAuthenticationToken, RequestEntityTooLargeException (HTTP
// 413), ThrottlingException, UnrecognizedClientException and UnknownOperationException;
// the AWS JSON protocol spells the two signature ones with the "Exception" suffix
// (IncompleteSignatureException, MissingAuthenticationTokenException), as real JSON
// services answer them. InvalidSignatureException (the signature does not match) and
// SerializationException (a body that is not the operation's JSON input) are the AWS
// JSON protocol's own answers to requests that never reach an operation. ValidationError
// / ValidationException are on the page but Berth answers invalid input with the model's
// InvalidParameterException, so they are deliberately not accepted.
var CommonErrors = map[string]bool{
	"AccessDeniedException":               true,
	"IncompleteSignatureException":        true,
	"InvalidSignatureException":           true,
	"MissingAuthenticationTokenException": true,
	"RequestEntityTooLargeException":      true,
	"SerializationException":              true,
	"ThrottlingException":                 true,
	"UnknownOperationException":           true,
	"UnrecognizedClientException":         true,
}

// unsupportedAction is the start of the message Berth answers, with
// UnsupportedFeatureException, for an ECS action it does not implement at all (see
// control.notYet and the gateway's mapError): a deliberate Berth answer for the whole
// action, accepted for any operation. An UnsupportedFeatureException refusing one field
// of a served action must still be in the operation's model errors.
const unsupportedAction = "Berth does not support "

// CheckError decodes body, an error answer to operation, and returns one line per
// violation: the body is not {"__type", "message"} JSON, or its __type (the part after a
// '#', as the SDKs read it) is neither one of the operation's errors in the model nor one
// of CommonErrors. An operation the model lacks may only answer a common error.
func (m *Model) CheckError(operation string, body []byte) []string {
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return []string{fmt.Sprintf("%s: error answer is not JSON: %v", operation, err)}
	}
	typ := e.Type
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	switch {
	case typ == "":
		return []string{fmt.Sprintf("%s: error answer without __type: %s", operation, body)}
	case CommonErrors[typ], m.errors[operation][typ]:
		return nil
	case typ == "UnsupportedFeatureException" && strings.HasPrefix(e.Message, unsupportedAction):
		return nil
	}
	return []string{fmt.Sprintf("%s: error %s is not one of the operation's model errors %v (message %q)",
		operation, typ, m.Errors(operation), e.Message)}
}

// Errors returns the error shapes the model lists for operation, sorted (nil when the
// operation is unknown or lists none).
func (m *Model) Errors(operation string) []string {
	var out []string
	for e := range m.errors[operation] {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

type walker struct {
	m          *Model
	op         string
	violations []string
}

func (w *walker) fail(path, format string, args ...any) {
	if path == "" {
		path = "(response)"
	}
	w.violations = append(w.violations, w.op+": "+path+": "+fmt.Sprintf(format, args...))
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (w *walker) value(shapeName string, v any, path string) {
	s := w.m.shapes[shapeName]
	if s == nil {
		w.fail(path, "shape %s is not in the model", shapeName)
		return
	}
	if v == nil {
		w.fail(path, "null %s", s.Type)
		return
	}
	switch s.Type {
	case "structure":
		obj, ok := v.(map[string]any)
		if !ok {
			w.fail(path, "want an object (%s), got %T", shapeName, v)
			return
		}
		for _, r := range s.Required {
			if val, ok := obj[r]; !ok || val == nil {
				w.fail(path, "missing required member %s (%s)", r, shapeName)
			}
		}
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			mem, ok := s.Members[k]
			if !ok {
				w.fail(join(path, k), "member not defined by %s", shapeName)
				continue
			}
			w.value(mem.Shape, obj[k], join(path, k))
		}
	case "list":
		list, ok := v.([]any)
		if !ok {
			w.fail(path, "want a list (%s), got %T", shapeName, v)
			return
		}
		for i, e := range list {
			w.value(s.Member.Shape, e, fmt.Sprintf("%s[%d]", path, i))
		}
	case "map":
		obj, ok := v.(map[string]any)
		if !ok {
			w.fail(path, "want a map (%s), got %T", shapeName, v)
			return
		}
		for k, e := range obj {
			w.value(s.Value.Shape, e, fmt.Sprintf("%s[%q]", path, k))
		}
	case "string":
		if _, ok := v.(string); !ok {
			w.fail(path, "want a string, got %T", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			w.fail(path, "want a boolean, got %T", v)
		}
	case "integer", "long", "double", "float", "timestamp":
		if _, ok := v.(json.Number); !ok {
			w.fail(path, "want a number (%s), got %T", s.Type, v)
		}
	}
}

// Recorder checks every ECS response passing through it and keeps the violations; safe
// for concurrent use.
type Recorder struct {
	model      *Model
	mu         sync.Mutex
	violations []string
	checked    map[string]int
	errs       map[string]map[string]int
}

// NewRecorder returns a Recorder checking against model.
func NewRecorder(model *Model) *Recorder {
	return &Recorder{model: model, checked: map[string]int{}, errs: map[string]map[string]int{}}
}

// Record checks one response: target is the request's X-Amz-Target, status the HTTP
// status. A 200 answer is checked with Check, any other with CheckError; requests to
// another service (no model prefix) are ignored.
func (r *Recorder) Record(target string, status int, body []byte) {
	op, ok := strings.CutPrefix(target, r.model.TargetPrefix)
	if !ok {
		return
	}
	if status != http.StatusOK {
		v := r.model.CheckError(op, body)
		var e struct {
			Type string `json:"__type"`
		}
		_ = json.Unmarshal(body, &e)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.errs[op] == nil {
			r.errs[op] = map[string]int{}
		}
		r.errs[op][e.Type]++
		r.violations = append(r.violations, v...)
		return
	}
	v := r.model.Check(op, body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked[op]++
	r.violations = append(r.violations, v...)
}

// ErrorsSeen returns, per operation, how many error answers of each __type were
// recorded.
func (r *Recorder) ErrorsSeen() map[string]map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]map[string]int, len(r.errs))
	for op, m := range r.errs {
		c := make(map[string]int, len(m))
		for k, v := range m {
			c[k] = v
		}
		out[op] = c
	}
	return out
}

// Violations returns every violation recorded so far.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

// Checked returns how many successful responses of each operation were checked.
func (r *Recorder) Checked() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.checked))
	for k, v := range r.checked {
		out[k] = v
	}
	return out
}

// Err returns nil when no violation was recorded, else an error listing them (at most 20,
// then how many more).
func (r *Recorder) Err() error {
	v := r.Violations()
	if len(v) == 0 {
		return nil
	}
	shown := v
	if len(shown) > 20 {
		shown = shown[:20]
	}
	msg := fmt.Sprintf("%d response(s) break the ECS model:\n  %s", len(v), strings.Join(shown, "\n  "))
	if len(v) > len(shown) {
		msg += fmt.Sprintf("\n  … and %d more", len(v)-len(shown))
	}
	return errors.New(msg)
}

// Transport returns an http.RoundTripper that sends through next (http.DefaultTransport
// when nil) and records every response it receives; the body is handed on unchanged.
func (r *Recorder) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper{r: r, next: next}
}

type roundTripper struct {
	r    *Recorder
	next http.RoundTripper
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	t.r.Record(req.Header.Get("X-Amz-Target"), res.StatusCode, body)
	return res, nil
}

// Handler returns next with every ECS response it writes recorded. Requests without an
// X-Amz-Target (the agent's streamed Connect session, dev routes) pass through untouched,
// so a stream is never held in the capture buffer.
func (r *Recorder) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-Amz-Target") == "" {
			next.ServeHTTP(w, req)
			return
		}
		// The request is read whole first: forwarded as it streams in (Proxy), the
		// proxy's transport could still be waiting for the body's EOF when the answer
		// came back, and net/http's server then closes an unfinished request body as
		// the proxy starts writing the answer; the transport's write failed, it closed
		// the connection under the answer's body, and the client got a cut answer
		// ("unexpected EOF", seen once in TestResponseShapesTour).
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		cw := &capture{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(cw, req)
		r.Record(req.Header.Get("X-Amz-Target"), cw.status, cw.body.Bytes())
	})
}

// Proxy returns a reverse proxy to target (for example a `berth dev` gateway) that records
// every response; point the AWS CLI or boto3 at it.
func (r *Recorder) Proxy(target *url.URL) http.Handler {
	return r.Handler(httputil.NewSingleHostReverseProxy(target))
}

type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(status int) {
	c.status = status
	c.ResponseWriter.WriteHeader(status)
}

func (c *capture) Write(p []byte) (int, error) {
	c.body.Write(p)
	return c.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush, deadlines).
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }
