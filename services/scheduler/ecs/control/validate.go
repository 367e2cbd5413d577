package control

import (
	"bytes"
	"encoding/json"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// mergeTags returns cur with add applied (same key: value replaced), in first-seen order.
func mergeTags(cur, add []*ecsv1.Tag) []*ecsv1.Tag {
	out := make([]*ecsv1.Tag, 0, len(cur)+len(add))
	idx := map[string]int{}
	for _, t := range append(append([]*ecsv1.Tag{}, cur...), add...) {
		if t == nil {
			continue
		}
		nt := &ecsv1.Tag{Key: strPtr(t.GetKey()), Value: strPtr(t.GetValue())}
		if i, ok := idx[t.GetKey()]; ok {
			out[i] = nt
			continue
		}
		idx[t.GetKey()] = len(out)
		out = append(out, nt)
	}
	return out
}

// removeTags returns cur without the given keys.
func removeTags(cur []*ecsv1.Tag, keys []string) []*ecsv1.Tag {
	drop := map[string]bool{}
	for _, k := range keys {
		drop[k] = true
	}
	out := make([]*ecsv1.Tag, 0, len(cur))
	for _, t := range cur {
		if !drop[t.GetKey()] {
			out = append(out, t)
		}
	}
	return out
}

func strPtr(s string) *string { return &s }

// optionalString returns p, or nil when p points to "": ECS treats an empty optional
// string (taskRoleArn: "" in a task definition) as absent and leaves it out of its answers.
func optionalString(p *string) *string {
	if p == nil || *p == "" {
		return nil
	}
	return p
}

// Task-level cpu bounds for tasks on EC2 and external instances, in CPU units: "between
// 128 CPU units (0.125 vCPUs) and 196608 CPU units (192 vCPUs)" (task definition
// parameters, Task size, in the Amazon ECS developer guide).
const (
	minTaskCPU = 128
	maxTaskCPU = 196608
)

// normalizeCPU turns a task-level cpu ("1 vCPU", "0.5 vcpu", "1024") into CPU units as a
// decimal string, as RegisterTaskDefinition stores it. It parses with placement.ParseCPU,
// the parser task demand is computed with, so what validates is what is reserved. ok is
// false for anything else and for values outside minTaskCPU–maxTaskCPU.
func normalizeCPU(v string) (string, bool) {
	n, err := placement.ParseCPU(v)
	if err != nil || n < minTaskCPU || n > maxTaskCPU {
		return "", false
	}
	return strconv.Itoa(int(n)), true
}

// Task-level memory bounds, in MiB. The minimum is the 6 MiB ECS requires of a
// container's memory ("the minimum you can specify for a container is 6 MiB",
// ContainerDefinition memory, Amazon ECS API reference): a task smaller than that cannot
// hold one container. The maximum is 4 TiB (4096 GB).
const (
	minTaskMemory = 6
	maxTaskMemory = 4194304
)

// normalizeMemory turns a task-level memory ("1 GB", "0.5GB", "512", "512 MiB") into MiB
// as a decimal string, parsing with placement.ParseMemory. ok is false for anything else
// and for values outside minTaskMemory–maxTaskMemory.
func normalizeMemory(v string) (string, bool) {
	n, err := placement.ParseMemory(v)
	if err != nil || n < minTaskMemory || n > maxTaskMemory {
		return "", false
	}
	return strconv.Itoa(int(n)), true
}

// taskCPUError is the ClientException for a task-level cpu that normalizeCPU refuses, in
// RegisterTaskDefinition and in a RunTask/StartTask cpu override. The message is AWS's (it
// does not repeat the value).
func taskCPUError() error {
	return awserr.Clientf("Invalid 'cpu' setting for task. For more information, see the Troubleshooting section of the Amazon ECS Developer Guide.")
}

// taskMemoryError is the ClientException for a task-level memory v that normalizeMemory
// refuses, in RegisterTaskDefinition and in a RunTask/StartTask memory override. It names
// the problem: not a number of MiB (or GB), above maxTaskMemory, or below minTaskMemory.
func taskMemoryError(v string) error {
	n, err := placement.ParseMemory(v)
	switch {
	case err != nil:
		return awserr.Clientf("Invalid 'memory' setting for task: %q is not a whole number of MiB or a number of GB.", v)
	case n > maxTaskMemory:
		return awserr.Clientf("Invalid 'memory' setting for task: %q. The maximum is %d MiB.", v, maxTaskMemory)
	}
	return awserr.Clientf("Invalid 'memory' setting for task: %q. The minimum is %d MiB.", v, minTaskMemory)
}

// checkContainerMemory applies RegisterTaskDefinition's rules to one container's memory
// settings (MiB; nil when unset) against the task's memory (MiB; 0 when the task sets
// none): memory not below memoryReservation, nor above the task's memory. The error is of
// type kind: ClientErr at registration, InvalidParamErr for RunTask/StartTask overrides.
func checkContainerMemory(kind, name string, memory, reservation *int32, taskMem int) error {
	if memory != nil && reservation != nil && *memory < *reservation {
		return awserr.New(kind, "Invalid setting for container '%s'. 'memory' must be greater than or equal to 'memoryReservation'.", name)
	}
	if taskMem > 0 && memory != nil && int(*memory) > taskMem {
		return awserr.New(kind, "Invalid 'memory' setting for container '%s'. The container memory must not exceed the task memory.", name)
	}
	return nil
}

// containerMemoryMiB is what a container counts against its task's memory: its memory,
// else its memoryReservation, else 0.
func containerMemoryMiB(memory, reservation *int32) int {
	if memory != nil {
		return int(*memory)
	}
	if reservation != nil {
		return int(*reservation)
	}
	return 0
}

// checkTaskMemorySum refuses containers whose memory together (memSum, MiB) exceeds the
// task's memory (taskMem, MiB; 0 when the task sets none), with an error of type kind (as
// checkContainerMemory).
func checkTaskMemorySum(kind string, memSum, taskMem int) error {
	if taskMem > 0 && memSum > taskMem {
		return awserr.New(kind, "Invalid 'memory' setting for task: the containers' memory (%d MiB) exceeds the task memory (%d MiB).", memSum, taskMem)
	}
	return nil
}

// Size limits ECS puts on requests. maxOverridesLen is the 8,192 characters a RunTask or
// StartTask overrides structure may take, JSON formatting included (TaskOverride, Amazon
// ECS API reference; AWS answers InvalidParameterException "Container Overrides length
// must be at most 8192"). maxTaskDefinitionLen is the 64 KiB a task definition may take
// (Amazon ECS service quotas, "Task definition size"; AWS answers ClientException
// "Actual length: 'N'. Max allowed length is '65536' bytes.").
const (
	maxOverridesLen      = 8192
	maxTaskDefinitionLen = 65536
)

// jsonLen returns the length in bytes of m as compact JSON with AWS's field names
// (protojson's output, whose spacing is not stable, compacted). It returns 0 for a nil m
// or when m cannot be marshalled.
func jsonLen(m proto.Message) int {
	b, err := protojson.Marshal(m)
	if err != nil {
		return 0
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return len(b)
	}
	return buf.Len()
}

// checkOverridesSize refuses overrides whose JSON is longer than maxOverridesLen, with
// AWS's InvalidParameterException.
func checkOverridesSize(ov *ecsv1.TaskOverride) error {
	if ov == nil {
		return nil
	}
	if jsonLen(ov) > maxOverridesLen {
		return awserr.InvalidParameterf("Container Overrides length must be at most %d", maxOverridesLen)
	}
	return nil
}

// checkTaskDefinitionSize refuses a RegisterTaskDefinition request whose task definition
// (the request without its tags) is longer than maxTaskDefinitionLen bytes as JSON, with
// AWS's ClientException.
func checkTaskDefinitionSize(m *ecsv1.RegisterTaskDefinitionRequest) error {
	c := proto.Clone(m).(*ecsv1.RegisterTaskDefinitionRequest)
	c.Tags = nil
	if n := jsonLen(c); n > maxTaskDefinitionLen {
		return awserr.Clientf("Actual length: '%d'. Max allowed length is '%d' bytes.", n, maxTaskDefinitionLen)
	}
	return nil
}

// oneOf reports whether v is one of the allowed values.
func oneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
