package control

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// gpuTaskDef registers family with one container asking for gpus GPUs (none when "").
func (e *env) gpuTaskDef(family, gpus string) (*ecsv1.RegisterTaskDefinitionResponse, *awserr.Error) {
	e.t.Helper()
	c := &ecsv1.ContainerDefinition{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 10, Memory: proto.Int32(16)}
	if gpus != "" {
		c.ResourceRequirements = []*ecsv1.ResourceRequirement{{Type: proto.String("GPU"), Value: proto.String(gpus)}}
	}
	return call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String(family), ContainerDefinitions: []*ecsv1.ContainerDefinition{c}})
}

// TestGPUPlacement: a task asking for a GPU is never placed on an instance that advertises
// none, failing with AWS's RESOURCE:GPU and reserving nothing; bad GPU values and Elastic Inference are
// refused at registration and in overrides.
func TestGPUPlacement(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h1", 1024, 1024)
	if _, err := e.gpuTaskDef("gpu", "1"); err != nil {
		t.Fatalf("register GPU task definition: %v", err)
	}
	r := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("gpu")})
	if len(r.GetTasks()) != 0 || len(r.GetFailures()) != 1 || r.GetFailures()[0].GetReason() != "RESOURCE:GPU" || r.GetFailures()[0].GetArn() != ci.GetContainerInstanceArn() {
		t.Fatalf("GPU task on a GPU-less instance: %v", r)
	}
	d := e.describeInstance("c", ci.GetContainerInstanceArn())
	if ResourceInt(d.GetRemainingResources(), "CPU") != 1024 || ResourceInt(d.GetRemainingResources(), "MEMORY") != 1024 || d.GetPendingTasksCount() != 0 {
		t.Fatalf("a failed GPU placement reserved something: %v", d.GetRemainingResources())
	}
	// StartTask on the named instance fails the same way.
	st := must(e, e.s.StartTask, &ecsv1.StartTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("gpu"), ContainerInstances: []string{ci.GetContainerInstanceArn()}})
	if len(st.GetTasks()) != 0 || len(st.GetFailures()) != 1 || st.GetFailures()[0].GetReason() != "RESOURCE:GPU" {
		t.Fatalf("StartTask of a GPU task: %v", st)
	}
	// A container override adding a GPU to a GPU-less definition is placed the same way.
	e.simpleTaskDef("plain", 10, 16)
	ov := &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("app"), ResourceRequirements: []*ecsv1.ResourceRequirement{{Type: proto.String("GPU"), Value: proto.String("2")}}}}}
	r = must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("plain"), Overrides: ov})
	if len(r.GetTasks()) != 0 || len(r.GetFailures()) != 1 || r.GetFailures()[0].GetReason() != "RESOURCE:GPU" {
		t.Fatalf("GPU override: %v", r)
	}
	// Without the override it runs: only the GPU stood in the way.
	r = must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("plain")})
	if len(r.GetTasks()) != 1 {
		t.Fatalf("plain task: %v", r)
	}
	e.checkCounters("c")

	// Bad values: ClientException at registration, InvalidParameterException in overrides.
	for _, v := range []string{"0", "-1", "x", "1.5", "+1", " 1"} {
		_, err := e.gpuTaskDef("bad", v)
		wantErr(t, err, "ClientException")
		if !strings.Contains(err.Message, "resourceRequirements") || !strings.Contains(err.Message, "container 'app'") {
			t.Fatalf("GPU %q: %s", v, err.Message)
		}
	}
	_, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("inf"), ContainerDefinitions: []*ecsv1.ContainerDefinition{{
		Name: proto.String("app"), Image: proto.String("busybox"), Memory: proto.Int32(16),
		ResourceRequirements: []*ecsv1.ResourceRequirement{{Type: proto.String("InferenceAccelerator"), Value: proto.String("dev1")}},
	}}})
	wantErr(t, err, "ClientException")
	if !strings.Contains(err.Message, "InferenceAccelerator is not supported") {
		t.Fatalf("InferenceAccelerator: %s", err.Message)
	}
	ov.ContainerOverrides[0].ResourceRequirements[0].Value = proto.String("0")
	_, err = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("plain"), Overrides: ov})
	wantErr(t, err, "InvalidParameterException")
	if !strings.Contains(err.Message, "container override 'app'") {
		t.Fatalf("GPU override 0: %s", err.Message)
	}
}

// TestGPUAssignment: an instance registering 2 GPU ids gives two 1-GPU tasks distinct ids
// (on the task record, the container's gpuIds and the agent's assignment); a third fails
// with RESOURCE:GPU; once one stops its id is given again; a re-registration keeps held
// ids out of the remaining set.
func TestGPUAssignment(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	reg := func() *ecsv1.ContainerInstance {
		r, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
			Cluster: "c", HostId: "g1", RuntimeReady: true,
			Resources: append(Resources(4096, 4096, nil, nil), &ecsv1.Resource{Name: proto.String("GPU"), Type: proto.String("STRINGSET"), StringSetValue: []string{"GPU-a", "GPU-b"}}),
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetContainerInstance()
	}
	ci := reg()
	if _, err := e.gpuTaskDef("gpu", "1"); err != nil {
		t.Fatal(err)
	}
	run := func() *ecsv1.RunTaskResponse {
		return must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("gpu")})
	}
	gpuOf := func(tk *ecsv1.Task) string {
		t.Helper()
		d := e.describeTask("c", tk.GetTaskArn())
		ids := d.GetContainers()[0].GetGpuIds()
		a := e.inbox(ci.GetContainerInstanceArn(), tk.GetTaskArn()).GetAssignment()
		if len(ids) != 1 || !slices.Equal(a.GetTask().GetContainers()[0].GetGpuIds(), ids) {
			t.Fatalf("task %s: gpuIds %v, assignment %v", tk.GetTaskArn(), ids, a.GetTask().GetContainers())
		}
		return ids[0]
	}
	r1, r2 := run(), run()
	if len(r1.GetTasks()) != 1 || len(r2.GetTasks()) != 1 {
		t.Fatalf("runs: %v %v", r1, r2)
	}
	g1, g2 := gpuOf(r1.GetTasks()[0]), gpuOf(r2.GetTasks()[0])
	if g1 == g2 || !slices.Contains([]string{"GPU-a", "GPU-b"}, g1) || !slices.Contains([]string{"GPU-a", "GPU-b"}, g2) {
		t.Fatalf("GPUs %s and %s: want the two distinct ids", g1, g2)
	}
	if rem := ResourcePortSet(e.describeInstance("c", ci.GetContainerInstanceArn()).GetRemainingResources(), "GPU"); len(rem) != 0 {
		t.Fatalf("remaining GPUs %v with both held", rem)
	}
	r3 := run()
	if len(r3.GetTasks()) != 0 || len(r3.GetFailures()) != 1 || r3.GetFailures()[0].GetReason() != "RESOURCE:GPU" {
		t.Fatalf("third GPU task: %v", r3)
	}
	// The agent re-registering its GPUs does not free the held ones.
	ci = reg()
	if r := run(); len(r.GetTasks()) != 0 || r.GetFailures()[0].GetReason() != "RESOURCE:GPU" {
		t.Fatalf("after re-registration: %v", r)
	}
	if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, ci.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: r1.GetTasks()[0].GetTaskArn(), LastStatus: "STOPPED"}); err != nil {
		t.Fatal(err)
	}
	if rem := ResourcePortSet(e.describeInstance("c", ci.GetContainerInstanceArn()).GetRemainingResources(), "GPU"); !slices.Equal(rem, []string{g1}) {
		t.Fatalf("remaining GPUs after a stop %v, want [%s]", rem, g1)
	}
	r4 := run()
	if len(r4.GetTasks()) != 1 || gpuOf(r4.GetTasks()[0]) != g1 {
		t.Fatalf("after the stop: %v, want %s again", r4, g1)
	}
	e.checkCounters("c")
	// Duplicate ids in a registration are refused.
	_, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: "g2", RuntimeReady: true,
		Resources: append(Resources(1024, 1024, nil, nil), &ecsv1.Resource{Name: proto.String("GPU"), Type: proto.String("STRINGSET"), StringSetValue: []string{"GPU-x", "GPU-x"}})})
	if err == nil || !strings.Contains(err.Error(), "GPU id") {
		t.Fatalf("duplicate GPU ids: %v", err)
	}
}
