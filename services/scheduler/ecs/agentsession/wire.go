package agentsession

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// The sessions read a few fields of the records they pass on straight off the wire
// (routeFieldsOf, parseRawAssignment). The field numbers come from the generated
// descriptors, so that a renumbering in a .proto cannot go unnoticed here.
var (
	fieldInboxAssignment          = (&storev1.InboxEntry{}).ProtoReflect().Descriptor().Fields().ByName("assignment").Number()
	fieldResponseAssignment       = (&agentv1.SessionResponse{}).ProtoReflect().Descriptor().Fields().ByName("assignment").Number()
	assignmentFields              = (&agentv1.Assignment{}).ProtoReflect().Descriptor().Fields()
	fieldAssignmentDeliveryID     = assignmentFields.ByName("delivery_id").Number()
	fieldAssignmentTask           = assignmentFields.ByName("task").Number()
	fieldAssignmentTaskDefinition = assignmentFields.ByName("task_definition").Number()
	fieldTaskDefinitionArn        = (&ecsv1.Task{}).ProtoReflect().Descriptor().Fields().ByName("task_definition_arn").Number()
)

// rawAssignment is what deliverRaw reads of an inbox entry holding an assignment.
type rawAssignment struct {
	fields            []byte // the Assignment's encoding, a sub-slice of the entry's
	deliveryID        string // "" when the entry has none
	hasTaskDefinition bool   // the entry carries its task definition (written before they were left out)
	taskDefinitionArn string // the task's
}

// parseRawAssignment reads an encoded InboxEntry. ok is false unless it is exactly one
// assignment field whose framing parses down to the task's fields, with the task field
// once: anything else (a stop order, bytes a full decode would merge, bytes framed
// wrongly) is left to proto.Unmarshal. It checks no deeper and no string's UTF-8 (see
// deliver).
func parseRawAssignment(entry []byte) (a rawAssignment, ok bool) {
	n, tasks := 0, 0
	err := eachField(entry, func(num protowire.Number, typ protowire.Type, v []byte) error {
		n++
		if num != fieldInboxAssignment || typ != protowire.BytesType {
			return errNotRaw
		}
		a.fields = v
		return nil
	})
	if err != nil || n != 1 {
		return rawAssignment{}, false
	}
	err = eachField(a.fields, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldAssignmentDeliveryID:
			a.deliveryID = string(v)
		case fieldAssignmentTaskDefinition:
			a.hasTaskDefinition = true
		case fieldAssignmentTask:
			tasks++
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == fieldTaskDefinitionArn && typ == protowire.BytesType {
					a.taskDefinitionArn = string(v)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil || tasks != 1 {
		return rawAssignment{}, false
	}
	return a, true
}

// errNotRaw stops parseRawAssignment's walk at a field it does not pass on raw.
var errNotRaw = errors.New("not a raw assignment")

// appendAssignment appends to dst a SessionResponse's assignment field holding the
// Assignment encoded as fields followed by the extra encoded fields (each appended field
// sets one the encoding lacks, so the message decodes as fields with them set).
func appendAssignment(dst, fields []byte, extra ...[]byte) []byte {
	size := len(fields)
	for _, e := range extra {
		size += len(e)
	}
	dst = protowire.AppendTag(dst, fieldResponseAssignment, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = append(dst, fields...)
	for _, e := range extra {
		dst = append(dst, e...)
	}
	return dst
}

// eachField calls fn with each field of the encoded message b: its number, wire type and,
// for a length-delimited field, its contents (other types' values are skipped). It stops
// at fn's first error and returns it, or an error for a tag or value whose framing does
// not parse. It does not look inside the contents.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}
