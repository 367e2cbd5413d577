package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TestTaskCPUMinimum: a task-level cpu below the EC2 minimum of 128 units (0.125 vCPU) is
// a ClientException with AWS's message; 128 and "0.125 vCPU" are accepted.
func TestTaskCPUMinimum(t *testing.T) {
	e := newEnv(t)
	for _, cpu := range []string{"1", "64", "127", "0.1 vCPU", "196609"} {
		_, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String("small"), Cpu: proto.String(cpu), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")},
		})
		wantErr(t, err, "ClientException")
		if err.Message != "Invalid 'cpu' setting for task. For more information, see the Troubleshooting section of the Amazon ECS Developer Guide." {
			t.Fatalf("cpu %q: message %q", cpu, err.Message)
		}
	}
	for cpu, want := range map[string]string{"128": "128", "0.125 vCPU": "128", "196608": "196608"} {
		td := must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String("small"), Cpu: proto.String(cpu), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")},
		}).GetTaskDefinition()
		if td.GetCpu() != want {
			t.Fatalf("cpu %q stored as %q", cpu, td.GetCpu())
		}
	}
}

// TestTaskMemoryMinimum: a task-level memory below the 6 MiB a container needs is a
// ClientException at registration; 6 is accepted.
func TestTaskMemoryMinimum(t *testing.T) {
	e := newEnv(t)
	for _, mem := range []string{"0", "5"} {
		_, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family: proto.String("small"), Memory: proto.String(mem), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", noMemory)},
		})
		wantErr(t, err, "ClientException")
		if !strings.Contains(err.Message, "Invalid 'memory' setting for task") {
			t.Fatalf("memory %q: message %q", mem, err.Message)
		}
	}
	must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String("small"), Memory: proto.String("6"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", noMemory)},
	})
}

// noMemory leaves a container's memory to the task's.
func noMemory(c *ecsv1.ContainerDefinition) { c.Memory = nil }

// TestUnknownClusterDescribeList: Describe* and List* calls naming a cluster that does not
// exist (by name or by ARN) answer ClusterNotFoundException, as AWS does.
func TestUnknownClusterDescribeList(t *testing.T) {
	e := newEnv(t)
	e.createCluster("real")
	for _, ref := range []string{"nope", "arn:aws:ecs:us-east-1:" + e.acc + ":cluster/nope"} {
		c := proto.String(ref)
		checks := map[string]func() error{
			"DescribeContainerInstances": func() error {
				_, err := call(e, e.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: c, ContainerInstances: []string{"0123456789abcdef0123456789abcdef"}})
				return errOrNil(err)
			},
			"ListContainerInstances": func() error {
				_, err := call(e, e.s.ListContainerInstances, &ecsv1.ListContainerInstancesRequest{Cluster: c})
				return errOrNil(err)
			},
			"DescribeTasks": func() error {
				_, err := call(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: c, Tasks: []string{"0123456789abcdef0123456789abcdef"}})
				return errOrNil(err)
			},
			"ListTasks": func() error {
				_, err := call(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: c})
				return errOrNil(err)
			},
			"ListTasks by family": func() error {
				_, err := call(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: c, Family: proto.String("web")})
				return errOrNil(err)
			},
			"ListAttributes": func() error {
				_, err := call(e, e.s.ListAttributes, &ecsv1.ListAttributesRequest{Cluster: c, TargetType: proto.String("container-instance")})
				return errOrNil(err)
			},
			"DescribeClusters": func() error {
				r, err := call(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{ref}})
				if err != nil {
					return err
				}
				// DescribeClusters answers a MISSING failure, not an error.
				if len(r.GetFailures()) != 1 || r.GetFailures()[0].GetReason() != "MISSING" {
					return fmt.Errorf("failures %v", r.GetFailures())
				}
				return awserr.ClusterNotFoundError()
			},
		}
		for name, f := range checks {
			err := f()
			var ee *awserr.Error
			if !errors.As(err, &ee) || ee.Type != "ClusterNotFoundException" {
				t.Errorf("%s with cluster %q: %v, want ClusterNotFoundException", name, ref, err)
			}
		}
	}
}

// errOrNil returns err as an error, nil for a nil *awserr.Error.
func errOrNil(err *awserr.Error) error {
	if err == nil {
		return nil
	}
	return err
}

// TestRegisterWithInstanceIdentityDocument: as the ECS agent registers an EC2 host, the
// instance identity document names the instance: ec2InstanceId is its instanceId and its
// availabilityZone becomes the ecs.availability-zone attribute; registering again with the
// same document is the same container instance.
func TestRegisterWithInstanceIdentityDocument(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	doc := `{"accountId":"123456789012","architecture":"x86_64","availabilityZone":"eu-west-1b","imageId":"ami-0abcdef1234567890",` +
		`"instanceId":"i-0123456789abcdef0","instanceType":"m5.large","privateIp":"10.0.0.12","region":"eu-west-1","version":"2017-09-30"}`
	reg := func() *ecsv1.ContainerInstance {
		return must(e, e.s.RegisterContainerInstance, &ecsv1.RegisterContainerInstanceRequest{
			Cluster: proto.String("c"), InstanceIdentityDocument: proto.String(doc),
			InstanceIdentityDocumentSignature: proto.String("sig"), TotalResources: Resources(1024, 1024, nil, nil),
		}).GetContainerInstance()
	}
	ci := reg()
	if ci.GetEc2InstanceId() != "i-0123456789abcdef0" {
		t.Fatalf("ec2InstanceId %q, want the document's instanceId", ci.GetEc2InstanceId())
	}
	az := ""
	for _, a := range ci.GetAttributes() {
		if a.GetName() == "ecs.availability-zone" {
			az = a.GetValue()
		}
	}
	if az != "eu-west-1b" {
		t.Fatalf("ecs.availability-zone %q, attributes %v", az, ci.GetAttributes())
	}
	if again := reg(); again.GetContainerInstanceArn() != ci.GetContainerInstanceArn() {
		t.Fatalf("re-registration made a new instance %s (was %s)", again.GetContainerInstanceArn(), ci.GetContainerInstanceArn())
	}
	// A document whose instanceId cannot be an EC2 instance id is refused, naming the field.
	_, err := call(e, e.s.RegisterContainerInstance, &ecsv1.RegisterContainerInstanceRequest{
		Cluster: proto.String("c"), InstanceIdentityDocument: proto.String(`{"instanceId":"../x"}`),
	})
	wantErr(t, err, "InvalidParameterException")
}

// TestListTasksUnknownService: ListTasks filtered by a serviceName that names no service
// of the cluster is ServiceNotFoundException ("Service not found."), as AWS answers; a
// service that exists lists its tasks (none here), by name or by ARN.
func TestListTasksUnknownService(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	_, err := call(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("c"), ServiceName: proto.String("nope")})
	wantErr(t, err, "ServiceNotFoundException")
	rec := &storev1.ServiceRecord{ClusterName: "c", Service: &ecsv1.Service{ServiceName: proto.String("web"), Status: proto.String("ACTIVE")}}
	if _, err := store.Create(context.Background(), sharedEtcd, keys.Service(e.sc, "c", "web"), rec); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"web", "arn:aws:ecs:us-east-1:" + e.acc + ":service/c/web"} {
		r := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("c"), ServiceName: proto.String(ref)})
		if len(r.GetTaskArns()) != 0 {
			t.Fatalf("tasks %v", r.GetTaskArns())
		}
	}
}
