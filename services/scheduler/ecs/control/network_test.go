package control

import (
	"fmt"
	"net"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// TestTaskSubnetAllocation: every container instance gets its own /24 of the pool at
// registration, keeps it when it registers again, and gives it back on deregistration;
// an awsvpc task is created with its ENI attachment PRECREATED in the first subnet of its
// awsvpcConfiguration (how its agent's ATTACHED report fills it in is task's
// TestApplyStateChange).
func TestTaskSubnetAllocation(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	reg := func(host string) string {
		resp, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: host, RuntimeReady: true, Resources: Resources(1024, 1024, nil, nil)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTaskSubnet()
	}
	a, b := reg("h1"), reg("h2")
	_, pool, _ := net.ParseCIDR(DefaultTaskSubnetPool)
	for _, s := range []string{a, b} {
		ip, n, err := net.ParseCIDR(s)
		if err != nil || !pool.Contains(ip) {
			t.Fatalf("task subnet %q not in the pool %s", s, pool)
		}
		if ones, _ := n.Mask.Size(); ones != 24 {
			t.Errorf("task subnet %s is not a /24", s)
		}
	}
	if a == b {
		t.Fatalf("two instances share the task subnet %s", a)
	}
	if again := reg("h1"); again != a {
		t.Errorf("re-registration moved h1 from %s to %s", a, again)
	}
	list := must(e, e.s.ListContainerInstances, &ecsv1.ListContainerInstancesRequest{Cluster: proto.String("c")})
	desc := must(e, e.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("c"), ContainerInstances: list.GetContainerInstanceArns()})
	var h2 string
	for _, c := range desc.GetContainerInstances() {
		if c.GetEc2InstanceId() == "h2" {
			h2 = c.GetContainerInstanceArn()
		}
	}
	must(e, e.s.DeregisterContainerInstance, &ecsv1.DeregisterContainerInstanceRequest{Cluster: proto.String("c"), ContainerInstance: proto.String(h2)})
	if c := reg("h3"); c != b {
		t.Errorf("h3 got %s, want h2's freed %s", c, b)
	}

	must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String("vpc"), NetworkMode: proto.String("awsvpc"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Memory: proto.Int32(32)}},
	})
	out := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("vpc"),
		NetworkConfiguration: &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{Subnets: []string{"subnet-0abc", "subnet-0def"}, SecurityGroups: []string{DefaultSecurityGroup}}}})
	if len(out.GetTasks()) != 1 {
		t.Fatalf("RunTask: %v", out.GetFailures())
	}
	tk := out.GetTasks()[0]
	atts := tk.GetAttachments()
	if len(atts) != 1 || atts[0].GetType() != "ElasticNetworkInterface" || atts[0].GetStatus() != "PRECREATED" ||
		atts[0].GetId() != task.ENIAttachmentID(tk.GetTaskArn()) || len(atts[0].GetDetails()) != 1 || atts[0].GetDetails()[0].GetValue() != "subnet-0abc" {
		t.Fatalf("attachments = %v", atts)
	}
}

// TestTaskSubnetSkipsTaken: a registration reporting taken_task_subnets (another Berth
// installation's subnet on the host) gets a /24 overlapping none of them; an instance
// whose kept subnet its host reports taken is moved to a free one and the old claim is
// released for others.
func TestTaskSubnetSkipsTaken(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	reg := func(host string, taken ...string) string {
		resp, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: host, RuntimeReady: true, Resources: Resources(1024, 1024, nil, nil), TakenTaskSubnets: taken})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTaskSubnet()
	}
	// The package's tests share one etcd: subnets are compared, not assumed.
	a := reg("h1")
	if a == "" {
		t.Fatal("no task subnet")
	}
	// h1's host now finds a held by another installation: moved to a free one, and a
	// is released for an instance whose host does not report it.
	b := reg("h1", a)
	if b == "" || b == a || overlapsAny(b, []string{a}) {
		t.Errorf("h1 re-registered reporting %s taken got %q", a, b)
	}
	if again := reg("h1", a); again != b {
		t.Errorf("h1 moved again from %s to %s", b, again)
	}
	if got := reg("h2"); got != a {
		t.Errorf("h2 got %s, want the released %s", got, a)
	}
	// A wide taken network (another bridge's /17) keeps the whole of it out.
	if got := reg("h3", "10.240.0.0/17", "192.168.0.0/16"); got == "" || overlapsAny(got, []string{"10.240.0.0/17"}) {
		t.Errorf("h3 got %q inside the taken 10.240.0.0/17", got)
	}
}

// TestContainerPortRangeValidation applies AWS's containerPortRange rules at
// registration (ClientException naming the container) and registers a valid range in
// bridge and awsvpc as given, with no hostPort filled in.
func TestContainerPortRangeValidation(t *testing.T) {
	e := newEnv(t)
	reg := func(mode string, pms ...*ecsv1.PortMapping) *awserr.Error {
		_, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String("r"), NetworkMode: proto.String(mode),
			ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Memory: proto.Int32(32), PortMappings: pms}},
		})
		return err
	}
	rng := func(r string) *ecsv1.PortMapping { return &ecsv1.PortMapping{ContainerPortRange: proto.String(r)} }
	for _, tc := range []struct {
		name, mode string
		pms        []*ecsv1.PortMapping
		want       string
	}{
		{"host mode", "host", []*ecsv1.PortMapping{rng("8000-8010")}, "containerPortRange is only supported when networkMode is bridge or awsvpc"},
		{"none mode", "none", []*ecsv1.PortMapping{rng("8000-8010")}, "containerPortRange is only supported when networkMode is bridge or awsvpc"},
		{"with containerPort", "bridge", []*ecsv1.PortMapping{{ContainerPortRange: proto.String("8000-8010"), ContainerPort: proto.Int32(8000)}}, "containerPort and containerPortRange cannot both be specified"},
		{"with hostPort", "bridge", []*ecsv1.PortMapping{{ContainerPortRange: proto.String("8000-8010"), HostPort: proto.Int32(9000)}}, "hostPort cannot be specified with containerPortRange"},
		{"reversed", "bridge", []*ecsv1.PortMapping{rng("8010-8000")}, `Invalid containerPortRange "8010-8000" for container 'app'`},
		{"single port", "bridge", []*ecsv1.PortMapping{rng("8000-8000")}, `Invalid containerPortRange "8000-8000"`},
		{"zero", "awsvpc", []*ecsv1.PortMapping{rng("0-10")}, `Invalid containerPortRange "0-10"`},
		{"too high", "awsvpc", []*ecsv1.PortMapping{rng("65000-65536")}, `Invalid containerPortRange "65000-65536"`},
		{"not a range", "bridge", []*ecsv1.PortMapping{rng("8000")}, `Invalid containerPortRange "8000"`},
		{"overlap", "bridge", []*ecsv1.PortMapping{rng("8000-8010"), rng("8010-8020")}, "container ports 8000-8010 and 8010-8020 overlap"},
		{"port in range", "bridge", []*ecsv1.PortMapping{rng("8000-8010"), {ContainerPort: proto.Int32(8005)}}, "container ports 8000-8010 and 8005 overlap"},
	} {
		ee := reg(tc.mode, tc.pms...)
		if ee == nil || ee.Type != ClientErr || !strings.Contains(ee.Message, tc.want) || !strings.Contains(ee.Message, "'app'") {
			t.Errorf("%s: err = %v, want ClientException containing %q", tc.name, ee, tc.want)
		}
	}
	var many []*ecsv1.PortMapping
	for i := range MaxPortRangesPerContainer + 1 {
		many = append(many, rng(fmt.Sprintf("%d-%d", 10000+10*i, 10001+10*i)))
	}
	if err := reg("bridge", many...); err == nil || !strings.Contains(err.Error(), "at most 100 containerPortRange") {
		t.Errorf("101 ranges: err = %v", err)
	}
	if err := reg("bridge", many[:MaxPortRangesPerContainer]...); err != nil {
		t.Errorf("100 ranges: %v", err)
	}
	for _, mode := range []string{"bridge", "awsvpc"} {
		if err := reg(mode, rng("8000-8010"), &ecsv1.PortMapping{ContainerPort: proto.Int32(9000)}); err != nil {
			t.Errorf("%s: valid range refused: %v", mode, err)
		}
	}
	td := must(e, e.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String("r")}).GetTaskDefinition()
	pm := td.GetContainerDefinitions()[0].GetPortMappings()[0]
	if pm.GetContainerPortRange() != "8000-8010" || pm.ContainerPort != nil || pm.HostPort != nil || pm.GetProtocol() != "tcp" {
		t.Errorf("stored mapping %v", pm)
	}
}

// TestRegisterHostAddress: the address an agent registers with is kept on the instance
// record (peers route its task subnet through it) and follows a re-registration; a
// loopback, unspecified or non-IPv4 address is refused naming the field.
func TestRegisterHostAddress(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	reg := func(addr string) (*agentv1.RegisterResponse, error) {
		return e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{Cluster: "c", HostId: "h1", RuntimeReady: true, Resources: Resources(1024, 1024, nil, nil), HostAddress: addr})
	}
	for _, bad := range []string{"127.0.0.1", "0.0.0.0", "fe80::1", "agent1"} {
		if _, err := reg(bad); err == nil || !strings.Contains(err.Error(), "host_address") {
			t.Errorf("host_address %q: err %v, want InvalidParameterException naming host_address", bad, err)
		}
	}
	stored := func() string {
		t.Helper()
		resp, err := e.s.kv.Get(e.ctx, keys.Instances(e.sc, "c"), clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("instance records: %v %v", resp, err)
		}
		var rec storev1.ContainerInstanceRecord
		if err := proto.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
			t.Fatal(err)
		}
		return rec.GetHostAddress()
	}
	if _, err := reg("192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != "192.0.2.10" {
		t.Errorf("stored host address %q", got)
	}
	if _, err := reg("192.0.2.11"); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != "192.0.2.11" {
		t.Errorf("after re-registration: stored host address %q", got)
	}
}
