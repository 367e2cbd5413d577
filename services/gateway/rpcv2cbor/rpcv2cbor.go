// Package rpcv2cbor is the Smithy RPC v2 CBOR protocol (smithy.protocols#rpcv2Cbor) of
// the gateway: `POST /service/{ServiceName}/operation/{Operation}` with the header
// `smithy-protocol: rpc-v2-cbor`, a CBOR map body (RFC 8949) in and out, errors as a CBOR
// map with `__type` and `message`. AWS SDKs send it to the services whose model lists it
// first (CloudWatch: botocore 1.43, the AWS CLI v1.45, recent SDKs).
//
// The codec converts between CBOR and the gateway's AWS JSON codec (package awsjson), whose
// field rules (json names, unboxed scalars, empty lists) it thereby shares: a request's
// CBOR is turned into the JSON document awsjson decodes, and a response's JSON (written by
// awsjson from the scheduler's protobuf) into CBOR. The message descriptor says which
// members are timestamps (CBOR tag 1, epoch seconds), blobs (byte strings) and integers.
package rpcv2cbor

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"github.com/fxamacker/cbor/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ContentType is the media type of requests and responses.
const ContentType = "application/cbor"

// ProtocolHeader is the header naming the protocol on requests and responses; its value
// is HeaderValue.
const (
	ProtocolHeader = "Smithy-Protocol"
	HeaderValue    = "rpc-v2-cbor"
)

// PathPrefix starts every request path: /service/{ServiceName}/operation/{Operation}.
const PathPrefix = "/service/"

var mapType = reflect.TypeOf(map[string]any(nil))

var (
	decMode cbor.DecMode
	encMode cbor.EncMode
)

func init() {
	var err error
	decMode, err = cbor.DecOptions{
		DefaultMapType:  reflect.TypeOf(map[string]any(nil)),
		IntDec:          cbor.IntDecConvertSigned,
		MaxNestedLevels: 64,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	// Smithy asks for the shortest float that keeps the value; Core Deterministic
	// Encoding also sorts map keys, which makes responses reproducible.
	encMode, err = cbor.EncOptions{ShortestFloat: cbor.ShortestFloat16, Sort: cbor.SortCoreDeterministic}.EncMode()
	if err != nil {
		panic(err)
	}
}

// SplitPath returns the service and operation names of a request path
// /service/{ServiceName}/operation/{Operation}; ok is false for any other path.
func SplitPath(path string) (service, operation string, ok bool) {
	rest, found := strings.CutPrefix(path, PathPrefix)
	if !found {
		return "", "", false
	}
	service, operation, found = strings.Cut(rest, "/operation/")
	if !found || service == "" || operation == "" || strings.Contains(operation, "/") {
		return "", "", false
	}
	return service, operation, true
}

// Unmarshal decodes a CBOR request body into m. An empty body is an empty input. Errors
// are *awsjson.Error of type SerializationException.
func Unmarshal(data []byte, m proto.Message) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return awsjson.Unmarshal([]byte("{}"), m)
	}
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return serialization("The request body is not valid CBOR: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return serialization("The request body must be a CBOR map.")
	}
	j, err := toJSON(v, m.ProtoReflect().Descriptor(), "")
	if err != nil {
		return err
	}
	doc, err := json.Marshal(j)
	if err != nil {
		return serialization("The request body could not be read: %v", err)
	}
	return awsjson.Unmarshal(doc, m)
}

func serialization(format string, args ...any) error {
	return &awsjson.Error{Type: "SerializationException", Message: fmt.Sprintf(format, args...)}
}

// toJSON turns a decoded CBOR value of message md into the value encoding/json writes as
// the AWS JSON document awsjson reads: tag-1 times become epoch seconds, byte strings
// base64. Non-finite floats have no JSON form and are refused (AWS refuses them as metric
// values too).
func toJSON(v any, md protoreflect.MessageDescriptor, path string) (any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return v, nil // awsjson reports the type mismatch by field name
	}
	fields := md.Fields()
	out := make(map[string]any, len(obj))
	for k, val := range obj {
		if val == nil {
			continue // Smithy: a null member is an absent one
		}
		fd := fields.ByJSONName(k)
		if fd == nil {
			out[k] = val // awsjson ignores unknown members as the JSON protocol does
			continue
		}
		conv, err := fieldToJSON(val, fd, join(path, k))
		if err != nil {
			return nil, err
		}
		out[k] = conv
	}
	return out, nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func fieldToJSON(v any, fd protoreflect.FieldDescriptor, path string) (any, error) {
	switch {
	case fd.IsMap():
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			if e == nil {
				continue
			}
			c, err := scalarToJSON(e, fd.MapValue(), path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case fd.IsList():
		l, ok := v.([]any)
		if !ok {
			return v, nil
		}
		out := make([]any, 0, len(l))
		for i, e := range l {
			c, err := scalarToJSON(e, fd, fmt.Sprintf("%s.%d", path, i+1))
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return scalarToJSON(v, fd, path)
}

// scalarToJSON converts one value of fd's element type.
func scalarToJSON(v any, fd protoreflect.FieldDescriptor, path string) (any, error) {
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		return toJSON(v, fd.Message(), path)
	}
	switch x := v.(type) {
	case time.Time:
		return json.Number(formatSeconds(x)), nil
	case []byte:
		return base64.StdEncoding.EncodeToString(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, &awsjson.Error{Type: "InvalidParameterValue", Message: fmt.Sprintf("The value %v for parameter %s is invalid.", x, path)}
		}
	case float32:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &awsjson.Error{Type: "InvalidParameterValue", Message: fmt.Sprintf("The value %v for parameter %s is invalid.", x, path)}
		}
		return f, nil
	case cbor.Tag:
		return nil, serialization("Unexpected CBOR tag %d at %s.", x.Number, path)
	}
	return v, nil
}

// formatSeconds writes t as epoch seconds with up to nanosecond digits.
func formatSeconds(t time.Time) string {
	sec := t.Unix()
	ns := t.Nanosecond()
	if ns == 0 {
		return fmt.Sprintf("%d", sec)
	}
	if sec < 0 && ns > 0 {
		return fmt.Sprintf("%.9f", float64(t.UnixNano())/1e9)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%09d", sec, ns), "0")
}

// FromJSON converts a response document written by awsjson for message md into CBOR.
func FromJSON(md protoreflect.MessageDescriptor, doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("rpcv2cbor: response JSON: %w", err)
	}
	c, err := fromJSON(v, md)
	if err != nil {
		return nil, err
	}
	return encMode.Marshal(c)
}

func fromJSON(v any, md protoreflect.MessageDescriptor) (any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("rpcv2cbor: %s is not a JSON object", md.FullName())
	}
	fields := md.Fields()
	out := make(map[string]any, len(obj))
	for k, val := range obj {
		fd := fields.ByJSONName(k)
		if fd == nil {
			return nil, fmt.Errorf("rpcv2cbor: %s has no member %s", md.FullName(), k)
		}
		c, err := fieldFromJSON(val, fd)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

func fieldFromJSON(v any, fd protoreflect.FieldDescriptor) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch {
	case fd.IsMap():
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rpcv2cbor: %s is not a map", fd.FullName())
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			c, err := scalarFromJSON(e, fd.MapValue())
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case fd.IsList():
		l, ok := v.([]any)
		if !ok {
			if wrapperField(fd) {
				return scalarFromJSON(v, fd)
			}
			return nil, fmt.Errorf("rpcv2cbor: %s is not a list", fd.FullName())
		}
		out := make([]any, 0, len(l))
		for _, e := range l {
			c, err := scalarFromJSON(e, fd)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return scalarFromJSON(v, fd)
}

func wrapperField(fd protoreflect.FieldDescriptor) bool {
	md := fd.Message()
	return md != nil && proto.GetExtension(md.Options(), ecsv1.E_Wrapper).(bool)
}

func scalarFromJSON(v any, fd protoreflect.FieldDescriptor) (any, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if proto.GetExtension(fd.Message().Options(), ecsv1.E_Wrapper).(bool) {
			// A wrapper is written as its bare collection: convert it as its one field.
			return fieldFromJSON(v, fd.Message().Fields().Get(0))
		}
		return fromJSON(v, fd.Message())
	case protoreflect.BytesKind:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("rpcv2cbor: blob %s is not a string", fd.FullName())
		}
		return base64.StdEncoding.DecodeString(s)
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		n, ok := v.(json.Number)
		if !ok {
			return v, nil // "NaN"/"Infinity" strings are not written by awsjson
		}
		f, err := n.Float64()
		if err != nil {
			return nil, err
		}
		if proto.GetExtension(fd.Options(), ecsv1.E_Timestamp).(bool) {
			return cbor.Tag{Number: 1, Content: epoch(f)}, nil
		}
		return f, nil
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		n, ok := v.(json.Number)
		if !ok {
			return v, nil
		}
		if i, err := n.Int64(); err == nil {
			return i, nil
		}
		return n.Float64()
	}
	return v, nil
}

// epoch is a timestamp's tag-1 content: an integer when whole (the shortest encoding),
// else a float.
func epoch(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// AppendError returns the CBOR error body {"__type": typ, "message": message}.
func AppendError(typ, message string) []byte {
	b, err := encMode.Marshal(map[string]string{"__type": typ, "message": message})
	if err != nil {
		panic(err) // two strings always encode
	}
	return b
}
