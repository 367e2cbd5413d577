package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	sdtypes "github.com/aws/aws-sdk-go-v2/service/servicediscovery/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// createPrivateNamespace creates a private DNS namespace and returns its id, read back
// through the operation CreatePrivateDnsNamespace returned, as AWS callers do.
func createPrivateNamespace(t *testing.T, c *sd.Client, name string) string {
	t.Helper()
	out, err := c.CreatePrivateDnsNamespace(t.Context(), &sd.CreatePrivateDnsNamespaceInput{Name: aws.String(name), Vpc: aws.String("vpc-1")})
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.GetOperation(t.Context(), &sd.GetOperationInput{OperationId: out.OperationId})
	if err != nil {
		t.Fatal(err)
	}
	if op.Operation.Status != sdtypes.OperationStatusSuccess || op.Operation.Type != sdtypes.OperationTypeCreateNamespace {
		t.Fatalf("GetOperation = %+v", op.Operation)
	}
	return op.Operation.Targets["NAMESPACE"]
}

// noHostPrefix turns off the endpoint host prefix "data-" that DiscoverInstances and
// DiscoverInstancesRevision carry on AWS: a Berth endpoint is one host for every action.
func noHostPrefix(o *sd.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("BerthNoHostPrefix",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
			}), middleware.Before)
	})
}

// TestCloudMapWithSDK drives the Cloud Map API (JSON 1.1) through the real gateway and
// scheduler with the AWS SDK for Go v2: namespaces, services with DNS records,
// instances, discovery, custom health, operations, tags, account isolation and AWS's
// error codes.
func TestCloudMapWithSDK(t *testing.T) {
	const acct, other = "444444444444", "555555555555"
	stack := startAPIStack(t, acct, other)
	c := sd.NewFromConfig(stack.awsConfig(acct, "us-east-1"), noHostPrefix)
	ctx := t.Context()

	nsID := createPrivateNamespace(t, c, "internal.example")
	if !strings.HasPrefix(nsID, "ns-") || len(nsID) != 19 {
		t.Errorf("namespace id %q", nsID)
	}
	_, err := c.CreatePrivateDnsNamespace(ctx, &sd.CreatePrivateDnsNamespaceInput{Name: aws.String("internal.example"), Vpc: aws.String("vpc-1")})
	wantCode(t, err, "NamespaceAlreadyExists")
	_, err = c.CreatePublicDnsNamespace(ctx, &sd.CreatePublicDnsNamespaceInput{Name: aws.String("example.com")})
	wantCode(t, err, "InvalidInput")
	if _, err := c.CreateHttpNamespace(ctx, &sd.CreateHttpNamespaceInput{Name: aws.String("api")}); err != nil {
		t.Fatal(err)
	}
	ns, err := c.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(nsID)})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Namespace.Type != sdtypes.NamespaceTypeDnsPrivate || aws.ToString(ns.Namespace.Arn) != "arn:aws:servicediscovery:us-east-1:"+acct+":namespace/"+nsID ||
		ns.Namespace.Properties.DnsProperties.SOA == nil || aws.ToInt64(ns.Namespace.Properties.DnsProperties.SOA.TTL) != 15 {
		t.Errorf("GetNamespace = %+v", ns.Namespace)
	}
	list, err := c.ListNamespaces(ctx, &sd.ListNamespacesInput{Filters: []sdtypes.NamespaceFilter{{Name: sdtypes.NamespaceFilterNameType, Values: []string{"DNS_PRIVATE"}}}})
	if err != nil || len(list.Namespaces) != 1 || aws.ToString(list.Namespaces[0].Id) != nsID {
		t.Errorf("ListNamespaces TYPE=DNS_PRIVATE = %+v, %v", list, err)
	}
	// Another account sees none of it.
	oc := sd.NewFromConfig(stack.awsConfig(other, "us-east-1"))
	_, err = oc.GetNamespace(ctx, &sd.GetNamespaceInput{Id: aws.String(nsID)})
	wantCode(t, err, "NamespaceNotFound")

	svcOut, err := c.CreateService(ctx, &sd.CreateServiceInput{
		Name: aws.String("web"), NamespaceId: aws.String(nsID),
		DnsConfig:               &sdtypes.DnsConfig{DnsRecords: []sdtypes.DnsRecord{{Type: sdtypes.RecordTypeA, TTL: aws.Int64(10)}, {Type: sdtypes.RecordTypeSrv, TTL: aws.Int64(10)}}},
		HealthCheckCustomConfig: &sdtypes.HealthCheckCustomConfig{},
		Tags:                    []sdtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := svcOut.Service
	if !strings.HasPrefix(aws.ToString(svc.Id), "srv-") || svc.DnsConfig.RoutingPolicy != sdtypes.RoutingPolicyMultivalue || svc.Type != sdtypes.ServiceTypeDnsHttp ||
		aws.ToString(svc.Arn) != "arn:aws:servicediscovery:us-east-1:"+acct+":service/"+aws.ToString(svc.Id) {
		t.Errorf("CreateService = %+v", svc)
	}
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("web"), NamespaceId: aws.String(nsID), DnsConfig: svc.DnsConfig})
	wantCode(t, err, "ServiceAlreadyExists")
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("x"), NamespaceId: aws.String("ns-nope")})
	wantCode(t, err, "NamespaceNotFound")
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("x"), NamespaceId: aws.String(nsID),
		DnsConfig: &sdtypes.DnsConfig{DnsRecords: []sdtypes.DnsRecord{{Type: sdtypes.RecordTypeCname, TTL: aws.Int64(10)}}}})
	wantCode(t, err, "InvalidInput")
	_, err = c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String("x"), NamespaceId: aws.String(nsID),
		HealthCheckConfig: &sdtypes.HealthCheckConfig{Type: sdtypes.HealthCheckTypeHttp}})
	wantCode(t, err, "InvalidInput")

	// Instances: SRV needs a port; the address must be IPv4.
	_, err = c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svc.Id, InstanceId: aws.String("i-1"), Attributes: map[string]string{"AWS_INSTANCE_IPV4": "10.0.0.1"}})
	wantCode(t, err, "InvalidInput")
	_, err = c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svc.Id, InstanceId: aws.String("i-1"), Attributes: map[string]string{"AWS_INSTANCE_IPV4": "nope", "AWS_INSTANCE_PORT": "80"}})
	wantCode(t, err, "InvalidInput")
	for i, ip := range []string{"10.0.0.1", "10.0.0.2"} {
		reg, err := c.RegisterInstance(ctx, &sd.RegisterInstanceInput{ServiceId: svc.Id, InstanceId: aws.String("i-" + string(rune('1'+i))),
			Attributes: map[string]string{"AWS_INSTANCE_IPV4": ip, "AWS_INSTANCE_PORT": "80", "color": []string{"blue", "green"}[i]}})
		if err != nil {
			t.Fatal(err)
		}
		op, err := c.GetOperation(ctx, &sd.GetOperationInput{OperationId: reg.OperationId})
		if err != nil || op.Operation.Type != sdtypes.OperationTypeRegisterInstance || op.Operation.Targets["INSTANCE"] != "i-"+string(rune('1'+i)) {
			t.Errorf("GetOperation(register) = %+v, %v", op, err)
		}
	}
	got, err := c.GetInstance(ctx, &sd.GetInstanceInput{ServiceId: svc.Id, InstanceId: aws.String("i-1")})
	if err != nil || got.Instance.Attributes["AWS_INSTANCE_IPV4"] != "10.0.0.1" {
		t.Errorf("GetInstance = %+v, %v", got, err)
	}
	insts, err := c.ListInstances(ctx, &sd.ListInstancesInput{ServiceId: svc.Id, MaxResults: aws.Int32(1)})
	if err != nil || len(insts.Instances) != 1 || insts.NextToken == nil {
		t.Fatalf("ListInstances page 1 = %+v, %v", insts, err)
	}
	insts2, err := c.ListInstances(ctx, &sd.ListInstancesInput{ServiceId: svc.Id, NextToken: insts.NextToken})
	if err != nil || len(insts2.Instances) != 1 || aws.ToString(insts2.Instances[0].Id) != "i-2" || insts2.NextToken != nil {
		t.Errorf("ListInstances page 2 = %+v, %v", insts2, err)
	}
	discover := func(in *sd.DiscoverInstancesInput) []string {
		t.Helper()
		out, err := c.DiscoverInstances(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, i := range out.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
		slices.Sort(ids)
		return ids
	}
	if ids := discover(&sd.DiscoverInstancesInput{NamespaceName: aws.String("internal.example"), ServiceName: aws.String("web")}); !slices.Equal(ids, []string{"i-1", "i-2"}) {
		t.Errorf("DiscoverInstances = %v", ids)
	}
	if ids := discover(&sd.DiscoverInstancesInput{NamespaceName: aws.String("internal.example"), ServiceName: aws.String("web"), QueryParameters: map[string]string{"color": "green"}}); !slices.Equal(ids, []string{"i-2"}) {
		t.Errorf("DiscoverInstances color=green = %v", ids)
	}
	// Custom health: an UNHEALTHY instance is not discovered as HEALTHY.
	if _, err := c.UpdateInstanceCustomHealthStatus(ctx, &sd.UpdateInstanceCustomHealthStatusInput{ServiceId: svc.Id, InstanceId: aws.String("i-1"), Status: sdtypes.CustomHealthStatusUnhealthy}); err != nil {
		t.Fatal(err)
	}
	hs, err := c.GetInstancesHealthStatus(ctx, &sd.GetInstancesHealthStatusInput{ServiceId: svc.Id})
	if err != nil || hs.Status["i-1"] != sdtypes.HealthStatusUnhealthy || hs.Status["i-2"] != sdtypes.HealthStatusHealthy {
		t.Errorf("GetInstancesHealthStatus = %+v, %v", hs, err)
	}
	if ids := discover(&sd.DiscoverInstancesInput{NamespaceName: aws.String("internal.example"), ServiceName: aws.String("web"), HealthStatus: sdtypes.HealthStatusFilterHealthy}); !slices.Equal(ids, []string{"i-2"}) {
		t.Errorf("DiscoverInstances HEALTHY = %v", ids)
	}
	rev1, err := c.DiscoverInstancesRevision(ctx, &sd.DiscoverInstancesRevisionInput{NamespaceName: aws.String("internal.example"), ServiceName: aws.String("web")})
	if err != nil {
		t.Fatal(err)
	}

	// The service cannot go while it has instances; nor the namespace while it has services.
	_, err = c.DeleteService(ctx, &sd.DeleteServiceInput{Id: svc.Id})
	wantCode(t, err, "ResourceInUse")
	_, err = c.DeleteNamespace(ctx, &sd.DeleteNamespaceInput{Id: aws.String(nsID)})
	wantCode(t, err, "ResourceInUse")
	if _, err := c.UpdateService(ctx, &sd.UpdateServiceInput{Id: svc.Id, Service: &sdtypes.ServiceChange{
		Description: aws.String("web tier"),
		DnsConfig:   &sdtypes.DnsConfigChange{DnsRecords: []sdtypes.DnsRecord{{Type: sdtypes.RecordTypeA, TTL: aws.Int64(30)}, {Type: sdtypes.RecordTypeSrv, TTL: aws.Int64(30)}}},
	}}); err != nil {
		t.Fatal(err)
	}
	gs, err := c.GetService(ctx, &sd.GetServiceInput{Id: svc.Id})
	if err != nil || aws.ToString(gs.Service.Description) != "web tier" || aws.ToInt64(gs.Service.DnsConfig.DnsRecords[0].TTL) != 30 || aws.ToInt32(gs.Service.InstanceCount) != 2 {
		t.Errorf("GetService after update = %+v, %v", gs, err)
	}
	for _, id := range []string{"i-1", "i-2"} {
		if _, err := c.DeregisterInstance(ctx, &sd.DeregisterInstanceInput{ServiceId: svc.Id, InstanceId: aws.String(id)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.DeregisterInstance(ctx, &sd.DeregisterInstanceInput{ServiceId: svc.Id, InstanceId: aws.String("i-1")})
	wantCode(t, err, "InstanceNotFound")
	rev2, err := c.DiscoverInstancesRevision(ctx, &sd.DiscoverInstancesRevisionInput{NamespaceName: aws.String("internal.example"), ServiceName: aws.String("web")})
	if err != nil || aws.ToInt64(rev2.InstancesRevision) <= aws.ToInt64(rev1.InstancesRevision) {
		t.Errorf("DiscoverInstancesRevision %v then %v, %v", rev1.InstancesRevision, rev2, err)
	}

	// Tags.
	if _, err := c.TagResource(ctx, &sd.TagResourceInput{ResourceARN: svc.Arn, Tags: []sdtypes.Tag{{Key: aws.String("env"), Value: aws.String("dev")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UntagResource(ctx, &sd.UntagResourceInput{ResourceARN: svc.Arn, TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.ListTagsForResource(ctx, &sd.ListTagsForResourceInput{ResourceARN: svc.Arn})
	if err != nil || len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "env" {
		t.Errorf("ListTagsForResource = %+v, %v", tags, err)
	}
	ops, err := c.ListOperations(ctx, &sd.ListOperationsInput{Filters: []sdtypes.OperationFilter{{Name: sdtypes.OperationFilterNameType, Values: []string{"DEREGISTER_INSTANCE"}}}})
	if err != nil || len(ops.Operations) != 2 {
		t.Errorf("ListOperations TYPE=DEREGISTER_INSTANCE = %+v, %v", ops, err)
	}
	if _, err := c.DeleteService(ctx, &sd.DeleteServiceInput{Id: svc.Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteNamespace(ctx, &sd.DeleteNamespaceInput{Id: aws.String(nsID)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.UpdatePrivateDnsNamespace(ctx, &sd.UpdatePrivateDnsNamespaceInput{Id: aws.String(nsID), Namespace: &sdtypes.PrivateDnsNamespaceChange{}})
	wantCode(t, err, "InvalidInput")
	_, err = c.GetServiceAttributes(ctx, &sd.GetServiceAttributesInput{ServiceId: svc.Id})
	wantCode(t, err, "UnsupportedOperationException")
}

// TestECSServiceRegistriesValidation checks serviceRegistries[] on CreateService and
// UpdateService as ECS validates it, and ListServicesByNamespace over the result.
func TestECSServiceRegistriesValidation(t *testing.T) {
	const acct = "666666666666"
	stack := startAPIStack(t, acct)
	c := sd.NewFromConfig(stack.awsConfig(acct, "us-east-1"))
	e := stack.clients[acct]
	ctx := t.Context()
	nsID := createPrivateNamespace(t, c, "svc.local")
	mk := func(name string, recs ...sdtypes.DnsRecord) string {
		out, err := c.CreateService(ctx, &sd.CreateServiceInput{Name: aws.String(name), NamespaceId: aws.String(nsID), DnsConfig: &sdtypes.DnsConfig{DnsRecords: recs}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Service.Arn)
	}
	aOnly := mk("a", sdtypes.DnsRecord{Type: sdtypes.RecordTypeA, TTL: aws.Int64(5)})
	srv := mk("srv", sdtypes.DnsRecord{Type: sdtypes.RecordTypeSrv, TTL: aws.Int64(5)})

	if _, err := e.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	register := func(family, mode string) string {
		out, err := e.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String(family), NetworkMode: ecstypes.NetworkMode(mode),
			ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("web"), Image: aws.String("busybox"), Memory: aws.Int32(64),
				PortMappings: []ecstypes.PortMapping{{ContainerPort: aws.Int32(8080)}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.TaskDefinition.TaskDefinitionArn)
	}
	vpcTD, bridgeTD := register("vpc", "awsvpc"), register("br", "bridge")
	netCfg := &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-1"}}}
	create := func(name, td string, regs ...ecstypes.ServiceRegistry) error {
		in := &ecs.CreateServiceInput{Cluster: aws.String("c"), ServiceName: aws.String(name), TaskDefinition: aws.String(td), DesiredCount: aws.Int32(0), ServiceRegistries: regs}
		if td == vpcTD {
			in.NetworkConfiguration = netCfg
		}
		_, err := e.CreateService(ctx, in)
		return err
	}
	for _, tc := range []struct {
		name string
		td   string
		regs []ecstypes.ServiceRegistry
	}{
		{"two registries", vpcTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String(aOnly)}, {RegistryArn: aws.String(srv), Port: aws.Int32(80)}}},
		{"not a cloud map arn", vpcTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String("arn:aws:ecs:us-east-1:" + acct + ":service/x")}}},
		{"missing service", vpcTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String("arn:aws:servicediscovery:us-east-1:" + acct + ":service/srv-0000000000000000")}}},
		{"srv without port", vpcTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String(srv)}}},
		{"port and container", vpcTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String(srv), Port: aws.Int32(80), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}}},
		{"unknown container port", vpcTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String(srv), ContainerName: aws.String("web"), ContainerPort: aws.Int32(9)}}},
		{"bridge with A only", bridgeTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String(aOnly), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}}},
		{"bridge with port", bridgeTD, []ecstypes.ServiceRegistry{{RegistryArn: aws.String(srv), Port: aws.Int32(80)}}},
	} {
		if err := create("bad", tc.td, tc.regs...); apiErrorCode(err) != "InvalidParameterException" {
			t.Errorf("%s: error %v, want InvalidParameterException", tc.name, err)
		}
	}
	if err := create("vpc-a", vpcTD, ecstypes.ServiceRegistry{RegistryArn: aws.String(aOnly)}); err != nil {
		t.Fatal(err)
	}
	if err := create("br-srv", bridgeTD, ecstypes.ServiceRegistry{RegistryArn: aws.String(srv), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}); err != nil {
		t.Fatal(err)
	}
	if err := create("plain", bridgeTD); err != nil {
		t.Fatal(err)
	}
	ds, err := e.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String("c"), Services: []string{"vpc-a"}})
	if err != nil || len(ds.Services) != 1 || len(ds.Services[0].ServiceRegistries) != 1 || aws.ToString(ds.Services[0].ServiceRegistries[0].RegistryArn) != aOnly {
		t.Fatalf("DescribeServices = %+v, %v", ds, err)
	}
	_, err = e.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("c"), Service: aws.String("plain"),
		ServiceRegistries: []ecstypes.ServiceRegistry{{RegistryArn: aws.String(aOnly), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}}})
	wantCode(t, err, "InvalidParameterException")
	if _, err := e.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("c"), Service: aws.String("plain"),
		ServiceRegistries: []ecstypes.ServiceRegistry{{RegistryArn: aws.String(srv), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}}}); err != nil {
		t.Fatal(err)
	}

	byNS, err := e.ListServicesByNamespace(ctx, &ecs.ListServicesByNamespaceInput{Namespace: aws.String("svc.local")})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(byNS.ServiceArns)
	want := []string{
		"arn:aws:ecs:us-east-1:" + acct + ":service/c/br-srv", "arn:aws:ecs:us-east-1:" + acct + ":service/c/plain", "arn:aws:ecs:us-east-1:" + acct + ":service/c/vpc-a",
	}
	if !slices.Equal(byNS.ServiceArns, want) {
		t.Errorf("ListServicesByNamespace = %v, want %v", byNS.ServiceArns, want)
	}
	page, err := e.ListServicesByNamespace(ctx, &ecs.ListServicesByNamespaceInput{Namespace: aws.String("svc.local"), MaxResults: aws.Int32(2)})
	if err != nil || len(page.ServiceArns) != 2 || page.NextToken == nil {
		t.Errorf("ListServicesByNamespace maxResults 2 = %+v, %v", page, err)
	}
	_, err = e.ListServicesByNamespace(ctx, &ecs.ListServicesByNamespaceInput{Namespace: aws.String("nope.local")})
	wantCode(t, err, "NamespaceNotFoundException")
}

// TestCloudMapWithAWSCLI drives the Cloud Map API with the AWS CLI against the gateway:
// create-private-dns-namespace, get-operation, create-service, register-instance,
// list-instances, get-instances-health-status and list-services. (discover-instances is
// left out: the CLI sends it to the host "data-" + the endpoint's host, as on AWS; see
// docs/service-discovery.md.)
func TestCloudMapWithAWSCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; make deps installs it")
	}
	const acct = "777777777777"
	stack := startAPIStack(t, acct)
	ctx := t.Context()
	run := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.CommandContext(ctx, "aws", append(append([]string{"servicediscovery"}, args...), "--endpoint-url", stack.url, "--region", "us-east-1", "--output", "json")...)
		cmd.Env = cliEnv(stack, acct)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("aws servicediscovery %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		v := map[string]any{}
		if out.Len() > 0 {
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("aws servicediscovery %s: %v\n%s", strings.Join(args, " "), err, out.String())
			}
		}
		return v
	}
	op := run("create-private-dns-namespace", "--name", "cli.local", "--vpc", "vpc-1")
	got := run("get-operation", "--operation-id", op["OperationId"].(string))
	nsID := got["Operation"].(map[string]any)["Targets"].(map[string]any)["NAMESPACE"].(string)
	svc := run("create-service", "--name", "api", "--namespace-id", nsID, "--dns-config", "RoutingPolicy=MULTIVALUE,DnsRecords=[{Type=A,TTL=60}]")
	svcID := svc["Service"].(map[string]any)["Id"].(string)
	run("register-instance", "--service-id", svcID, "--instance-id", "one", "--attributes", "AWS_INSTANCE_IPV4=10.9.0.1")
	li := run("list-instances", "--service-id", svcID)
	insts := li["Instances"].([]any)
	if len(insts) != 1 || insts[0].(map[string]any)["Attributes"].(map[string]any)["AWS_INSTANCE_IPV4"] != "10.9.0.1" {
		t.Errorf("list-instances = %v", li)
	}
	hs := run("get-instances-health-status", "--service-id", svcID)
	if st := hs["Status"].(map[string]any); st["one"] != "UNKNOWN" {
		t.Errorf("get-instances-health-status = %v", hs)
	}
	ls := run("list-services")
	if s := ls["Services"].([]any); len(s) != 1 || s[0].(map[string]any)["Name"] != "api" {
		t.Errorf("list-services = %v", ls)
	}
}
