package control

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestRegisterInstance(t *testing.T) {
	e := newEnv(t)
	// The default cluster is created on first registration, as the ECS agent does.
	ci := e.registerHost("", "host-1", 2048, 4096)
	if !strings.Contains(ci.GetContainerInstanceArn(), ":container-instance/default/") || ci.GetStatus() != "ACTIVE" || !ci.GetAgentConnected() || ci.GetVersion() != 1 {
		t.Fatalf("registered %v", ci)
	}
	if c := e.describeCluster("default"); c.GetRegisteredContainerInstancesCount() != 1 {
		t.Fatalf("count %d", c.GetRegisteredContainerInstancesCount())
	}
	if ResourceInt(ci.GetRegisteredResources(), "CPU") != 2048 || ResourceInt(ci.GetRemainingResources(), "MEMORY") != 4096 {
		t.Fatalf("resources %v", ci.GetRegisteredResources())
	}
	// Same host: same instance, resources updated, version bumped, count unchanged.
	again := e.registerHost("default", "host-1", 4096, 8192)
	if again.GetContainerInstanceArn() != ci.GetContainerInstanceArn() || again.GetVersion() != 2 || ResourceInt(again.GetRegisteredResources(), "CPU") != 4096 {
		t.Fatalf("re-registered %v", again)
	}
	if c := e.describeCluster("default"); c.GetRegisteredContainerInstancesCount() != 1 {
		t.Fatalf("count after re-register %d", c.GetRegisteredContainerInstancesCount())
	}
	// The agent session server may call without a caller identity in ctx.
	other := newAccount()
	if _, err := e.s.RegisterInstance(context.Background(), keys.Scope{Account: other, Region: testRegion}, &agentv1.RegisterRequest{HostId: "h", RuntimeReady: true}); err != nil {
		t.Fatalf("register without identity in ctx: %v", err)
	}
	// Unknown non-default cluster.
	if _, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "nope", HostId: "h"}); !errorsIsType(err, "ClusterNotFoundException") {
		t.Fatalf("unknown cluster: %v", err)
	}
	for _, bad := range []*agentv1.RegisterRequest{nil, {}, {HostId: "h", Resources: []*ecsv1.Resource{{Name: proto.String("CPU"), IntegerValue: -1}}}, {HostId: "h", Resources: []*ecsv1.Resource{{Name: proto.String("PORTS"), StringSetValue: []string{"x"}}}}} {
		if _, err := e.s.RegisterInstance(e.ctx, e.sc, bad); !errorsIsType(err, "InvalidParameterException") {
			t.Fatalf("bad request %v: %v", bad, err)
		}
	}
}

func TestInvoluntaryAndOperatorDrain(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	ci := e.registerHost("c", "h", 1024, 1024)
	arnS := ci.GetContainerInstanceArn()

	// The runtime goes away: zero capacity and not ready → DRAINING, disconnected.
	r, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: "h", RuntimeReady: false, RuntimeReason: "containerd unreachable"})
	if err != nil {
		t.Fatal(err)
	}
	d := r.GetContainerInstance()
	if d.GetStatus() != "DRAINING" || d.GetAgentConnected() || ResourceInt(d.GetRegisteredResources(), "CPU") != 0 || d.GetContainerInstanceArn() != arnS {
		t.Fatalf("involuntary drain %v", d)
	}
	// SetAgentConnected(true) cannot reconnect an involuntarily drained instance.
	if err := e.s.SetAgentConnected(e.ctx, e.sc, arnS, true); err != nil {
		t.Fatal(err)
	}
	if e.describeInstance("c", arnS).GetAgentConnected() {
		t.Fatal("connected while drained")
	}
	// Capacity returns: ACTIVE again.
	if back := e.registerHost("c", "h", 1024, 1024); back.GetStatus() != "ACTIVE" || !back.GetAgentConnected() {
		t.Fatalf("recovered %v", back)
	}
	// An operator drain survives re-registration.
	u := must(e, e.s.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{Cluster: proto.String("c"), ContainerInstances: []string{arnS, "nope"}, Status: proto.String("DRAINING")})
	if len(u.GetContainerInstances()) != 1 || u.GetContainerInstances()[0].GetStatus() != "DRAINING" || len(u.GetFailures()) != 1 || u.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("update state %v", u)
	}
	if again := e.registerHost("c", "h", 1024, 1024); again.GetStatus() != "DRAINING" {
		t.Fatalf("operator drain cleared by re-registration: %v", again.GetStatus())
	}
	v1 := e.describeInstance("c", arnS).GetVersion()
	must(e, e.s.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{Cluster: proto.String("c"), ContainerInstances: []string{arnS}, Status: proto.String("ACTIVE")})
	got := e.describeInstance("c", arnS)
	if got.GetStatus() != "ACTIVE" || got.GetVersion() <= v1 {
		t.Fatalf("back to ACTIVE %v (version %d → %d)", got.GetStatus(), v1, got.GetVersion())
	}
	_, cerr := call(e, e.s.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{Cluster: proto.String("c"), ContainerInstances: []string{arnS}, Status: proto.String("INACTIVE")})
	wantErr(t, cerr, "InvalidParameterException")

	// SetAgentConnected toggles and bumps the version; unknown instances are refused.
	if err := e.s.SetAgentConnected(e.ctx, e.sc, arnS, false); err != nil {
		t.Fatal(err)
	}
	if e.describeInstance("c", arnS).GetAgentConnected() {
		t.Fatal("still connected")
	}
	if err := e.s.SetAgentConnected(e.ctx, keys.Scope{Account: newAccount(), Region: testRegion}, arnS, true); !errorsIsType(err, "AccessDeniedException") {
		t.Fatalf("other account: %v", err)
	}
}

func TestContainerInstanceListDescribeDeregister(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	var arns []string
	for _, h := range []string{"h1", "h2", "h3"} {
		arns = append(arns, e.registerHost("c", h, 1024, 1024).GetContainerInstanceArn())
	}
	must(e, e.s.PutAttributes, &ecsv1.PutAttributesRequest{Cluster: proto.String("c"), Attributes: []*ecsv1.Attribute{{Name: proto.String("stack"), Value: proto.String("prod"), TargetId: proto.String(arns[1])}}})

	list := func(req *ecsv1.ListContainerInstancesRequest) []string {
		t.Helper()
		req.Cluster = proto.String("c")
		var out []string
		for {
			r := must(e, e.s.ListContainerInstances, req)
			out = append(out, r.GetContainerInstanceArns()...)
			if r.NextToken == nil {
				return out
			}
			req.NextToken = r.NextToken
		}
	}
	if got := list(&ecsv1.ListContainerInstancesRequest{MaxResults: proto.Int32(1)}); len(got) != 3 {
		t.Fatalf("list %v", got)
	}
	if got := list(&ecsv1.ListContainerInstancesRequest{Filter: proto.String("attribute:stack == prod")}); len(got) != 1 || got[0] != arns[1] {
		t.Fatalf("filter %v", got)
	}
	if got := list(&ecsv1.ListContainerInstancesRequest{Filter: proto.String("attribute:ecs.os-type == linux and attribute:stack exists")}); len(got) != 1 {
		t.Fatalf("filter and %v", got)
	}
	// The filter is package cql's language: globs for =~ (as control's own parser took
	// them), the built-in subjects, a blank filter matching everything.
	if got := list(&ecsv1.ListContainerInstancesRequest{Filter: proto.String("attribute:stack =~ pr*")}); len(got) != 1 || got[0] != arns[1] {
		t.Fatalf("filter glob %v", got)
	}
	if got := list(&ecsv1.ListContainerInstancesRequest{Filter: proto.String("agentConnected == true and not attribute:stack exists")}); len(got) != 2 {
		t.Fatalf("filter builtin %v", got)
	}
	if got := list(&ecsv1.ListContainerInstancesRequest{Filter: proto.String("instanceId == " + arns[2][strings.LastIndexByte(arns[2], '/')+1:])}); len(got) != 1 || got[0] != arns[2] {
		t.Fatalf("filter instanceId %v", got)
	}
	if got := list(&ecsv1.ListContainerInstancesRequest{Filter: proto.String("  ")}); len(got) != 3 {
		t.Fatalf("blank filter %v", got)
	}
	_, err := call(e, e.s.ListContainerInstances, &ecsv1.ListContainerInstancesRequest{Cluster: proto.String("c"), Filter: proto.String("garbage")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.ListContainerInstances, &ecsv1.ListContainerInstancesRequest{Cluster: proto.String("nope")})
	wantErr(t, err, "ClusterNotFoundException")

	id0 := arns[0][strings.LastIndexByte(arns[0], '/')+1:]
	d := must(e, e.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("c"), ContainerInstances: []string{id0, arns[1], "0123456789abcdef0123456789abcdef"}, Include: []string{"TAGS"}})
	if len(d.GetContainerInstances()) != 2 || len(d.GetFailures()) != 1 || d.GetFailures()[0].GetReason() != "MISSING" || !strings.HasSuffix(d.GetFailures()[0].GetArn(), "/c/0123456789abcdef0123456789abcdef") {
		t.Fatalf("describe %v", d)
	}
	if d.GetContainerInstances()[0].Tags == nil {
		t.Fatal("include TAGS gives a tags list")
	}

	// Deregister: INACTIVE, still describable, not listed, count drops; the host
	// registers as a new instance afterwards.
	dr := must(e, e.s.DeregisterContainerInstance, &ecsv1.DeregisterContainerInstanceRequest{Cluster: proto.String("c"), ContainerInstance: proto.String(arns[0])}).GetContainerInstance()
	if dr.GetStatus() != "INACTIVE" {
		t.Fatalf("deregistered %v", dr.GetStatus())
	}
	if e.describeInstance("c", arns[0]).GetStatus() != "INACTIVE" || len(list(&ecsv1.ListContainerInstancesRequest{})) != 2 || e.describeCluster("c").GetRegisteredContainerInstancesCount() != 2 {
		t.Fatal("after deregistration")
	}
	if again := e.registerHost("c", "h1", 1024, 1024); again.GetContainerInstanceArn() == arns[0] {
		t.Fatal("deregistered instance reused")
	}
	_, err = call(e, e.s.DeregisterContainerInstance, &ecsv1.DeregisterContainerInstanceRequest{Cluster: proto.String("c"), ContainerInstance: proto.String(arns[0])})
	wantErr(t, err, "InvalidParameterException")

	// A running task blocks deregistration without force.
	e.simpleTaskDef("w", 10, 10)
	run := must(e, e.s.StartTask, &ecsv1.StartTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("w"), ContainerInstances: []string{arns[2]}})
	if len(run.GetTasks()) != 1 {
		t.Fatalf("start %v", run.GetFailures())
	}
	_, err = call(e, e.s.DeregisterContainerInstance, &ecsv1.DeregisterContainerInstanceRequest{Cluster: proto.String("c"), ContainerInstance: proto.String(arns[2])})
	wantErr(t, err, "InvalidParameterException")
	must(e, e.s.DeregisterContainerInstance, &ecsv1.DeregisterContainerInstanceRequest{Cluster: proto.String("c"), ContainerInstance: proto.String(arns[2]), Force: proto.Bool(true)})
}

func TestRegisterContainerInstanceAPI(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	r := must(e, e.s.RegisterContainerInstance, &ecsv1.RegisterContainerInstanceRequest{
		Cluster: proto.String("c"), InstanceIdentityDocument: proto.String("doc-1"),
		TotalResources: Resources(512, 512, nil, nil),
		Tags:           []*ecsv1.Tag{{Key: proto.String("a"), Value: proto.String("b")}},
	}).GetContainerInstance()
	if len(r.GetTags()) != 1 || ResourceInt(r.GetRegisteredResources(), "CPU") != 512 {
		t.Fatalf("registered %v", r)
	}
	again := must(e, e.s.RegisterContainerInstance, &ecsv1.RegisterContainerInstanceRequest{
		Cluster: proto.String("c"), ContainerInstanceArn: r.ContainerInstanceArn, TotalResources: Resources(1024, 512, nil, nil),
	}).GetContainerInstance()
	if again.GetContainerInstanceArn() != r.GetContainerInstanceArn() || ResourceInt(again.GetRegisteredResources(), "CPU") != 1024 {
		t.Fatalf("re-registered %v", again)
	}
}

// TestRegisterInstanceHostAddress: the host address an agent reports is kept on the
// instance record (where peer routes and load balancer targets of bridge tasks take it
// from) and replaced by the next registration; a value that is not a routable IPv4
// address is refused naming the field.
func TestRegisterInstanceHostAddress(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	reg := func(addr string) (string, error) {
		r, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: "h", RuntimeReady: true, Resources: Resources(1024, 1024, nil, nil), HostAddress: addr})
		if err != nil {
			return "", err
		}
		a, _ := arn.Parse(r.GetContainerInstance().GetContainerInstanceArn())
		rec, _, err := store.Get[*storev1.ContainerInstanceRecord](e.ctx, sharedEtcd, keys.Instance(e.sc, "c", a.Name))
		return rec.GetHostAddress(), err
	}
	for _, step := range []struct{ give, want string }{{"10.0.3.7", "10.0.3.7"}, {"10.0.3.8", "10.0.3.8"}, {"", ""}} {
		if got, err := reg(step.give); err != nil || got != step.want {
			t.Errorf("register with host_address %q: stored %q, %v; want %q", step.give, got, err, step.want)
		}
	}
	for _, bad := range []string{"host.example", "0.0.0.0", "10.0.0.1:80", "127.0.0.1", "fd00::1"} {
		if _, err := reg(bad); !errorsIsType(err, "InvalidParameterException") || !strings.Contains(err.Error(), "host_address") {
			t.Errorf("host_address %q: %v", bad, err)
		}
	}
}
