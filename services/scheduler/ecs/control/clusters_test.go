package control

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestCreateCluster(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		req     *ecsv1.CreateClusterRequest
		wantErr string
		check   func(t *testing.T, c *ecsv1.Cluster)
	}{
		{"default name", &ecsv1.CreateClusterRequest{}, "", func(t *testing.T, c *ecsv1.Cluster) {
			if c.GetClusterName() != "default" || c.GetClusterArn() != "arn:aws:ecs:us-east-1:"+e.acc+":cluster/default" {
				t.Fatalf("got %s %s", c.GetClusterName(), c.GetClusterArn())
			}
			if c.GetStatus() != "ACTIVE" {
				t.Fatalf("status %s", c.GetStatus())
			}
			if len(c.GetSettings()) != 1 || c.GetSettings()[0].GetValue() != "disabled" {
				t.Fatalf("settings %v", c.GetSettings())
			}
		}},
		{"name with tags and settings", &ecsv1.CreateClusterRequest{
			ClusterName: proto.String("prod_1-a"),
			Tags:        []*ecsv1.Tag{{Key: proto.String("team"), Value: proto.String("core")}},
			Settings:    []*ecsv1.ClusterSetting{{Name: proto.String("containerInsights"), Value: proto.String("disabled")}},
		}, "", func(t *testing.T, c *ecsv1.Cluster) {
			if len(c.GetTags()) != 1 || c.GetSettings()[0].GetValue() != "disabled" {
				t.Fatalf("tags %v settings %v", c.GetTags(), c.GetSettings())
			}
		}},
		{"containerInsights enabled", &ecsv1.CreateClusterRequest{ClusterName: proto.String("ci"),
			Settings: []*ecsv1.ClusterSetting{{Name: proto.String("containerInsights"), Value: proto.String("enabled")}}}, "InvalidParameterException", nil},
		{"bad characters", &ecsv1.CreateClusterRequest{ClusterName: proto.String("a b")}, "InvalidParameterException", nil},
		{"slash", &ecsv1.CreateClusterRequest{ClusterName: proto.String("a/b")}, "InvalidParameterException", nil},
		{"too long", &ecsv1.CreateClusterRequest{ClusterName: proto.String(strings.Repeat("a", 256))}, "InvalidParameterException", nil},
		{"empty", &ecsv1.CreateClusterRequest{ClusterName: proto.String("")}, "InvalidParameterException", nil},
		{"max length", &ecsv1.CreateClusterRequest{ClusterName: proto.String(strings.Repeat("a", 255))}, "", nil},
		{"aws tag", &ecsv1.CreateClusterRequest{ClusterName: proto.String("x"), Tags: []*ecsv1.Tag{{Key: proto.String("aws:x"), Value: proto.String("")}}}, "InvalidParameterException", nil},
		{"bad setting", &ecsv1.CreateClusterRequest{ClusterName: proto.String("x"), Settings: []*ecsv1.ClusterSetting{{Name: proto.String("foo"), Value: proto.String("enabled")}}}, "InvalidParameterException", nil},
		{"nil tag entries", &ecsv1.CreateClusterRequest{ClusterName: proto.String("x"), Tags: []*ecsv1.Tag{nil}}, "InvalidParameterException", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := call(e, e.s.CreateCluster, tc.req)
			if tc.wantErr != "" {
				wantErr(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, resp.GetCluster())
			}
		})
	}
	// Creating an ACTIVE cluster again returns it unchanged.
	again := must(e, e.s.CreateCluster, &ecsv1.CreateClusterRequest{ClusterName: proto.String("prod_1-a")}).GetCluster()
	if len(again.GetTags()) != 1 {
		t.Fatalf("re-create changed the cluster: %v", again)
	}
}

func TestDescribeClusters(t *testing.T) {
	e := newEnv(t)
	e.createCluster("a")
	must(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String(e.describeCluster("a").GetClusterArn()), Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}}})

	r := must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"a", "nope", "arn:aws:ecs:us-east-1:" + e.acc + ":cluster/a"}})
	if len(r.GetClusters()) != 2 || len(r.GetFailures()) != 1 {
		t.Fatalf("clusters %d failures %v", len(r.GetClusters()), r.GetFailures())
	}
	f := r.GetFailures()[0]
	if f.GetReason() != "MISSING" || f.GetArn() != "arn:aws:ecs:us-east-1:"+e.acc+":cluster/nope" {
		t.Fatalf("failure %v", f)
	}
	if r.GetClusters()[0].GetTags() != nil || r.GetClusters()[0].GetStatistics() != nil {
		t.Fatalf("tags/statistics without include: %v", r.GetClusters()[0])
	}
	r = must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"a"}, Include: []string{"TAGS", "STATISTICS", "SETTINGS"}})
	c := r.GetClusters()[0]
	if len(c.GetTags()) != 1 || len(c.GetStatistics()) == 0 || len(c.GetSettings()) != 1 {
		t.Fatalf("include: %v", c)
	}
	// No clusters given: default, missing here.
	r = must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{})
	if len(r.GetFailures()) != 1 || !strings.HasSuffix(r.GetFailures()[0].GetArn(), ":cluster/default") {
		t.Fatalf("default: %v", r)
	}
	_, err := call(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Include: []string{"BOGUS"}})
	wantErr(t, err, "InvalidParameterException")
}

func TestListClustersPaging(t *testing.T) {
	e := newEnv(t)
	for i := range 7 {
		e.createCluster(fmt.Sprintf("c%d", i))
	}
	must(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("c3")})
	var all []string
	token := ""
	for {
		req := &ecsv1.ListClustersRequest{MaxResults: proto.Int32(2)}
		if token != "" {
			req.NextToken = proto.String(token)
		}
		r := must(e, e.s.ListClusters, req)
		all = append(all, r.GetClusterArns()...)
		if len(r.GetClusterArns()) > 2 {
			t.Fatalf("page of %d", len(r.GetClusterArns()))
		}
		if r.NextToken == nil {
			break
		}
		token = r.GetNextToken()
	}
	if len(all) != 6 {
		t.Fatalf("listed %v", all)
	}
	for _, a := range all {
		if strings.HasSuffix(a, "/c3") {
			t.Fatalf("INACTIVE cluster listed: %v", all)
		}
	}
	for _, bad := range []int32{0, 101, -1} {
		_, err := call(e, e.s.ListClusters, &ecsv1.ListClustersRequest{MaxResults: proto.Int32(bad)})
		wantErr(t, err, "InvalidParameterException")
	}
	_, err := call(e, e.s.ListClusters, &ecsv1.ListClustersRequest{NextToken: proto.String("garbage!")})
	wantErr(t, err, "InvalidParameterException")
}

func TestDeleteCluster(t *testing.T) {
	e := newEnv(t)
	e.createCluster("gone")
	del := must(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("gone")}).GetCluster()
	if del.GetStatus() != "INACTIVE" {
		t.Fatalf("status %s", del.GetStatus())
	}
	if got := e.describeCluster("gone").GetStatus(); got != "INACTIVE" {
		t.Fatalf("described status %s", got)
	}
	_, err := call(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("gone")})
	wantErr(t, err, "ClusterNotFoundException")
	_, err = call(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("never")})
	wantErr(t, err, "ClusterNotFoundException")
	// Re-creating an INACTIVE cluster makes it ACTIVE again.
	if e.createCluster("gone").GetStatus() != "ACTIVE" {
		t.Fatal("re-create of INACTIVE cluster")
	}

	// Instances, then tasks, block deletion.
	e.createCluster("busy")
	ci := e.registerHost("busy", "h1", 1024, 1024)
	_, err = call(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("busy")})
	wantErr(t, err, "ClusterContainsContainerInstancesException")
	if err.Message != "The Cluster cannot be deleted while Container Instances are active or draining." {
		t.Fatalf("message %q", err.Message)
	}
	e.simpleTaskDef("web", 128, 128)
	run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("busy"), TaskDefinition: proto.String("web")})
	if len(run.GetTasks()) != 1 {
		t.Fatalf("run: %v", run.GetFailures())
	}
	must(e, e.s.DeregisterContainerInstance, &ecsv1.DeregisterContainerInstanceRequest{Cluster: proto.String("busy"), ContainerInstance: ci.ContainerInstanceArn, Force: proto.Bool(true)})
	_, err = call(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("busy")})
	wantErr(t, err, "ClusterContainsTasksException")
	must(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("busy"), Task: run.GetTasks()[0].TaskArn})
	if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, ci.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: run.GetTasks()[0].GetTaskArn(), LastStatus: "STOPPED"}); err != nil {
		t.Fatal(err)
	}
	must(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("busy")})

	// Services block deletion (the counter is the service scheduler's; set it directly).
	e.createCluster("svc")
	if _, err := e.s.mutateCluster(e.ctx, e.sc, "svc", func(c *ecsv1.Cluster) error { c.ActiveServicesCount = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	_, err = call(e, e.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("svc")})
	wantErr(t, err, "ClusterContainsServicesException")
}

func TestUpdateClusterAndCapacityProviders(t *testing.T) {
	e := newEnv(t)
	e.createCluster("u")
	_, err := call(e, e.s.UpdateClusterSettings, &ecsv1.UpdateClusterSettingsRequest{Cluster: proto.String("u"), Settings: []*ecsv1.ClusterSetting{{Name: proto.String("containerInsights"), Value: proto.String("enhanced")}}})
	wantErr(t, err, "InvalidParameterException")
	c := must(e, e.s.UpdateClusterSettings, &ecsv1.UpdateClusterSettingsRequest{Cluster: proto.String("u"), Settings: []*ecsv1.ClusterSetting{{Name: proto.String("containerInsights"), Value: proto.String("disabled")}}}).GetCluster()
	if c.GetSettings()[0].GetValue() != "disabled" {
		t.Fatalf("settings %v", c.GetSettings())
	}
	_, err = call(e, e.s.UpdateClusterSettings, &ecsv1.UpdateClusterSettingsRequest{Cluster: proto.String("nope"), Settings: c.GetSettings()})
	wantErr(t, err, "ClusterNotFoundException")
	must(e, e.s.UpdateCluster, &ecsv1.UpdateClusterRequest{Cluster: proto.String("u"), Configuration: &ecsv1.ClusterConfiguration{}})
	p := must(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{
		Cluster: proto.String("u"), CapacityProviders: []string{"FARGATE"},
		DefaultCapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("FARGATE"), Weight: 1}},
	}).GetCluster()
	if len(p.GetCapacityProviders()) != 1 {
		t.Fatalf("providers %v", p)
	}
	_, err = call(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{
		Cluster: proto.String("u"), DefaultCapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("X")}},
	})
	wantErr(t, err, "InvalidParameterException")
}

func TestAccountIsolation(t *testing.T) {
	a := newEnv(t)
	b := a.as(newAccount())
	a.createCluster("shared-name")
	a.simpleTaskDef("fam", 10, 10)

	r := must(b, b.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"shared-name", "arn:aws:ecs:us-east-1:" + a.acc + ":cluster/shared-name"}})
	if len(r.GetClusters()) != 0 || len(r.GetFailures()) != 2 {
		t.Fatalf("b sees a's cluster: %v", r)
	}
	if l := must(b, b.s.ListClusters, &ecsv1.ListClustersRequest{}); len(l.GetClusterArns()) != 0 {
		t.Fatalf("b lists %v", l.GetClusterArns())
	}
	_, err := call(b, b.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String("fam")})
	wantErr(t, err, "ClientException")
	_, err = call(b, b.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String("arn:aws:ecs:us-east-1:" + a.acc + ":task-definition/fam:1")})
	wantErr(t, err, "ClientException")
	_, err = call(b, b.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("arn:aws:ecs:us-east-1:" + a.acc + ":cluster/shared-name")})
	wantErr(t, err, "ClusterNotFoundException")
	_, err = call(b, b.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String("arn:aws:ecs:us-east-1:" + a.acc + ":cluster/shared-name"), Tags: []*ecsv1.Tag{{Key: proto.String("x"), Value: proto.String("y")}}})
	wantErr(t, err, "ClusterNotFoundException")
	// b's own cluster of the same name is independent.
	b.createCluster("shared-name")
	if l := must(b, b.s.ListClusters, &ecsv1.ListClustersRequest{}); len(l.GetClusterArns()) != 1 || !strings.Contains(l.GetClusterArns()[0], b.acc) {
		t.Fatalf("b lists %v", l.GetClusterArns())
	}
	// b's agent cannot report on a's tasks.
	ci := a.registerHost("shared-name", "h", 1024, 1024)
	run := must(a, a.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("shared-name"), TaskDefinition: proto.String("fam")})
	err2 := b.s.ApplyTaskStateChange(b.ctx, b.sc, ci.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: run.GetTasks()[0].GetTaskArn(), LastStatus: "RUNNING"})
	if !errorsIsType(err2, "AccessDeniedException") {
		t.Fatalf("cross-account state change: %v", err2)
	}
}

func errorsIsType(err error, typ string) bool {
	e, ok := err.(*awserr.Error)
	return ok && e.Type == typ
}

// TestEveryActionAnswersECSError calls every ECS action with an empty request through the
// Connect handler NewHandler builds (behind caller.Interceptor, as app serves it) and
// checks the answer is a response or an ECS error (never a bare Connect error, never a
// panic); actions Berth lacks answer UnsupportedFeatureException with UnsupportedMessage,
// which names the action.
func TestEveryActionAnswersECSError(t *testing.T) {
	e := newEnv(t)
	v := reflect.ValueOf(e.client(t, true))
	it := reflect.TypeOf((*ecsv1connect.EcsServiceHandler)(nil)).Elem()
	for i := range it.NumMethod() {
		m := it.Method(i)
		t.Run(m.Name, func(t *testing.T) {
			reqType := m.Type.In(1) // *connect.Request[X]
			msgType := reqType.Elem().Field(0).Type.Elem()
			req := reflect.New(reqType.Elem())
			req.Elem().Field(0).Set(reflect.New(msgType))
			out := v.MethodByName(m.Name).Call([]reflect.Value{reflect.ValueOf(e.ctx), req})
			if errv := out[1].Interface(); errv != nil {
				err := errv.(error)
				ee, ok := awserr.FromConnect(err)
				if !ok {
					t.Fatalf("%s: not an ECS error: %v", m.Name, err)
				}
				if ee.Type == "UnsupportedFeatureException" && !strings.Contains(ee.Message, m.Name) {
					t.Fatalf("%s: message %q does not name the action", m.Name, ee.Message)
				}
				if ee.Type == "ServerException" {
					t.Fatalf("%s: internal error on empty request", m.Name)
				}
			}
		})
	}
	// An action the Server lacks (a service action, served by package service) is the
	// generated handler's CodeUnimplemented on the bare Server, and
	// UnsupportedFeatureException with UnsupportedMessage through NewHandler.
	if _, err := e.s.CreateService(e.ctx, connect.NewRequest(&ecsv1.CreateServiceRequest{})); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("bare CreateService: %v, want CodeUnimplemented", err)
	}
	_, err := e.client(t, true).CreateService(e.ctx, connect.NewRequest(&ecsv1.CreateServiceRequest{}))
	if ee, ok := awserr.FromConnect(err); !ok || ee.Type != "UnsupportedFeatureException" || ee.Message != UnsupportedMessage("CreateService") {
		t.Fatalf("CreateService through NewHandler: %v, want UnsupportedFeatureException %q", err, UnsupportedMessage("CreateService"))
	}
	// Without an account every call is refused: through Connect by caller.Interceptor,
	// in process (no interceptor) with an ECS error by awsapi.Handle.
	if _, err := e.client(t, false).ListClusters(e.ctx, connect.NewRequest(&ecsv1.ListClustersRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("no identity headers: %v, want CodeUnauthenticated", err)
	}
	_, err = e.s.ListClusters(context.Background(), connect.NewRequest(&ecsv1.ListClustersRequest{}))
	if ee, ok := awserr.FromConnect(err); !ok || ee.Type != "AccessDeniedException" {
		t.Fatalf("no account: %v", err)
	}
	// A nil request message is treated as empty.
	if _, err := e.s.ListClusters(e.ctx, &connect.Request[ecsv1.ListClustersRequest]{}); err != nil {
		t.Fatalf("nil message: %v", err)
	}
}

// client serves e's Server through NewHandler behind caller.Interceptor, as app does,
// and returns a Connect client of it that sends e's account and region as the gateway
// does (no identity headers when identify is false).
func (e *env) client(t *testing.T, identify bool) ecsv1connect.EcsServiceClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(NewHandler(e.s, connect.WithInterceptors(caller.Interceptor{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	var opts []connect.ClientOption
	if identify {
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set(identity.AccountHeader, e.sc.Account)
				req.Header().Set(identity.RegionHeader, e.sc.Region)
				return next(ctx, req)
			}
		})))
	}
	return ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL, opts...)
}

// TestClusterTaskCountsAreInstanceSums: placing tasks and the agents' state changes leave
// the cluster record alone (its ModRevision does not move), so a cluster's placements and
// state changes do not take turns on one key; DescribeClusters, with and without
// STATISTICS, reports the sums of the instances' counters.
func TestClusterTaskCountsAreInstanceSums(t *testing.T) {
	e := newEnv(t)
	e.createCluster("sum")
	h1 := e.registerHost("sum", "h1", 1024, 1024)
	h2 := e.registerHost("sum", "h2", 1024, 1024)
	e.simpleTaskDef("sumweb", 256, 128)
	_, before, err := store.Get[*storev1.ClusterRecord](e.ctx, sharedEtcd, keys.Cluster(e.sc, "sum"))
	if err != nil {
		t.Fatal(err)
	}
	run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("sum"), TaskDefinition: proto.String("sumweb"), Count: proto.Int32(5),
		PlacementStrategy: []*ecsv1.PlacementStrategy{{Type: proto.String("spread"), Field: proto.String("instanceId")}}})
	if len(run.GetTasks()) != 5 {
		t.Fatalf("run: %v", run.GetFailures())
	}
	for _, tk := range run.GetTasks()[:2] {
		if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, tk.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tk.GetTaskArn(), LastStatus: "RUNNING"}); err != nil {
			t.Fatal(err)
		}
	}
	_, after, err := store.Get[*storev1.ClusterRecord](e.ctx, sharedEtcd, keys.Cluster(e.sc, "sum"))
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("cluster record ModRevision moved from %d to %d: placements or state changes wrote it", before, after)
	}
	per := map[string][2]int32{}
	for _, h := range []*ecsv1.ContainerInstance{h1, h2} {
		ci := e.describeInstance("sum", h.GetContainerInstanceArn())
		per[h.GetContainerInstanceArn()] = [2]int32{ci.GetPendingTasksCount(), ci.GetRunningTasksCount()}
	}
	if p, r := per[h1.GetContainerInstanceArn()][0]+per[h2.GetContainerInstanceArn()][0], per[h1.GetContainerInstanceArn()][1]+per[h2.GetContainerInstanceArn()][1]; p != 3 || r != 2 ||
		per[h1.GetContainerInstanceArn()] == [2]int32{} || per[h2.GetContainerInstanceArn()] == [2]int32{} {
		t.Fatalf("instances' (pending, running): %v, want both used and summing to (3, 2)", per)
	}
	d := must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"sum"}, Include: []string{"STATISTICS"}}).GetClusters()[0]
	if d.GetPendingTasksCount() != 3 || d.GetRunningTasksCount() != 2 {
		t.Errorf("DescribeClusters pending %d running %d, want 3 and 2", d.GetPendingTasksCount(), d.GetRunningTasksCount())
	}
	stats := map[string]string{}
	for _, kv := range d.GetStatistics() {
		stats[kv.GetName()] = kv.GetValue()
	}
	if stats["pendingEC2TasksCount"] != "3" || stats["runningEC2TasksCount"] != "2" {
		t.Errorf("statistics %v, want pendingEC2TasksCount 3 and runningEC2TasksCount 2", stats)
	}
	e.checkCounters("sum")
}

// TestTaskStartingLeavesInstanceRecord: a task going from PENDING to RUNNING writes only
// its own record and keys (its keys.InstanceRunning key), not its instance's record,
// which every placement on that instance compares; stopping it writes the instance
// (its reservation goes back). The counts follow through DescribeContainerInstances,
// ListContainerInstances' runningTasksCount filter and DescribeClusters.
func TestTaskStartingLeavesInstanceRecord(t *testing.T) {
	e := newEnv(t)
	e.createCluster("start")
	h := e.registerHost("start", "h1", 1024, 1024)
	e.simpleTaskDef("startweb", 256, 128)
	run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("start"), TaskDefinition: proto.String("startweb"), Count: proto.Int32(3)})
	if len(run.GetTasks()) != 3 {
		t.Fatalf("run: %v", run.GetFailures())
	}
	instKey := keys.Instance(e.sc, "start", instanceID(h.GetContainerInstanceArn()))
	_, before, err := store.Get[*storev1.ContainerInstanceRecord](e.ctx, sharedEtcd, instKey)
	if err != nil {
		t.Fatal(err)
	}
	report := func(tk *ecsv1.Task, status string) {
		t.Helper()
		if err := e.s.ApplyTaskStateChange(e.ctx, e.sc, tk.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tk.GetTaskArn(), LastStatus: status}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range run.GetTasks()[:2] {
		report(tk, "RUNNING")
	}
	if _, after, err := store.Get[*storev1.ContainerInstanceRecord](e.ctx, sharedEtcd, instKey); err != nil || after != before {
		t.Fatalf("instance record ModRevision moved from %d to %d (%v): tasks starting wrote it", before, after, err)
	}
	counts := func(pending, running int32) {
		t.Helper()
		if ci := e.describeInstance("start", h.GetContainerInstanceArn()); ci.GetPendingTasksCount() != pending || ci.GetRunningTasksCount() != running {
			t.Fatalf("instance (pending, running) = (%d, %d), want (%d, %d)", ci.GetPendingTasksCount(), ci.GetRunningTasksCount(), pending, running)
		}
		if c := e.describeCluster("start"); c.GetPendingTasksCount() != pending || c.GetRunningTasksCount() != running {
			t.Fatalf("cluster (pending, running) = (%d, %d), want (%d, %d)", c.GetPendingTasksCount(), c.GetRunningTasksCount(), pending, running)
		}
		for _, f := range []struct {
			expr string
			hit  bool
		}{{fmt.Sprintf("runningTasksCount == %d", running), true}, {fmt.Sprintf("runningTasksCount > %d", running), false}} {
			l := must(e, e.s.ListContainerInstances, &ecsv1.ListContainerInstancesRequest{Cluster: proto.String("start"), Filter: proto.String(f.expr)})
			if got := len(l.GetContainerInstanceArns()) == 1; got != f.hit {
				t.Fatalf("ListContainerInstances filter %q listed %v, want the instance %v", f.expr, l.GetContainerInstanceArns(), f.hit)
			}
		}
	}
	counts(1, 2)
	report(run.GetTasks()[0], "STOPPED")
	if _, after, err := store.Get[*storev1.ContainerInstanceRecord](e.ctx, sharedEtcd, instKey); err != nil || after == before {
		t.Fatalf("instance record ModRevision still %d (%v) after a task stopped", after, err)
	}
	counts(1, 1)
	if ci := e.describeInstance("start", h.GetContainerInstanceArn()); ResourceInt(ci.GetRemainingResources(), ResourceCPU) != 1024-2*256 {
		t.Errorf("remaining CPU %d, want %d", ResourceInt(ci.GetRemainingResources(), ResourceCPU), 1024-2*256)
	}
	e.checkCounters("start")
}
