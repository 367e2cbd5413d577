package control

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// checkCounters verifies the cluster's and each instance's counters against the tasks.
func (e *env) checkCounters(cluster string) {
	e.t.Helper()
	var pending, running int32
	perInst := map[string][2]int32{}
	token := ""
	for {
		items, next, err := store.List[*storev1.TaskRecord](e.ctx, sharedEtcd, keys.Tasks(e.sc, cluster), 100, token)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, it := range items {
			p, r := task.Counts(it.Value.GetTask().GetLastStatus())
			pending, running = pending+p, running+r
			c := perInst[it.Value.GetContainerInstanceId()]
			perInst[it.Value.GetContainerInstanceId()] = [2]int32{c[0] + p, c[1] + r}
		}
		if next == "" {
			break
		}
		token = next
	}
	c := e.describeCluster(cluster)
	if c.GetPendingTasksCount() != pending || c.GetRunningTasksCount() != running {
		e.t.Fatalf("cluster counters pending %d running %d, records say %d %d", c.GetPendingTasksCount(), c.GetRunningTasksCount(), pending, running)
	}
	items, _, err := store.List[*storev1.ContainerInstanceRecord](e.ctx, sharedEtcd, keys.Instances(e.sc, cluster), 1000, "")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, it := range items {
		arn := it.Value.GetContainerInstance().GetContainerInstanceArn()
		want := perInst[instanceID(arn)]
		if it.Value.GetActiveTasks() != want[0]+want[1] {
			e.t.Fatalf("instance %s record: %d active tasks, records say %d", arn, it.Value.GetActiveTasks(), want[0]+want[1])
		}
		ci := e.describeInstance(cluster, arn)
		if ci.GetPendingTasksCount() != want[0] || ci.GetRunningTasksCount() != want[1] {
			e.t.Fatalf("instance %s counters %d/%d, records say %d/%d", arn, ci.GetPendingTasksCount(), ci.GetRunningTasksCount(), want[0], want[1])
		}
	}
}

func (e *env) inbox(instanceARN, taskARN string) *storev1.InboxEntry {
	e.t.Helper()
	v, _, err := get[*storev1.InboxEntry](e.ctx, sharedEtcd, keys.Inbox(e.sc, instanceID(instanceARN), taskARN[strings.LastIndexByte(taskARN, '/')+1:]))
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func TestRunTaskPlacement(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci1 := e.registerHost("c", "h1", 1024, 1024)
	ci2 := e.registerHost("c", "h2", 1024, 1024)
	e.simpleTaskDef("web", 512, 512, 8080)

	r := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(3), StartedBy: proto.String("me"),
		Overrides: &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("app"), Command: []string{"sleep", "1"}}}}})
	// Port 8080 fits once per instance: two placed, one fails with RESOURCE:PORTS.
	if len(r.GetTasks()) != 2 || len(r.GetFailures()) == 0 {
		t.Fatalf("placed %d failures %v", len(r.GetTasks()), r.GetFailures())
	}
	for _, f := range r.GetFailures() {
		if f.GetReason() != "RESOURCE:PORTS" {
			t.Fatalf("failure %v", f)
		}
	}
	tk := r.GetTasks()[0]
	if len(tk.GetAttributes()) != 1 || tk.GetAttributes()[0].GetValue() != "x86_64" {
		t.Fatalf("task attributes %v", tk.GetAttributes())
	}
	if tk.GetLastStatus() != "PENDING" || tk.GetDesiredStatus() != "RUNNING" || tk.GetGroup() != "family:web" || tk.GetStartedBy() != "me" ||
		!strings.Contains(tk.GetTaskArn(), ":task/c/") || len(tk.GetContainers()) != 1 || tk.GetOverrides().GetContainerOverrides()[0].GetCommand()[1] != "1" {
		t.Fatalf("task %v", tk)
	}
	// Reservations and inbox entries.
	for _, ci := range []*ecsv1.ContainerInstance{ci1, ci2} {
		d := e.describeInstance("c", ci.GetContainerInstanceArn())
		if ResourceInt(d.GetRemainingResources(), "CPU") != 512 || ResourceInt(d.GetRemainingResources(), "MEMORY") != 512 ||
			!strings.Contains(strings.Join(ResourcePortSet(d.GetRemainingResources(), "PORTS"), ","), "8080") || d.GetPendingTasksCount() != 1 {
			t.Fatalf("instance after placement %v", d)
		}
	}
	for _, tk := range r.GetTasks() {
		in := e.inbox(tk.GetContainerInstanceArn(), tk.GetTaskArn())
		// The entry names the task definition by the task's ARN for it; the agent
		// session adds the definition when it delivers (agentsession TestEndToEndWithControl).
		if in.GetAssignment().GetTask().GetTaskArn() != tk.GetTaskArn() || in.GetAssignment().GetTaskDefinition() != nil ||
			!strings.HasSuffix(in.GetAssignment().GetTask().GetTaskDefinitionArn(), ":task-definition/web:1") {
			t.Fatalf("inbox %v", in)
		}
	}
	e.checkCounters("c")
	// Memory exhausted.
	e.simpleTaskDef("big", 10, 900)
	r2 := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("big")})
	if len(r2.GetTasks()) != 0 || r2.GetFailures()[0].GetReason() != "RESOURCE:MEMORY" {
		t.Fatalf("memory failure %v", r2)
	}
	e.simpleTaskDef("cpu", 1000, 10)
	r3 := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("cpu")})
	if len(r3.GetTasks()) != 0 || r3.GetFailures()[0].GetReason() != "RESOURCE:CPU" {
		t.Fatalf("cpu failure %v", r3)
	}
	// Only draining instances: the failure names their status.
	must(e, e.s.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{Cluster: proto.String("c"), ContainerInstances: []string{ci1.GetContainerInstanceArn(), ci2.GetContainerInstanceArn()}, Status: proto.String("DRAINING")})
	e.simpleTaskDef("small", 1, 6)
	rd := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("small")})
	if len(rd.GetTasks()) != 0 || len(rd.GetFailures()) != 2 || rd.GetFailures()[0].GetReason() != "DRAINING" {
		t.Fatalf("draining failure %v", rd)
	}
	must(e, e.s.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{Cluster: proto.String("c"), ContainerInstances: []string{ci1.GetContainerInstanceArn(), ci2.GetContainerInstanceArn()}, Status: proto.String("ACTIVE")})
	// A disconnected agent: AGENT.
	if err := e.s.SetAgentConnected(e.ctx, e.sc, ci1.GetContainerInstanceArn(), false); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SetAgentConnected(e.ctx, e.sc, ci2.GetContainerInstanceArn(), false); err != nil {
		t.Fatal(err)
	}
	e.simpleTaskDef("tiny", 1, 6)
	r4 := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("tiny")})
	if len(r4.GetTasks()) != 0 || r4.GetFailures()[0].GetReason() != "AGENT" {
		t.Fatalf("agent failure %v", r4)
	}
	e.checkCounters("c")
}

func TestRunTaskValidation(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	e.createCluster("empty")
	e.registerHost("c", "h", 4096, 4096)
	e.simpleTaskDef("web", 1, 6)
	e.simpleTaskDef("old", 1, 6)
	must(e, e.s.DeregisterTaskDefinition, &ecsv1.DeregisterTaskDefinitionRequest{TaskDefinition: proto.String("old:1")})
	tests := []struct {
		name string
		req  *ecsv1.RunTaskRequest
		typ  string
		msg  string
	}{
		{"count 0", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(0)}, "InvalidParameterException", "count"},
		{"count 11", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(11)}, "InvalidParameterException", "count"},
		{"no cluster", &ecsv1.RunTaskRequest{TaskDefinition: proto.String("web")}, "ClusterNotFoundException", "Cluster not found."},
		{"fargate", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), LaunchType: proto.String("FARGATE")}, "InvalidParameterException", "FARGATE"},
		{"managed instances", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), LaunchType: proto.String("MANAGED_INSTANCES")}, "UnsupportedFeatureException", "MANAGED_INSTANCES"},
		{"no task definition", &ecsv1.RunTaskRequest{Cluster: proto.String("c")}, "InvalidParameterException", "taskDefinition"},
		{"unknown task definition", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("nope")}, "ClientException", "TaskDefinition not found."},
		{"inactive task definition", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("old:1")}, "InvalidParameterException", "TaskDefinition is inactive"},
		{"override unknown container", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"),
			Overrides: &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("ghost")}}}}, "InvalidParameterException", "Override for container named ghost is not a container in the TaskDefinition."},
		{"nil override", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"),
			Overrides: &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{nil}}}, "InvalidParameterException", ""},
		{"memory override below 6 MiB", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"),
			Overrides: &ecsv1.TaskOverride{Memory: proto.String("5")}}, "ClientException", "Invalid 'memory' setting for task: \"5\". The minimum is 6 MiB."},
		{"cpu override below 128", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"),
			Overrides: &ecsv1.TaskOverride{Cpu: proto.String("64")}}, "ClientException", "Invalid 'cpu' setting for task."},
		{"no instances", &ecsv1.RunTaskRequest{Cluster: proto.String("empty"), TaskDefinition: proto.String("web")}, "InvalidParameterException", "No Container Instances were found in your cluster."},
		{"bad constraint", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("memberOf"), Expression: proto.String("nonsense")}}}, "InvalidParameterException", ""},
		{"long token", &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), ClientToken: proto.String(strings.Repeat("x", 65))}, "InvalidParameterException", "clientToken"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(e, e.s.RunTask, tc.req)
			wantErr(t, err, tc.typ)
			if !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("message %q lacks %q", err.Message, tc.msg)
			}
		})
	}
	// Constraints: memberOf on an attribute, distinctInstance.
	r := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"),
		PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("memberOf"), Expression: proto.String("attribute:ecs.os-type == windows")}}})
	if len(r.GetTasks()) != 0 || r.GetFailures()[0].GetReason() != "ATTRIBUTE" {
		t.Fatalf("memberOf %v", r)
	}
	r = must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(2),
		PlacementConstraints: []*ecsv1.PlacementConstraint{{Type: proto.String("distinctInstance")}}})
	if len(r.GetTasks()) != 1 {
		t.Fatalf("distinctInstance on one instance placed %d", len(r.GetTasks()))
	}
	// Ten at once fit in one transaction.
	r = must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(10)})
	if len(r.GetTasks()) != 10 {
		t.Fatalf("count 10 placed %d: %v", len(r.GetTasks()), r.GetFailures())
	}
	e.checkCounters("c")
}

func TestRunTaskClientToken(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	e.registerHost("c", "h", 4096, 4096)
	e.simpleTaskDef("web", 1, 6)
	req := &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(2), ClientToken: proto.String("tok/1")}
	a := must(e, e.s.RunTask, req)
	b := must(e, e.s.RunTask, req)
	if len(a.GetTasks()) != 2 || len(b.GetTasks()) != 2 {
		t.Fatalf("tasks %d %d", len(a.GetTasks()), len(b.GetTasks()))
	}
	for i := range a.GetTasks() {
		if a.GetTasks()[i].GetTaskArn() != b.GetTasks()[i].GetTaskArn() {
			t.Fatal("same token started new tasks")
		}
	}
	l := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("c")})
	if len(l.GetTaskArns()) != 2 {
		t.Fatalf("listed %d tasks", len(l.GetTaskArns()))
	}
	// Concurrent calls with one token start the tasks once.
	var wg sync.WaitGroup
	got := make([][]string, 8)
	for i := range got {
		wg.Go(func() {
			r, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), ClientToken: proto.String("race")})
			if err != nil {
				t.Error(err)
				return
			}
			for _, tk := range r.GetTasks() {
				got[i] = append(got[i], tk.GetTaskArn())
			}
		})
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) != 1 || got[i][0] != got[0][0] {
			t.Fatalf("token race: %v", got)
		}
	}
	if l := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("c")}); len(l.GetTaskArns()) != 3 {
		t.Fatalf("listed %d tasks after token race", len(l.GetTaskArns()))
	}
}

func TestStopTaskAndStateChanges(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h", 2048, 2048)
	ciARN := ci.GetContainerInstanceArn()
	e.simpleTaskDef("web", 256, 256, 80)
	tk := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web")}).GetTasks()[0]
	taskARN := tk.GetTaskArn()
	apply := func(ch *agentv1.TaskStateChange) {
		t.Helper()
		ch.TaskArn = taskARN
		if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, ciARN, ch); err != nil {
			t.Fatal(err)
		}
		e.checkCounters("c")
	}
	exit := int32(0)
	apply(&agentv1.TaskStateChange{LastStatus: "RUNNING", Containers: []*agentv1.ContainerState{{Name: "app", LastStatus: "RUNNING", RuntimeId: "rid"}}})
	got := e.describeTask("c", taskARN)
	if got.GetLastStatus() != "RUNNING" || got.StartedAt == nil || got.GetContainers()[0].GetRuntimeId() != "rid" || got.GetVersion() != 2 {
		t.Fatalf("running %v", got)
	}
	if c := e.describeCluster("c"); c.GetRunningTasksCount() != 1 || c.GetPendingTasksCount() != 0 {
		t.Fatalf("counters %v", c)
	}
	// Backwards is ignored.
	apply(&agentv1.TaskStateChange{LastStatus: "PENDING"})
	if e.describeTask("c", taskARN).GetLastStatus() != "RUNNING" {
		t.Fatal("status moved backwards")
	}
	// Another instance cannot report on the task.
	other := e.registerHost("c", "h2", 1024, 1024)
	if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, other.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: taskARN, LastStatus: "STOPPED"}); !errorsIsType(err, "AccessDeniedException") {
		t.Fatalf("foreign instance: %v", err)
	}
	if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, ciARN, &agentv1.TaskStateChange{TaskArn: taskARN, LastStatus: "BOGUS"}); !errorsIsType(err, "InvalidParameterException") {
		t.Fatalf("bogus status: %v", err)
	}
	if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, ciARN, nil); err == nil {
		t.Fatal("nil change accepted")
	}

	// StopTask: desired STOPPED, UserInitiated, StopOrder in the inbox.
	st := must(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: proto.String(taskARN), Reason: proto.String("bye")}).GetTask()
	if st.GetDesiredStatus() != "STOPPED" || st.GetStopCode() != "UserInitiated" || st.GetStoppedReason() != "bye" || st.GetLastStatus() != "RUNNING" {
		t.Fatalf("stopped %v", st)
	}
	if in := e.inbox(ciARN, taskARN); in.GetStop().GetTaskArn() != taskARN || in.GetStop().GetStopCode() != "UserInitiated" {
		t.Fatalf("inbox %v", in)
	}
	// The agent reports the stop: counters, reservation released, inbox cleared, the
	// user's stop code kept, container exit code recorded.
	apply(&agentv1.TaskStateChange{LastStatus: "STOPPED", StopCode: "EssentialContainerExited", StoppedReason: "exited",
		Containers: []*agentv1.ContainerState{{Name: "app", LastStatus: "STOPPED", ExitCode: &exit, Reason: "done"}}})
	got = e.describeTask("c", taskARN)
	if got.GetLastStatus() != "STOPPED" || got.GetStopCode() != "UserInitiated" || got.GetStoppedReason() != "bye" || got.StoppedAt == nil ||
		got.GetContainers()[0].ExitCode == nil || got.GetContainers()[0].GetReason() != "done" {
		t.Fatalf("after STOPPED %v", got)
	}
	d := e.describeInstance("c", ciARN)
	if ResourceInt(d.GetRemainingResources(), "CPU") != 2048 || strings.Contains(strings.Join(ResourcePortSet(d.GetRemainingResources(), "PORTS"), ","), "80,") || d.GetRunningTasksCount() != 0 {
		t.Fatalf("instance after stop %v", d)
	}
	if ports := ResourcePortSet(d.GetRemainingResources(), "PORTS"); len(ports) != 1 || ports[0] != "22" {
		t.Fatalf("ports after stop %v", ports)
	}
	if in := e.inbox(ciARN, taskARN); in != nil {
		t.Fatalf("inbox not cleared: %v", in)
	}
	// Stopping again returns the task as is; listing by desired status moved it.
	must(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: proto.String(taskARN)})
	if l := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("c"), DesiredStatus: proto.String("STOPPED")}); len(l.GetTaskArns()) != 1 {
		t.Fatalf("STOPPED list %v", l)
	}
	if l := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("c")}); len(l.GetTaskArns()) != 0 {
		t.Fatalf("RUNNING list %v", l)
	}
	_, err := call(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: proto.String("0123456789abcdef0123456789abcdef")})
	wantErr(t, err, "InvalidParameterException")
	if err.Message != "The referenced task was not found." {
		t.Fatalf("message %q", err.Message)
	}
	// A later report after STOPPED changes nothing.
	apply(&agentv1.TaskStateChange{LastStatus: "STOPPED"})
	e.checkCounters("c")
}

func TestStopUnplacedTask(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	// A task record without an instance (as a future placer may hold pending tasks; no
	// instance counts it, and a cluster's counts are its instances').
	rec := &storev1.TaskRecord{ClusterName: "c", Task: &ecsv1.Task{
		TaskArn: proto.String("arn:aws:ecs:us-east-1:" + e.acc + ":task/c/00000000000000000000000000000001"), LastStatus: proto.String("PROVISIONING"),
		DesiredStatus: proto.String("RUNNING"), TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:" + e.acc + ":task-definition/x:1"),
	}}
	txn := store.NewTxn(sharedEtcd)
	task.WriteTxn(txn, e.sc, nil, 0, rec)
	if _, err := txn.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	st := must(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: proto.String("00000000000000000000000000000001")}).GetTask()
	if st.GetLastStatus() != "STOPPED" || st.GetDesiredStatus() != "STOPPED" || st.GetStoppedReason() != "Task stopped by user" {
		t.Fatalf("stopped %v", st)
	}
	e.checkCounters("c")
}

// TestStopTaskTxnFence: task.StopTxn's extra compares (the service scheduler's leader
// fence) guard the write; a failing one leaves the task as it was.
func TestStopTaskTxnFence(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	rec := &storev1.TaskRecord{ClusterName: "c", ContainerInstanceId: "i1", Task: &ecsv1.Task{
		TaskArn: proto.String("arn:aws:ecs:us-east-1:" + e.acc + ":task/c/00000000000000000000000000000002"), LastStatus: proto.String("RUNNING"),
		DesiredStatus: proto.String("RUNNING"), TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:" + e.acc + ":task-definition/x:1"),
	}}
	txn := store.NewTxn(sharedEtcd)
	task.WriteTxn(txn, e.sc, nil, 0, rec)
	if _, err := txn.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	key := keys.Task(e.sc, "c", "00000000000000000000000000000002")
	ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := task.StopTxn(ctx, sharedEtcd, time.Now, e.sc, key, "ServiceSchedulerInitiated", "scale in", store.Fence("/berth/v1/leader/none", 42)); err == nil {
		t.Fatal("stopped through a failing fence")
	}
	if got := e.describeTask("c", rec.GetTask().GetTaskArn()); got.GetDesiredStatus() != "RUNNING" {
		t.Fatalf("task changed through a failing fence: %v", got)
	}
	got, err := task.StopTxn(e.ctx, sharedEtcd, time.Now, e.sc, key, "ServiceSchedulerInitiated", "scale in")
	if err != nil || got.GetTask().GetDesiredStatus() != "STOPPED" || got.GetTask().GetStopCode() != "ServiceSchedulerInitiated" {
		t.Fatalf("stop: %v %v", got, err)
	}
	if _, err := task.StopTxn(e.ctx, sharedEtcd, time.Now, e.sc, keys.Task(e.sc, "c", "00000000000000000000000000000009"), "x", "y"); err == nil {
		t.Fatal("stopped a task that does not exist")
	}
}

func TestDescribeAndListTasks(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci1 := e.registerHost("c", "h1", 8192, 8192)
	ci2 := e.registerHost("c", "h2", 8192, 8192)
	e.simpleTaskDef("a", 1, 6)
	e.simpleTaskDef("b", 1, 6)
	runA := must(e, e.s.StartTask, &ecsv1.StartTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("a"), ContainerInstances: []string{ci1.GetContainerInstanceArn(), ci2.GetContainerInstanceArn(), "ffffffffffffffffffffffffffffffff"}, StartedBy: proto.String("ci/job"),
		Tags: []*ecsv1.Tag{{Key: proto.String("t"), Value: proto.String("1")}}})
	if len(runA.GetTasks()) != 2 || len(runA.GetFailures()) != 1 || runA.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("start %v", runA)
	}
	must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("b"), Count: proto.Int32(3)})

	list := func(req *ecsv1.ListTasksRequest) []string {
		t.Helper()
		req.Cluster = proto.String("c")
		var out []string
		for {
			r := must(e, e.s.ListTasks, req)
			out = append(out, r.GetTaskArns()...)
			if r.NextToken == nil {
				return out
			}
			req.NextToken = r.NextToken
		}
	}
	if got := list(&ecsv1.ListTasksRequest{MaxResults: proto.Int32(2)}); len(got) != 5 {
		t.Fatalf("all %d", len(got))
	}
	if got := list(&ecsv1.ListTasksRequest{Family: proto.String("a")}); len(got) != 2 {
		t.Fatalf("family %d", len(got))
	}
	if got := list(&ecsv1.ListTasksRequest{StartedBy: proto.String("ci/job")}); len(got) != 2 {
		t.Fatalf("startedBy %d", len(got))
	}
	if got := list(&ecsv1.ListTasksRequest{ContainerInstance: ci1.ContainerInstanceArn, Family: proto.String("a")}); len(got) != 1 {
		t.Fatalf("instance+family %d", len(got))
	}
	if got := list(&ecsv1.ListTasksRequest{LaunchType: proto.String("FARGATE")}); len(got) != 0 {
		t.Fatalf("launchType %d", len(got))
	}
	if got := list(&ecsv1.ListTasksRequest{DesiredStatus: proto.String("PENDING")}); len(got) != 0 {
		t.Fatalf("PENDING %d", len(got))
	}
	_, err := call(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("nope")})
	wantErr(t, err, "ClusterNotFoundException")

	arnA := runA.GetTasks()[0].GetTaskArn()
	d := must(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String("c"), Tasks: []string{arnA, arnA[strings.LastIndexByte(arnA, '/')+1:], "0123456789abcdef0123456789abcdef"}, Include: []string{"TAGS"}})
	if len(d.GetTasks()) != 2 || len(d.GetFailures()) != 1 || !strings.HasSuffix(d.GetFailures()[0].GetArn(), ":task/c/0123456789abcdef0123456789abcdef") {
		t.Fatalf("describe %v", d)
	}
	if len(d.GetTasks()[0].GetTags()) != 1 {
		t.Fatalf("tags %v", d.GetTasks()[0].GetTags())
	}
	if d := must(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String("c"), Tasks: []string{arnA}}); d.GetTasks()[0].Tags != nil {
		t.Fatal("tags without include")
	}
	_, err = call(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String("c")})
	wantErr(t, err, "InvalidParameterException")
}

func TestARNFormatSettings(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	for _, name := range []string{"taskLongArnFormat", "containerInstanceLongArnFormat"} {
		must(e, e.s.PutAccountSetting, &ecsv1.PutAccountSettingRequest{Name: proto.String(name), Value: proto.String("disabled")})
	}
	ci := e.registerHost("c", "h", 1024, 1024)
	if strings.Contains(ci.GetContainerInstanceArn(), "/c/") {
		t.Fatalf("short instance ARN expected: %s", ci.GetContainerInstanceArn())
	}
	e.simpleTaskDef("w", 1, 6)
	tk := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("w")}).GetTasks()[0]
	if strings.Contains(tk.GetTaskArn(), "/c/") {
		t.Fatalf("short task ARN expected: %s", tk.GetTaskArn())
	}
	// Short ARNs resolve everywhere: describe, agent reports, tags.
	e.describeTask("c", tk.GetTaskArn())
	if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, ci.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tk.GetTaskArn(), LastStatus: "RUNNING"}); err != nil {
		t.Fatal(err)
	}
	must(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: tk.TaskArn, Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}}})
	// Back to the default: long ARNs.
	must(e, e.s.DeleteAccountSetting, &ecsv1.DeleteAccountSettingRequest{Name: proto.String("taskLongArnFormat")})
	tk2 := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("w")}).GetTasks()[0]
	if !strings.Contains(tk2.GetTaskArn(), ":task/c/") {
		t.Fatalf("long task ARN expected: %s", tk2.GetTaskArn())
	}
	// The id → cluster mapping is stored for the short ARN only (a long one names its
	// cluster).
	idCluster := func(taskARN string) *wrapperspb.StringValue {
		v, _, err := get[*wrapperspb.StringValue](e.ctx, sharedEtcd, keys.IDCluster(e.sc, arn.Task, taskARN[strings.LastIndexByte(taskARN, '/')+1:]))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := idCluster(tk.GetTaskArn()); v.GetValue() != "c" {
		t.Fatalf("id → cluster of the short ARN: %v", v)
	}
	if v := idCluster(tk2.GetTaskArn()); v != nil {
		t.Fatalf("id → cluster of a long ARN: %v", v)
	}
}

// TestCountersUnderConcurrency runs tasks, reports their states and stops them from many
// goroutines at once, then checks the cluster's and instances' counters and reservations
// against the records.
func TestCountersUnderConcurrency(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	cis := []*ecsv1.ContainerInstance{e.registerHost("c", "h1", 64*1024, 64*1024), e.registerHost("c", "h2", 64*1024, 64*1024)}
	e.simpleTaskDef("w", 64, 64)
	var mu sync.Mutex
	var tasks []*ecsv1.Task
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			r, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("w"), Count: proto.Int32(3)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			tasks = append(tasks, r.GetTasks()...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(tasks) != 30 {
		t.Fatalf("placed %d tasks", len(tasks))
	}
	e.checkCounters("c")
	for i, tk := range tasks {
		wg.Go(func() {
			report := func(status string) {
				if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, tk.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tk.GetTaskArn(), LastStatus: status}); err != nil {
					t.Error(err)
				}
			}
			report("RUNNING")
			if i%3 == 0 {
				return // stays running
			}
			if i%3 == 1 {
				if _, err := call(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: tk.TaskArn}); err != nil {
					t.Error(err)
				}
			}
			report("STOPPED")
		})
	}
	wg.Wait()
	e.checkCounters("c")
	c := e.describeCluster("c")
	if c.GetRunningTasksCount() != 10 || c.GetPendingTasksCount() != 0 {
		t.Fatalf("cluster counters %d running %d pending", c.GetRunningTasksCount(), c.GetPendingTasksCount())
	}
	var reservedCPU int32
	for _, ci := range cis {
		d := e.describeInstance("c", ci.GetContainerInstanceArn())
		reservedCPU += ResourceInt(d.GetRegisteredResources(), "CPU") - ResourceInt(d.GetRemainingResources(), "CPU")
	}
	if reservedCPU != 10*64 {
		t.Fatalf("reserved CPU %d, want %d for 10 running tasks", reservedCPU, 10*64)
	}
}
