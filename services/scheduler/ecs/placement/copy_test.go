package placement

import (
	"fmt"
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// agentRecord is an instance record as an agent registers it: the attributes, reserved
// ports and GPUs of a real host.
func agentRecord() *storev1.ContainerInstanceRecord {
	ci := &ecsv1.ContainerInstance{
		ContainerInstanceArn: proto.String("arn:aws:ecs:us-east-1:" + testAccount + ":container-instance/c/i0"),
		Ec2InstanceId:        proto.String("i-0123456789abcdef0"),
		Status:               proto.String("ACTIVE"),
		AgentConnected:       true,
		RegisteredAt:         proto.Float64(1.7e9),
		VersionInfo:          &ecsv1.VersionInfo{AgentVersion: proto.String("1.0.0")},
		RegisteredResources: []*ecsv1.Resource{intRes(ResourceCPU, 4096), intRes(ResourceMemory, 16000),
			setRes(ResourcePorts, "22", "2375", "2376", "51678", "51679"), setRes(ResourcePortsUDP), setRes(ResourceGPU, "GPU-a", "GPU-b")},
		RemainingResources: []*ecsv1.Resource{intRes(ResourceCPU, 4096), intRes(ResourceMemory, 16000),
			setRes(ResourcePorts, "22", "2375", "2376", "51678", "51679"), setRes(ResourcePortsUDP), setRes(ResourceGPU, "GPU-a", "GPU-b")},
		Version: 7,
	}
	ci.Attributes = append(ci.Attributes, &ecsv1.Attribute{Name: proto.String("ecs.os-type"), Value: proto.String("linux")},
		&ecsv1.Attribute{Name: proto.String("ecs.cpu-architecture"), Value: proto.String("x86_64")})
	for i := range 28 {
		ci.Attributes = append(ci.Attributes, &ecsv1.Attribute{Name: proto.String(fmt.Sprintf("ecs.capability.feature-%d", i))})
	}
	return &storev1.ContainerInstanceRecord{ContainerInstance: ci, ClusterName: "c", ActiveTasks: 3}
}

// TestWritableCopy: the copy a hook reserves on equals the record, and what task.PlaceTxn
// changes on it (reservations with ports and GPUs, active_tasks, the instance's version)
// leaves the cached record as it was.
func TestWritableCopy(t *testing.T) {
	rec := agentRecord()
	// A field this build does not know survives the copy too.
	rec.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5))
	// As the cache holds it: decoded from etcd, whose string sets have room to grow in
	// place (an append to a shared one would write into the record's).
	data, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec = &storev1.ContainerInstanceRecord{}
	if err := proto.Unmarshal(data, rec); err != nil {
		t.Fatal(err)
	}
	before := proto.Clone(rec)

	cp := writableCopy(rec)
	if !proto.Equal(cp, rec) {
		t.Fatalf("copy differs from the record:\n%v\n%v", cp, rec)
	}
	d := Demand{CPU: 512, Memory: 1024, Ports: []int32{8080}, UDPPorts: []int32{53}, GPUs: 1, GPUIDs: []string{"GPU-a"}}
	if err := Reserve(cp.GetContainerInstance(), d); err != nil {
		t.Fatal(err)
	}
	if err := Reserve(cp.GetContainerInstance(), Demand{CPU: 1, Memory: 1, Ports: []int32{8081}}); err != nil {
		t.Fatal(err)
	}
	cp.ActiveTasks += 2
	cp.GetContainerInstance().Version++
	// A second copy of the same record, reserving another port: neither sees the other's.
	other := writableCopy(rec)
	if err := Reserve(other.GetContainerInstance(), Demand{CPU: 1, Memory: 1, Ports: []int32{9090}}); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(rec, before) {
		t.Fatalf("reserving on the copies changed the record:\n%v\nwant\n%v", rec, before)
	}
	if w := FromRecord("i0", other, 0); !w.Ports[9090] || w.Ports[8080] || w.Ports[8081] {
		t.Fatalf("second copy's ports: %v", w.Ports)
	}
	v := FromRecord("i0", cp, 0)
	if v.CPU != 4096-513 || v.Memory != 16000-1025 || !v.Ports[8080] || !v.Ports[8081] || v.Ports[9090] || !v.Ports[22] || !v.UDPPorts[53] || v.GPUs != 1 || v.RunningTasks != 5 {
		t.Fatalf("view of the copy: %+v", v)
	}
	if w := FromRecord("i0", rec, 0); w.CPU != 4096 || w.Ports[8080] || w.UDPPorts != nil || w.GPUs != 2 || w.RunningTasks != 3 {
		t.Fatalf("view of the record: %+v", w)
	}
}

// BenchmarkWritableCopy is what placing a task on an instance costs to copy its record
// (an agent's, with 30 attributes), against the proto.Clone it replaced.
func BenchmarkWritableCopy(b *testing.B) {
	rec := agentRecord()
	b.Run("writableCopy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writableCopy(rec)
		}
	})
	b.Run("proto.Clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			proto.Clone(rec)
		}
	})
}

// TestShallowCopyEveryField: shallowCopy carries every field of the messages it copies,
// each set (a generated struct whose exported fields stopped being its message's fields
// would fail here rather than lose a field in etcd).
func TestShallowCopyEveryField(t *testing.T) {
	for _, m := range []proto.Message{&storev1.ContainerInstanceRecord{}, &ecsv1.ContainerInstance{}, &ecsv1.Resource{}} {
		fillEveryField(m.ProtoReflect(), 2)
		var cp proto.Message
		switch m := m.(type) {
		case *storev1.ContainerInstanceRecord:
			cp = shallowCopy(m)
		case *ecsv1.ContainerInstance:
			cp = shallowCopy(m)
		case *ecsv1.Resource:
			cp = shallowCopy(m)
		}
		if !proto.Equal(cp, m) {
			t.Errorf("%T: copy differs:\n%v\nwant\n%v", m, cp, m)
		}
		// Every field is set: a field left out above would not show.
		fields := m.ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if o := fd.ContainingOneof(); (o == nil || o.IsSynthetic()) && !m.ProtoReflect().Has(fd) {
				t.Errorf("%T: field %s not filled", m, fd.Name())
			}
		}
	}
}

// fillEveryField sets every field of m (one member of each oneof) to a value that is not
// its default, down to depth levels of messages.
func fillEveryField(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && m.WhichOneof(o) != nil {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
				e := l.NewElement()
				if depth > 0 {
					fillEveryField(e.Message(), depth-1)
				}
				l.Append(e)
			} else {
				l.Append(scalarOf(fd))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			v := mp.NewValue()
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				v = scalarOf(fd.MapValue())
			}
			mp.Set(scalarOf(fd.MapKey()).MapKey(), v)
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			sub := m.Mutable(fd).Message()
			if depth > 0 {
				fillEveryField(sub, depth-1)
			}
		default:
			m.Set(fd, scalarOf(fd))
		}
	}
}

// scalarOf is a value of fd's scalar kind that is not the default.
func scalarOf(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(vs.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(7)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(7)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	}
	panic(fmt.Sprintf("no value for kind %v", fd.Kind()))
}
