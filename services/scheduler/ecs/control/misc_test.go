package control

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestTags(t *testing.T) {
	e := newEnv(t)
	c := e.createCluster("c")
	td := e.simpleTaskDef("f", 1, 6)
	ci := e.registerHost("c", "h", 1024, 1024)
	tk := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("f")}).GetTasks()[0]
	for _, a := range []string{c.GetClusterArn(), td.GetTaskDefinitionArn(), ci.GetContainerInstanceArn(), tk.GetTaskArn()} {
		must(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String(a), Tags: []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("1")}, {Key: proto.String("b"), Value: proto.String("2")}}})
		must(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String(a), Tags: []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("3")}}})
		must(e, e.s.UntagResource, &ecsv1.UntagResourceRequest{ResourceArn: proto.String(a), TagKeys: []string{"b", "zzz"}})
		got := must(e, e.s.ListTagsForResource, &ecsv1.ListTagsForResourceRequest{ResourceArn: proto.String(a)}).GetTags()
		if len(got) != 1 || got[0].GetKey() != "a" || got[0].GetValue() != "3" {
			t.Fatalf("%s tags %v", a, got)
		}
	}
	tests := []struct {
		name string
		arn  string
		tags []*ecsv1.Tag
		typ  string
	}{
		{"bad arn", "nope", []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("")}}, "InvalidParameterException"},
		{"no tags", c.GetClusterArn(), nil, "InvalidParameterException"},
		{"reserved", c.GetClusterArn(), []*ecsv1.Tag{{Key: proto.String("aws:x"), Value: proto.String("")}}, "InvalidParameterException"},
		{"unknown cluster", "arn:aws:ecs:us-east-1:" + e.acc + ":cluster/ghost", []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("")}}, "ClusterNotFoundException"},
		{"unknown task", "arn:aws:ecs:us-east-1:" + e.acc + ":task/c/0123456789abcdef0123456789abcdef", []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("")}}, "ResourceNotFoundException"},
		{"unknown taskdef", "arn:aws:ecs:us-east-1:" + e.acc + ":task-definition/f:9", []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("")}}, "ResourceNotFoundException"},
		{"unknown capacity provider", "arn:aws:ecs:us-east-1:" + e.acc + ":capacity-provider/x", []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("")}}, "ResourceNotFoundException"},
		{"unknown task set", "arn:aws:ecs:us-east-1:" + e.acc + ":task-set/c/s/ecs-svc/1", []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("")}}, "ResourceNotFoundException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String(tc.arn), Tags: tc.tags})
			wantErr(t, err, tc.typ)
		})
	}
	// 50 tags at most.
	var many []*ecsv1.Tag
	for i := range 50 {
		many = append(many, &ecsv1.Tag{Key: proto.String(fmt.Sprint("k", i)), Value: proto.String("v")})
	}
	_, err := call(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: c.ClusterArn, Tags: many})
	wantErr(t, err, "InvalidParameterException")
}

func TestConcurrentTagUntag(t *testing.T) {
	e := newEnv(t)
	c := e.createCluster("c")
	const n = 40
	// Pre-existing tags u0..u19 get removed while t0..t39 get added.
	var pre []*ecsv1.Tag
	for i := range n / 2 {
		pre = append(pre, &ecsv1.Tag{Key: proto.String(fmt.Sprint("u", i)), Value: proto.String("x")})
	}
	must(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: c.ClusterArn, Tags: pre})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := call(e, e.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: c.ClusterArn, Tags: []*ecsv1.Tag{{Key: proto.String(fmt.Sprint("t", i)), Value: proto.String("v")}}}); err != nil {
				t.Error(err)
			}
		})
		if i < n/2 {
			wg.Go(func() {
				if _, err := call(e, e.s.UntagResource, &ecsv1.UntagResourceRequest{ResourceArn: c.ClusterArn, TagKeys: []string{fmt.Sprint("u", i)}}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	got := must(e, e.s.ListTagsForResource, &ecsv1.ListTagsForResourceRequest{ResourceArn: c.ClusterArn}).GetTags()
	have := map[string]bool{}
	for _, tg := range got {
		have[tg.GetKey()] = true
	}
	for i := range n {
		if !have[fmt.Sprint("t", i)] {
			t.Fatalf("tag t%d lost; have %v", i, have)
		}
	}
	if len(got) != n {
		t.Fatalf("untagged keys survived: %v", have)
	}
}

func TestAttributes(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h", 1024, 1024)
	id := instanceID(ci.GetContainerInstanceArn())
	must(e, e.s.PutAttributes, &ecsv1.PutAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{
		{Name: proto.String("stack"), Value: proto.String("prod"), TargetId: proto.String(id)},
		{Name: proto.String("flag"), TargetId: ci.ContainerInstanceArn, TargetType: proto.String("container-instance")},
	}})
	l := must(e, e.s.ListAttributes, &ecsv1.ListAttributesRequest{Cluster: proto.String("c"), TargetType: proto.String("container-instance"), AttributeName: proto.String("stack")})
	if len(l.GetAttributes()) != 1 || l.GetAttributes()[0].GetValue() != "prod" || l.GetAttributes()[0].GetTargetId() != ci.GetContainerInstanceArn() {
		t.Fatalf("list %v", l)
	}
	all := must(e, e.s.ListAttributes, &ecsv1.ListAttributesRequest{Cluster: proto.String("c"), TargetType: proto.String("container-instance")})
	if len(all.GetAttributes()) != 4 { // ecs.os-type, ecs.cpu-architecture, stack, flag
		t.Fatalf("all %v", all.GetAttributes())
	}
	// Re-registration keeps custom attributes.
	e.registerHost("c", "h", 1024, 1024)
	if l := must(e, e.s.ListAttributes, &ecsv1.ListAttributesRequest{Cluster: proto.String("c"), TargetType: proto.String("container-instance"), AttributeName: proto.String("stack")}); len(l.GetAttributes()) != 1 {
		t.Fatal("custom attribute lost on re-registration")
	}
	must(e, e.s.DeleteAttributes, &ecsv1.DeleteAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{{Name: proto.String("stack"), TargetId: proto.String(id)}}})
	if l := must(e, e.s.ListAttributes, &ecsv1.ListAttributesRequest{Cluster: proto.String("c"), TargetType: proto.String("container-instance"), AttributeName: proto.String("stack")}); len(l.GetAttributes()) != 0 {
		t.Fatal("attribute not deleted")
	}
	var ten []*ecsv1.Attribute
	for i := range 10 {
		ten = append(ten, &ecsv1.Attribute{Name: proto.String(fmt.Sprint("a", i)), TargetId: proto.String(id)})
	}
	_, err := call(e, e.s.PutAttributes, &ecsv1.PutAttributesRequest{Cluster: proto.String("c"), Attributes: ten})
	wantErr(t, err, "AttributeLimitExceededException")
	_, err = call(e, e.s.PutAttributes, &ecsv1.PutAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{{Name: proto.String("x"), TargetId: proto.String("0123456789abcdef0123456789abcdef")}}})
	wantErr(t, err, "TargetNotFoundException")
	_, err = call(e, e.s.PutAttributes, &ecsv1.PutAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{{Name: proto.String("bad name!"), TargetId: proto.String(id)}}})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.PutAttributes, &ecsv1.PutAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{nil}})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.ListAttributes, &ecsv1.ListAttributesRequest{Cluster: proto.String("c")})
	wantErr(t, err, "InvalidParameterException")
}

func TestAccountSettings(t *testing.T) {
	e := newEnv(t)
	eff := must(e, e.s.ListAccountSettings, &ecsv1.ListAccountSettingsRequest{EffectiveSettings: true, Name: proto.String("taskLongArnFormat")})
	if len(eff.GetSettings()) != 1 || eff.GetSettings()[0].GetValue() != "enabled" {
		t.Fatalf("default %v", eff)
	}
	if l := must(e, e.s.ListAccountSettings, &ecsv1.ListAccountSettingsRequest{}); len(l.GetSettings()) != 0 {
		t.Fatalf("explicit settings before any put: %v", l)
	}
	_, err := call(e, e.s.PutAccountSettingDefault, &ecsv1.PutAccountSettingDefaultRequest{Name: proto.String("containerInsights"), Value: proto.String("enabled")})
	wantErr(t, err, "InvalidParameterException")
	must(e, e.s.PutAccountSettingDefault, &ecsv1.PutAccountSettingDefaultRequest{Name: proto.String("containerInsights"), Value: proto.String("disabled")})
	if c := e.createCluster("ci"); c.GetSettings()[0].GetValue() != "disabled" {
		t.Fatalf("cluster setting from account default: %v", c.GetSettings())
	}
	p := must(e, e.s.PutAccountSetting, &ecsv1.PutAccountSettingRequest{Name: proto.String("serviceLongArnFormat"), Value: proto.String("disabled")}).GetSetting()
	if p.GetPrincipalArn() != "arn:aws:iam::"+e.acc+":root" {
		t.Fatalf("principal %v", p)
	}
	// Paging through the effective settings.
	var names []string
	req := &ecsv1.ListAccountSettingsRequest{EffectiveSettings: true, MaxResults: 3}
	for {
		r := must(e, e.s.ListAccountSettings, req)
		for _, s := range r.GetSettings() {
			names = append(names, s.GetName())
		}
		if r.NextToken == nil {
			break
		}
		req.NextToken = r.NextToken
	}
	if len(names) != len(settingDefaults) {
		t.Fatalf("effective settings %v", names)
	}
	for _, bad := range []*ecsv1.PutAccountSettingRequest{
		{Name: proto.String("nope"), Value: proto.String("enabled")},
		{Name: proto.String("taskLongArnFormat"), Value: proto.String("maybe")},
		{Name: proto.String("taskLongArnFormat"), Value: proto.String("enabled"), PrincipalArn: proto.String("arn:aws:iam::111111111111:root")},
		{},
	} {
		_, err := call(e, e.s.PutAccountSetting, bad)
		wantErr(t, err, "InvalidParameterException")
	}
	d := must(e, e.s.DeleteAccountSetting, &ecsv1.DeleteAccountSettingRequest{Name: proto.String("serviceLongArnFormat")}).GetSetting()
	if d.GetValue() != "disabled" {
		t.Fatalf("deleted %v", d)
	}
	if v := effective(mustSettings(t, e), "serviceLongArnFormat"); v != "enabled" {
		t.Fatalf("after delete %s", v)
	}
	// Another account is unaffected.
	o := e.as(newAccount())
	if c := o.createCluster("ci"); c.GetSettings()[0].GetValue() != "disabled" {
		t.Fatal("settings leaked across accounts")
	}
}

func mustSettings(t *testing.T, e *env) []*ecsv1.Setting {
	st, err := e.s.settings(e.ctx, e.sc)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestTaskProtection(t *testing.T) {
	e := newEnv(t)
	now := time.Unix(1_800_000_000, 0)
	e.s.now = func() time.Time { return now }
	e.createCluster("c")
	e.registerHost("c", "h", 1024, 1024)
	e.simpleTaskDef("f", 1, 6)
	tk := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("f")}).GetTasks()[0]
	alone := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("f")}).GetTasks()[0]
	u0 := must(e, e.s.UpdateTaskProtection, &ecsv1.UpdateTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{alone.GetTaskArn()}, ProtectionEnabled: true})
	if len(u0.GetProtectedTasks()) != 0 || len(u0.GetFailures()) != 1 || u0.GetFailures()[0].GetReason() != "TASK_NOT_VALID" {
		t.Fatalf("standalone task protected: %v", u0)
	}
	// tk belongs to a service, as the service scheduler writes it.
	if _, _, err := store.Mutate(e.ctx, sharedEtcd, keys.Task(e.sc, "c", tk.GetTaskArn()[strings.LastIndexByte(tk.GetTaskArn(), '/')+1:]), func(r *storev1.TaskRecord) error {
		r.ServiceName = "svc"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	u := must(e, e.s.UpdateTaskProtection, &ecsv1.UpdateTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{tk.GetTaskArn(), "0123456789abcdef0123456789abcdef"}, ProtectionEnabled: true})
	if len(u.GetProtectedTasks()) != 1 || len(u.GetFailures()) != 1 || u.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("update %v", u)
	}
	if got := u.GetProtectedTasks()[0].GetExpirationDate(); got != float64(now.Add(120*time.Minute).Unix()) {
		t.Fatalf("default expiry %v", got)
	}
	g := must(e, e.s.GetTaskProtection, &ecsv1.GetTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{tk.GetTaskArn()}})
	if !g.GetProtectedTasks()[0].GetProtectionEnabled() {
		t.Fatalf("get %v", g)
	}
	now = now.Add(3 * time.Hour)
	g = must(e, e.s.GetTaskProtection, &ecsv1.GetTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{tk.GetTaskArn()}})
	if g.GetProtectedTasks()[0].GetProtectionEnabled() {
		t.Fatal("expired protection still enabled")
	}
	for _, m := range []int32{0, 2881} {
		_, err := call(e, e.s.UpdateTaskProtection, &ecsv1.UpdateTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{tk.GetTaskArn()}, ProtectionEnabled: true, ExpiresInMinutes: proto.Int32(m)})
		wantErr(t, err, "InvalidParameterException")
	}
	_, err := call(e, e.s.GetTaskProtection, &ecsv1.GetTaskProtectionRequest{Cluster: proto.String("nope"), Tasks: []string{"x"}})
	wantErr(t, err, "ClusterNotFoundException")
}

// TestNilEntries sends requests whose lists hold nil entries; every call must answer
// with a response or an ECS error, never panic.
func TestNilEntries(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h", 1024, 1024)
	e.simpleTaskDef("f", 1, 6)
	_, _ = call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("n"),
		Volumes: []*ecsv1.Volume{nil}, ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}})
	_, _ = call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("n"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{nil}
			c.MountPoints = []*ecsv1.MountPoint{nil}
			c.DependsOn = []*ecsv1.ContainerDependency{nil}
		})}})
	_, _ = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("f"),
		PlacementConstraints: []*ecsv1.PlacementConstraint{nil}, PlacementStrategy: []*ecsv1.PlacementStrategy{nil}, Tags: []*ecsv1.Tag{nil}})
	_, _ = call(e, e.s.StartTask, &ecsv1.StartTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("f"), ContainerInstances: []string{""}})
	_, _ = call(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String("c"), Tasks: []string{"", "arn:", "arn:aws:ecs:x:y:task/"}})
	_, _ = call(e, e.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("c"), ContainerInstances: []string{"", "arn:aws:ecs:us-east-1:" + e.acc + ":container-instance/c/x/y"}})
	_, _ = call(e, e.s.DeleteAttributes, &ecsv1.DeleteAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{nil}})
	_, _ = call(e, e.s.UpdateTaskProtection, &ecsv1.UpdateTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{""}})
	_, _ = call(e, e.s.GetTaskProtection, &ecsv1.GetTaskProtectionRequest{Cluster: proto.String("c"), Tasks: []string{"", "x/y"}})
	_, _ = call(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("c"), DefaultCapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{nil}})
	_, _ = call(e, e.s.UpdateClusterSettings, &ecsv1.UpdateClusterSettingsRequest{Cluster: proto.String("c"), Settings: []*ecsv1.ClusterSetting{nil}})
	_, _ = call(e, e.s.UntagResource, &ecsv1.UntagResourceRequest{ResourceArn: ci.ContainerInstanceArn, TagKeys: []string{""}})
	if _, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: "h", Resources: []*ecsv1.Resource{nil}, Attributes: []*ecsv1.Attribute{nil}}); err != nil {
		t.Fatal(err)
	}
	tk := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("f")})
	if len(tk.GetTasks()) == 1 {
		_ = e.s.ApplyTaskStateChange(e.ctx, e.sc, ci.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tk.GetTasks()[0].GetTaskArn(), LastStatus: "RUNNING", Containers: []*agentv1.ContainerState{nil}})
	}
	_ = e.s.ApplyTaskStateChange(e.ctx, e.sc, "", &agentv1.TaskStateChange{LastStatus: "RUNNING"})
	_ = e.s.SetAgentConnected(e.ctx, e.sc, "", true)
}

// TestRefusedSettingStoredEarlierNotInForce: a setting value Berth now refuses (here
// containerInsights enabled, stored before it was refused) is not in force: the effective
// value and a new cluster's setting are AWS's default, disabled.
func TestRefusedSettingStoredEarlierNotInForce(t *testing.T) {
	e := newEnv(t)
	rec := &ecsv1.ListAccountSettingsResponse{Settings: []*ecsv1.Setting{
		{Name: proto.String("containerInsights"), Value: proto.String("enabled"), PrincipalArn: proto.String(rootARN(e.sc)), Type: proto.String("user")},
		{Name: proto.String("containerInsights"), Value: proto.String("enhanced"), Type: proto.String("user")},
	}}
	if _, err := store.NewTxn(sharedEtcd).Create(keys.Settings(e.sc), rec).Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	eff := must(e, e.s.ListAccountSettings, &ecsv1.ListAccountSettingsRequest{EffectiveSettings: true, Name: proto.String("containerInsights")})
	if len(eff.GetSettings()) != 1 || eff.GetSettings()[0].GetValue() != "disabled" {
		t.Errorf("effective containerInsights %v, want disabled", eff.GetSettings())
	}
	if c := e.createCluster("ci"); c.GetSettings()[0].GetValue() != "disabled" {
		t.Errorf("new cluster's containerInsights %v, want disabled", c.GetSettings())
	}
}
