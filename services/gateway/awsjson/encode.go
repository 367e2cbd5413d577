package awsjson

import (
	"encoding/base64"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Marshal encodes m, an operation's response message, as an AWS JSON 1.1 body.
//
// Members are written in the message's field order (alphabetical for berth.ecs.v1) with
// their JSON names. Scalars without presence (AWS's unboxed Integer, Long and Boolean) are
// always written; optional ones, strings and structures only when set. int32 and int64 are
// JSON numbers (never strings, unlike protojson), doubles and timestamps are numbers
// (timestamps in epoch seconds). Maps are objects with sorted keys. Lists are arrays,
// omitted when empty except for the top-level members of the response, which AWS always
// writes (for example "failures": []). Members AWS returns even when empty (a task
// definition's "volumes": [], a task's "overrides": {...}) are written from the Defaults
// table, and so is every list member the model marks required. Marshal never fails on a
// valid message; NaN and infinite doubles, which JSON cannot carry, are written as 0.
func Marshal(m proto.Message) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	msg := m.ProtoReflect()
	b := appendMessage((*bp)[:0], msg, shapeOf(msg.Descriptor()), true)
	// One exact-size copy instead of the ~2x of repeated growth; the scratch buffer is
	// kept for the next response unless it grew past maxScratch.
	out := make([]byte, len(b))
	copy(out, b)
	putScratch(bp, b)
	return out, nil
}

// MarshalPooled is Marshal into a buffer taken from a pool: b is valid until release is
// called, after which the buffer serves another response. It saves Marshal's
// exact-size copy (a DescribeTasks(100) answer is ~150 KB) for a caller that writes the
// bytes out at once, as the gateway does.
func MarshalPooled(m proto.Message) (b []byte, release func()) {
	bp := scratch.Get().(*[]byte)
	msg := m.ProtoReflect()
	b = appendMessage((*bp)[:0], msg, shapeOf(msg.Descriptor()), true)
	return b, func() { putScratch(bp, b) }
}

// scratch holds encoding buffers between responses; maxScratch (bytes) bounds what it keeps.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// putScratch returns bp to scratch holding b (written into it, possibly grown), unless b
// grew past maxScratch.
func putScratch(bp *[]byte, b []byte) {
	if cap(b) <= maxScratch {
		*bp = b[:0]
		scratch.Put(bp)
	}
}

const maxScratch = 1 << 20

// shapeInfo is what the encoder needs of a message type, computed once: each field's
// quoted JSON name with its colon, and the Defaults of its fields (nil when none).
type shapeInfo struct {
	names    [][]byte
	defaults []Default
	// wrapper says the message is a wrapper (isWrapper), written as its one field.
	wrapper bool
	// fields holds the message's field descriptors, by index.
	fields []protoreflect.FieldDescriptor
	// kids holds, by field index, the shapeInfo of a message-typed field's (a list's
	// element's, a map's value's) message, filled on first use: encoding a nested
	// message then looks up no table.
	kids []atomic.Pointer[shapeInfo]
	// zero holds, for fields whose default is EmptyStructure, the read-only empty message
	// written when the field is unset (Get would allocate one per call).
	zero []protoreflect.Message
	// zeroBodies holds, for those fields, the encoding of zero[i], filled on first use
	// (it depends only on the Defaults table).
	zeroBodies []atomic.Pointer[[]byte]
	// wire is what MarshalWirePooled needs besides.
	wire *wireShape
}

// shapes maps a message's full name to its *shapeInfo.
var shapes sync.Map

func shapeOf(md protoreflect.MessageDescriptor) *shapeInfo {
	if si, ok := shapes.Load(md.FullName()); ok {
		return si.(*shapeInfo)
	}
	fields := md.Fields()
	si := &shapeInfo{
		names:    make([][]byte, fields.Len()),
		defaults: memberDefaults(md),
		wrapper:  isWrapper(md),
		fields:   make([]protoreflect.FieldDescriptor, fields.Len()),
		kids:     make([]atomic.Pointer[shapeInfo], fields.Len()),
		wire:     newWireShape(md),
	}
	for i := range si.names {
		si.fields[i] = fields.Get(i)
		si.names[i] = append(appendString(nil, fields.Get(i).JSONName()), ':')
		if si.defaults != nil && si.defaults[i] == EmptyStructure {
			if si.zero == nil {
				si.zero = make([]protoreflect.Message, fields.Len())
				si.zeroBodies = make([]atomic.Pointer[[]byte], fields.Len())
			}
			if mt, err := protoregistry.GlobalTypes.FindMessageByName(fields.Get(i).Message().FullName()); err == nil {
				si.zero[i] = mt.Zero()
			}
		}
	}
	actual, _ := shapes.LoadOrStore(md.FullName(), si)
	return actual.(*shapeInfo)
}

// kid returns the shapeInfo of the message of field i (its element's for a list, its
// value's for a map); nil when the field holds no message.
func (si *shapeInfo) kid(i int) *shapeInfo {
	if k := si.kids[i].Load(); k != nil {
		return k
	}
	fd := si.fields[i]
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	md := fd.Message()
	if md == nil {
		return nil
	}
	k := shapeOf(md)
	si.kids[i].Store(k)
	return k
}

// zeroBody returns the encoding of field i's read-only empty message (zero[i]).
func (si *shapeInfo) zeroBody(i int) []byte {
	if defaultsOff {
		return appendMessage(nil, si.zero[i], si.kid(i), false)
	}
	if p := si.zeroBodies[i].Load(); p != nil {
		return *p
	}
	b := appendMessage(nil, si.zero[i], si.kid(i), false)
	si.zeroBodies[i].Store(&b)
	return b
}

// AppendError appends the AWS JSON error body {"__type": typ, "message": message}.
func AppendError(b []byte, typ, message string) []byte {
	b = append(b, `{"__type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, message)
	return append(b, '}')
}

// appendMessage writes msg, whose shapeInfo is si; top says it is the response itself.
func appendMessage(b []byte, msg protoreflect.Message, si *shapeInfo, top bool) []byte {
	b = append(b, '{')
	first := true
	defaults := si.defaults
	if defaultsOff {
		defaults = nil
	}
	for i, fd := range si.fields {
		def := Omit
		if defaults != nil {
			def = defaults[i]
		}
		var v protoreflect.Value
		switch {
		case fd.IsList():
			// Has is false for an empty list and, unlike Get, allocates no reflective
			// wrapper.
			if !msg.Has(fd) {
				b = si.appendUnsetList(b, &first, i, def, top)
				continue
			}
			v = msg.Get(fd)
		case fd.IsMap():
			if !msg.Has(fd) && !top {
				continue
			}
			v = msg.Get(fd)
		case fd.HasPresence():
			if !msg.Has(fd) {
				var done bool
				if b, done = si.appendUnset(b, &first, i, def); done {
					continue
				}
			}
			v = msg.Get(fd)
		default:
			v = msg.Get(fd)
		}
		b = appendName(b, &first, si.names[i])
		b = appendField(b, fd, si.kid(i), v)
	}
	return append(b, '}')
}

// appendUnsetList writes list field i, which is empty, as its default def says: [] for
// EmptyList and, at the top of a response (top), for any default but OmitEmpty;
// otherwise nothing.
func (si *shapeInfo) appendUnsetList(b []byte, first *bool, i int, def Default, top bool) []byte {
	if def == EmptyList || (top && def != OmitEmpty) {
		b = appendName(b, first, si.names[i])
		b = append(b, "[]"...)
	}
	return b
}

// appendUnset writes field i, a structure or boxed scalar that is unset, as its default
// def says: the read-only empty message for EmptyStructure (its own defaults written),
// true for True, nothing otherwise. done is false only when the empty message is
// missing (not registered), for the caller to write the field's zero value instead.
func (si *shapeInfo) appendUnset(b []byte, first *bool, i int, def Default) (_ []byte, done bool) {
	switch def {
	case EmptyStructure:
		if si.zero[i] == nil {
			return b, false
		}
		b = appendName(b, first, si.names[i])
		return append(b, si.zeroBody(i)...), true
	case True:
		b = appendName(b, first, si.names[i])
		return append(b, "true"...), true
	}
	return b, true
}

// appendName writes the member's quoted name and colon (from shapeInfo.names), preceded by a comma unless it is the
// object's first member.
func appendName(b []byte, first *bool, name []byte) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	return append(b, name...)
}

// appendField writes v, the value of fd; kid is the shapeInfo of its message (a list's
// element's, a map's value's), nil for scalars.
func appendField(b []byte, fd protoreflect.FieldDescriptor, kid *shapeInfo, v protoreflect.Value) []byte {
	switch {
	case fd.IsList():
		list := v.List()
		b = append(b, '[')
		for i := 0; i < list.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSingular(b, fd, kid, list.Get(i))
		}
		return append(b, ']')
	case fd.IsMap():
		m := v.Map()
		keys := make([]string, 0, m.Len())
		m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k.String())
			return true
		})
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendSingular(b, fd.MapValue(), kid, m.Get(protoreflect.ValueOfString(k).MapKey()))
		}
		return append(b, '}')
	}
	return appendSingular(b, fd, kid, v)
}

// appendSingular writes v, one value of fd (one element of a list or map); kid is as
// for appendField.
func appendSingular(b []byte, fd protoreflect.FieldDescriptor, kid *shapeInfo, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		m := v.Message()
		if kid.wrapper {
			inner := kid.fields[0]
			return appendField(b, inner, kid.kid(0), m.Get(inner))
		}
		return appendMessage(b, m, kid, false)
	case protoreflect.StringKind:
		return appendString(b, v.String())
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind,
		protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		return appendFloat(b, v.Float())
	case protoreflect.EnumKind:
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.BytesKind:
		// A blob: base64 in a JSON string, as the AWS JSON protocols carry it.
		return appendString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	}
	return append(b, "null"...)
}

// appendFloat writes f as a JSON number without an exponent where that stays short, as
// epoch seconds such as 1700000000.5 read best that way.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

const hex = "0123456789abcdef"

// appendString writes s as a JSON string. Invalid UTF-8 becomes U+FFFD; <, > and & are not
// escaped (AWS does not escape them).
func appendString(b []byte, s string) []byte {
	b, _ = appendText(b, s)
	return b
}

// appendText is appendString for a string or its bytes; invalid says s held invalid
// UTF-8 (written as U+FFFD).
func appendText[T string | []byte](b []byte, s T) (_ []byte, invalid bool) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(load8(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			invalid = true
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"'), invalid
}

// load8 returns the 8 bytes of s from i as a little-endian word (the compiler makes it
// one load).
func load8[T string | []byte](s T, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// plain8 reports whether none of the 8 bytes in w needs appendText's attention: none is
// a control character, '"', '\\' or a byte of a multi-byte UTF-8 sequence. Each test
// is the classic "has a byte less than n" (x - n per byte, masked with ^x) on w or on w
// with the byte searched for turned into zero.
func plain8(w uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	ctl := (w - lsb*0x20) &^ w
	q := w ^ (lsb * '"')
	q = (q - lsb) &^ q
	bs := w ^ (lsb * '\\')
	bs = (bs - lsb) &^ bs
	return (ctl|q|bs|w)&msb == 0
}

// decodeRune is utf8.DecodeRuneInString or utf8.DecodeRune, as s is.
func decodeRune[T string | []byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.RuneError, 1
}
