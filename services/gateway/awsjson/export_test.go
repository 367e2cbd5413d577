package awsjson

import "google.golang.org/protobuf/proto"

// SetDefaultsOff switches the Defaults table off (true) or on for benchmarks comparing the
// encoder with and without it.
func SetDefaultsOff(off bool) { defaultsOff = off }

// BuildDefaults exposes the table builder so tests can feed it rows that must be refused.
func BuildDefaults(rows []MemberDefault) error {
	_, err := buildDefaults(rows)
	return err
}

// MarshalNested encodes m as a structure nested in a response (not as the response
// itself, whose list members are always written), to test the member rules alone.
func MarshalNested(m proto.Message) []byte {
	msg := m.ProtoReflect()
	return appendMessage(nil, msg, shapeOf(msg.Descriptor()), false)
}
