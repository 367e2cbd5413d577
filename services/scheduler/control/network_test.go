package control

import (
	"net"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/keys"
)

// TestTaskSubnetAllocation: every container instance gets its own /24 of the pool at
// registration, keeps it when it registers again, and gives it back on deregistration;
// an awsvpc task is created with its ENI attachment PRECREATED in the first subnet of its
// awsvpcConfiguration, and its agent's ATTACHED report fills it in.
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
		NetworkConfiguration: &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{Subnets: []string{"subnet-0abc", "subnet-0def"}, SecurityGroups: []string{"sg-01"}}}})
	if len(out.GetTasks()) != 1 {
		t.Fatalf("RunTask: %v", out.GetFailures())
	}
	task := out.GetTasks()[0]
	atts := task.GetAttachments()
	if len(atts) != 1 || atts[0].GetType() != "ElasticNetworkInterface" || atts[0].GetStatus() != "PRECREATED" ||
		atts[0].GetId() != ENIAttachmentID(task.GetTaskArn()) || len(atts[0].GetDetails()) != 1 || atts[0].GetDetails()[0].GetValue() != "subnet-0abc" {
		t.Fatalf("attachments = %v", atts)
	}
	mergeAttachments(task, []*ecsv1.Attachment{{Id: atts[0].Id, Type: atts[0].Type, Status: proto.String("ATTACHED"),
		Details: []*ecsv1.KeyValuePair{{Name: proto.String("privateIPv4Address"), Value: proto.String("10.240.0.2")}}}})
	mergeAttachments(task, []*ecsv1.Attachment{{Id: atts[0].Id, Status: proto.String("PRECREATED")}}) // never backward
	if got := task.GetAttachments(); len(got) != 1 || got[0].GetStatus() != "ATTACHED" || got[0].GetDetails()[0].GetValue() != "10.240.0.2" {
		t.Errorf("merged attachments = %v", got)
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
