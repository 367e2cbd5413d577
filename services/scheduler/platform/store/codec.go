package store

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Item is one record read from the store with its revisions.
type Item[T proto.Message] struct {
	// Key is the record's full key.
	Key string
	// Value is the decoded record; nil for a Watch delete event.
	Value T
	// CreateRevision is the revision at which the key was created.
	CreateRevision int64
	// ModRevision is the revision of the last write to the key; pass it to
	// Update or Txn.Update to write back.
	ModRevision int64
}

var marshalOpts = proto.MarshalOptions{Deterministic: true}

func marshal(msg proto.Message) ([]byte, error) {
	if msg == nil || !msg.ProtoReflect().IsValid() {
		return nil, errors.New("store: nil message")
	}
	return marshalOpts.Marshal(msg)
}

// newMessage returns a new empty T. T must be a concrete message pointer type
// such as *ecsv1.Task: generated messages answer ProtoReflect on a nil
// pointer.
func newMessage[T proto.Message]() T {
	var zero T
	return zero.ProtoReflect().New().Interface().(T)
}

// Decode decodes kv's value as a T (a concrete message pointer type such as
// *storev1.TaskRecord) for a caller that read kv itself, in a txn of its own. A value
// that does not decode is an error naming the key and its revision.
func Decode[T proto.Message](kv *mvccpb.KeyValue) (T, error) {
	return decode[T](kv)
}

// decode keeps the fields T does not know as unknown fields (proto.Unmarshal's default):
// watchers that take records as emptypb.Empty read them raw from there (agentsession's
// route and inbox watches, placement's instance watch, control's task cache), so this
// must not discard them.
//
// An emptypb.Empty is not decoded: its unknown fields are kv's value as it is (shared,
// not copied; clipped, so that nothing appends into it), which its readers decode or
// scan themselves and which nobody changes. Its framing is checked as proto.Unmarshal
// checked it (field by field at the top level, without copying): a value that does not
// parse is an error as before. Decoding it only to copy the same bytes was a third of
// what the placement path's watches spent decoding.
func decode[T proto.Message](kv *mvccpb.KeyValue) (T, error) {
	msg := newMessage[T]()
	if e, ok := any(msg).(*emptypb.Empty); ok {
		if err := checkFraming(kv.Value); err != nil {
			var zero T
			return zero, fmt.Errorf("store: decode %s at revision %d: %w", kv.Key, kv.ModRevision, err)
		}
		if len(kv.Value) > 0 {
			e.ProtoReflect().SetUnknown(slices.Clip(kv.Value))
		}
		return msg, nil
	}
	if err := proto.Unmarshal(kv.Value, msg); err != nil {
		var zero T
		return zero, fmt.Errorf("store: decode %s at revision %d: %w", kv.Key, kv.ModRevision, err)
	}
	return msg, nil
}

// checkFraming returns an error unless b is a sequence of well-framed protobuf fields
// (what proto.Unmarshal checks of fields it keeps as unknown).
func checkFraming(b []byte) error {
	for len(b) > 0 {
		_, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

func decodeItem[T proto.Message](kv *mvccpb.KeyValue) (Item[T], error) {
	msg, err := decode[T](kv)
	if err != nil {
		return Item[T]{}, err
	}
	return Item[T]{Key: string(kv.Key), Value: msg, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}, nil
}
