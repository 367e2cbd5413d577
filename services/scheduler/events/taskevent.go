package events

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Event is one EventBridge event (https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html),
// decoded the way patterns match it (json.Number for numbers).
type Event map[string]any

// newEvent returns an event envelope: version "0", a random id, time in RFC 3339 UTC.
func newEvent(s keys.Scope, source, detailType string, resources []string, detail any, at time.Time) Event {
	if resources == nil {
		resources = []string{}
	}
	res := make([]any, len(resources))
	for i, r := range resources {
		res[i] = r
	}
	return Event{
		"version": "0", "id": newUUID(), "detail-type": detailType, "source": source,
		"account": s.Account, "time": at.UTC().Format(time.RFC3339), "region": s.Region,
		"resources": res, "detail": detail,
	}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// TaskStateChange returns ECS's "ECS Task State Change" event for a task
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs_task_events.html):
// source aws.ecs, resources the task ARN, detail the task as DescribeTasks shows it
// (AWS member names, timestamps as RFC 3339 strings with milliseconds, as ECS's events
// write them) plus updatedAt and version (the record's etcd revision, which grows with
// every change as ECS's task version does).
func TaskStateChange(s keys.Scope, task *ecsv1.Task, version int64, at time.Time) Event {
	t := proto.Clone(task).(*ecsv1.Task)
	t.Tags = nil
	if t.GetLaunchType() == "FARGATE" {
		t.ContainerInstanceArn = nil
	}
	detail := messageJSON(t.ProtoReflect())
	detail["updatedAt"] = at.UTC().Format("2006-01-02T15:04:05.000Z")
	detail["version"] = json.Number(fmt.Sprint(version))
	return newEvent(s, "aws.ecs", "ECS Task State Change", []string{t.GetTaskArn()}, detail, at)
}

// messageJSON renders a wire-shape message as the JSON AWS writes in events, by its
// descriptors: json names, timestamps (berth.ecs.v1.timestamp) as RFC 3339 strings.
func messageJSON(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		ts, _ := proto.GetExtension(fd.Options(), ecsv1.E_Timestamp).(bool)
		switch {
		case fd.IsList():
			l := v.List()
			arr := make([]any, l.Len())
			for i := range arr {
				arr[i] = scalarJSON(fd, l.Get(i), ts)
			}
			out[fd.JSONName()] = arr
		case fd.IsMap():
			mm := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				mm[k.String()] = scalarJSON(fd.MapValue(), mv, false)
				return true
			})
			out[fd.JSONName()] = mm
		default:
			out[fd.JSONName()] = scalarJSON(fd, v, ts)
		}
		return true
	})
	return out
}

func scalarJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value, ts bool) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageJSON(v.Message())
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.EnumKind:
		return string(fd.Enum().Values().ByNumber(v.Enum()).Name())
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		f := v.Float()
		if ts {
			sec, frac := math.Modf(f)
			return time.Unix(int64(sec), int64(frac*1e9)).UTC().Format("2006-01-02T15:04:05.000Z")
		}
		return json.Number(fmt.Sprint(f))
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		return json.Number(fmt.Sprint(v.Int()))
	default:
		return json.Number(fmt.Sprint(v.Uint()))
	}
}
