package awsjson

import (
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MarshalWirePooled encodes the response message of type mt held in wire, its protobuf
// binary encoding (what the scheduler answers over Connect), as an AWS JSON 1.1 body: the
// bytes Marshal writes for the message proto.Unmarshal would decode from wire, without
// decoding it into a Go message. The gateway's answers are mostly repeated structures
// (a DescribeTasks(100) answer is ~150 KB of JSON from ~100 KB of protobuf), and decoding
// them into messages only to walk them again by reflection was about half of the
// gateway's CPU per call.
//
// b is valid until release is called, as for MarshalPooled. It returns an error, and no
// body, when wire is not a valid encoding of mt (when proto.Unmarshal fails). Input whose
// decoding is not a plain reading of the bytes (a singular message, string or oneof
// written more than once, which proto.Unmarshal merges, checks or overrides; a map key
// written twice; a string that is not valid UTF-8; a group; a message with required
// fields; nesting deeper than proto.Unmarshal allows) is decoded with proto.Unmarshal and
// encoded with Marshal, so the answer is always Marshal's.
func MarshalWirePooled(mt protoreflect.MessageType, wire []byte) (b []byte, release func(), err error) {
	bp := scratch.Get().(*[]byte)
	e := wireEncoders.Get().(*wireEncoder)
	b, err = e.message((*bp)[:0], shapeOf(mt.Descriptor()), wire, true)
	clear(e.fields[:cap(e.fields)]) // no payload slice keeps wire alive from the pool
	e.fields, e.depth = e.fields[:0], 0
	wireEncoders.Put(e)
	if err == nil {
		return b, func() { putScratch(bp, b) }, nil
	}
	putScratch(bp, b)
	if !errors.Is(err, errNotPlain) {
		return nil, func() {}, err
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(wire, m); err != nil {
		return nil, func() {}, err
	}
	b, release = MarshalPooled(m)
	return b, release, nil
}

// errNotPlain says the wire bytes need proto.Unmarshal's merging rules (see
// MarshalWirePooled): the encoder starts over from the decoded message.
var errNotPlain = errors.New("awsjson: wire input needs decoding")

// errMalformed is the error for bytes that are not a protobuf encoding.
var errMalformed = errors.New("awsjson: malformed protobuf wire data")

// wireField is one field occurrence of a message's encoding: index is the field's index
// in the descriptor, value its varint or fixed-width value, data its length-delimited
// payload.
type wireField struct {
	index int32
	typ   protowire.Type
	value uint64
	data  []byte
}

// wireEncoder holds the field occurrences of the messages being encoded, innermost last,
// and how deep the message being encoded is nested.
type wireEncoder struct {
	fields []wireField
	depth  int
}

// maxDepth is proto.Unmarshal's limit on nesting (protowire's default recursion limit).
const maxDepth = 10000

var wireEncoders = sync.Pool{New: func() any { return &wireEncoder{fields: make([]wireField, 0, 256)} }}

// wireShape is what the wire encoder needs of a message type beyond shapeInfo, computed
// once: field indexes by number and each field's kind and cardinality.
type wireShape struct {
	byNumber []int32 // field number → index + 1 (0: no such field), for numbers < len
	byMap    map[protowire.Number]int32
	kinds    []protoreflect.Kind
	list     []bool
	isMap    []bool
	presence []bool
	oneof    []int8 // index of the field's (non-synthetic) oneof, -1 for none
	oneofs   int
	// decode says the type is left to proto.Unmarshal: a field is a group, required or a
	// closed enum (proto2), which proto.Unmarshal checks.
	decode bool
}

func newWireShape(md protoreflect.MessageDescriptor) *wireShape {
	fields := md.Fields()
	n := fields.Len()
	ws := &wireShape{
		kinds: make([]protoreflect.Kind, n), list: make([]bool, n), isMap: make([]bool, n),
		presence: make([]bool, n), oneof: make([]int8, n),
	}
	maxNum := protowire.Number(0)
	for i := range n {
		maxNum = max(maxNum, fields.Get(i).Number())
	}
	if maxNum < 1024 {
		ws.byNumber = make([]int32, maxNum+1)
	} else {
		ws.byMap = make(map[protowire.Number]int32, n)
	}
	for i := range n {
		fd := fields.Get(i)
		if ws.byNumber != nil {
			ws.byNumber[fd.Number()] = int32(i) + 1
		} else {
			ws.byMap[fd.Number()] = int32(i) + 1
		}
		ws.kinds[i], ws.list[i], ws.isMap[i], ws.presence[i] = fd.Kind(), fd.IsList(), fd.IsMap(), fd.HasPresence()
		ws.oneof[i] = -1
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			ws.oneof[i] = int8(min(od.Index(), 127))
			ws.oneofs = max(ws.oneofs, od.Index()+1)
		}
		closedEnum := fd.Kind() == protoreflect.EnumKind && fd.Enum().IsClosed() // unknown values become unknown fields
		ws.decode = ws.decode || fd.Kind() == protoreflect.GroupKind || fd.Cardinality() == protoreflect.Required || closedEnum
	}
	return ws
}

// index returns the index of the field numbered num, or -1.
func (ws *wireShape) index(num protowire.Number) int32 {
	if ws.byNumber != nil {
		if int(num) < len(ws.byNumber) {
			return ws.byNumber[num] - 1
		}
		return -1
	}
	return ws.byMap[num] - 1
}

// readField reads the field at the start of data: its number and its value (consumeValue).
// n is the bytes read, negative for malformed input (a field number proto.Unmarshal
// refuses included).
func readField(data []byte) (num protowire.Number, f wireField, n int) {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 || num > protowire.MaxValidNumber {
		return 0, f, -1
	}
	f, m := consumeValue(num, typ, data[n:])
	if m < 0 {
		return 0, f, -1
	}
	return num, f, n + m
}

// consumeValue reads the value of a field numbered num of wire type typ at the start of
// data: a varint or fixed-width value into value, a length-delimited payload into data,
// and a group skipped. n is the bytes read, negative for malformed input.
func consumeValue(num protowire.Number, typ protowire.Type, data []byte) (f wireField, n int) {
	f.typ = typ
	switch typ {
	case protowire.VarintType:
		f.value, n = protowire.ConsumeVarint(data)
	case protowire.Fixed32Type:
		var v uint32
		v, n = protowire.ConsumeFixed32(data)
		f.value = uint64(v)
	case protowire.Fixed64Type:
		f.value, n = protowire.ConsumeFixed64(data)
	case protowire.BytesType:
		f.data, n = protowire.ConsumeBytes(data)
	default:
		n = protowire.ConsumeFieldValue(num, typ, data)
	}
	return f, n
}

// wireTypeOf is the wire type a single value of kind k is written with.
func wireTypeOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType
}

// parse appends the occurrences of si's known fields in data to e.fields, ordered by
// field index and, within a field, as written. Fields written with a wire type their kind
// does not take are skipped, as proto.Unmarshal keeps them as unknown fields, which
// Marshal does not write.
func (e *wireEncoder) parse(si *shapeInfo, data []byte) error {
	ws := si.wire
	if ws.decode {
		return errNotPlain
	}
	base := len(e.fields)
	sorted := true
	last := int32(-1)
	for len(data) > 0 {
		num, f, n := readField(data)
		if n < 0 {
			return errMalformed
		}
		data = data[n:]
		f.index = ws.index(num)
		if f.index < 0 {
			continue
		}
		if f.typ == protowire.StartGroupType {
			return errNotPlain // a field written as a group
		}
		if want := wireTypeOf(ws.kinds[f.index]); f.typ != want && !(f.typ == protowire.BytesType && ws.list[f.index] && want != protowire.BytesType) {
			continue
		}
		if f.index < last {
			sorted = false
		}
		last = f.index
		e.fields = append(e.fields, f)
	}
	fs := e.fields[base:]
	if !sorted {
		slices.SortStableFunc(fs, func(a, b wireField) int { return int(a.index - b.index) })
	}
	if ws.oneofs > 0 {
		// Two members of one oneof: proto.Unmarshal keeps the later one.
		var few [8]int32
		seen := few[:]
		if ws.oneofs > len(few) {
			seen = make([]int32, ws.oneofs)
		}
		for _, f := range fs {
			if o := ws.oneof[f.index]; o >= 0 {
				if seen[o] != 0 && seen[o] != f.index+1 {
					return errNotPlain
				}
				seen[o] = f.index + 1
			}
		}
	}
	return nil
}

// enter parses the message of shape si in data, one level deeper, and returns its
// occurrences (e.fields from base on, which nothing writes over while nested messages
// are encoded, though e.fields may grow and move); leave(base) ends the level, error or
// not. Past maxDepth the message is proto.Unmarshal's to refuse.
func (e *wireEncoder) enter(si *shapeInfo, data []byte) (occ []wireField, base int, err error) {
	base = len(e.fields)
	if e.depth++; e.depth > maxDepth {
		return nil, base, errNotPlain
	}
	if err := e.parse(si, data); err != nil {
		return nil, base, err
	}
	return e.fields[base:], base, nil
}

// leave ends the level enter began at base.
func (e *wireEncoder) leave(base int) { e.fields, e.depth = e.fields[:base], e.depth-1 }

// message appends the encoding of the message of shape si whose bytes are data, as
// appendMessage does for the decoded message; top says it is the response itself.
func (e *wireEncoder) message(b []byte, si *shapeInfo, data []byte, top bool) ([]byte, error) {
	fs, base, err := e.enter(si, data)
	defer e.leave(base)
	if err != nil {
		return b, err
	}
	b = append(b, '{')
	first := true
	defaults := si.defaults
	if defaultsOff {
		defaults = nil
	}
	ws := si.wire
	j := 0
	for i, fd := range si.fields {
		k := j
		for k < len(fs) && fs[k].index == int32(i) {
			k++
		}
		occ := fs[j:k]
		j = k
		def := Omit
		if defaults != nil {
			def = defaults[i]
		}
		switch {
		case ws.list[i]:
			if !hasElements(occ, wireTypeOf(ws.kinds[i]) != protowire.BytesType) {
				b = si.appendUnsetList(b, &first, i, def, top)
				continue
			}
		case ws.isMap[i]:
			if len(occ) == 0 && !top {
				continue
			}
		case ws.presence[i]:
			if len(occ) == 0 {
				var done bool
				if b, done = si.appendUnset(b, &first, i, def); done {
					continue
				}
			}
		}
		b = appendName(b, &first, si.names[i])
		if b, err = e.value(b, fd, si, i, occ); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// hasElements reports whether a list field's occurrences hold an element. Every
// occurrence is one, an empty string or message too, except an empty packed run of
// scalars (packable), after which proto.Unmarshal's list is still empty.
func hasElements(occ []wireField, packable bool) bool {
	if !packable {
		return len(occ) > 0
	}
	for _, f := range occ {
		if f.typ != protowire.BytesType || len(f.data) > 0 {
			return true
		}
	}
	return false
}

// value appends field i of si (fd) from its occurrences occ, as appendField does for
// msg.Get(fd): an unset field is its zero value (an empty list, map or message).
func (e *wireEncoder) value(b []byte, fd protoreflect.FieldDescriptor, si *shapeInfo, i int, occ []wireField) ([]byte, error) {
	ws := si.wire
	kid := si.kid(i)
	var err error
	switch {
	case ws.list[i]:
		b = append(b, '[')
		n := 0
		for _, f := range occ {
			if f.typ == protowire.BytesType && wireTypeOf(ws.kinds[i]) != protowire.BytesType {
				if b, n, err = appendPacked(b, ws.kinds[i], f.data, n); err != nil {
					return b, err
				}
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			if b, err = e.singular(b, fd, kid, f); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case ws.isMap[i]:
		return e.mapValue(b, fd, kid, occ)
	case len(occ) == 0:
		return e.singular(b, fd, kid, wireField{typ: wireTypeOf(ws.kinds[i])})
	case len(occ) > 1 && (ws.kinds[i] == protoreflect.MessageKind || ws.kinds[i] == protoreflect.StringKind):
		// proto.Unmarshal merges a message's occurrences and checks every string's UTF-8.
		return b, errNotPlain
	}
	return e.singular(b, fd, kid, occ[len(occ)-1]) // the last occurrence of a scalar wins
}

// singular appends one value of fd (a list's element) from its occurrence f, as
// appendSingular does; kid is the shape of fd's message.
func (e *wireEncoder) singular(b []byte, fd protoreflect.FieldDescriptor, kid *shapeInfo, f wireField) ([]byte, error) {
	k := fd.Kind()
	if k == protoreflect.MessageKind {
		if kid.wrapper {
			occ, base, err := e.enter(kid, f.data)
			defer e.leave(base)
			if err != nil {
				return b, err
			}
			return e.value(b, kid.fields[0], kid, 0, occ)
		}
		return e.message(b, kid, f.data, false)
	}
	return appendScalar(b, k, f)
}

// appendScalar appends the scalar of kind k held in f, decoded as proto.Unmarshal does.
func appendScalar(b []byte, k protoreflect.Kind, f wireField) ([]byte, error) {
	v := f.value
	switch k {
	case protoreflect.StringKind:
		var invalid bool
		if b, invalid = appendText(b, f.data); invalid {
			return b, errNotPlain
		}
		return b, nil
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, f.data)
		return append(b, '"'), nil
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v != 0), nil
	case protoreflect.Int32Kind, protoreflect.EnumKind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(b, int64(int32(v)), 10), nil
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, int64(v), 10), nil
	case protoreflect.Sint32Kind:
		return strconv.AppendInt(b, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10), nil
	case protoreflect.Sint64Kind:
		return strconv.AppendInt(b, protowire.DecodeZigZag(v), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(b, uint64(uint32(v)), 10), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v, 10), nil
	case protoreflect.FloatKind:
		return appendFloat(b, float64(math.Float32frombits(uint32(v)))), nil
	case protoreflect.DoubleKind:
		return appendFloat(b, math.Float64frombits(v)), nil
	}
	return append(b, "null"...), nil
}

// appendPacked appends the elements of a packed run of scalars of kind k, after the n
// elements already written, and returns the new count.
func appendPacked(b []byte, k protoreflect.Kind, data []byte, n int) ([]byte, int, error) {
	typ := wireTypeOf(k)
	for len(data) > 0 {
		f, m := consumeValue(0, typ, data) // typ is a varint or fixed-width type
		if m < 0 {
			return b, n, errMalformed
		}
		data = data[m:]
		if n > 0 {
			b = append(b, ',')
		}
		n++
		var err error
		if b, err = appendScalar(b, k, f); err != nil {
			return b, n, err
		}
	}
	return b, n, nil
}

// mapEntry is one entry of an encoded map: its key as Marshal writes it and its value.
type mapEntry struct {
	key   string
	value wireField
}

// mapValue appends a map field from its entries' occurrences, keys sorted as Marshal
// sorts them. Entries with one key, or an entry with its key or value twice, are left to
// proto.Unmarshal (errNotPlain).
func (e *wireEncoder) mapValue(b []byte, fd protoreflect.FieldDescriptor, kid *shapeInfo, occ []wireField) ([]byte, error) {
	keyKind, valKind := fd.MapKey().Kind(), fd.MapValue().Kind()
	entries := make([]mapEntry, 0, len(occ))
	for _, f := range occ {
		key := wireField{typ: wireTypeOf(keyKind)}
		val := wireField{typ: wireTypeOf(valKind)}
		data := f.data
		var seenKey, seenValue bool
		for len(data) > 0 {
			num, g, n := readField(data)
			if n < 0 {
				return b, errMalformed
			}
			data = data[n:]
			switch {
			case num == 1 && g.typ == wireTypeOf(keyKind):
				if seenKey {
					return b, errNotPlain // proto.Unmarshal checks (or merges) each
				}
				key, seenKey = g, true
			case num == 2 && g.typ == wireTypeOf(valKind):
				if seenValue {
					return b, errNotPlain
				}
				val, seenValue = g, true
			}
		}
		var s string
		if keyKind == protoreflect.StringKind {
			if !utf8.Valid(key.data) {
				return b, errNotPlain
			}
			s = string(key.data)
		} else {
			ks, err := appendScalar(nil, keyKind, key) // a number or bool, as MapKey.String writes it
			if err != nil {
				return b, err
			}
			s = string(ks)
		}
		entries = append(entries, mapEntry{s, val})
	}
	slices.SortFunc(entries, func(x, y mapEntry) int { return strings.Compare(x.key, y.key) })
	b = append(b, '{')
	for i, en := range entries {
		if i > 0 {
			if entries[i-1].key == en.key {
				// proto.Unmarshal decodes (and checks) the entry a later one replaces.
				return b, errNotPlain
			}
			b = append(b, ',')
		}
		b = appendString(b, en.key)
		b = append(b, ':')
		var err error
		if b, err = e.singular(b, fd.MapValue(), kid, en.value); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}
