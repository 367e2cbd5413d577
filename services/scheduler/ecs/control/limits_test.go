package control

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestOverrideMemoryAgainstTask: RunTask and StartTask hold container memory overrides to
// the rules RegisterTaskDefinition holds container definitions to, against the task's
// memory (the override's when given), and answer a task memory override that is not a
// number or too large with its own message.
func TestOverrideMemoryAgainstTask(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h", 4096, 8192)
	must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("t128"), Memory: proto.String("128"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{container("app"), container("side", func(c *ecsv1.ContainerDefinition) { c.Memory = nil; c.MemoryReservation = proto.Int32(32) })}})
	co := func(mods ...func(*ecsv1.ContainerOverride)) *ecsv1.TaskOverride {
		o := &ecsv1.ContainerOverride{Name: proto.String("app")}
		for _, m := range mods {
			m(o)
		}
		return &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{o}}
	}
	tests := []struct {
		name string
		ov   *ecsv1.TaskOverride
		typ  string // "" for accepted
		msg  string
	}{
		{"container memory above task memory", co(func(o *ecsv1.ContainerOverride) { o.Memory = proto.Int32(4096) }), "InvalidParameterException",
			"Invalid 'memory' setting for container 'app'. The container memory must not exceed the task memory."},
		{"container memory above overridden task memory", func() *ecsv1.TaskOverride {
			ov := co(func(o *ecsv1.ContainerOverride) { o.Memory = proto.Int32(1024) })
			ov.Memory = proto.String("512")
			return ov
		}(), "InvalidParameterException", "Invalid 'memory' setting for container 'app'. The container memory must not exceed the task memory."},
		{"task memory override below container memory", &ecsv1.TaskOverride{Memory: proto.String("32")}, "InvalidParameterException",
			"Invalid 'memory' setting for container 'app'. The container memory must not exceed the task memory."},
		{"containers together above task memory", co(func(o *ecsv1.ContainerOverride) { o.Memory = proto.Int32(120) }), "InvalidParameterException",
			"Invalid 'memory' setting for task: the containers' memory (152 MiB) exceeds the task memory (128 MiB)."},
		{"reservation above memory", co(func(o *ecsv1.ContainerOverride) { o.MemoryReservation = proto.Int32(100) }), "InvalidParameterException",
			"Invalid setting for container 'app'. 'memory' must be greater than or equal to 'memoryReservation'."},
		{"task memory not a number", &ecsv1.TaskOverride{Memory: proto.String("abc")}, "ClientException",
			`Invalid 'memory' setting for task: "abc" is not a whole number of MiB or a number of GB.`},
		{"task memory too large", &ecsv1.TaskOverride{Memory: proto.String("999999999")}, "ClientException",
			`Invalid 'memory' setting for task: "999999999". The maximum is 4194304 MiB.`},
		{"task memory below minimum", &ecsv1.TaskOverride{Memory: proto.String("5")}, "ClientException",
			`Invalid 'memory' setting for task: "5". The minimum is 6 MiB.`},
		{"overrides over 8192 characters", co(func(o *ecsv1.ContainerOverride) {
			o.Environment = []*ecsv1.KeyValuePair{{Name: proto.String("BIG"), Value: proto.String(strings.Repeat("x", 8192))}}
		}), "InvalidParameterException", "Container Overrides length must be at most 8192"},
		{"within limits", func() *ecsv1.TaskOverride {
			ov := co(func(o *ecsv1.ContainerOverride) {
				o.Memory = proto.Int32(1024)
				o.MemoryReservation = proto.Int32(512)
				o.Environment = []*ecsv1.KeyValuePair{{Name: proto.String("BIG"), Value: proto.String(strings.Repeat("x", 8000))}}
			})
			ov.Memory = proto.String("2048")
			return ov
		}(), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("t128"), Overrides: tc.ov}
			start := &ecsv1.StartTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("t128"), Overrides: tc.ov, ContainerInstances: []string{ci.GetContainerInstanceArn()}}
			if tc.typ == "" {
				if r := must(e, e.s.RunTask, run); len(r.GetTasks()) != 1 {
					t.Fatalf("RunTask %v", r)
				}
				if r := must(e, e.s.StartTask, start); len(r.GetTasks()) != 1 {
					t.Fatalf("StartTask %v", r)
				}
				return
			}
			_, err := call(e, e.s.RunTask, run)
			wantErr(t, err, tc.typ)
			if err.Message != tc.msg {
				t.Fatalf("RunTask message %q, want %q", err.Message, tc.msg)
			}
			_, err = call(e, e.s.StartTask, start)
			wantErr(t, err, tc.typ)
			if err.Message != tc.msg {
				t.Fatalf("StartTask message %q, want %q", err.Message, tc.msg)
			}
		})
	}
}

// TestRegisterTaskDefinitionLimits: a task definition over 64 KiB is refused with AWS's
// ClientException, a task definition and task memory settings AWS refuses are answered
// with a message naming the problem, and an empty taskRoleArn or executionRoleArn is
// treated as absent (left out of the answer).
func TestRegisterTaskDefinitionLimits(t *testing.T) {
	e := newEnv(t)
	big := &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("big"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
		c.Environment = []*ecsv1.KeyValuePair{{Name: proto.String("BIG"), Value: proto.String(strings.Repeat("x", 65536))}}
	})}}
	_, err := call(e, e.s.RegisterTaskDefinition, big)
	wantErr(t, err, "ClientException")
	if !strings.HasPrefix(err.Message, "Actual length: '") || !strings.HasSuffix(err.Message, "'. Max allowed length is '65536' bytes.") {
		t.Fatalf("message %q", err.Message)
	}
	// Just under the limit registers.
	big.ContainerDefinitions[0].Environment[0].Value = proto.String(strings.Repeat("x", 60000))
	must(e, e.s.RegisterTaskDefinition, big)

	for mem, msg := range map[string]string{
		"abc":       `Invalid 'memory' setting for task: "abc" is not a whole number of MiB or a number of GB.`,
		"999999999": `Invalid 'memory' setting for task: "999999999". The maximum is 4194304 MiB.`,
		"2":         `Invalid 'memory' setting for task: "2". The minimum is 6 MiB.`,
	} {
		_, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("m"), Memory: proto.String(mem), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}})
		wantErr(t, err, "ClientException")
		if err.Message != msg {
			t.Fatalf("memory %q: message %q, want %q", mem, err.Message, msg)
		}
	}

	td := must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("roles"), TaskRoleArn: proto.String(""), ExecutionRoleArn: proto.String(""),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}).GetTaskDefinition()
	if td.TaskRoleArn != nil || td.ExecutionRoleArn != nil {
		t.Fatalf("registered with empty role ARNs: %v / %v", td.TaskRoleArn, td.ExecutionRoleArn)
	}
	d := must(e, e.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String("roles")}).GetTaskDefinition()
	if d.TaskRoleArn != nil || d.ExecutionRoleArn != nil {
		t.Fatalf("described with empty role ARNs: %v / %v", d.TaskRoleArn, d.ExecutionRoleArn)
	}
}
