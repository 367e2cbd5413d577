package agentsession

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// fieldsByDecoding is routeFieldsOf's answer computed the slow way: the whole record
// decoded by proto.Unmarshal.
func fieldsByDecoding(t *testing.T, b []byte) routeFields {
	t.Helper()
	rec := &storev1.ContainerInstanceRecord{}
	if err := proto.Unmarshal(b, rec); err != nil {
		t.Fatal(err)
	}
	ci := rec.GetContainerInstance()
	return routeFields{arn: ci.GetContainerInstanceArn(), inactive: ci.GetStatus() == "INACTIVE", subnet: rec.GetTaskSubnet(), address: rec.GetHostAddress()}
}

// TestRouteFieldsOf: the route fields read off the wire agree with a full decode for
// records with every kind of field around them, for a container instance split over two
// occurrences (merged, as proto.Unmarshal merges), and malformed bytes are an error.
func TestRouteFieldsOf(t *testing.T) {
	const arn = "arn:aws:ecs:us-east-1:123456789012:container-instance/c/0123456789abcdef"
	full := &storev1.ContainerInstanceRecord{
		ContainerInstance: &ecsv1.ContainerInstance{
			ContainerInstanceArn: proto.String(arn),
			Status:               proto.String("ACTIVE"),
			AgentConnected:       true,
			RunningTasksCount:    7,
			Attributes:           []*ecsv1.Attribute{{Name: proto.String("ecs.cpu-architecture"), Value: proto.String("x86_64")}},
			RemainingResources:   []*ecsv1.Resource{{Name: proto.String("CPU"), Type: proto.String("INTEGER"), IntegerValue: 1024}, {Name: proto.String("PORTS"), Type: proto.String("STRINGSET"), StringSetValue: []string{"22", "80"}}},
			Version:              42,
		},
		ClusterName: "c",
		TaskSubnet:  "10.240.3.0/24",
		HostAddress: "192.0.2.7",
	}
	inactive := proto.Clone(full).(*storev1.ContainerInstanceRecord)
	inactive.ContainerInstance.Status = proto.String("INACTIVE")
	bare := &storev1.ContainerInstanceRecord{ContainerInstance: &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(arn)}}

	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The ARN in one occurrence of container_instance and the status in a second, with
	// an unknown varint and an unknown fixed64 field between them.
	split := protowire.AppendTag(nil, fieldInstance, protowire.BytesType)
	split = protowire.AppendBytes(split, enc(&ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(arn), Status: proto.String("ACTIVE")}))
	split = protowire.AppendTag(split, 9999, protowire.VarintType)
	split = protowire.AppendVarint(split, 300)
	split = protowire.AppendTag(split, 9998, protowire.Fixed64Type)
	split = protowire.AppendFixed64(split, 1)
	split = protowire.AppendTag(split, fieldInstance, protowire.BytesType)
	split = protowire.AppendBytes(split, enc(&ecsv1.ContainerInstance{Status: proto.String("INACTIVE")}))
	split = append(split, enc(&storev1.ContainerInstanceRecord{TaskSubnet: "10.240.9.0/24", HostAddress: "192.0.2.9"})...)

	for name, b := range map[string][]byte{
		"full":     enc(full),
		"inactive": enc(inactive),
		"bare":     enc(bare),
		"empty":    nil,
		"split":    split,
	} {
		got, err := routeFieldsOf(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := fieldsByDecoding(t, b); got != want {
			t.Errorf("%s: routeFieldsOf = %+v, decoding gives %+v", name, got, want)
		}
	}
	if got, _ := routeFieldsOf(split); !got.inactive || got.arn != arn || got.subnet != "10.240.9.0/24" {
		t.Errorf("split: %+v, want the ARN of the first occurrence and INACTIVE from the second", got)
	}

	good := enc(full)
	for name, b := range map[string][]byte{
		"truncated":          good[:len(good)-3],
		"bad tag":            {0x00},
		"length past end":    append(protowire.AppendTag(nil, fieldTaskSubnet, protowire.BytesType), 0x10, 'x'),
		"truncated instance": append(protowire.AppendTag(nil, fieldInstance, protowire.BytesType), 2, byte(fieldInstanceARN<<3|2), 5),
	} {
		if _, err := routeFieldsOf(b); err == nil {
			t.Errorf("%s: no error for malformed bytes", name)
		}
	}
}
