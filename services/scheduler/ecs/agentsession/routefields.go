package agentsession

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// routeFields is what a route is made of, read from an encoded ContainerInstanceRecord:
// the instance's ARN, whether it is INACTIVE, its task subnet and its host address.
// Comparable, so that a put that changes none of them is seen without building routes.
type routeFields struct {
	arn      string
	inactive bool
	subnet   string
	address  string
}

// The field numbers routeFieldsOf reads (see wire.go).
var (
	recordFields     = (&storev1.ContainerInstanceRecord{}).ProtoReflect().Descriptor().Fields()
	instanceFields   = (&ecsv1.ContainerInstance{}).ProtoReflect().Descriptor().Fields()
	fieldInstance    = recordFields.ByName("container_instance").Number()
	fieldTaskSubnet  = recordFields.ByName("task_subnet").Number()
	fieldHostAddress = recordFields.ByName("host_address").Number()
	fieldInstanceARN = instanceFields.ByName("container_instance_arn").Number()
	fieldStatus      = instanceFields.ByName("status").Number()
)

// routeFieldsOf reads the route fields of an encoded ContainerInstanceRecord without
// decoding the rest of it (its resources and attributes, which every placement rewrites:
// decoding whole records was most of the route watch's cost). As proto.Unmarshal does,
// the last occurrence of a field wins and a repeated embedded message merges. It returns
// an error for framing that does not parse in the record or its container instance; it
// checks neither the fields it skips nor the strings' UTF-8.
func routeFieldsOf(b []byte) (routeFields, error) {
	var f routeFields
	var status string
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == fieldTaskSubnet && typ == protowire.BytesType:
			f.subnet = string(v)
		case num == fieldHostAddress && typ == protowire.BytesType:
			f.address = string(v)
		case num == fieldInstance && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == fieldInstanceARN && typ == protowire.BytesType:
					f.arn = string(v)
				case num == fieldStatus && typ == protowire.BytesType:
					status = string(v)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return routeFields{}, fmt.Errorf("instance record: %w", err)
	}
	f.inactive = status == "INACTIVE"
	return f, nil
}
