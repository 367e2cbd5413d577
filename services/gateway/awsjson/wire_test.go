package awsjson_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "github.com/berthhq/berth/gen/berth/admin/v1"
	_ "github.com/berthhq/berth/gen/berth/agent/v1"
	_ "github.com/berthhq/berth/gen/berth/console/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	_ "github.com/berthhq/berth/gen/berth/elbv2/v1"
	_ "github.com/berthhq/berth/gen/berth/logs/v1"
	_ "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	_ "github.com/berthhq/berth/gen/berth/servicediscovery/v1"
	_ "github.com/berthhq/berth/gen/berth/ssm/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	_ "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
)

// berthTypes returns every message type of Berth's protos, by name.
func berthTypes(t testing.TB) []protoreflect.MessageType {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if strings.HasPrefix(string(mt.Descriptor().FullName()), "berth.") && !mt.Descriptor().IsMapEntry() {
			types = append(types, mt)
		}
		return true
	})
	slices.SortFunc(types, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	if len(types) < 100 {
		t.Fatalf("only %d berth message types registered", len(types))
	}
	return types
}

// checkWire asserts that MarshalWirePooled(mt, wire) answers what Marshal answers for the
// message proto.Unmarshal decodes from wire, and fails exactly when proto.Unmarshal does.
// It reports whether wire decoded.
func checkWire(t *testing.T, mt protoreflect.MessageType, wire []byte) bool {
	t.Helper()
	m := mt.New().Interface()
	uerr := proto.Unmarshal(wire, m)
	got, release, err := awsjson.MarshalWirePooled(mt, wire)
	defer release()
	if (err != nil) != (uerr != nil) {
		t.Fatalf("%s: MarshalWirePooled error %v, proto.Unmarshal error %v\nwire %x", mt.Descriptor().FullName(), err, uerr, wire)
	}
	if uerr != nil {
		return false
	}
	want, _ := awsjson.Marshal(m)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: MarshalWirePooled\n%s\nMarshal\n%s\nwire %x", mt.Descriptor().FullName(), got, want, wire)
	}
	return true
}

// A random message of every Berth type, and variations of its encoding, encode as the
// decoded message does: field order, unknown fields, wire types the field does not take,
// packed and unpacked lists, repeated occurrences (proto.Unmarshal's last-one-wins and
// merging), truncated input.
func TestMarshalWirePooledMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 2026))
	decoded, variants := 0, 0
	for _, mt := range berthTypes(t) {
		for range 8 {
			m := randomMessage(rng, mt.New(), 0)
			wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if checkWire(t, mt, wire) {
				decoded++
			}
			for _, v := range wireVariants(rng, wire) {
				variants++
				if checkWire(t, mt, v) {
					decoded++
				}
			}
		}
	}
	t.Logf("%d encodings checked, %d of them decodable", variants+decoded, decoded)
}

// wireVariants returns encodings derived from wire that proto.Unmarshal reads differently
// from a plain pass or refuses.
func wireVariants(rng *rand.Rand, wire []byte) [][]byte {
	fields := splitFields(wire)
	var out [][]byte
	// Twice over: lists doubled, scalars and oneofs last-one-wins, messages merged.
	out = append(out, append(slices.Clone(wire), wire...))
	// Fields reversed, and shuffled.
	rev := slices.Clone(fields)
	slices.Reverse(rev)
	out = append(out, bytes.Join(rev, nil))
	shuf := slices.Clone(fields)
	rng.Shuffle(len(shuf), func(i, j int) { shuf[i], shuf[j] = shuf[j], shuf[i] })
	out = append(out, bytes.Join(shuf, nil))
	// Unknown fields of each wire type between the known ones.
	var unk []byte
	unk = protowire.AppendTag(unk, 9999, protowire.VarintType)
	unk = protowire.AppendVarint(unk, 7)
	unk = protowire.AppendTag(unk, 9998, protowire.BytesType)
	unk = protowire.AppendBytes(unk, []byte("x"))
	unk = protowire.AppendTag(unk, 9997, protowire.Fixed32Type)
	unk = protowire.AppendFixed32(unk, 1)
	unk = protowire.AppendTag(unk, 9996, protowire.Fixed64Type)
	unk = protowire.AppendFixed64(unk, 1)
	unk = protowire.AppendTag(unk, 9995, protowire.StartGroupType)
	unk = protowire.AppendTag(unk, 9995, protowire.EndGroupType)
	out = append(out, append(slices.Clone(unk), wire...), append(slices.Clone(wire), unk...))
	// Each known field number written with every other wire type (an unknown field to
	// proto.Unmarshal) and, for a varint, packed.
	for _, f := range fields {
		num, typ, _ := protowire.ConsumeTag(f)
		for _, other := range []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type, protowire.BytesType} {
			if other == typ {
				continue
			}
			var g []byte
			g = protowire.AppendTag(g, num, other)
			switch other {
			case protowire.VarintType:
				g = protowire.AppendVarint(g, 300)
			case protowire.Fixed32Type:
				g = protowire.AppendFixed32(g, 0x3f800000)
			case protowire.Fixed64Type:
				g = protowire.AppendFixed64(g, 0x3ff0000000000000)
			case protowire.BytesType:
				g = protowire.AppendBytes(g, nil)
			}
			out = append(out, append(slices.Clone(wire), g...))
		}
		if typ == protowire.VarintType {
			var g []byte
			g = protowire.AppendTag(g, num, protowire.BytesType)
			g = protowire.AppendBytes(g, protowire.AppendVarint(protowire.AppendVarint(nil, 1), 1<<40))
			out = append(out, append(slices.Clone(wire), g...))
		}
	}
	// Cut short.
	if len(wire) > 1 {
		out = append(out, wire[:len(wire)-1], wire[:rng.IntN(len(wire))])
	}
	return out
}

// splitFields splits an encoding into its top-level fields.
func splitFields(wire []byte) [][]byte {
	var out [][]byte
	for len(wire) > 0 {
		_, _, n := protowire.ConsumeField(wire)
		if n < 0 {
			return append(out, wire)
		}
		out = append(out, wire[:n])
		wire = wire[n:]
	}
	return out
}

var randomStrings = []string{
	"", "a", "web", `quote " and \ backslash`, "line\nbreak\ttab\r", "\x01\x1f control",
	"é ünïcödé 名前", "\u2028\u2029 separators", "<tag> & amp", "arn:aws:ecs:us-east-1:000000000000:task/default/0123456789abcdef",
}

var randomDoubles = []float64{0, 1, -1, 0.5, 1700000000.25, 1e-7, 1e21, -1e300, math.Inf(1), math.NaN(), math.Copysign(0, -1), 123456789.123}

// randomMessage fills about half of m's fields with random values, nested messages to a
// depth of 3, and returns m.
func randomMessage(rng *rand.Rand, m protoreflect.Message, depth int) protoreflect.Message {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if rng.IntN(2) == 0 {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && m.WhichOneof(od) != nil {
			continue
		}
		switch {
		case fd.IsList():
			list := m.Mutable(fd).List()
			for range rng.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					if depth >= 3 {
						break
					}
					list.Append(protoreflect.ValueOfMessage(randomMessage(rng, list.NewElement().Message(), depth+1)))
					continue
				}
				list.Append(randomScalar(rng, fd))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range rng.IntN(4) {
				k := randomScalar(rng, fd.MapKey()).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					if depth >= 3 {
						break
					}
					mp.Set(k, protoreflect.ValueOfMessage(randomMessage(rng, mp.NewValue().Message(), depth+1)))
					continue
				}
				mp.Set(k, randomScalar(rng, fd.MapValue()))
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 3 {
				m.Set(fd, protoreflect.ValueOfMessage(randomMessage(rng, m.NewField(fd).Message(), depth+1)))
			}
		default:
			m.Set(fd, randomScalar(rng, fd))
		}
	}
	return m
}

func randomScalar(rng *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	ints := []int64{0, 1, -1, 42, math.MaxInt32, math.MinInt32, 1 << 40, math.MinInt64, math.MaxInt64}
	n := ints[rng.IntN(len(ints))]
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(rng.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(randomDoubles[rng.IntN(len(randomDoubles))]))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(randomDoubles[rng.IntN(len(randomDoubles))])
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(randomStrings[rng.IntN(len(randomStrings))]))
	}
	return protoreflect.ValueOfString(randomStrings[rng.IntN(len(randomStrings))])
}

func mustType(t *testing.T, name string) protoreflect.MessageType {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	return mt
}

// Strings that are not UTF-8, empty packed runs, map entries without a key or value or
// with a key twice, and a message field written twice: each as proto.Unmarshal reads it.
func TestMarshalWirePooledEdges(t *testing.T) {
	task := (&ecsv1.Task{}).ProtoReflect().Type()
	cd := (&ecsv1.ContainerDefinition{}).ProtoReflect().Type()
	field := func(md protoreflect.MessageDescriptor, name string) protowire.Number {
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%s has no field %s", md.FullName(), name)
		}
		return fd.Number()
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), []byte(s))
	}
	entry := func(parts ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, field(cd.Descriptor(), "docker_labels"), protowire.BytesType), bytes.Join(parts, nil))
	}
	lastStatus := field(task.Descriptor(), "last_status")
	ssmParams := mustType(t, "berth.ssm.v1.MaintenanceWindowTaskParameters") // map<string, message> entries = 1
	ssmEntry := func(parts ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bytes.Join(parts, nil))
	}
	bigNumber := protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 0)
	logField := mustType(t, "berth.logs.v1.LogFieldType") // element (1) is a LogFieldType
	nested := func(depth int) []byte {
		var wire []byte
		for range depth {
			wire = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), wire)
		}
		return wire
	}
	overrides := field(task.Descriptor(), "overrides")
	for name, c := range map[string]struct {
		mt   protoreflect.MessageType
		wire []byte
	}{
		"invalid UTF-8 string":         {task, str(lastStatus, "RUN\xffNING")},
		"string written twice":         {task, append(str(lastStatus, "PENDING"), str(lastStatus, "RUNNING")...)},
		"message written twice":        {task, append(str(overrides, string(str(1, "x"))), str(overrides, "")...)},
		"map entries":                  {cd, bytes.Join([][]byte{entry(str(1, "b"), str(2, "2")), entry(str(1, "a"), str(2, "1")), entry(str(1, "b"), str(2, "3"))}, nil)},
		"map entry without key":        {cd, entry(str(2, "v"))},
		"map entry without value":      {cd, entry(str(1, "k"))},
		"map entry key not UTF-8":      {cd, entry(str(1, "k\xff"), str(2, "v"))},
		"map entry with unknown field": {cd, entry(str(1, "k"), str(3, "?"), str(2, "v"))},
		"empty":                        {task, nil},
		// Bytes proto.Unmarshal checks although the message it decodes drops them.
		"string twice, first not UTF-8":          {task, append(str(lastStatus, "RUN\xff"), str(lastStatus, "RUNNING")...)},
		"map key twice, first value not UTF-8":   {cd, append(entry(str(1, "k"), str(2, "v\xff")), entry(str(1, "k"), str(2, "v"))...)},
		"map entry key twice, first not UTF-8":   {cd, entry(str(1, "k\xff"), str(1, "k"), str(2, "v"))},
		"map entry value twice, first not UTF-8": {cd, entry(str(1, "k"), str(2, "v\xff"), str(2, "v"))},
		"map key twice, first message malformed": {ssmParams, append(ssmEntry(str(1, "k"), str(2, "\x80")), ssmEntry(str(1, "k"))...)},
		// Field numbers past protowire.MaxValidNumber, which proto.Unmarshal refuses.
		"field number too large":        {task, bigNumber},
		"field number too large in map": {cd, entry(str(1, "k"), bigNumber)},
		// Deeper than proto.Unmarshal's recursion limit (10,000), and just within it.
		"too deep":              {logField, nested(10001)},
		"deep but not too deep": {logField, nested(9999)},
	} {
		t.Run(name, func(t *testing.T) { checkWire(t, c.mt, c.wire) })
	}
	// Two members of one oneof: the later one is the message's.
	inbox := (&storev1.InboxEntry{}).ProtoReflect().Type()
	t.Run("oneof members", func(t *testing.T) {
		checkWire(t, inbox, append(str(field(inbox.Descriptor(), "assignment"), ""), str(field(inbox.Descriptor(), "stop"), "")...))
	})
	// A packed list that is empty (no list, so left out of a nested structure), one
	// mixing packed and unpacked elements, and a packed run cut short; each in a
	// container definition's restart policy.
	rp := (&ecsv1.ContainerRestartPolicy{}).ProtoReflect().Type()
	codes := field(rp.Descriptor(), "ignored_exit_codes")
	empty := protowire.AppendBytes(protowire.AppendTag(nil, codes, protowire.BytesType), nil)
	mixed := protowire.AppendVarint(protowire.AppendTag(slices.Clone(empty), codes, protowire.VarintType), 3)
	mixed = append(mixed, protowire.AppendBytes(protowire.AppendTag(nil, codes, protowire.BytesType), protowire.AppendVarint(protowire.AppendVarint(nil, 1), 2))...)
	bad := protowire.AppendBytes(protowire.AppendTag(nil, codes, protowire.BytesType), []byte{0x80})
	policy := field(cd.Descriptor(), "restart_policy")
	for name, wire := range map[string][]byte{"empty packed": empty, "mixed": mixed, "bad packed": bad} {
		t.Run(name, func(t *testing.T) {
			checkWire(t, rp, wire)
			checkWire(t, cd, str(policy, string(wire)))
		})
	}
}

// Proto2's rules, which Berth's proto3 messages do not use but MarshalWirePooled takes
// any type: a missing required field fails, an unknown value of a closed enum is an
// unknown field.
func TestMarshalWirePooledProto2(t *testing.T) {
	fdp := (&descriptorpb.FieldDescriptorProto{}).ProtoReflect().Type()
	np := (&descriptorpb.UninterpretedOption_NamePart{}).ProtoReflect().Type()
	closed := protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 99) // type = 99
	t.Run("closed enum, unknown value", func(t *testing.T) { checkWire(t, fdp, closed) })
	t.Run("required field missing", func(t *testing.T) { checkWire(t, np, nil) })
}

// Random byte changes to random messages' encodings (bits flipped, bytes replaced or
// inserted, runs repeated): each as proto.Unmarshal reads it, or refused as it refuses.
func TestMarshalWirePooledMutated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	types := berthTypes(t)
	for range 40000 {
		mt := types[rng.IntN(len(types))]
		wire, _ := proto.MarshalOptions{Deterministic: true}.Marshal(randomMessage(rng, mt.New(), 0).Interface())
		if len(wire) == 0 {
			continue
		}
		w := slices.Clone(wire)
		for range 1 + rng.IntN(3) {
			switch i := rng.IntN(len(w)); rng.IntN(4) {
			case 0:
				w[i] ^= 1 << rng.IntN(8)
			case 1:
				w[i] = byte(rng.UintN(256))
			case 2:
				w = slices.Insert(w, i, byte(rng.UintN(256)))
			case 3:
				j := i + rng.IntN(len(w)-i)
				w = append(slices.Clone(w), w[i:j]...)
			}
		}
		checkWire(t, mt, w)
	}
}
