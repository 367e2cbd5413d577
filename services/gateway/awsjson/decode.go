package awsjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Error is an AWS JSON error: Type is the error code written as "__type" (for example
// "SerializationException") and Message the human-readable "message".
type Error struct {
	// Type is the AWS error code.
	Type string
	// Message is the message returned to the client.
	Message string
}

// Error returns "Type: Message".
func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Error codes returned by Unmarshal.
const (
	// SerializationException: the body is not JSON or a member has the wrong JSON type.
	SerializationException = "SerializationException"
	// InvalidParameterException: a required member is missing or a value is not allowed.
	InvalidParameterException = "InvalidParameterException"
)

func serializationError(format string, args ...any) *Error {
	return &Error{Type: SerializationException, Message: fmt.Sprintf(format, args...)}
}

// Unmarshal decodes an AWS JSON 1.1 request body into m, which must be a message of the
// berth.ecs.v1 package (or any message whose fields' JSON names are the wire names). An
// empty body decodes as {}. A member not in the message is refused (SerializationException
// naming its path), so no field is silently ignored; null members are absent.
//
// The returned error is always an *Error: SerializationException when the body is not valid
// JSON, a member has the wrong JSON type or a structure has a member it does not define (the
// message names the member), and
// InvalidParameterException listing every missing required member
// (berth.ecs.v1.required) and every string outside its enum (berth.ecs.v1.enum_values), in
// AWS's "N validation errors detected: ..." form.
func Unmarshal(data []byte, m proto.Message) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		data = []byte("{}")
	}
	if !json.Valid(data) {
		return serializationError("The request body is not valid JSON.")
	}
	d := &decoder{}
	if err := d.message(data, m.ProtoReflect(), ""); err != nil {
		return err
	}
	if len(d.violations) > 0 {
		noun := "error"
		if len(d.violations) > 1 {
			noun = "errors"
		}
		return &Error{
			Type:    InvalidParameterException,
			Message: fmt.Sprintf("%d validation %s detected: %s", len(d.violations), noun, strings.Join(d.violations, "; ")),
		}
	}
	return nil
}

type decoder struct {
	violations []string
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// join returns the AWS path of a member: "containerDefinitions.1.member.name".
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) message(raw json.RawMessage, msg protoreflect.Message, path string) error {
	if raw[0] != '{' {
		if path == "" {
			return serializationError("%s can not be converted to a structure: the request body must be a JSON object.", tokenName(raw))
		}
		return mismatch(raw, "a structure", path)
	}
	obj, err := splitObject(raw)
	if err != nil {
		return serializationError("The request body is not valid JSON.")
	}
	fields := describe(msg.Descriptor())
	known := 0
	for _, f := range fields {
		if _, ok := obj[f.name]; ok {
			known++
		}
	}
	if known < len(obj) {
		return unknownMember(obj, fields, path)
	}
	for _, f := range fields {
		fd, name := f.fd, f.name
		v, ok := obj[name]
		if !ok || isNull(v) {
			if f.required {
				d.violations = append(d.violations, fmt.Sprintf("Value null at '%s' failed to satisfy constraint: Member must not be null", join(path, name)))
			}
			continue
		}
		if err := d.field(v, msg, fd, join(path, name)); err != nil {
			return err
		}
	}
	return nil
}

// unknownMember is the SerializationException for a JSON object (at path) that has a
// member its structure does not: Berth ignores no field silently, and a misspelt member
// ("desiredcount", "healthCheckGracePeriod") would otherwise run the request as if it
// were absent. The first unknown member in name order is named by its AWS path, as the
// type errors of this decoder name theirs. AWS does not document what its awsJson1_1
// servers do with unknown members (the Smithy protocol specification is silent), so the
// error type is the protocol's SerializationException for a body that does not match
// the operation's input shape.
func unknownMember(obj map[string]json.RawMessage, fields []*field, path string) *Error {
	names := make(map[string]bool, len(fields))
	for _, f := range fields {
		names[f.name] = true
	}
	var unknown []string
	for k := range obj {
		if !names[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	return serializationError("Unknown member '%s': the structure has no member of that name.", join(path, unknown[0]))
}

func (d *decoder) field(raw json.RawMessage, msg protoreflect.Message, fd protoreflect.FieldDescriptor, path string) error {
	switch {
	case fd.IsMap():
		if raw[0] != '{' {
			return mismatch(raw, "a map", path)
		}
		obj, err := splitObject(raw)
		if err != nil {
			return serializationError("The request body is not valid JSON.")
		}
		m := msg.Mutable(fd).Map()
		for k, v := range obj {
			if isNull(v) {
				continue
			}
			if fd.MapValue().Message() != nil {
				val := m.NewValue()
				if err := d.value(v, val.Message(), join(path, k)); err != nil {
					return err
				}
				m.Set(protoreflect.ValueOfString(k).MapKey(), val)
				continue
			}
			val, err := d.scalar(v, fd.MapValue(), join(path, k))
			if err != nil {
				return err
			}
			m.Set(protoreflect.ValueOfString(k).MapKey(), val)
		}
	case fd.IsList():
		if raw[0] != '[' {
			return mismatch(raw, "a list", path)
		}
		elems := splitArray(raw)
		list := msg.Mutable(fd).List()
		// A list of unconstrained strings (task ARNs, subnets, …) needs no element path
		// unless an element is not a plain string: it is not formatted per element.
		plainStrings := fd.Kind() == protoreflect.StringKind && len(options(fd).enum) == 0
		for i, e := range elems {
			if isNull(e) {
				continue
			}
			if plainStrings {
				if s, ok := plainString(e); ok {
					list.Append(protoreflect.ValueOfString(s))
					continue
				}
			}
			epath := fmt.Sprintf("%s.%d.member", path, i+1)
			if fd.Message() != nil {
				el := list.NewElement()
				if err := d.value(e, el.Message(), epath); err != nil {
					return err
				}
				list.Append(el)
				continue
			}
			val, err := d.scalar(e, fd, epath)
			if err != nil {
				return err
			}
			list.Append(val)
		}
	case fd.Message() != nil:
		return d.value(raw, msg.Mutable(fd).Message(), path)
	default:
		val, err := d.scalar(raw, fd, path)
		if err != nil {
			return err
		}
		msg.Set(fd, val)
	}
	return nil
}

// value decodes a structure, or the bare list or map a wrapper message stands for
// (berth.ecs.v1.wrapper).
func (d *decoder) value(raw json.RawMessage, msg protoreflect.Message, path string) error {
	if isWrapper(msg.Descriptor()) {
		return d.field(raw, msg, msg.Descriptor().Fields().Get(0), path)
	}
	return d.message(raw, msg, path)
}

// isWrapper reports whether md is a wrapper message: the list or map a model nests in
// another collection (see tools/awsgen), written on the wire as the bare collection.
func isWrapper(md protoreflect.MessageDescriptor) bool {
	if w, ok := wrapperCache.Load(md.FullName()); ok {
		return w.(bool)
	}
	w := md.Fields().Len() == 1 && proto.GetExtension(md.Options(), ecsv1.E_Wrapper).(bool)
	wrapperCache.Store(md.FullName(), w)
	return w
}

var wrapperCache sync.Map

// scalar decodes one scalar value of fd's kind; for a list field it decodes one element.
func (d *decoder) scalar(raw json.RawMessage, fd protoreflect.FieldDescriptor, path string) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if raw[0] != '"' {
			return protoreflect.Value{}, mismatch(raw, "a String", path)
		}
		s, ok := plainString(raw)
		if !ok {
			if err := json.Unmarshal(raw, &s); err != nil {
				return protoreflect.Value{}, serializationError("The request body is not valid JSON.")
			}
		}
		d.checkEnum(fd, s, path)
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BoolKind:
		switch string(raw) {
		case "true":
			return protoreflect.ValueOfBool(true), nil
		case "false":
			return protoreflect.ValueOfBool(false), nil
		}
		return protoreflect.Value{}, mismatch(raw, "a Boolean", path)
	case protoreflect.Int32Kind:
		n, err := integer(raw, math.MinInt32, math.MaxInt32)
		if err != nil {
			return protoreflect.Value{}, mismatchOr(raw, "an Integer", path, err)
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind:
		n, err := integer(raw, math.MinInt64, math.MaxInt64)
		if err != nil {
			return protoreflect.Value{}, mismatchOr(raw, "a Long", path, err)
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.DoubleKind:
		what := "a Double"
		if options(fd).timestamp {
			what = "a Timestamp"
		}
		if !isNumber(raw) {
			return protoreflect.Value{}, mismatch(raw, what, path)
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) {
			return protoreflect.Value{}, serializationError("Value %s at '%s' is out of range for %s.", raw, path, what)
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.BytesKind:
		// A blob: base64 in a JSON string, as the AWS JSON protocols carry it.
		if raw[0] != '"' {
			return protoreflect.Value{}, mismatch(raw, "a Blob", path)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return protoreflect.Value{}, serializationError("The request body is not valid JSON.")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return protoreflect.Value{}, serializationError("Value at '%s' is not valid base64 for a Blob.", path)
		}
		return protoreflect.ValueOfBytes(b), nil
	}
	// The models have no other kinds; refuse rather than guess.
	return protoreflect.Value{}, serializationError("Member '%s' has a type this endpoint cannot decode.", path)
}

// plainString returns the value of raw, a JSON string token, when it holds no escape,
// no control character and only valid UTF-8, so that its bytes between the quotes are
// the value json.Unmarshal would give; ok is false otherwise (the caller then unmarshals).
func plainString(raw json.RawMessage) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	ascii := true
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

func (d *decoder) checkEnum(fd protoreflect.FieldDescriptor, s, path string) {
	allowed := options(fd).enum
	if len(allowed) == 0 {
		return
	}
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	d.violations = append(d.violations, fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: [%s]", s, path, strings.Join(allowed, ", ")))
}

func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

var errRange = fmt.Errorf("out of range")

// integer parses a JSON number that must be integral and within [lo, hi]; 5.0 and 1e3 are
// accepted, 5.5 is not.
func integer(raw json.RawMessage, lo, hi int64) (int64, error) {
	if !isNumber(raw) {
		return 0, fmt.Errorf("not a number")
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		if n < lo || n > hi {
			return 0, errRange
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f < float64(lo) || f >= -float64(lo) || f > float64(hi) {
		return 0, errRange
	}
	return int64(f), nil
}

func mismatchOr(raw json.RawMessage, what, path string, err error) *Error {
	if err == errRange {
		return serializationError("Value %s at '%s' can not be converted to %s: it is not an integer in range.", raw, path, what)
	}
	return mismatch(raw, what, path)
}

// tokenName names the JSON token at the start of raw the way AWS's deserializer does.
func tokenName(raw json.RawMessage) string {
	switch {
	case len(raw) == 0:
		return "EMPTY"
	case raw[0] == '{':
		return "START_OBJECT"
	case raw[0] == '[':
		return "START_ARRAY"
	case raw[0] == '"':
		return "STRING_VALUE"
	case raw[0] == 't', raw[0] == 'f':
		return "BOOLEAN_VALUE"
	case raw[0] == 'n':
		return "NULL_VALUE"
	}
	return "NUMBER_VALUE"
}

func mismatch(raw json.RawMessage, what, path string) *Error {
	return serializationError("%s can not be converted to %s (at '%s').", tokenName(raw), what, path)
}

// field is what the decoder needs of a field, read once from its descriptor and options.
type field struct {
	fd        protoreflect.FieldDescriptor
	name      string
	required  bool
	timestamp bool
	enum      []string
}

// fieldCache maps a FieldDescriptor to its *field, and a message's full name to its
// []*field; reading extensions from options on every request would dominate decoding.
var fieldCache sync.Map

func options(fd protoreflect.FieldDescriptor) *field {
	if f, ok := fieldCache.Load(fd); ok {
		return f.(*field)
	}
	f := &field{
		fd:        fd,
		name:      fd.JSONName(),
		required:  proto.GetExtension(fd.Options(), ecsv1.E_Required).(bool),
		timestamp: proto.GetExtension(fd.Options(), ecsv1.E_Timestamp).(bool),
		enum:      proto.GetExtension(fd.Options(), ecsv1.E_EnumValues).([]string),
	}
	actual, _ := fieldCache.LoadOrStore(fd, f)
	return actual.(*field)
}

func describe(md protoreflect.MessageDescriptor) []*field {
	if fs, ok := fieldCache.Load(md.FullName()); ok {
		return fs.([]*field)
	}
	fields := md.Fields()
	fs := make([]*field, fields.Len())
	for i := range fs {
		fs[i] = options(fields.Get(i))
	}
	actual, _ := fieldCache.LoadOrStore(md.FullName(), fs)
	return actual.([]*field)
}
