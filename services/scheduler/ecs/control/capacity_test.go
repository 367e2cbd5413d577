package control

import (
	"strings"
	"testing"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

func asgARN(name string) string {
	return "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:0f1e2d3c-aaaa-bbbb-cccc-000000000000:autoScalingGroupName/" + name
}

func (e *env) createProvider(name string) *ecsv1.CapacityProvider {
	e.t.Helper()
	return must(e, e.s.CreateCapacityProvider, &ecsv1.CreateCapacityProviderRequest{
		Name: proto.String(name), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN(name))},
	}).GetCapacityProvider()
}

// registerPoolHost registers a connected host whose berth.capacity-provider attribute
// puts it in provider's pool ("" for none) and, with noFargate, out of the Fargate pool.
func (e *env) registerPoolHost(cluster, host, provider string, noFargate bool, cpu, memory int32) *ecsv1.ContainerInstance {
	e.t.Helper()
	attrs := []*ecsv1.Attribute{{Name: proto.String("ecs.os-type"), Value: proto.String("linux")}}
	if provider != "" {
		attrs = append(attrs, &ecsv1.Attribute{Name: proto.String(capacity.PoolAttribute), Value: proto.String(provider)})
	}
	if noFargate {
		attrs = append(attrs, &ecsv1.Attribute{Name: proto.String(capacity.FargateAttribute), Value: proto.String("false")})
	}
	resp, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
		Cluster: cluster, HostId: host, RuntimeReady: true, Resources: Resources(cpu, memory, []string{"22"}, nil), Attributes: attrs,
	})
	if err != nil {
		e.t.Fatalf("RegisterInstance: %v", err)
	}
	return resp.GetContainerInstance()
}

func TestCapacityProviderLifecycle(t *testing.T) {
	e := newEnv(t)
	cp := must(e, e.s.CreateCapacityProvider, &ecsv1.CreateCapacityProviderRequest{
		Name: proto.String("pool-a"),
		AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{
			AutoScalingGroupArn:          proto.String(asgARN("a")),
			ManagedScaling:               &ecsv1.ManagedScaling{Status: proto.String("DISABLED"), TargetCapacity: proto.Int32(80)},
			ManagedTerminationProtection: proto.String("DISABLED"),
		},
		Tags: []*ecsv1.Tag{{Key: proto.String("team"), Value: proto.String("x")}},
	}).GetCapacityProvider()
	ms := cp.GetAutoScalingGroupProvider().GetManagedScaling()
	if cp.GetStatus() != "ACTIVE" || cp.GetType() != "EC2_AUTOSCALING" || ms.GetTargetCapacity() != 80 || ms.GetMinimumScalingStepSize() != 1 ||
		ms.GetMaximumScalingStepSize() != 10000 || ms.GetInstanceWarmupPeriod() != 300 || cp.GetAutoScalingGroupProvider().GetManagedDraining() != "ENABLED" ||
		cp.GetCapacityProviderArn() != "arn:aws:ecs:us-east-1:"+e.acc+":capacity-provider/pool-a" {
		t.Fatalf("created %v", cp)
	}
	for _, bad := range []*ecsv1.CreateCapacityProviderRequest{
		{Name: proto.String("pool-a"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN("z"))}},
		{Name: proto.String("pool-b"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN("a"))}},
	} {
		_, err := call(e, e.s.CreateCapacityProvider, bad)
		wantErr(t, err, "ClientException")
	}
	for _, bad := range []*ecsv1.CreateCapacityProviderRequest{
		{Name: proto.String("fargate-x"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN("f"))}},
		{Name: proto.String("no-asg")},
		{Name: proto.String("bad-asg"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String("arn:aws:ec2:us-east-1:1:instance/i-1")}},
		{Name: proto.String("mtp"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN("m")), ManagedTerminationProtection: proto.String("ENABLED")}},
		{Name: proto.String("tc"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN("t")), ManagedScaling: &ecsv1.ManagedScaling{TargetCapacity: proto.Int32(101)}}},
		// Berth scales no group: managed scaling ENABLED (also by default when managedScaling is given) is refused.
		{Name: proto.String("ms"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String(asgARN("s")), ManagedScaling: &ecsv1.ManagedScaling{TargetCapacity: proto.Int32(90)}}},
	} {
		_, err := call(e, e.s.CreateCapacityProvider, bad)
		wantErr(t, err, "InvalidParameterException")
	}

	d := must(e, e.s.DescribeCapacityProviders, &ecsv1.DescribeCapacityProvidersRequest{})
	var names []string
	for _, p := range d.GetCapacityProviders() {
		names = append(names, p.GetName())
		if p.Tags != nil {
			t.Fatalf("tags without include TAGS: %v", p)
		}
	}
	if strings.Join(names, ",") != "FARGATE,FARGATE_SPOT,pool-a" {
		t.Fatalf("listed %v", names)
	}
	d = must(e, e.s.DescribeCapacityProviders, &ecsv1.DescribeCapacityProvidersRequest{MaxResults: proto.Int32(2)})
	if len(d.GetCapacityProviders()) != 2 || d.GetNextToken() == "" {
		t.Fatalf("page 1 %v", d)
	}
	d = must(e, e.s.DescribeCapacityProviders, &ecsv1.DescribeCapacityProvidersRequest{MaxResults: proto.Int32(2), NextToken: d.NextToken})
	if len(d.GetCapacityProviders()) != 1 || d.NextToken != nil {
		t.Fatalf("page 2 %v", d)
	}
	d = must(e, e.s.DescribeCapacityProviders, &ecsv1.DescribeCapacityProvidersRequest{CapacityProviders: []string{cp.GetCapacityProviderArn(), "nope"}, Include: []string{"TAGS"}})
	if len(d.GetCapacityProviders()) != 1 || len(d.GetCapacityProviders()[0].GetTags()) != 1 || len(d.GetFailures()) != 1 || d.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("by name %v", d)
	}

	u := must(e, e.s.UpdateCapacityProvider, &ecsv1.UpdateCapacityProviderRequest{Name: proto.String("pool-a"),
		AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProviderUpdate{ManagedScaling: &ecsv1.ManagedScaling{TargetCapacity: proto.Int32(50)}, ManagedTerminationProtection: proto.String("DISABLED")}}).GetCapacityProvider()
	if u.GetUpdateStatus() != "UPDATE_COMPLETE" || u.GetAutoScalingGroupProvider().GetManagedScaling().GetTargetCapacity() != 50 ||
		u.GetAutoScalingGroupProvider().GetManagedScaling().GetStatus() != "DISABLED" || u.GetAutoScalingGroupProvider().GetManagedTerminationProtection() != "DISABLED" {
		t.Fatalf("updated %v", u)
	}
	_, err := call(e, e.s.UpdateCapacityProvider, &ecsv1.UpdateCapacityProviderRequest{Name: proto.String("FARGATE"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProviderUpdate{}})
	wantErr(t, err, "ClientException")

	// Associated with a cluster: not deletable, not associable with a second cluster.
	e.createCluster("c1")
	e.createCluster("c2")
	must(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("c1"), CapacityProviders: []string{"pool-a", "FARGATE"},
		DefaultCapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("pool-a"), Weight: 1}}})
	_, err = call(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("c2"), CapacityProviders: []string{"pool-a"}})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("c2"), CapacityProviders: []string{"ghost"}})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.DeleteCapacityProvider, &ecsv1.DeleteCapacityProviderRequest{CapacityProvider: proto.String("pool-a")})
	wantErr(t, err, "ClientException")
	must(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("c1"), CapacityProviders: []string{}, DefaultCapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{}})
	del := must(e, e.s.DeleteCapacityProvider, &ecsv1.DeleteCapacityProviderRequest{CapacityProvider: proto.String("pool-a")}).GetCapacityProvider()
	if del.GetStatus() != "INACTIVE" || del.GetUpdateStatus() != "DELETE_COMPLETE" {
		t.Fatalf("deleted %v", del)
	}
	_, err = call(e, e.s.DeleteCapacityProvider, &ecsv1.DeleteCapacityProviderRequest{CapacityProvider: proto.String("pool-a")})
	wantErr(t, err, "ClientException")
	if d := must(e, e.s.DescribeCapacityProviders, &ecsv1.DescribeCapacityProvidersRequest{}); len(d.GetCapacityProviders()) != 2 {
		t.Fatalf("deleted provider still listed: %v", d)
	}
	e.createProvider("pool-a") // the name can be used again
}

// TestRunTaskCapacityProviderStrategy places base 1 / weights 1:3 over two pools and
// counts the tasks on each pool's instances.
func TestRunTaskCapacityProviderStrategy(t *testing.T) {
	e := newEnv(t)
	e.createCluster("cp")
	e.createProvider("pool-a")
	e.createProvider("pool-b")
	a := e.registerPoolHost("cp", "ha", "pool-a", false, 4096, 8192)
	b := e.registerPoolHost("cp", "hb", "pool-b", false, 4096, 8192)
	e.registerPoolHost("cp", "hx", "", false, 4096, 8192) // in no pool
	td := e.simpleTaskDef("cpfam", 10, 10)
	strategy := []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("pool-a"), Base: 1, Weight: 1}, {CapacityProvider: proto.String("pool-b"), Weight: 3}}

	// Not associated with the cluster yet.
	_, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("cp"), TaskDefinition: td.TaskDefinitionArn, CapacityProviderStrategy: strategy})
	wantErr(t, err, "InvalidParameterException")
	must(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("cp"), CapacityProviders: []string{"pool-a", "pool-b"}, DefaultCapacityProviderStrategy: strategy})
	if inst := e.describeInstance("cp", a.GetContainerInstanceArn()); inst.GetCapacityProviderName() != "pool-a" {
		t.Fatalf("instance capacityProviderName %q", inst.GetCapacityProviderName())
	}

	for _, bad := range [][]*ecsv1.CapacityProviderStrategyItem{
		{{CapacityProvider: proto.String("ghost"), Weight: 1}},
		{{CapacityProvider: proto.String("pool-a"), Base: 1, Weight: 1}, {CapacityProvider: proto.String("pool-b"), Base: 1, Weight: 1}},
		{{CapacityProvider: proto.String("pool-a")}, {CapacityProvider: proto.String("pool-b")}},
		{{CapacityProvider: proto.String("pool-a"), Weight: 1001}},
	} {
		_, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("cp"), TaskDefinition: td.TaskDefinitionArn, CapacityProviderStrategy: bad})
		wantErr(t, err, "InvalidParameterException")
	}
	_, err = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("cp"), TaskDefinition: td.TaskDefinitionArn, CapacityProviderStrategy: strategy, LaunchType: proto.String("EC2")})
	wantErr(t, err, "InvalidParameterException")

	for _, req := range []*ecsv1.RunTaskRequest{
		{Cluster: proto.String("cp"), TaskDefinition: td.TaskDefinitionArn, Count: proto.Int32(9), CapacityProviderStrategy: strategy},
		{Cluster: proto.String("cp"), TaskDefinition: td.TaskDefinitionArn, Count: proto.Int32(9)}, // the cluster's default
		{Cluster: proto.String("cp"), TaskDefinition: td.TaskDefinitionArn, Count: proto.Int32(9), CapacityProviderStrategy: strategy, ClientToken: proto.String("tok-1")},
	} {
		r := must(e, e.s.RunTask, req)
		if len(r.GetTasks()) != 9 || len(r.GetFailures()) != 0 {
			t.Fatalf("run: %d tasks, failures %v", len(r.GetTasks()), r.GetFailures())
		}
		onA, onB := 0, 0
		for _, tk := range r.GetTasks() {
			switch {
			case tk.GetContainerInstanceArn() == a.GetContainerInstanceArn() && tk.GetCapacityProviderName() == "pool-a":
				onA++
			case tk.GetContainerInstanceArn() == b.GetContainerInstanceArn() && tk.GetCapacityProviderName() == "pool-b":
				onB++
			default:
				t.Fatalf("task %s on %s via %q", tk.GetTaskArn(), tk.GetContainerInstanceArn(), tk.GetCapacityProviderName())
			}
			if tk.GetLaunchType() != "EC2" {
				t.Fatalf("launchType %q", tk.GetLaunchType())
			}
		}
		if onA != 1+2 || onB != 6 {
			t.Fatalf("base 1, weights 1:3 over 9 tasks: pool-a %d, pool-b %d", onA, onB)
		}
	}

	// A full pool fails naming its provider.
	big := e.simpleTaskDef("cpbig", 4090, 100)
	r := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("cp"), TaskDefinition: big.TaskDefinitionArn, Count: proto.Int32(1),
		CapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("pool-a"), Weight: 1}}})
	if len(r.GetTasks()) != 0 || len(r.GetFailures()) == 0 || !strings.Contains(r.GetFailures()[0].GetDetail(), "pool-a") {
		t.Fatalf("full pool: %v", r)
	}
}

func connectReq[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

func fargateTaskDef(e *env, family, cpu, memory string) (*ecsv1.TaskDefinition, *ecsv1.Exception) {
	r, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String(family), RequiresCompatibilities: []string{"FARGATE"}, NetworkMode: proto.String("awsvpc"),
		Cpu: proto.String(cpu), Memory: proto.String(memory),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Essential: proto.Bool(true)}},
	})
	if err != nil {
		return nil, &ecsv1.Exception{Type: err.Type, Message: err.Message}
	}
	return r.GetTaskDefinition(), nil
}

func TestFargateLaunchType(t *testing.T) {
	e := newEnv(t)
	e.createCluster("fg")
	e.registerPoolHost("fg", "out", "", true, 4096, 8192) // kept out of the Fargate pool
	in := e.registerPoolHost("fg", "in", "", false, 4096, 8192)

	if _, ex := fargateTaskDef(e, "fgbad", "256", "4096"); ex == nil || ex.Type != "ClientException" || !strings.Contains(ex.Message, "No Fargate configuration") {
		t.Fatalf("bad size registered: %v", ex)
	}
	_, rerr := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("fgbridge"), RequiresCompatibilities: []string{"FARGATE"},
		Cpu: proto.String("256"), Memory: proto.String("512"), ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox")}}})
	wantErr(t, rerr, "ClientException")
	td, ex := fargateTaskDef(e, "fgok", "0.5 vCPU", "1 GB")
	if ex != nil {
		t.Fatalf("register: %v", ex)
	}
	if strings.Join(td.GetCompatibilities(), ",") != "EC2,EXTERNAL,FARGATE" {
		t.Fatalf("compatibilities %v", td.GetCompatibilities())
	}
	ec2 := e.simpleTaskDef("fgec2", 10, 10)
	net := &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{Subnets: []string{"subnet-1"}}}

	_, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: td.TaskDefinitionArn, LaunchType: proto.String("FARGATE")})
	wantErr(t, err, "InvalidParameterException") // awsvpc needs networkConfiguration
	_, err = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: ec2.TaskDefinitionArn, LaunchType: proto.String("FARGATE")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: td.TaskDefinitionArn, LaunchType: proto.String("FARGATE"), NetworkConfiguration: net,
		Overrides: &ecsv1.TaskOverride{Memory: proto.String("8192")}})
	wantErr(t, err, "ClientException")
	_, err = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: td.TaskDefinitionArn, LaunchType: proto.String("FARGATE"), NetworkConfiguration: net, PlatformVersion: proto.String("1.0.0")})
	wantErr(t, err, "PlatformUnknownException")
	_, err = call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: td.TaskDefinitionArn, LaunchType: proto.String("FARGATE"), NetworkConfiguration: net,
		PlacementStrategy: []*ecsv1.PlacementStrategy{{Type: proto.String("random")}}})
	wantErr(t, err, "InvalidParameterException")

	r := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: td.TaskDefinitionArn, LaunchType: proto.String("FARGATE"), NetworkConfiguration: net, Count: proto.Int32(3), PlatformVersion: proto.String("LATEST")})
	if len(r.GetTasks()) != 3 {
		t.Fatalf("fargate run: %v", r.GetFailures())
	}
	for _, tk := range r.GetTasks() {
		if tk.GetLaunchType() != "FARGATE" || tk.GetCapacityProviderName() != "FARGATE" || tk.GetPlatformVersion() != "1.4.0" || tk.GetPlatformFamily() != "Linux" || tk.ContainerInstanceArn != nil {
			t.Fatalf("fargate task %v", tk)
		}
		d := e.describeTask("fg", tk.GetTaskArn())
		if d.ContainerInstanceArn != nil || d.GetLaunchType() != "FARGATE" {
			t.Fatalf("described %v", d)
		}
		l := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("fg"), ContainerInstance: in.ContainerInstanceArn})
		if len(l.GetTaskArns()) != 3 {
			t.Fatalf("fargate tasks not on the pool's instance: %v", l.GetTaskArns())
		}
	}
	// FARGATE_SPOT through a strategy.
	must(e, e.s.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String("fg"), CapacityProviders: []string{"FARGATE", "FARGATE_SPOT"}})
	r = must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: td.TaskDefinitionArn, NetworkConfiguration: net,
		CapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("FARGATE_SPOT"), Weight: 1}}})
	if len(r.GetTasks()) != 1 || r.GetTasks()[0].GetCapacityProviderName() != "FARGATE_SPOT" || r.GetTasks()[0].GetLaunchType() != "FARGATE" {
		t.Fatalf("spot: %v %v", r.GetTasks(), r.GetFailures())
	}
	e.s.RunTask(e.ctx, connectReq(&ecsv1.RunTaskRequest{Cluster: proto.String("fg"), TaskDefinition: ec2.TaskDefinitionArn, LaunchType: proto.String("EC2")}))
	stats := map[string]string{}
	for _, kv := range must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"fg"}, Include: []string{"STATISTICS"}}).GetClusters()[0].GetStatistics() {
		stats[kv.GetName()] = kv.GetValue()
	}
	if stats["pendingFargateTasksCount"] != "4" || stats["pendingEC2TasksCount"] != "1" {
		t.Fatalf("statistics %v", stats)
	}
}
