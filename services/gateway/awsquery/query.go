package awsquery

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Error is a request the protocol refuses: Code is the AWS error code (ValidationError for
// a malformed or unknown parameter, as STS and ELB answer), Message says which parameter.
type Error struct {
	Code    string
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ValidationError is the query services' code for a request that does not fit the model.
const ValidationError = "ValidationError"

// protocolParams are the parameters every query request carries besides its members.
var protocolParams = map[string]bool{"Action": true, "Version": true}

// Unmarshal decodes the form parameters of a query request into m, the operation's request
// message (field JSON names are the model's member names). A parameter that names no
// member is refused (no field is silently ignored), as is a value of the wrong type; every
// required member (berth.ecs.v1.required) missing is listed in AWS's "N validation errors
// detected: …" form. The error is always an *Error.
func Unmarshal(form url.Values, m proto.Message) error {
	d := &decoder{used: map[string]bool{}}
	if err := d.message(form, m.ProtoReflect(), ""); err != nil {
		return err
	}
	var unknown []string
	for k := range form {
		if !protocolParams[k] && !d.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &Error{Code: ValidationError, Message: fmt.Sprintf("Unknown parameter '%s': the operation has no member of that name.", unknown[0])}
	}
	if len(d.violations) > 0 {
		noun := "error"
		if len(d.violations) > 1 {
			noun = "errors"
		}
		return &Error{Code: ValidationError, Message: fmt.Sprintf("%d validation %s detected: %s", len(d.violations), noun, strings.Join(d.violations, "; "))}
	}
	return nil
}

type decoder struct {
	used       map[string]bool
	violations []string
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// hasPrefix reports whether any parameter is prefix or starts with prefix + ".".
func hasPrefix(form url.Values, prefix string) bool {
	for k := range form {
		if k == prefix || strings.HasPrefix(k, prefix+".") {
			return true
		}
	}
	return false
}

func (d *decoder) message(form url.Values, msg protoreflect.Message, prefix string) error {
	fields := msg.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := join(prefix, fd.JSONName())
		if !hasPrefix(form, name) {
			if proto.GetExtension(fd.Options(), ecsv1.E_Required).(bool) {
				d.violations = append(d.violations, fmt.Sprintf("Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(name)))
			}
			continue
		}
		if err := d.field(form, msg, fd, name); err != nil {
			return err
		}
	}
	return nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func (d *decoder) field(form url.Values, msg protoreflect.Message, fd protoreflect.FieldDescriptor, name string) error {
	switch {
	case fd.IsList():
		list := msg.Mutable(fd).List()
		if vals, ok := form[name]; ok && len(vals) == 1 && vals[0] == "" {
			// "Name=" is an empty list, as the SDKs send one.
			d.used[name] = true
			return nil
		}
		for i := 1; ; i++ {
			el := fmt.Sprintf("%s.member.%d", name, i)
			if !hasPrefix(form, el) {
				return nil
			}
			if fd.Message() != nil {
				v := list.NewElement()
				if err := d.message(form, v.Message(), el); err != nil {
					return err
				}
				list.Append(v)
				continue
			}
			v, err := d.scalar(form, fd, el)
			if err != nil {
				return err
			}
			list.Append(v)
		}
	case fd.IsMap():
		m := msg.Mutable(fd).Map()
		for i := 1; ; i++ {
			entry := fmt.Sprintf("%s.entry.%d", name, i)
			if !hasPrefix(form, entry) {
				return nil
			}
			key := entry + ".key"
			k := form.Get(key)
			d.used[key] = true
			if fd.MapValue().Message() != nil {
				v := m.NewValue()
				if err := d.message(form, v.Message(), entry+".value"); err != nil {
					return err
				}
				m.Set(protoreflect.ValueOfString(k).MapKey(), v)
				continue
			}
			v, err := d.scalar(form, fd.MapValue(), entry+".value")
			if err != nil {
				return err
			}
			m.Set(protoreflect.ValueOfString(k).MapKey(), v)
		}
	case fd.Message() != nil:
		return d.message(form, msg.Mutable(fd).Message(), name)
	}
	v, err := d.scalar(form, fd, name)
	if err != nil {
		return err
	}
	msg.Set(fd, v)
	return nil
}

func (d *decoder) scalar(form url.Values, fd protoreflect.FieldDescriptor, name string) (protoreflect.Value, error) {
	d.used[name] = true
	s := form.Get(name)
	bad := func(what string) (protoreflect.Value, error) {
		return protoreflect.Value{}, &Error{Code: ValidationError, Message: fmt.Sprintf("Value '%s' at '%s' could not be converted to %s.", s, lowerFirst(name), what)}
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if allowed := proto.GetExtension(fd.Options(), ecsv1.E_EnumValues).([]string); len(allowed) > 0 {
			ok := false
			for _, a := range allowed {
				ok = ok || a == s
			}
			if !ok {
				d.violations = append(d.violations, fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: [%s]", s, lowerFirst(name), strings.Join(allowed, ", ")))
			}
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BoolKind:
		switch s {
		case "true":
			return protoreflect.ValueOfBool(true), nil
		case "false":
			return protoreflect.ValueOfBool(false), nil
		}
		return bad("a Boolean")
	case protoreflect.Int32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad("an Integer")
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad("a Long")
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.DoubleKind:
		if proto.GetExtension(fd.Options(), ecsv1.E_Timestamp).(bool) {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return bad("a Timestamp (ISO 8601)")
			}
			return protoreflect.ValueOfFloat64(float64(t.UnixNano()) / 1e9), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return bad("a Double")
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.BytesKind:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return bad("a Blob (base64)")
		}
		return protoreflect.ValueOfBytes(b), nil
	}
	return bad("a value of this member's type")
}

// Marshal returns the XML response of action: m (the operation's response message, nil for
// none) in <{action}Result>, and the request id in ResponseMetadata, in namespace xmlns.
// Members are elements named by the model (the fields' JSON names) in field order; unset
// optional members are left out. An empty list is written as an empty element
// (<TargetGroups/>) where AWS writes one: every list member of the result itself, and
// the nested members of EmptyLists; other empty lists are left out. Lists are <member>
// elements, maps <entry><key/><value/></entry>, timestamps ISO 8601 in UTC, blobs base64.
func Marshal(action string, m proto.Message, xmlns, requestID string) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header[:len(xml.Header)-1])
	fmt.Fprintf(&b, "\n<%sResponse xmlns=\"%s\">\n", action, escape(xmlns))
	if m != nil {
		fmt.Fprintf(&b, "  <%sResult>", action)
		writeMessage(&b, m.ProtoReflect(), true)
		fmt.Fprintf(&b, "</%sResult>\n", action)
	}
	fmt.Fprintf(&b, "  <ResponseMetadata>\n    <RequestId>%s</RequestId>\n  </ResponseMetadata>\n", escape(requestID))
	fmt.Fprintf(&b, "</%sResponse>\n", action)
	return b.Bytes()
}

// MarshalError returns AWS's query-protocol XML error: Type is Sender for a client error
// (status < 500) and Receiver otherwise.
func MarshalError(status int, code, message, xmlns, requestID string) []byte {
	typ := "Sender"
	if status >= 500 {
		typ = "Receiver"
	}
	var b bytes.Buffer
	b.WriteString(xml.Header[:len(xml.Header)-1])
	fmt.Fprintf(&b, "\n<ErrorResponse xmlns=\"%s\">\n  <Error>\n    <Type>%s</Type>\n    <Code>%s</Code>\n    <Message>%s</Message>\n  </Error>\n  <RequestId>%s</RequestId>\n</ErrorResponse>\n",
		escape(xmlns), typ, escape(code), escape(message), escape(requestID))
	return b.Bytes()
}

// escape escapes s for XML text (and the double-quoted xmlns attribute): &, <, > and
// quotes as entities, characters XML cannot carry as U+FFFD (xml.EscapeText); apostrophes
// stay as they are, as AWS writes them.
func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), "&#39;", "'")
}

// EmptyList is one nested list member AWS writes as an empty element when it has no
// items: member Member (the model's member name, the field's JSON name) of the shape
// Shape (the full protobuf name of the model's structure).
type EmptyList struct {
	// Shape is the structure's full message name, e.g. "berth.elbv2.v1.TargetGroup".
	Shape protoreflect.FullName
	// Member is the list member's model name, e.g. "LoadBalancerArns".
	Member string
	// Source names the AWS document that shows the member empty.
	Source string
}

// EmptyLists are the nested list members written as an empty element when empty (the
// result's own lists always are). Read by Marshal.
var EmptyLists = []EmptyList{
	// DescribeTags: a resource without tags is <member><ResourceArn/><Tags/></member>.
	{"berth.elbv2.v1.TagDescription", "Tags", "ELBv2 API reference, DescribeTags example response"},
	// A target group no load balancer uses: "LoadBalancerArns": [].
	{"berth.elbv2.v1.TargetGroup", "LoadBalancerArns", "AWS CLI reference, elbv2 create-target-group example output"},
	// The default rule: "Conditions": [].
	{"berth.elbv2.v1.Rule", "Conditions", "AWS CLI reference, elbv2 describe-rules example output"},
}

// alwaysWritten reports whether the list member fd is written when empty.
func alwaysWritten(fd protoreflect.FieldDescriptor, top bool) bool {
	if !fd.IsList() {
		return false
	}
	if top {
		return true
	}
	for _, e := range EmptyLists {
		if e.Shape == fd.ContainingMessage().FullName() && e.Member == fd.JSONName() {
			return true
		}
	}
	return false
}

// writeMessage writes msg's members; top is true for the operation's result itself.
func writeMessage(b *bytes.Buffer, msg protoreflect.Message, top bool) {
	fields := msg.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !msg.Has(fd) {
			if alwaysWritten(fd, top) {
				fmt.Fprintf(b, "<%s/>", fd.JSONName())
			}
			continue
		}
		name := fd.JSONName()
		v := msg.Get(fd)
		fmt.Fprintf(b, "<%s>", name)
		switch {
		case fd.IsList():
			list := v.List()
			for j := 0; j < list.Len(); j++ {
				b.WriteString("<member>")
				writeSingular(b, fd, list.Get(j))
				b.WriteString("</member>")
			}
		case fd.IsMap():
			m := v.Map()
			keys := make([]string, 0, m.Len())
			m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k.String())
				return true
			})
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(b, "<entry><key>%s</key><value>", escape(k))
				writeSingular(b, fd.MapValue(), m.Get(protoreflect.ValueOfString(k).MapKey()))
				b.WriteString("</value></entry>")
			}
		default:
			writeSingular(b, fd, v)
		}
		fmt.Fprintf(b, "</%s>", name)
	}
}

func writeSingular(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		writeMessage(b, v.Message(), false)
	case protoreflect.StringKind:
		b.WriteString(escape(v.String()))
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.DoubleKind:
		f := v.Float()
		if proto.GetExtension(fd.Options(), ecsv1.E_Timestamp).(bool) {
			sec, frac := math.Modf(f)
			b.WriteString(time.Unix(int64(sec), int64(frac*1e9)).UTC().Format("2006-01-02T15:04:05.000Z"))
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0
		}
		b.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
	case protoreflect.BytesKind:
		b.WriteString(base64.StdEncoding.EncodeToString(v.Bytes()))
	}
}
