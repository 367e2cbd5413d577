package task

import (
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// Tags returns the tags a new task gets, as ECS gives them (RunTask's and
// CreateService's propagateTags and enableECSManagedTags; the Developer Guide's
// "Tagging your Amazon ECS resources"), in this order:
//
//   - the propagated tags, as stored: the task definition's with propagateTags
//     TASK_DEFINITION, the service's with SERVICE (a service's task; RunTask refuses
//     SERVICE); none with NONE or none given;
//   - the task's own tags (RunTask's, StartTask's) put over them: a key already there
//     takes the task's value, a new one comes after; each is written with a value, ""
//     when it has none, as ECS holds no null tag value;
//   - with ManagedTags, aws:ecs:clusterName, then aws:ecs:serviceName for a service's
//     task or aws:ecs:taskDefinitionFamily for another.
//
// Never nil. It enforces no count: each source of user tags was held to ecsrules.MaxTags
// where it was given, though a task's own tags and its task definition's can together
// exceed it (AWS documents no rule for that); the "aws:" tags do not count against the
// limit, as on AWS.
func Tags(tt Template) []*ecsv1.Tag {
	var propagated []*ecsv1.Tag
	switch tt.PropagateTags {
	case "TASK_DEFINITION":
		propagated = tt.TaskDefinitionTags
	case "SERVICE":
		propagated = tt.ServiceTags
	}
	tags := make([]*ecsv1.Tag, 0, len(propagated)+len(tt.Tags)+2)
	for _, t := range propagated {
		tags = append(tags, proto.Clone(t).(*ecsv1.Tag))
	}
	tags = putTags(tags, tt.Tags)
	if tt.ManagedTags {
		managed := []*ecsv1.Tag{{Key: proto.String("aws:ecs:clusterName"), Value: proto.String(tt.Cluster)}}
		if tt.ServiceName != "" {
			managed = append(managed, &ecsv1.Tag{Key: proto.String("aws:ecs:serviceName"), Value: proto.String(tt.ServiceName)})
		} else {
			managed = append(managed, &ecsv1.Tag{Key: proto.String("aws:ecs:taskDefinitionFamily"), Value: proto.String(tt.TaskDefinition.GetFamily())})
		}
		tags = putTags(tags, managed)
	}
	return tags
}

// putTags puts each tag of add over tags: it replaces the tag of tags with its key, in
// its place, or is appended. A tag of add is copied, with "" for a value it lacks.
func putTags(tags, add []*ecsv1.Tag) []*ecsv1.Tag {
	for _, a := range add {
		if a == nil {
			continue
		}
		nt := &ecsv1.Tag{Key: proto.String(a.GetKey()), Value: proto.String(a.GetValue())}
		i := indexOfKey(tags, a.GetKey())
		if i < 0 {
			tags = append(tags, nt)
			continue
		}
		tags[i] = nt
	}
	return tags
}

func indexOfKey(tags []*ecsv1.Tag, key string) int {
	for i, t := range tags {
		if t.GetKey() == key {
			return i
		}
	}
	return -1
}
