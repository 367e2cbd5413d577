package cloudmap_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	sdv1 "github.com/berthhq/berth/gen/berth/servicediscovery/v1"
	"github.com/berthhq/berth/services/scheduler/cloudmap"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
)

type api struct {
	h   *cloudmap.Handler
	ctx context.Context
	now *time.Time
}

func newAPI(t *testing.T) api {
	t.Helper()
	r, now := newRegistry(t)
	return api{h: cloudmap.NewHandler(r), ctx: caller.With(t.Context(), caller.Identity{Account: account, Region: scope.Region}), now: now}
}

func str(s string) *string { return &s }

func call[Req, Res any](t *testing.T, a api, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) *Res {
	t.Helper()
	res, err := fn(a.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return res.Msg
}

// namespaceID returns the namespace a create operation made, through GetOperation.
func (a api) namespaceID(t *testing.T, op string) string {
	t.Helper()
	o := call(t, a, a.h.GetOperation, &sdv1.GetOperationRequest{OperationId: str(op)}).GetOperation()
	if o.GetStatus() != "SUCCESS" {
		t.Fatalf("operation %s is %s", op, o.GetStatus())
	}
	return o.GetTargets()["NAMESPACE"]
}

func (a api) privateDNS(t *testing.T, name string) string {
	t.Helper()
	return a.namespaceID(t, call(t, a, a.h.CreatePrivateDnsNamespace, &sdv1.CreatePrivateDnsNamespaceRequest{Name: str(name), Vpc: str("vpc-1")}).GetOperationId())
}

func (a api) httpNS(t *testing.T, name string) string {
	t.Helper()
	return a.namespaceID(t, call(t, a, a.h.CreateHttpNamespace, &sdv1.CreateHttpNamespaceRequest{Name: str(name)}).GetOperationId())
}

func (a api) service(t *testing.T, req *sdv1.CreateServiceRequest) *sdv1.Service {
	t.Helper()
	return call(t, a, a.h.CreateService, req).GetService()
}

func (a api) register(t *testing.T, serviceID, id string, attrs map[string]string) {
	t.Helper()
	call(t, a, a.h.RegisterInstance, &sdv1.RegisterInstanceRequest{ServiceId: str(serviceID), InstanceId: str(id), Attributes: attrs})
}

func TestNamespaceAPI(t *testing.T) {
	a := newAPI(t)
	op := call(t, a, a.h.CreatePrivateDnsNamespace, &sdv1.CreatePrivateDnsNamespaceRequest{Name: str("corp.local"), Vpc: str("vpc-1"), Description: str("d"),
		CreatorRequestId: str("r1"), Properties: &sdv1.PrivateDnsNamespaceProperties{DnsProperties: &sdv1.PrivateDnsPropertiesMutable{Soa: &sdv1.SOA{Ttl: 60}}}}).GetOperationId()
	dnsID := a.namespaceID(t, op)
	httpID := a.httpNS(t, "apps")
	a.service(t, &sdv1.CreateServiceRequest{Name: str("web"), NamespaceId: str(dnsID)})
	a.service(t, &sdv1.CreateServiceRequest{Name: str("api"), NamespaceId: str(dnsID)})

	ns := call(t, a, a.h.GetNamespace, &sdv1.GetNamespaceRequest{Id: str(dnsID)}).GetNamespace()
	if ns.GetName() != "corp.local" || ns.GetType() != "DNS_PRIVATE" || ns.GetDescription() != "d" || ns.GetCreatorRequestId() != "r1" ||
		ns.GetServiceCount() != 2 || ns.GetResourceOwner() != account || ns.GetArn() != cloudmap.ARN(scope, "namespace", dnsID) ||
		ns.GetProperties().GetDnsProperties().GetSoa().GetTtl() != 60 || !zoneRE.MatchString(ns.GetProperties().GetDnsProperties().GetHostedZoneId()) ||
		ns.GetProperties().GetHttpProperties().GetHttpName() != "corp.local" || ns.GetCreateDate() != epoch(clock) {
		t.Fatalf("GetNamespace = %v", ns)
	}
	hns := call(t, a, a.h.GetNamespace, &sdv1.GetNamespaceRequest{Id: str(httpID)}).GetNamespace()
	if hns.GetType() != "HTTP" || hns.GetProperties().GetDnsProperties() != nil || hns.GetProperties().GetHttpProperties().GetHttpName() != "apps" || hns.GetServiceCount() != 0 {
		t.Fatalf("HTTP namespace = %v", hns)
	}
	_, err := a.h.GetNamespace(a.ctx, connect.NewRequest(&sdv1.GetNamespaceRequest{Id: str("ns-nope")}))
	wantErr(t, err, "NamespaceNotFound", "ns-nope")

	// What Berth does not serve is refused plainly.
	_, err = a.h.CreatePublicDnsNamespace(a.ctx, connect.NewRequest(&sdv1.CreatePublicDnsNamespaceRequest{Name: str("example.com")}))
	wantErr(t, err, "InvalidInput", "Public DNS namespaces are not supported by Berth")
	_, err = a.h.UpdatePrivateDnsNamespace(a.ctx, connect.NewRequest(&sdv1.UpdatePrivateDnsNamespaceRequest{Id: str(dnsID)}))
	wantErr(t, err, "InvalidInput", "UpdatePrivateDnsNamespace is not supported")
	_, err = a.h.UpdatePublicDnsNamespace(a.ctx, connect.NewRequest(&sdv1.UpdatePublicDnsNamespaceRequest{Id: str(dnsID)}))
	wantErr(t, err, "InvalidInput", "Public DNS namespaces")
	_, err = a.h.CreatePrivateDnsNamespace(a.ctx, connect.NewRequest(&sdv1.CreatePrivateDnsNamespaceRequest{Name: str("x.local")}))
	wantErr(t, err, "InvalidInput", "Vpc is required")

	// Delete: refused while it has services.
	_, err = a.h.DeleteNamespace(a.ctx, connect.NewRequest(&sdv1.DeleteNamespaceRequest{Id: str(dnsID)}))
	wantErr(t, err, "ResourceInUse", "")
	op = call(t, a, a.h.DeleteNamespace, &sdv1.DeleteNamespaceRequest{Id: str(httpID)}).GetOperationId()
	if o := call(t, a, a.h.GetOperation, &sdv1.GetOperationRequest{OperationId: str(op)}).GetOperation(); o.GetType() != "DELETE_NAMESPACE" || o.GetTargets()["NAMESPACE"] != httpID {
		t.Fatalf("delete operation = %v", o)
	}
	_, err = a.h.GetOperation(a.ctx, connect.NewRequest(&sdv1.GetOperationRequest{OperationId: str("op-nope")}))
	wantErr(t, err, "OperationNotFound", "op-nope")
}

func namespaceFilter(name, cond string, values ...string) *sdv1.NamespaceFilter {
	f := &sdv1.NamespaceFilter{Name: str(name), Values: values}
	if cond != "" {
		f.Condition = str(cond)
	}
	return f
}

func TestListNamespaces(t *testing.T) {
	a := newAPI(t)
	ids := map[string]string{}
	for _, n := range []string{"alpha.local", "beta.local", "alpine.internal"} {
		ids[n] = a.privateDNS(t, n)
	}
	ids["alpha-http"] = a.httpNS(t, "alpha-http")
	nameOf := map[string]string{}
	for n, id := range ids {
		nameOf[id] = n
	}
	list := func(t *testing.T, req *sdv1.ListNamespacesRequest) ([]string, int) {
		t.Helper()
		var names []string
		pages := 0
		for page := 0; ; page++ {
			if page == 100 {
				t.Fatal("paging does not end")
			}
			res := call(t, a, a.h.ListNamespaces, req)
			pages++
			for _, ns := range res.GetNamespaces() {
				if nameOf[ns.GetId()] != ns.GetName() || ns.GetResourceOwner() != account {
					t.Fatalf("summary = %v", ns)
				}
				names = append(names, ns.GetName())
			}
			if res.NextToken == nil {
				slices.Sort(names)
				return names, pages
			}
			req.NextToken = res.NextToken
		}
	}
	for _, tc := range []struct {
		name    string
		filters []*sdv1.NamespaceFilter
		want    []string
	}{
		{"all", nil, []string{"alpha-http", "alpha.local", "alpine.internal", "beta.local"}},
		{"type EQ", []*sdv1.NamespaceFilter{namespaceFilter("TYPE", "", "HTTP")}, []string{"alpha-http"}},
		{"type IN", []*sdv1.NamespaceFilter{namespaceFilter("TYPE", "IN", "HTTP", "DNS_PRIVATE")}, []string{"alpha-http", "alpha.local", "alpine.internal", "beta.local"}},
		{"name begins with", []*sdv1.NamespaceFilter{namespaceFilter("NAME", "BEGINS_WITH", "alp")}, []string{"alpha-http", "alpha.local", "alpine.internal"}},
		{"http name EQ", []*sdv1.NamespaceFilter{namespaceFilter("HTTP_NAME", "EQ", "beta.local")}, []string{"beta.local"}},
		{"filters are ANDed", []*sdv1.NamespaceFilter{namespaceFilter("NAME", "BEGINS_WITH", "alp"), namespaceFilter("TYPE", "", "DNS_PRIVATE")}, []string{"alpha.local", "alpine.internal"}},
		{"resource owner", []*sdv1.NamespaceFilter{namespaceFilter("RESOURCE_OWNER", "", account)}, []string{"alpha-http", "alpha.local", "alpine.internal", "beta.local"}},
		{"another owner", []*sdv1.NamespaceFilter{namespaceFilter("RESOURCE_OWNER", "", "999999999999")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := list(t, &sdv1.ListNamespacesRequest{Filters: tc.filters}); !slices.Equal(got, tc.want) {
				t.Fatalf("names = %v, want %v", got, tc.want)
			}
		})
	}
	if got, pages := list(t, &sdv1.ListNamespacesRequest{MaxResults: 1}); pages != 4 || len(got) != 4 {
		t.Fatalf("MaxResults 1: %v in %d pages", got, pages)
	}
	if got, pages := list(t, &sdv1.ListNamespacesRequest{MaxResults: 3}); pages != 2 || len(got) != 4 {
		t.Fatalf("MaxResults 3: %v in %d pages", got, pages)
	}
	for _, tc := range []struct {
		name string
		req  *sdv1.ListNamespacesRequest
		msg  string
	}{
		{"filter name", &sdv1.ListNamespacesRequest{Filters: []*sdv1.NamespaceFilter{namespaceFilter("VPC", "", "x")}}, `Filter name "VPC" is not valid`},
		{"condition", &sdv1.ListNamespacesRequest{Filters: []*sdv1.NamespaceFilter{namespaceFilter("NAME", "IN", "a", "b")}}, "Filter condition IN is not valid here: EQ, BEGINS_WITH."},
		{"between", &sdv1.ListNamespacesRequest{Filters: []*sdv1.NamespaceFilter{namespaceFilter("TYPE", "BETWEEN", "a", "b")}}, "Filter condition BETWEEN"},
		{"EQ takes one value", &sdv1.ListNamespacesRequest{Filters: []*sdv1.NamespaceFilter{namespaceFilter("TYPE", "EQ", "HTTP", "DNS_PRIVATE")}}, "An EQ filter takes exactly one value."},
		{"BEGINS_WITH takes one value", &sdv1.ListNamespacesRequest{Filters: []*sdv1.NamespaceFilter{namespaceFilter("NAME", "BEGINS_WITH", "a", "b")}}, "A BEGINS_WITH filter takes exactly one value."},
		{"no values", &sdv1.ListNamespacesRequest{Filters: []*sdv1.NamespaceFilter{namespaceFilter("TYPE", "")}}, "A filter needs at least one value."},
		{"token", &sdv1.ListNamespacesRequest{NextToken: str("!!not base64")}, "NextToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.h.ListNamespaces(a.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, "InvalidInput", tc.msg)
		})
	}
}

func TestServiceAPI(t *testing.T) {
	a := newAPI(t)
	dnsID := a.privateDNS(t, "svc.local")
	httpID := a.httpNS(t, "apps")
	// The namespace may come in DnsConfig (the older form), as AWS accepts.
	web := a.service(t, &sdv1.CreateServiceRequest{Name: str("web"), Description: str("front"), CreatorRequestId: str("r1"),
		DnsConfig:               &sdv1.DnsConfig{NamespaceId: str(dnsID), DnsRecords: []*sdv1.DnsRecord{{Type: str("A"), Ttl: 30}, {Type: str("SRV"), Ttl: 60}}},
		HealthCheckCustomConfig: &sdv1.HealthCheckCustomConfig{}, Tags: []*sdv1.Tag{{Key: str("env"), Value: str("dev")}}})
	if web.GetNamespaceId() != dnsID || web.GetType() != "DNS_HTTP" || web.GetDnsConfig().GetRoutingPolicy() != "MULTIVALUE" ||
		len(web.GetDnsConfig().GetDnsRecords()) != 2 || web.GetDnsConfig().GetDnsRecords()[1].GetTtl() != 60 ||
		web.GetHealthCheckCustomConfig().GetFailureThreshold() != 1 || web.GetDescription() != "front" || web.GetCreatorRequestId() != "r1" ||
		web.GetInstanceCount() != 0 || web.GetCreatedByAccount() != account || web.GetResourceOwner() != account {
		t.Fatalf("CreateService = %v", web)
	}
	api := a.service(t, &sdv1.CreateServiceRequest{Name: str("api"), NamespaceId: str(httpID)})
	if api.GetType() != "HTTP" || api.GetDnsConfig() != nil || api.GetHealthCheckCustomConfig() != nil {
		t.Fatalf("HTTP service = %v", api)
	}
	_, err := a.h.CreateService(a.ctx, connect.NewRequest(&sdv1.CreateServiceRequest{Name: str("x"), NamespaceId: str(dnsID), HealthCheckConfig: &sdv1.HealthCheckConfig{}}))
	wantErr(t, err, "InvalidInput", "HealthCheckConfig")

	a.register(t, web.GetId(), "i-1", map[string]string{cloudmap.AttrIPv4: "10.0.0.1", cloudmap.AttrPort: "80"})
	if got := call(t, a, a.h.GetService, &sdv1.GetServiceRequest{Id: str(web.GetId())}).GetService(); got.GetInstanceCount() != 1 || got.GetArn() != web.GetArn() {
		t.Fatalf("GetService = %v", got)
	}
	_, err = a.h.GetService(a.ctx, connect.NewRequest(&sdv1.GetServiceRequest{Id: str("srv-nope")}))
	wantErr(t, err, "ServiceNotFound", "srv-nope")

	listed := func(filters ...*sdv1.ServiceFilter) []string {
		var names []string
		for _, s := range call(t, a, a.h.ListServices, &sdv1.ListServicesRequest{Filters: filters}).GetServices() {
			names = append(names, s.GetName())
		}
		slices.Sort(names)
		return names
	}
	if got := listed(); !slices.Equal(got, []string{"api", "web"}) {
		t.Errorf("ListServices = %v", got)
	}
	if got := listed(&sdv1.ServiceFilter{Name: str("NAMESPACE_ID"), Values: []string{dnsID}}); !slices.Equal(got, []string{"web"}) {
		t.Errorf("ListServices in %s = %v", dnsID, got)
	}
	if got := listed(&sdv1.ServiceFilter{Name: str("NAMESPACE_ID"), Condition: str("IN"), Values: []string{dnsID, httpID}}); !slices.Equal(got, []string{"api", "web"}) {
		t.Errorf("ListServices IN = %v", got)
	}
	_, err = a.h.ListServices(a.ctx, connect.NewRequest(&sdv1.ListServicesRequest{Filters: []*sdv1.ServiceFilter{{Name: str("NAME"), Values: []string{"web"}}}}))
	wantErr(t, err, "InvalidInput", `Filter name "NAME" is not valid: NAMESPACE_ID.`)

	// UpdateService: the description and record TTLs.
	op := call(t, a, a.h.UpdateService, &sdv1.UpdateServiceRequest{Id: str(web.GetId()), Service: &sdv1.ServiceChange{Description: str("new"),
		DnsConfig: &sdv1.DnsConfigChange{DnsRecords: []*sdv1.DnsRecord{{Type: str("A"), Ttl: 5}, {Type: str("SRV"), Ttl: 6}}}}}).GetOperationId()
	if o := call(t, a, a.h.GetOperation, &sdv1.GetOperationRequest{OperationId: str(op)}).GetOperation(); o.GetType() != "UPDATE_SERVICE" {
		t.Fatalf("operation = %v", o)
	}
	got := call(t, a, a.h.GetService, &sdv1.GetServiceRequest{Id: str(web.GetId())}).GetService()
	if got.GetDescription() != "new" || got.GetDnsConfig().GetDnsRecords()[0].GetTtl() != 5 {
		t.Fatalf("after UpdateService = %v", got)
	}
	_, err = a.h.UpdateService(a.ctx, connect.NewRequest(&sdv1.UpdateServiceRequest{Id: str(web.GetId())}))
	wantErr(t, err, "InvalidInput", "Service is required.")

	// DeleteService: only without instances.
	_, err = a.h.DeleteService(a.ctx, connect.NewRequest(&sdv1.DeleteServiceRequest{Id: str(web.GetId())}))
	wantErr(t, err, "ResourceInUse", "")
	call(t, a, a.h.DeregisterInstance, &sdv1.DeregisterInstanceRequest{ServiceId: str(web.GetId()), InstanceId: str("i-1")})
	call(t, a, a.h.DeleteService, &sdv1.DeleteServiceRequest{Id: str(web.GetId())})
	if got := listed(); !slices.Equal(got, []string{"api"}) {
		t.Errorf("ListServices after delete = %v", got)
	}
}

func TestInstanceAPI(t *testing.T) {
	a := newAPI(t)
	nsID := a.httpNS(t, "apps")
	svc := a.service(t, &sdv1.CreateServiceRequest{Name: str("web"), NamespaceId: str(nsID)})
	for i := range 5 {
		a.register(t, svc.GetId(), fmt.Sprintf("i-%d", 4-i), map[string]string{"n": strconv.Itoa(4 - i)})
	}
	_, err := a.h.RegisterInstance(a.ctx, connect.NewRequest(&sdv1.RegisterInstanceRequest{ServiceId: str(svc.GetId()), InstanceId: str("bad id"), Attributes: map[string]string{"a": "b"}}))
	wantErr(t, err, "InvalidInput", "InstanceId")

	res := call(t, a, a.h.GetInstance, &sdv1.GetInstanceRequest{ServiceId: str(svc.GetId()), InstanceId: str("i-3")})
	if res.GetResourceOwner() != account || res.GetInstance().GetId() != "i-3" || res.GetInstance().GetAttributes()["n"] != "3" || res.GetInstance().GetCreatedByAccount() != account {
		t.Fatalf("GetInstance = %v", res)
	}
	_, err = a.h.GetInstance(a.ctx, connect.NewRequest(&sdv1.GetInstanceRequest{ServiceId: str(svc.GetId()), InstanceId: str("i-9")}))
	wantErr(t, err, "InstanceNotFound", "i-9")

	// ListInstances: in id order, in pages.
	var ids []string
	req := &sdv1.ListInstancesRequest{ServiceId: str(svc.GetId()), MaxResults: 2}
	pages := 0
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("paging does not end")
		}
		res := call(t, a, a.h.ListInstances, req)
		pages++
		if res.GetResourceOwner() != account {
			t.Fatalf("ResourceOwner = %s", res.GetResourceOwner())
		}
		for _, i := range res.GetInstances() {
			ids = append(ids, i.GetId())
		}
		if res.NextToken == nil {
			break
		}
		req.NextToken = res.NextToken
	}
	if want := []string{"i-0", "i-1", "i-2", "i-3", "i-4"}; !slices.Equal(ids, want) || pages != 3 {
		t.Fatalf("ListInstances = %v in %d pages, want %v in 3", ids, pages, want)
	}
	_, err = a.h.ListInstances(a.ctx, connect.NewRequest(&sdv1.ListInstancesRequest{ServiceId: str("srv-nope")}))
	wantErr(t, err, "ServiceNotFound", "")
	_, err = a.h.DeregisterInstance(a.ctx, connect.NewRequest(&sdv1.DeregisterInstanceRequest{ServiceId: str(svc.GetId()), InstanceId: str("i-9")}))
	wantErr(t, err, "InstanceNotFound", "")
}

func TestDiscoverInstances(t *testing.T) {
	a := newAPI(t)
	nsID := a.privateDNS(t, "corp.local")
	checked := a.service(t, &sdv1.CreateServiceRequest{Name: str("web"), NamespaceId: str(nsID), HealthCheckCustomConfig: &sdv1.HealthCheckCustomConfig{}})
	plain := a.service(t, &sdv1.CreateServiceRequest{Name: str("batch"), NamespaceId: str(nsID)})
	for id, attrs := range map[string]map[string]string{
		"blue-1":  {"color": "blue", "zone": "a"},
		"blue-2":  {"color": "blue", "zone": "b", cloudmap.AttrInitHealth: cloudmap.Unhealthy},
		"green-1": {"color": "green", "zone": "a"},
	} {
		a.register(t, checked.GetId(), id, attrs)
	}
	a.register(t, plain.GetId(), "p-1", map[string]string{"k": "v"})

	discover := func(t *testing.T, req *sdv1.DiscoverInstancesRequest) map[string]string {
		t.Helper()
		if req.NamespaceName == nil {
			req.NamespaceName = str("corp.local")
		}
		if req.ServiceName == nil {
			req.ServiceName = str("web")
		}
		res := call(t, a, a.h.DiscoverInstances, req)
		out := map[string]string{}
		for _, i := range res.GetInstances() {
			if i.GetNamespaceName() != "corp.local" || i.GetServiceName() != "web" && i.GetServiceName() != "batch" {
				t.Fatalf("instance summary = %v", i)
			}
			out[i.GetInstanceId()] = i.GetHealthStatus()
		}
		return out
	}
	for _, tc := range []struct {
		name string
		req  *sdv1.DiscoverInstancesRequest
		want map[string]string
	}{
		{"healthy by default", &sdv1.DiscoverInstancesRequest{}, map[string]string{"blue-1": "HEALTHY", "green-1": "HEALTHY"}},
		{"names are case-insensitive", &sdv1.DiscoverInstancesRequest{NamespaceName: str("CORP.local."), ServiceName: str("WEB")}, map[string]string{"blue-1": "HEALTHY", "green-1": "HEALTHY"}},
		{"unhealthy", &sdv1.DiscoverInstancesRequest{HealthStatus: str("UNHEALTHY")}, map[string]string{"blue-2": "UNHEALTHY"}},
		{"all", &sdv1.DiscoverInstancesRequest{HealthStatus: str("ALL")}, map[string]string{"blue-1": "HEALTHY", "blue-2": "UNHEALTHY", "green-1": "HEALTHY"}},
		{"query parameters", &sdv1.DiscoverInstancesRequest{HealthStatus: str("ALL"), QueryParameters: map[string]string{"color": "blue"}}, map[string]string{"blue-1": "HEALTHY", "blue-2": "UNHEALTHY"}},
		{"healthy or else all: some healthy", &sdv1.DiscoverInstancesRequest{HealthStatus: str("HEALTHY_OR_ELSE_ALL"), QueryParameters: map[string]string{"color": "blue"}}, map[string]string{"blue-1": "HEALTHY"}},
		{"optional parameters narrow", &sdv1.DiscoverInstancesRequest{OptionalParameters: map[string]string{"zone": "a", "color": "green"}}, map[string]string{"green-1": "HEALTHY"}},
		{"optional parameters matching nothing are ignored", &sdv1.DiscoverInstancesRequest{OptionalParameters: map[string]string{"zone": "z"}}, map[string]string{"blue-1": "HEALTHY", "green-1": "HEALTHY"}},
		{"no health check: every instance, UNKNOWN", &sdv1.DiscoverInstancesRequest{ServiceName: str("batch")}, map[string]string{"p-1": "UNKNOWN"}},
		{"max results", &sdv1.DiscoverInstancesRequest{HealthStatus: str("ALL"), MaxResults: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := discover(t, tc.req)
			if tc.want == nil {
				if len(got) != 1 {
					t.Fatalf("MaxResults 1 returned %v", got)
				}
				return
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("instances = %v, want %v", got, tc.want)
			}
		})
	}

	// When no instance is healthy, HEALTHY_OR_ELSE_ALL answers them all.
	call(t, a, a.h.UpdateInstanceCustomHealthStatus, &sdv1.UpdateInstanceCustomHealthStatusRequest{ServiceId: str(checked.GetId()), InstanceId: str("blue-1"), Status: str("UNHEALTHY")})
	if got := discover(t, &sdv1.DiscoverInstancesRequest{HealthStatus: str("HEALTHY_OR_ELSE_ALL"), QueryParameters: map[string]string{"color": "blue"}}); !maps.Equal(got, map[string]string{"blue-1": "UNHEALTHY", "blue-2": "UNHEALTHY"}) {
		t.Fatalf("HEALTHY_OR_ELSE_ALL without healthy instances = %v", got)
	}

	// The revision moves with every register and deregister, and both actions agree on it.
	revision := func() int64 {
		r1 := call(t, a, a.h.DiscoverInstances, &sdv1.DiscoverInstancesRequest{NamespaceName: str("corp.local"), ServiceName: str("web")}).GetInstancesRevision()
		r2 := call(t, a, a.h.DiscoverInstancesRevision, &sdv1.DiscoverInstancesRevisionRequest{NamespaceName: str("corp.local"), ServiceName: str("web")}).GetInstancesRevision()
		if r1 != r2 || r1 == 0 {
			t.Fatalf("InstancesRevision: DiscoverInstances %d, DiscoverInstancesRevision %d", r1, r2)
		}
		return r1
	}
	before := revision()
	a.register(t, checked.GetId(), "red-1", map[string]string{"color": "red"})
	mid := revision()
	call(t, a, a.h.DeregisterInstance, &sdv1.DeregisterInstanceRequest{ServiceId: str(checked.GetId()), InstanceId: str("red-1")})
	if after := revision(); !(before < mid && mid < after) {
		t.Fatalf("revisions %d %d %d do not increase", before, mid, after)
	}

	for _, tc := range []struct {
		name         string
		req          *sdv1.DiscoverInstancesRequest
		errType, msg string
	}{
		{"namespace", &sdv1.DiscoverInstancesRequest{NamespaceName: str("nope.local"), ServiceName: str("web")}, "NamespaceNotFound", "nope.local"},
		{"service", &sdv1.DiscoverInstancesRequest{NamespaceName: str("corp.local"), ServiceName: str("nope")}, "ServiceNotFound", "nope"},
		{"another owner", &sdv1.DiscoverInstancesRequest{NamespaceName: str("corp.local"), ServiceName: str("web"), OwnerAccount: str("999999999999")}, "NamespaceNotFound", "shared namespaces are not supported"},
		{"health status", &sdv1.DiscoverInstancesRequest{NamespaceName: str("corp.local"), ServiceName: str("web"), HealthStatus: str("SICK")}, "InvalidInput", `HealthStatus "SICK" is not valid.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.h.DiscoverInstances(a.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
	_, err := a.h.DiscoverInstancesRevision(a.ctx, connect.NewRequest(&sdv1.DiscoverInstancesRevisionRequest{NamespaceName: str("corp.local"), ServiceName: str("nope")}))
	wantErr(t, err, "ServiceNotFound", "")
}

func TestInstancesHealthStatus(t *testing.T) {
	a := newAPI(t)
	nsID := a.httpNS(t, "apps")
	checked := a.service(t, &sdv1.CreateServiceRequest{Name: str("checked"), NamespaceId: str(nsID), HealthCheckCustomConfig: &sdv1.HealthCheckCustomConfig{}})
	plain := a.service(t, &sdv1.CreateServiceRequest{Name: str("plain"), NamespaceId: str(nsID)})
	for _, id := range []string{"a", "b", "c"} {
		a.register(t, checked.GetId(), id, map[string]string{"k": "v"})
		a.register(t, plain.GetId(), id, map[string]string{"k": "v"})
	}
	update := func(id, status string) error {
		_, err := a.h.UpdateInstanceCustomHealthStatus(a.ctx, connect.NewRequest(&sdv1.UpdateInstanceCustomHealthStatusRequest{ServiceId: str(checked.GetId()), InstanceId: str(id), Status: str(status)}))
		return err
	}
	if err := update("b", "UNHEALTHY"); err != nil {
		t.Fatal(err)
	}
	status := func(req *sdv1.GetInstancesHealthStatusRequest) map[string]string {
		t.Helper()
		out := map[string]string{}
		for page := 0; ; page++ {
			if page == 100 {
				t.Fatal("paging does not end")
			}
			res := call(t, a, a.h.GetInstancesHealthStatus, req)
			maps.Copy(out, res.GetStatus())
			if res.NextToken == nil {
				return out
			}
			req.NextToken = res.NextToken
		}
	}
	if got := status(&sdv1.GetInstancesHealthStatusRequest{ServiceId: str(checked.GetId())}); !maps.Equal(got, map[string]string{"a": "HEALTHY", "b": "UNHEALTHY", "c": "HEALTHY"}) {
		t.Fatalf("status = %v", got)
	}
	if got := status(&sdv1.GetInstancesHealthStatusRequest{ServiceId: str(checked.GetId()), MaxResults: 1}); len(got) != 3 {
		t.Fatalf("paged status = %v", got)
	}
	if got := status(&sdv1.GetInstancesHealthStatusRequest{ServiceId: str(checked.GetId()), Instances: []string{"b", "c", "b"}}); !maps.Equal(got, map[string]string{"b": "UNHEALTHY", "c": "HEALTHY"}) {
		t.Fatalf("named status = %v", got)
	}
	if got := status(&sdv1.GetInstancesHealthStatusRequest{ServiceId: str(plain.GetId())}); !maps.Equal(got, map[string]string{"a": "UNKNOWN", "b": "UNKNOWN", "c": "UNKNOWN"}) {
		t.Fatalf("status without a health check = %v", got)
	}
	_, err := a.h.GetInstancesHealthStatus(a.ctx, connect.NewRequest(&sdv1.GetInstancesHealthStatusRequest{ServiceId: str(checked.GetId()), Instances: []string{"a", "zz"}}))
	wantErr(t, err, "InstanceNotFound", "a, zz")
	_, err = a.h.GetInstancesHealthStatus(a.ctx, connect.NewRequest(&sdv1.GetInstancesHealthStatusRequest{ServiceId: str("srv-nope")}))
	wantErr(t, err, "ServiceNotFound", "")
	wantErr(t, update("a", "DRAINING"), "InvalidInput", "HEALTHY or UNHEALTHY")
	_, err = a.h.UpdateInstanceCustomHealthStatus(a.ctx, connect.NewRequest(&sdv1.UpdateInstanceCustomHealthStatusRequest{ServiceId: str(plain.GetId()), InstanceId: str("a"), Status: str("HEALTHY")}))
	wantErr(t, err, "CustomHealthNotFound", "")
}

func opFilter(name, cond string, values ...string) *sdv1.OperationFilter {
	f := &sdv1.OperationFilter{Name: str(name), Values: values}
	if cond != "" {
		f.Condition = str(cond)
	}
	return f
}

func TestListOperations(t *testing.T) {
	a := newAPI(t)
	nsID := a.httpNS(t, "apps") // at clock
	*a.now = clock.Add(time.Hour)
	svc := a.service(t, &sdv1.CreateServiceRequest{Name: str("web"), NamespaceId: str(nsID)})
	a.register(t, svc.GetId(), "i-1", map[string]string{"k": "v"})
	*a.now = clock.Add(2 * time.Hour)
	call(t, a, a.h.DeregisterInstance, &sdv1.DeregisterInstanceRequest{ServiceId: str(svc.GetId()), InstanceId: str("i-1")})

	types := func(t *testing.T, filters ...*sdv1.OperationFilter) []string {
		t.Helper()
		var out []string
		req := &sdv1.ListOperationsRequest{Filters: filters, MaxResults: 2}
		for page := 0; ; page++ {
			if page == 100 {
				t.Fatal("paging does not end")
			}
			res := call(t, a, a.h.ListOperations, req)
			for _, o := range res.GetOperations() {
				if o.GetStatus() != "SUCCESS" {
					t.Fatalf("operation %s is %s", o.GetId(), o.GetStatus())
				}
				out = append(out, call(t, a, a.h.GetOperation, &sdv1.GetOperationRequest{OperationId: o.Id}).GetOperation().GetType())
			}
			if res.NextToken == nil {
				slices.Sort(out)
				return out
			}
			req.NextToken = res.NextToken
		}
	}
	hour := func(h int) string {
		return strconv.FormatFloat(epoch(clock.Add(time.Duration(h)*time.Hour)), 'f', 3, 64)
	}
	for _, tc := range []struct {
		name    string
		filters []*sdv1.OperationFilter
		want    []string
	}{
		{"all", nil, []string{"CREATE_NAMESPACE", "DEREGISTER_INSTANCE", "REGISTER_INSTANCE"}},
		{"type IN", []*sdv1.OperationFilter{opFilter("TYPE", "IN", "REGISTER_INSTANCE", "DEREGISTER_INSTANCE")}, []string{"DEREGISTER_INSTANCE", "REGISTER_INSTANCE"}},
		{"namespace", []*sdv1.OperationFilter{opFilter("NAMESPACE_ID", "", nsID)}, []string{"CREATE_NAMESPACE"}},
		{"service", []*sdv1.OperationFilter{opFilter("SERVICE_ID", "EQ", svc.GetId())}, []string{"DEREGISTER_INSTANCE", "REGISTER_INSTANCE"}},
		{"status", []*sdv1.OperationFilter{opFilter("STATUS", "IN", "FAIL", "PENDING")}, nil},
		{"update date", []*sdv1.OperationFilter{opFilter("UPDATE_DATE", "BETWEEN", hour(1), hour(1))}, []string{"REGISTER_INSTANCE"}},
		{"update date range", []*sdv1.OperationFilter{opFilter("UPDATE_DATE", "BETWEEN", hour(0), hour(1))}, []string{"CREATE_NAMESPACE", "REGISTER_INSTANCE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := types(t, tc.filters...); !slices.Equal(got, tc.want) {
				t.Fatalf("operations = %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		filters []*sdv1.OperationFilter
		msg     string
	}{
		{"unknown", []*sdv1.OperationFilter{opFilter("INSTANCE_ID", "", "i-1")}, `Filter name "INSTANCE_ID" is not valid`},
		{"namespace IN", []*sdv1.OperationFilter{opFilter("NAMESPACE_ID", "IN", nsID)}, "Filter condition IN is not valid here: EQ."},
		{"date condition", []*sdv1.OperationFilter{opFilter("UPDATE_DATE", "EQ", hour(0))}, "The UPDATE_DATE filter takes BETWEEN and two values."},
		{"date values", []*sdv1.OperationFilter{opFilter("UPDATE_DATE", "BETWEEN", "yesterday", "today")}, "epoch seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.h.ListOperations(a.ctx, connect.NewRequest(&sdv1.ListOperationsRequest{Filters: tc.filters}))
			wantErr(t, err, "InvalidInput", tc.msg)
		})
	}
}

func TestTagAPI(t *testing.T) {
	a := newAPI(t)
	nsID := a.httpNS(t, "apps")
	arn := cloudmap.ARN(scope, "namespace", nsID)
	tags := func() map[string]string {
		out := map[string]string{}
		for _, tg := range call(t, a, a.h.ListTagsForResource, &sdv1.ListTagsForResourceRequest{ResourceArn: str(arn)}).GetTags() {
			out[tg.GetKey()] = tg.GetValue()
		}
		return out
	}
	tag := func(k, v string) *sdv1.Tag { return &sdv1.Tag{Key: str(k), Value: str(v)} }
	call(t, a, a.h.TagResource, &sdv1.TagResourceRequest{ResourceArn: str(arn), Tags: []*sdv1.Tag{tag("env", "dev"), tag("team", "red")}})
	call(t, a, a.h.TagResource, &sdv1.TagResourceRequest{ResourceArn: str(arn), Tags: []*sdv1.Tag{tag("env", "prod")}})
	if got := tags(); !maps.Equal(got, map[string]string{"env": "prod", "team": "red"}) {
		t.Fatalf("tags = %v", got)
	}
	call(t, a, a.h.UntagResource, &sdv1.UntagResourceRequest{ResourceArn: str(arn), TagKeys: []string{"team", "absent"}})
	if got := tags(); !maps.Equal(got, map[string]string{"env": "prod"}) {
		t.Fatalf("tags after untag = %v", got)
	}
	_, err := a.h.TagResource(a.ctx, connect.NewRequest(&sdv1.TagResourceRequest{ResourceArn: str(arn), Tags: []*sdv1.Tag{tag("aws:x", "v")}}))
	wantErr(t, err, "InvalidInput", "reserved")
	missing := cloudmap.ARN(scope, "namespace", "ns-nope")
	_, err = a.h.ListTagsForResource(a.ctx, connect.NewRequest(&sdv1.ListTagsForResourceRequest{ResourceArn: str(missing)}))
	wantErr(t, err, "ResourceNotFoundException", missing)
	_, err = a.h.UntagResource(a.ctx, connect.NewRequest(&sdv1.UntagResourceRequest{ResourceArn: str(missing), TagKeys: []string{"k"}}))
	wantErr(t, err, "ResourceNotFoundException", "")
	_, err = a.h.TagResource(a.ctx, connect.NewRequest(&sdv1.TagResourceRequest{ResourceArn: str(missing), Tags: []*sdv1.Tag{tag("k", "v")}}))
	wantErr(t, err, "ResourceNotFoundException", "")
}

func TestAPIScope(t *testing.T) {
	a := newAPI(t)
	nsID := a.httpNS(t, "apps")
	// Another region of the account does not see the namespace.
	other := caller.With(t.Context(), caller.Identity{Account: account, Region: "eu-west-1"})
	_, err := a.h.GetNamespace(other, connect.NewRequest(&sdv1.GetNamespaceRequest{Id: str(nsID)}))
	wantErr(t, err, "NamespaceNotFound", "")
	_, err = a.h.ListNamespaces(t.Context(), connect.NewRequest(&sdv1.ListNamespacesRequest{}))
	wantErr(t, err, "AccessDeniedException", "")
	_, err = a.h.GetServiceAttributes(a.ctx, connect.NewRequest(&sdv1.GetServiceAttributesRequest{ServiceId: str("srv-x")}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("GetServiceAttributes err = %v, want CodeUnimplemented", err)
	}
}

// Instance ids may hold '/', which the registry's keys escape (%2F), so its key order is
// not id order: paging must still return every instance once, as ListInstances does.
func TestInstancesPagingWithSlashes(t *testing.T) {
	a := newAPI(t)
	nsID := a.httpNS(t, "apps")
	svc := a.service(t, &sdv1.CreateServiceRequest{Name: str("checked"), NamespaceId: str(nsID), HealthCheckCustomConfig: &sdv1.HealthCheckCustomConfig{}})
	ids := []string{"a-1", "a/1", "b", "a:1", "a.1"}
	for _, id := range ids {
		a.register(t, svc.GetId(), id, map[string]string{"k": "v"})
	}
	var health, listed []string
	req := &sdv1.GetInstancesHealthStatusRequest{ServiceId: str(svc.GetId()), MaxResults: 1}
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("GetInstancesHealthStatus paging does not end")
		}
		res := call(t, a, a.h.GetInstancesHealthStatus, req)
		for id := range res.GetStatus() {
			health = append(health, id)
		}
		if res.NextToken == nil {
			break
		}
		req.NextToken = res.NextToken
	}
	lreq := &sdv1.ListInstancesRequest{ServiceId: str(svc.GetId()), MaxResults: 1}
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("ListInstances paging does not end")
		}
		res := call(t, a, a.h.ListInstances, lreq)
		for _, i := range res.GetInstances() {
			listed = append(listed, i.GetId())
		}
		if res.NextToken == nil {
			break
		}
		lreq.NextToken = res.NextToken
	}
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(health, want) {
		t.Errorf("GetInstancesHealthStatus pages = %v, want %v", health, want)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("ListInstances pages = %v, want %v", listed, want)
	}
}
