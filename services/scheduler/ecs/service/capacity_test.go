package service

import (
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

func poolAttr(p string) *ecsv1.Attribute {
	return &ecsv1.Attribute{Name: proto.String(capacity.PoolAttribute), Value: proto.String(p)}
}

// A service with base 1 / weights 1:3 over two pools runs 1 + 3:1 of the rest, counted
// on the pools' instances, and keeps that split as it grows.
func TestServiceCapacityProviderStrategy(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	for _, p := range []string{"pool-a", "pool-b"} {
		must(e, e.ctl.CreateCapacityProvider, &ecsv1.CreateCapacityProviderRequest{Name: proto.String(p),
			AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String("arn:aws:autoscaling:us-east-1:1:autoScalingGroup:u:autoScalingGroupName/" + p)}})
	}
	a := e.host("ha", 4096, 8192, poolAttr("pool-a"))
	b := e.host("hb", 4096, 8192, poolAttr("pool-b"))
	e.host("hx", 4096, 8192)
	must(e, e.ctl.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String(e.cluster), CapacityProviders: []string{"pool-a", "pool-b"}})
	td := e.taskDef("web", "img", 10, 10, false)
	strategy := []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("pool-a"), Base: 1, Weight: 1}, {CapacityProvider: proto.String("pool-b"), Weight: 3}}

	_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String(e.cluster), ServiceName: proto.String("bad"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(1), CapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("ghost"), Weight: 1}}})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String(e.cluster), ServiceName: proto.String("bad"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(1), CapacityProviderStrategy: strategy, LaunchType: ecsLaunch("EC2")})
	wantErr(t, err, "InvalidParameterException")

	svc := must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String(e.cluster), ServiceName: proto.String("web"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(9), CapacityProviderStrategy: strategy}).GetService()
	if svc.LaunchType != nil || len(svc.GetCapacityProviderStrategy()) != 2 || len(svc.GetDeployments()[0].GetCapacityProviderStrategy()) != 2 || svc.GetDeployments()[0].LaunchType != nil {
		t.Fatalf("created %v", svc)
	}
	check := func(wantA, wantB int) {
		t.Helper()
		onA, onB := 0, 0
		for _, rec := range e.tasks() {
			tk := rec.GetTask()
			if rec.GetServiceName() != "web" || tk.GetDesiredStatus() != "RUNNING" {
				continue
			}
			switch {
			case tk.GetContainerInstanceArn() == a && tk.GetCapacityProviderName() == "pool-a":
				onA++
			case tk.GetContainerInstanceArn() == b && tk.GetCapacityProviderName() == "pool-b":
				onB++
			default:
				t.Fatalf("task on %s via %q", tk.GetContainerInstanceArn(), tk.GetCapacityProviderName())
			}
		}
		if onA != wantA || onB != wantB {
			t.Fatalf("pool-a %d pool-b %d, want %d and %d", onA, onB, wantA, wantB)
		}
	}
	e.settle("web", 10)
	check(3, 6)
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String(e.cluster), Service: proto.String("web"), DesiredCount: proto.Int32(13)})
	e.settle("web", 10)
	check(4, 9)

	// Switching the service to pool-b alone deploys: the new tasks all go to pool-b.
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String(e.cluster), Service: proto.String("web"),
		CapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("pool-b"), Weight: 1}}})
	if s := e.service("web"); len(s.GetDeployments()) != 2 || len(s.GetDeployments()[0].GetCapacityProviderStrategy()) != 1 {
		t.Fatalf("no deployment for the new strategy: %v", s.GetDeployments())
	}
	e.settle("web", 20)
	check(0, 13)

	// A pool without instances: the event names the provider.
	must(e, e.ctl.CreateCapacityProvider, &ecsv1.CreateCapacityProviderRequest{Name: proto.String("pool-c"),
		AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String("arn:aws:autoscaling:us-east-1:1:autoScalingGroup:u:autoScalingGroupName/pool-c")}})
	must(e, e.ctl.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String(e.cluster), CapacityProviders: []string{"pool-a", "pool-b", "pool-c"}})
	must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String(e.cluster), ServiceName: proto.String("empty"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(1), CapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{{CapacityProvider: proto.String("pool-c"), Weight: 1}}})
	e.step()
	if s := e.service("empty"); !hasEvent(s, "was unable to place a task on capacity provider pool-c") {
		t.Fatalf("events %v", s.GetEvents())
	}

	// A provider a service uses cannot be removed from the cluster.
	_, err = call(e, e.ctl.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{Cluster: proto.String(e.cluster), CapacityProviders: []string{"pool-a", "pool-c"}})
	wantErr(t, err, "ResourceInUseException")
}

func ecsLaunch(s string) *string { return &s }

// A FARGATE service runs on the Fargate pool with Fargate's answers; a protected task
// survives scale-in until its protection expires.
func TestFargateServiceAndProtection(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("out", 4096, 8192, &ecsv1.Attribute{Name: proto.String(capacity.FargateAttribute), Value: proto.String("false")})
	in := e.host("in", 4096, 8192)
	td := must(e, e.ctl.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("fg"), RequiresCompatibilities: []string{"FARGATE"},
		NetworkMode: proto.String("awsvpc"), Cpu: proto.String("256"), Memory: proto.String("512"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("img")}}}).GetTaskDefinition().GetTaskDefinitionArn()
	net := &ecsv1.NetworkConfiguration{AwsvpcConfiguration: &ecsv1.AwsVpcConfiguration{Subnets: []string{"subnet-1"}}}
	_, err := call(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String(e.cluster), ServiceName: proto.String("fg"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(3), LaunchType: ecsLaunch("FARGATE")})
	wantErr(t, err, "InvalidParameterException") // awsvpc needs networkConfiguration
	svc := must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{Cluster: proto.String(e.cluster), ServiceName: proto.String("fg"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(3), LaunchType: ecsLaunch("FARGATE"), NetworkConfiguration: net}).GetService()
	if svc.GetPlatformVersion() != "LATEST" || svc.GetPlatformFamily() != "Linux" || svc.GetDeployments()[0].GetPlatformVersion() != "1.4.0" {
		t.Fatalf("service %v", svc)
	}
	e.settle("fg", 10)
	var ids []string
	for _, rec := range e.tasks() {
		tk := rec.GetTask()
		if tk.GetDesiredStatus() != "RUNNING" {
			continue
		}
		if tk.GetLaunchType() != "FARGATE" || tk.GetCapacityProviderName() != "FARGATE" || tk.GetPlatformVersion() != "1.4.0" || tk.GetContainerInstanceArn() != in {
			t.Fatalf("fargate service task %v", tk)
		}
		ids = append(ids, tk.GetTaskArn())
	}
	// Protect two tasks, scale to zero: only the unprotected one stops.
	p := must(e, e.ctl.UpdateTaskProtection, &ecsv1.UpdateTaskProtectionRequest{Cluster: proto.String(e.cluster), Tasks: ids[:2], ProtectionEnabled: true, ExpiresInMinutes: proto.Int32(30)})
	if len(p.GetProtectedTasks()) != 2 {
		t.Fatalf("protect: %v", p)
	}
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String(e.cluster), Service: proto.String("fg"), DesiredCount: proto.Int32(0)})
	for range 3 {
		e.step()
	}
	if c := e.count("fg"); c.total != 2 {
		t.Fatalf("protected tasks: %d live, want 2", c.total)
	}
	if s := e.service("fg"); !hasEvent(s, "unable to scale in due to (reason: 2 tasks under protection)") {
		t.Fatalf("events %v", s.GetEvents())
	}
	e.clock.Advance(31 * time.Minute)
	for range 3 {
		e.step()
	}
	if c := e.count("fg"); c.total != 0 {
		t.Fatalf("after expiry: %d live", c.total)
	}
	if !strings.HasPrefix(ids[0], "arn:aws:ecs:") {
		t.Fatal(ids)
	}
}
