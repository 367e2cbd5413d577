package store

import (
	"bytes"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestDecodeEmpty: a value read as emptypb.Empty is its bytes as they are, clipped (an
// append does not write into the shared value); an empty value has no unknown fields; a
// value whose framing does not parse is an error, as proto.Unmarshal made it.
func TestDecodeEmpty(t *testing.T) {
	enc, err := proto.Marshal(wrapperspb.String("record"))
	if err != nil {
		t.Fatal(err)
	}
	backing := append(enc, 0xAA, 0xBB) // spare capacity after the value
	val := backing[:len(enc)]
	e, err := decode[*emptypb.Empty](&mvccpb.KeyValue{Key: []byte("k"), Value: val})
	if err != nil {
		t.Fatal(err)
	}
	raw := e.ProtoReflect().GetUnknown()
	if !bytes.Equal(raw, enc) {
		t.Errorf("unknown fields %x, want the value %x", raw, enc)
	}
	if cap(raw) != len(raw) {
		t.Errorf("unknown fields have capacity %d past their length %d: an append would write into the value's array", cap(raw), len(raw))
	}
	back := &wrapperspb.StringValue{}
	if err := proto.Unmarshal(raw, back); err != nil || back.GetValue() != "record" {
		t.Errorf("the raw bytes decode as %v, %v", back, err)
	}

	e, err = decode[*emptypb.Empty](&mvccpb.KeyValue{Key: []byte("k")})
	if err != nil || len(e.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("empty value: %v unknown fields, error %v; want none and no error", e.ProtoReflect().GetUnknown(), err)
	}

	for _, bad := range [][]byte{{0xff}, {0x00}, {0x0a, 0x05, 'a'}, enc[:len(enc)-1]} {
		if _, err := decode[*emptypb.Empty](&mvccpb.KeyValue{Key: []byte("k"), ModRevision: 9, Value: bad}); err == nil {
			t.Errorf("value %x decoded as Empty without error", bad)
		}
		if err := proto.Unmarshal(bad, &emptypb.Empty{}); err == nil {
			t.Errorf("value %x: proto.Unmarshal accepts it too, the test's premise is wrong", bad)
		}
	}
}
