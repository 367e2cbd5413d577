package cloudmap_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/cloudmap"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

const account = "111122223333"

var (
	scope = keys.Scope{Account: account, Region: "us-east-1"}
	clock = time.Date(2025, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
)

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// newRegistry returns a Registry over a fresh embedded etcd whose clock the test
// controls.
func newRegistry(t *testing.T) (*cloudmap.Registry, *time.Time) {
	t.Helper()
	now := clock
	return cloudmap.NewRegistry(etcdtest.Start(t), func() time.Time { return now }), &now
}

// wantErr fails unless err is the AWS error typ (a domain *awserr.Error or one carried
// by a Connect error) whose message contains msg.
func wantErr(t *testing.T, err error, typ, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", typ)
	}
	e, ok := awserr.FromConnect(err)
	if !ok && !errors.As(err, &e) {
		t.Fatalf("error %v is no AWS error, want %s", err, typ)
	}
	if e.Type != typ || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = %s: %q, want %s containing %q", e.Type, e.Message, typ, msg)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// namespaceOf returns the namespace a create operation made.
func namespaceOf(t *testing.T, r *cloudmap.Registry, op string) *storev1.CloudMapNamespaceRecord {
	t.Helper()
	rec, err := r.Operation(t.Context(), scope, op)
	if err != nil {
		t.Fatal(err)
	}
	ns, _, err := r.Namespace(t.Context(), scope, rec.GetTargets()["NAMESPACE"])
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func dnsNamespace(t *testing.T, r *cloudmap.Registry, name string) *storev1.CloudMapNamespaceRecord {
	t.Helper()
	op, err := r.CreateNamespace(t.Context(), scope, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: name, Vpc: "vpc-1"})
	if err != nil {
		t.Fatal(err)
	}
	return namespaceOf(t, r, op)
}

func httpNamespace(t *testing.T, r *cloudmap.Registry, name string) *storev1.CloudMapNamespaceRecord {
	t.Helper()
	op, err := r.CreateNamespace(t.Context(), scope, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return namespaceOf(t, r, op)
}

func records(types ...string) []*storev1.CloudMapDnsRecord {
	var out []*storev1.CloudMapDnsRecord
	for _, typ := range types {
		out = append(out, &storev1.CloudMapDnsRecord{Type: typ, Ttl: 60})
	}
	return out
}

var (
	nsIDRE   = regexp.MustCompile(`^ns-[a-z0-9]{16}$`)
	srvIDRE  = regexp.MustCompile(`^srv-[a-z0-9]{16}$`)
	zoneRE   = regexp.MustCompile(`^Z[A-Z0-9]{20}$`)
	opIDRE   = regexp.MustCompile(`^[a-z0-9]{32}-[a-z0-9]{8}$`)
	tooLong  = strings.Repeat("a", 64)
	longName = strings.Repeat(strings.Repeat("a", 60)+".", 4) + "local" // 249 characters
)

func TestCreateNamespace(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		in       cloudmap.CreateNamespaceInput
		wantName string // "" when refused
		errType  string
		msg      string
	}{
		{"dns", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "example.local", Vpc: "vpc-1"}, "example.local", "", ""},
		{"dns is lowercased, trailing dot dropped", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "Corp.Internal.", Vpc: "vpc-1"}, "corp.internal", "", ""},
		{"dns underscores and hyphens", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "_svc.my-zone", Vpc: "vpc-1"}, "_svc.my-zone", "", ""},
		{"dns 63-character label", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: tooLong[:63] + ".local", Vpc: "vpc-1"}, tooLong[:63] + ".local", "", ""},
		{"dns long name", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: longName, Vpc: "vpc-1"}, longName, "", ""},
		{"dns 64-character label", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: tooLong + ".local", Vpc: "vpc-1"}, "", "InvalidInput", "is not a valid DNS domain name"},
		{"dns 253 characters", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "abc." + longName, Vpc: "vpc-1"}, "abc." + longName, "", ""},
		{"dns 254 characters", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "abcd." + longName, Vpc: "vpc-1"}, "", "InvalidInput", "is not a valid DNS domain name"},
		{"dns leading hyphen", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "-bad.local", Vpc: "vpc-1"}, "", "InvalidInput", "not a valid DNS domain name"},
		{"dns trailing hyphen", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "bad-.local", Vpc: "vpc-1"}, "", "InvalidInput", "not a valid DNS domain name"},
		{"dns empty label", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "a..local", Vpc: "vpc-1"}, "", "InvalidInput", "not a valid DNS domain name"},
		{"dns space", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "a b.local", Vpc: "vpc-1"}, "", "InvalidInput", "not a valid DNS domain name"},
		{"dns empty", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "", Vpc: "vpc-1"}, "", "InvalidInput", "not a valid DNS domain name"},
		{"dns without vpc", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "novpc.local"}, "", "InvalidInput", "Vpc is required"},
		{"dns negative SOA TTL", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "soa.local", Vpc: "vpc-1", SOATTL: -1}, "", "InvalidInput", "SOA TTL -1 is not valid"},
		{"dns SOA TTL over int32", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "soa.local", Vpc: "vpc-1", SOATTL: 2147483648}, "", "InvalidInput", "SOA TTL"},
		{"http", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "My_Apps-1"}, "My_Apps-1", "", ""},
		{"http dot", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "a.b"}, "", "InvalidInput", "is not valid: 1 to 1024 letters, digits, '_' or '-'"},
		{"http empty", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: ""}, "", "InvalidInput", "is not valid"},
		{"http 1025", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: strings.Repeat("h", 1025)}, "", "InvalidInput", "is not valid"},
		{"description", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "desc", Description: strings.Repeat("d", 1025)}, "", "InvalidInput", "Description is longer than 1024 characters."},
		{"reserved tag", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: []*storev1.CloudMapTag{{Key: "AWS:x"}}}, "", "InvalidInput", "reserved"},
		{"duplicate tag", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: []*storev1.CloudMapTag{{Key: "k"}, {Key: "k"}}}, "", "InvalidInput", "Tag key k is given twice."},
		{"long tag key", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: []*storev1.CloudMapTag{{Key: strings.Repeat("k", 129)}}}, "", "InvalidInput", "1 to 128 characters"},
		{"long tag value", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: []*storev1.CloudMapTag{{Key: "k", Value: strings.Repeat("v", 257)}}}, "", "InvalidInput", "values at most 256"},
		{"empty tag key", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: []*storev1.CloudMapTag{{Key: ""}}}, "", "InvalidInput", "Tag key"},
		{"51 tags", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: nTags(51)}, "", "TooManyTagsException", "at most 50 tags"},
		{"50 tags", cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "tags", Tags: nTags(50)}, "tags", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, err := r.CreateNamespace(ctx, scope, tc.in)
			if tc.errType != "" {
				wantErr(t, err, tc.errType, tc.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !opIDRE.MatchString(op) {
				t.Errorf("operation id %q", op)
			}
			ns := namespaceOf(t, r, op)
			if ns.GetName() != tc.wantName || !nsIDRE.MatchString(ns.GetId()) || ns.GetArn() != cloudmap.ARN(scope, "namespace", ns.GetId()) ||
				ns.GetArn() != "arn:aws:servicediscovery:us-east-1:"+account+":namespace/"+ns.GetId() || ns.GetCreateDate() != epoch(clock) {
				t.Fatalf("namespace = %v", ns)
			}
			if tc.in.Type == cloudmap.TypeDNSPrivate && (!zoneRE.MatchString(ns.GetHostedZoneId()) || ns.GetSoaTtl() != 15) {
				t.Errorf("DNS namespace: hosted zone %q, SOA TTL %d (want the default 15)", ns.GetHostedZoneId(), ns.GetSoaTtl())
			}
			if tc.in.Type == cloudmap.TypeHTTP && ns.GetHostedZoneId() != "" {
				t.Errorf("HTTP namespace has hosted zone %q", ns.GetHostedZoneId())
			}
		})
	}
	nss, err := r.Namespaces(ctx, scope)
	if err != nil || len(nss) != 8 {
		t.Fatalf("%d namespaces (%v), want the 8 accepted", len(nss), err)
	}
}

func nTags(n int) []*storev1.CloudMapTag {
	out := make([]*storev1.CloudMapTag, n)
	for i := range out {
		out[i] = &storev1.CloudMapTag{Key: fmt.Sprint("k", i), Value: "v"}
	}
	return out
}

func TestNamespaceNamesAndRequestIDs(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	in := cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "corp.local", Vpc: "vpc-1", CreatorRequestID: "req-1", SOATTL: 300}
	op1, err := r.CreateNamespace(ctx, scope, in)
	if err != nil {
		t.Fatal(err)
	}
	if ns := namespaceOf(t, r, op1); ns.GetSoaTtl() != 300 || ns.GetCreatorRequestId() != "req-1" || ns.GetVpc() != "vpc-1" {
		t.Fatalf("namespace = %v", ns)
	}
	// A retry with the same CreatorRequestId answers the first operation.
	op2, err := r.CreateNamespace(ctx, scope, in)
	if err != nil || op2 != op1 {
		t.Fatalf("retry = %q, %v; want the first operation %q", op2, err, op1)
	}
	// The same name again (another request) is NamespaceAlreadyExists, also in another
	// letter case (DNS names are case-insensitive).
	for _, name := range []string{"corp.local", "CORP.local."} {
		_, err = r.CreateNamespace(ctx, scope, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: name, Vpc: "vpc-2"})
		wantErr(t, err, "NamespaceAlreadyExists", "Namespace corp.local already exists.")
	}
	// The same name is free for the other type and in another region.
	httpNamespace(t, r, "corp")
	if _, err := r.CreateNamespace(ctx, scope, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "corp.local"}); err == nil {
		t.Fatal("HTTP namespace named like a DNS one: dots are not allowed in HTTP names")
	}
	other := keys.Scope{Account: account, Region: "eu-west-1"}
	if _, err := r.CreateNamespace(ctx, other, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "corp.local", Vpc: "vpc-1"}); err != nil {
		t.Fatalf("same name in another region: %v", err)
	}
	if nss := must[[]*storev1.CloudMapNamespaceRecord](t)(r.Namespaces(ctx, scope)); len(nss) != 2 {
		t.Fatalf("%d namespaces in us-east-1, want 2", len(nss))
	}
	op, err := r.Operation(ctx, scope, op1)
	if err != nil {
		t.Fatal(err)
	}
	if op.GetType() != "CREATE_NAMESPACE" || op.GetStatus() != "SUCCESS" || op.GetOwnerAccount() != account ||
		op.GetCreateDate() != epoch(clock) || op.GetUpdateDate() != epoch(clock) || len(op.GetTargets()) != 1 {
		t.Fatalf("operation = %v", op)
	}
	for _, id := range []string{"", "a/b", "nope"} {
		_, err := r.Operation(ctx, scope, id)
		wantErr(t, err, "OperationNotFound", "Operation not found")
		_, _, err = r.Namespace(ctx, scope, id)
		wantErr(t, err, "NamespaceNotFound", "Namespace not found")
		_, _, err = r.Service(ctx, scope, id)
		wantErr(t, err, "ServiceNotFound", "Service not found")
	}
}

func TestCreateService(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	dns := dnsNamespace(t, r, "svc.local")
	http := httpNamespace(t, r, "apps")
	for _, tc := range []struct {
		name         string
		in           cloudmap.CreateServiceInput
		errType, msg string
	}{
		{"empty name", cloudmap.CreateServiceInput{Name: "", NamespaceID: dns.GetId()}, "InvalidInput", "Service name \"\" is not valid"},
		{"leading hyphen", cloudmap.CreateServiceInput{Name: "-web", NamespaceID: dns.GetId()}, "InvalidInput", "is not valid: a DNS label"},
		{"trailing hyphen", cloudmap.CreateServiceInput{Name: "web-", NamespaceID: dns.GetId()}, "InvalidInput", "is not valid"},
		{"64 characters", cloudmap.CreateServiceInput{Name: tooLong, NamespaceID: dns.GetId()}, "InvalidInput", "is not valid"},
		{"space", cloudmap.CreateServiceInput{Name: "my web", NamespaceID: dns.GetId()}, "InvalidInput", "is not valid"},
		{"no namespace", cloudmap.CreateServiceInput{Name: "web"}, "InvalidInput", "NamespaceId is required."},
		{"missing namespace", cloudmap.CreateServiceInput{Name: "web", NamespaceID: "ns-nope"}, "NamespaceNotFound", "ns-nope"},
		{"route 53 health check", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasHealthCheckConfig: true}, "InvalidInput", "HealthCheckConfig (Route 53 health checks) is not supported"},
		{"description", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), Description: strings.Repeat("d", 1025)}, "InvalidInput", "Description is longer than 1024"},
		{"tags", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), Tags: nTags(51)}, "TooManyTagsException", ""},
		{"type DNS", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), Type: "DNS"}, "InvalidInput", "Type \"DNS\" is not valid: HTTP."},
		{"DnsConfig in an HTTP namespace", cloudmap.CreateServiceInput{Name: "web", NamespaceID: http.GetId(), HasDNSConfig: true, DNSRecords: records("A")}, "InvalidInput", "cannot have DnsConfig"},
		{"type HTTP with DnsConfig", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), Type: "HTTP", HasDNSConfig: true, DNSRecords: records("A")}, "InvalidInput", "A service of type HTTP cannot have DnsConfig."},
		{"no records", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true}, "InvalidInput", "at least one record"},
		{"AAAA", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("AAAA")}, "InvalidInput", "DNS record type AAAA is not supported by Berth"},
		{"CNAME", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("CNAME")}, "InvalidInput", "CNAME is not supported"},
		{"MX", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("MX")}, "InvalidInput", `DNS record type "MX" is not valid`},
		{"two A records", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A", "A")}, "InvalidInput", "two A records"},
		{"negative TTL", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: []*storev1.CloudMapDnsRecord{{Type: "A", Ttl: -1}}}, "InvalidInput", "TTL -1 is not valid"},
		{"routing policy", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A"), RoutingPolicy: "LATENCY"}, "InvalidInput", `RoutingPolicy "LATENCY" is not valid`},
		{"failure threshold", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasCustomHealth: true, CustomFailureThreshold: 11}, "InvalidInput", "FailureThreshold 11 is not valid: 1 to 10."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.CreateService(ctx, scope, tc.in)
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
	if svcs := must[[]*storev1.CloudMapServiceRecord](t)(r.Services(ctx, scope)); len(svcs) != 0 {
		t.Fatalf("refused creates left %d services", len(svcs))
	}

	for _, tc := range []struct {
		name                   string
		in                     cloudmap.CreateServiceInput
		typ, policy            string
		customHealth           bool
		failureThreshold       int32
		records                int
		nsID                   string
		createdAfterNamespaces bool
	}{
		{"dns", cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A", "SRV")}, cloudmap.ServiceDNSHTTP, "MULTIVALUE", false, 0, 2, dns.GetId(), true},
		{"weighted", cloudmap.CreateServiceInput{Name: "w", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A"), RoutingPolicy: "WEIGHTED"}, cloudmap.ServiceDNSHTTP, "WEIGHTED", false, 0, 1, dns.GetId(), true},
		{"dns namespace without DnsConfig", cloudmap.CreateServiceInput{Name: "api", NamespaceID: dns.GetId()}, cloudmap.ServiceHTTP, "", false, 0, 0, dns.GetId(), true},
		{"http namespace", cloudmap.CreateServiceInput{Name: "web", NamespaceID: http.GetId(), Type: "HTTP", HasCustomHealth: true}, cloudmap.ServiceHTTP, "", true, 1, 0, http.GetId(), true},
		{"custom threshold", cloudmap.CreateServiceInput{Name: "t", NamespaceID: http.GetId(), HasCustomHealth: true, CustomFailureThreshold: 10}, cloudmap.ServiceHTTP, "", true, 10, 0, http.GetId(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := r.CreateService(ctx, scope, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if s.GetType() != tc.typ || s.GetRoutingPolicy() != tc.policy || s.GetCustomHealth() != tc.customHealth || s.GetCustomFailureThreshold() != tc.failureThreshold ||
				len(s.GetDnsRecords()) != tc.records || s.GetNamespaceId() != tc.nsID || !srvIDRE.MatchString(s.GetId()) ||
				s.GetArn() != "arn:aws:servicediscovery:us-east-1:"+account+":service/"+s.GetId() || s.GetCreateDate() != epoch(clock) {
				t.Fatalf("service = %v", s)
			}
			got, _, err := r.Service(ctx, scope, s.GetId())
			if err != nil || got.GetName() != tc.in.Name {
				t.Fatalf("Service(%s) = %v, %v", s.GetId(), got, err)
			}
		})
	}

	// Names are unique per namespace, whatever their case.
	_, err := r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "WEB", NamespaceID: dns.GetId()})
	wantErr(t, err, "ServiceAlreadyExists", "Service WEB already exists in namespace "+dns.GetId())

	// CreatorRequestId: a retry answers the first service; another request with it fails.
	in := cloudmap.CreateServiceInput{Name: "idem", NamespaceID: dns.GetId(), CreatorRequestID: "r-1"}
	first := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, in))
	if again := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, in)); again.GetId() != first.GetId() {
		t.Fatalf("retry made service %s, want %s", again.GetId(), first.GetId())
	}
	// (Berth answers DuplicateRequest, which the model does not list for CreateService;
	// only the refusal is checked.)
	if _, err = r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "other", NamespaceID: dns.GetId(), CreatorRequestID: "r-1"}); err == nil || !strings.Contains(err.Error(), "r-1") {
		t.Fatalf("another service with a used CreatorRequestId: %v", err)
	}
}

func TestUpdateService(t *testing.T) {
	r, now := newRegistry(t)
	ctx := t.Context()
	dns := dnsNamespace(t, r, "svc.local")
	web := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A", "SRV")}))
	api := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "api", NamespaceID: dns.GetId()}))

	*now = clock.Add(time.Minute)
	desc := "front end"
	op, err := r.UpdateService(ctx, scope, web.GetId(), cloudmap.UpdateServiceInput{Description: &desc, HasDNSConfig: true,
		DNSRecords: []*storev1.CloudMapDnsRecord{{Type: "SRV", Ttl: 10}, {Type: "A", Ttl: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := r.Service(ctx, scope, web.GetId())
	ttls := map[string]int64{}
	for _, d := range got.GetDnsRecords() {
		ttls[d.GetType()] = d.GetTtl()
	}
	if got.GetDescription() != "front end" || ttls["A"] != 5 || ttls["SRV"] != 10 || len(ttls) != 2 {
		t.Fatalf("updated service = %v", got)
	}
	o := must[*storev1.CloudMapOperationRecord](t)(r.Operation(ctx, scope, op))
	if o.GetType() != "UPDATE_SERVICE" || o.GetTargets()["SERVICE"] != web.GetId() || o.GetUpdateDate() != epoch(clock.Add(time.Minute)) {
		t.Fatalf("operation = %v", o)
	}

	long := strings.Repeat("d", 1025)
	for _, tc := range []struct {
		name         string
		id           string
		in           cloudmap.UpdateServiceInput
		errType, msg string
	}{
		{"add a record type", web.GetId(), cloudmap.UpdateServiceInput{HasDNSConfig: true, DNSRecords: records("A")}, "InvalidInput", "cannot add or remove DNS record types"},
		{"change a record type", web.GetId(), cloudmap.UpdateServiceInput{HasDNSConfig: true, DNSRecords: records("A", "AAAA")}, "InvalidInput", "AAAA is not supported"},
		{"swap a record type", must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "a-only", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A")})).GetId(),
			cloudmap.UpdateServiceInput{HasDNSConfig: true, DNSRecords: records("SRV")}, "InvalidInput", "SRV is not one of the service's"},
		{"DnsConfig of an HTTP service", api.GetId(), cloudmap.UpdateServiceInput{HasDNSConfig: true, DNSRecords: records("A")}, "InvalidInput", "has no DnsConfig to update"},
		{"route 53 health check", web.GetId(), cloudmap.UpdateServiceInput{HasHealthConfig: true}, "InvalidInput", "HealthCheckConfig"},
		{"description", web.GetId(), cloudmap.UpdateServiceInput{Description: &long}, "InvalidInput", "longer than 1024"},
		{"missing", "srv-nope", cloudmap.UpdateServiceInput{Description: &desc}, "ServiceNotFound", "srv-nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.UpdateService(ctx, scope, tc.id, tc.in)
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
}

func TestInstances(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	dns := dnsNamespace(t, r, "svc.local")
	web := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "web", NamespaceID: dns.GetId(), HasDNSConfig: true, DNSRecords: records("A", "SRV")}))
	plain := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "plain", NamespaceID: dns.GetId()}))
	ip := map[string]string{cloudmap.AttrIPv4: "10.0.0.1", cloudmap.AttrPort: "8080"}
	many := map[string]string{}
	for i := range 31 {
		many[fmt.Sprint("k", i)] = "v"
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			if a != k {
				out[a] = b
			}
		}
		return out
	}
	for _, tc := range []struct {
		name, service, id string
		attrs             map[string]string
		errType, msg      string
	}{
		{"instance id characters", web.GetId(), "bad id", ip, "InvalidInput", `InstanceId "bad id" is not valid`},
		{"instance id length", web.GetId(), strings.Repeat("i", 65), ip, "InvalidInput", "1 to 64"},
		{"empty instance id", web.GetId(), "", ip, "InvalidInput", "InstanceId"},
		{"no attributes", web.GetId(), "i-1", nil, "InvalidInput", "Attributes is required."},
		{"31 attributes", plain.GetId(), "i-1", many, "ResourceLimitExceeded", "at most 30 attributes"},
		{"long key", plain.GetId(), "i-1", map[string]string{strings.Repeat("k", 256): "v"}, "InvalidInput", "keys 1 to 255 characters"},
		{"long value", plain.GetId(), "i-1", map[string]string{"k": strings.Repeat("v", 1025)}, "InvalidInput", "values at most 1024"},
		{"A needs IPv4", web.GetId(), "i-1", map[string]string{cloudmap.AttrPort: "80"}, "InvalidInput", "needs the AWS_INSTANCE_IPV4 attribute"},
		{"SRV needs a port", web.GetId(), "i-1", map[string]string{cloudmap.AttrIPv4: "10.0.0.1"}, "InvalidInput", "SRV record needs the AWS_INSTANCE_PORT attribute"},
		{"IPv4 octet", web.GetId(), "i-1", with(ip, cloudmap.AttrIPv4, "10.0.0.256"), "InvalidInput", "is not an IPv4 address"},
		{"IPv6 as IPv4", web.GetId(), "i-1", with(ip, cloudmap.AttrIPv4, "::1"), "InvalidInput", "is not an IPv4 address"},
		{"port 0", web.GetId(), "i-1", with(ip, cloudmap.AttrPort, "0"), "InvalidInput", "is not a port (1 to 65535)"},
		{"port 65536", web.GetId(), "i-1", with(ip, cloudmap.AttrPort, "65536"), "InvalidInput", "is not a port"},
		{"port name", web.GetId(), "i-1", with(ip, cloudmap.AttrPort, "http"), "InvalidInput", "is not a port"},
		{"missing service", "srv-nope", "i-1", ip, "ServiceNotFound", "srv-nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.RegisterInstance(ctx, scope, tc.service, tc.id, "", tc.attrs)
			wantErr(t, err, tc.errType, tc.msg)
		})
	}

	rev0 := must[int64](t)(r.InstancesRevision(ctx, scope, web.GetId()))
	if rev0 != 0 {
		t.Fatalf("InstancesRevision before any instance = %d, want 0", rev0)
	}
	op := must[string](t)(r.RegisterInstance(ctx, scope, web.GetId(), "task/1:a@b.c_d-e", "req", ip))
	o := must[*storev1.CloudMapOperationRecord](t)(r.Operation(ctx, scope, op))
	if o.GetType() != "REGISTER_INSTANCE" || o.GetTargets()["INSTANCE"] != "task/1:a@b.c_d-e" || o.GetTargets()["SERVICE"] != web.GetId() {
		t.Fatalf("operation = %v", o)
	}
	inst, _, err := r.Instance(ctx, scope, web.GetId(), "task/1:a@b.c_d-e")
	if err != nil {
		t.Fatal(err)
	}
	if inst.GetAttributes()[cloudmap.AttrIPv4] != "10.0.0.1" || inst.GetCreatorRequestId() != "req" || inst.GetCreatedByAccount() != account ||
		inst.GetHealthStatus() != cloudmap.Unknown || inst.GetServiceId() != web.GetId() {
		t.Fatalf("instance = %v", inst)
	}
	rev1 := must[int64](t)(r.InstancesRevision(ctx, scope, web.GetId()))
	// Registering again replaces the attributes and moves the revision.
	must[string](t)(r.RegisterInstance(ctx, scope, web.GetId(), "task/1:a@b.c_d-e", "", with(ip, cloudmap.AttrIPv4, "10.0.0.2")))
	rev2 := must[int64](t)(r.InstancesRevision(ctx, scope, web.GetId()))
	inst, _, _ = r.Instance(ctx, scope, web.GetId(), "task/1:a@b.c_d-e")
	if inst.GetAttributes()[cloudmap.AttrIPv4] != "10.0.0.2" || !(rev0 < rev1 && rev1 < rev2) {
		t.Fatalf("re-registered instance %v; revisions %d %d %d", inst.GetAttributes(), rev0, rev1, rev2)
	}
	if insts := must[[]*storev1.CloudMapInstanceRecord](t)(r.Instances(ctx, scope, web.GetId())); len(insts) != 1 {
		t.Fatalf("%d instances, want 1", len(insts))
	}
	// A service without DNS records takes any attributes.
	must[string](t)(r.RegisterInstance(ctx, scope, plain.GetId(), "i-1", "", map[string]string{"color": "blue"}))

	// Deregister.
	op = must[string](t)(r.DeregisterInstance(ctx, scope, web.GetId(), "task/1:a@b.c_d-e"))
	if o := must[*storev1.CloudMapOperationRecord](t)(r.Operation(ctx, scope, op)); o.GetType() != "DEREGISTER_INSTANCE" {
		t.Fatalf("operation type = %s", o.GetType())
	}
	if rev3 := must[int64](t)(r.InstancesRevision(ctx, scope, web.GetId())); rev3 <= rev2 {
		t.Fatalf("revision after deregister = %d, want > %d", rev3, rev2)
	}
	for _, id := range []string{"task/1:a@b.c_d-e", "never", "bad id"} {
		_, err := r.DeregisterInstance(ctx, scope, web.GetId(), id)
		wantErr(t, err, "InstanceNotFound", "Instance not found: "+id)
		_, _, err = r.Instance(ctx, scope, web.GetId(), id)
		wantErr(t, err, "InstanceNotFound", "")
	}
	_, err = r.DeregisterInstance(ctx, scope, "srv-nope", "i-1")
	wantErr(t, err, "ServiceNotFound", "")
}

func TestCustomHealth(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	ns := httpNamespace(t, r, "apps")
	checked := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "checked", NamespaceID: ns.GetId(), HasCustomHealth: true}))
	unchecked := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "unchecked", NamespaceID: ns.GetId()}))

	// With a custom health check an instance starts HEALTHY, or as AWS_INIT_HEALTH_STATUS says.
	for id, init := range map[string]string{"a": "", "b": cloudmap.Healthy, "c": cloudmap.Unhealthy} {
		attrs := map[string]string{"k": "v"}
		if init != "" {
			attrs[cloudmap.AttrInitHealth] = init
		}
		must[string](t)(r.RegisterInstance(ctx, scope, checked.GetId(), id, "", attrs))
	}
	_, err := r.RegisterInstance(ctx, scope, checked.GetId(), "d", "", map[string]string{cloudmap.AttrInitHealth: "SICK"})
	wantErr(t, err, "InvalidInput", "AWS_INIT_HEALTH_STATUS must be HEALTHY or UNHEALTHY.")
	health := func(id string) string {
		i, _, err := r.Instance(ctx, scope, checked.GetId(), id)
		if err != nil {
			t.Fatal(err)
		}
		return i.GetHealthStatus()
	}
	if health("a") != cloudmap.Healthy || health("b") != cloudmap.Healthy || health("c") != cloudmap.Unhealthy {
		t.Fatalf("initial health a=%s b=%s c=%s", health("a"), health("b"), health("c"))
	}
	for _, step := range []struct{ id, status string }{{"a", cloudmap.Unhealthy}, {"a", cloudmap.Unhealthy}, {"c", cloudmap.Healthy}, {"a", cloudmap.Healthy}} {
		if err := r.SetCustomHealth(ctx, scope, checked.GetId(), step.id, step.status); err != nil {
			t.Fatal(err)
		}
		if got := health(step.id); got != step.status {
			t.Fatalf("after setting %s %s: %s", step.id, step.status, got)
		}
	}
	must[string](t)(r.RegisterInstance(ctx, scope, unchecked.GetId(), "u", "", map[string]string{cloudmap.AttrInitHealth: "whatever"}))
	for _, tc := range []struct{ service, id, status, errType, msg string }{
		{checked.GetId(), "a", "UNKNOWN", "InvalidInput", `Status "UNKNOWN" is not valid: HEALTHY or UNHEALTHY.`},
		{unchecked.GetId(), "u", cloudmap.Healthy, "CustomHealthNotFound", "has no HealthCheckCustomConfig"},
		{checked.GetId(), "nope", cloudmap.Healthy, "InstanceNotFound", "nope"},
		{"srv-nope", "a", cloudmap.Healthy, "ServiceNotFound", ""},
	} {
		wantErr(t, r.SetCustomHealth(ctx, scope, tc.service, tc.id, tc.status), tc.errType, tc.msg)
	}
}

func TestDeleteOrder(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	ns := dnsNamespace(t, r, "del.local")
	svc := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "web", NamespaceID: ns.GetId(), HasDNSConfig: true, DNSRecords: records("A")}))
	must[string](t)(r.RegisterInstance(ctx, scope, svc.GetId(), "i-1", "", map[string]string{cloudmap.AttrIPv4: "10.0.0.1"}))

	// A namespace with services, and a service with instances, cannot be deleted.
	_, err := r.DeleteNamespace(ctx, scope, ns.GetId())
	wantErr(t, err, "ResourceInUse", "has services")
	wantErr(t, r.DeleteService(ctx, scope, svc.GetId()), "ResourceInUse", "has registered instances")

	must[string](t)(r.DeregisterInstance(ctx, scope, svc.GetId(), "i-1"))
	if err := r.DeleteService(ctx, scope, svc.GetId()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.DeleteService(ctx, scope, svc.GetId()), "ServiceNotFound", svc.GetId())
	op, err := r.DeleteNamespace(ctx, scope, ns.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if o := must[*storev1.CloudMapOperationRecord](t)(r.Operation(ctx, scope, op)); o.GetType() != "DELETE_NAMESPACE" || o.GetTargets()["NAMESPACE"] != ns.GetId() {
		t.Fatalf("operation = %v", o)
	}
	_, err = r.DeleteNamespace(ctx, scope, ns.GetId())
	wantErr(t, err, "NamespaceNotFound", ns.GetId())
	// Both names are free again.
	ns2 := dnsNamespace(t, r, "del.local")
	if _, err := r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "web", NamespaceID: ns2.GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "web2", NamespaceID: ns.GetId()})
	wantErr(t, err, "NamespaceNotFound", "")
}

func TestTagsByARN(t *testing.T) {
	r, _ := newRegistry(t)
	ctx := t.Context()
	op, err := r.CreateNamespace(ctx, scope, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeHTTP, Name: "apps", Tags: []*storev1.CloudMapTag{{Key: "env", Value: "dev"}}})
	if err != nil {
		t.Fatal(err)
	}
	ns := namespaceOf(t, r, op)
	svc := must[*storev1.CloudMapServiceRecord](t)(r.CreateService(ctx, scope, cloudmap.CreateServiceInput{Name: "web", NamespaceID: ns.GetId()}))

	tags := must[[]*storev1.CloudMapTag](t)(r.Tags(ctx, scope, ns.GetArn()))
	if len(tags) != 1 || tags[0].GetKey() != "env" {
		t.Fatalf("namespace tags = %v", tags)
	}
	add := func(extra ...*storev1.CloudMapTag) func([]*storev1.CloudMapTag) []*storev1.CloudMapTag {
		return func(cur []*storev1.CloudMapTag) []*storev1.CloudMapTag { return append(cur, extra...) }
	}
	if err := r.Retag(ctx, scope, svc.GetArn(), add(&storev1.CloudMapTag{Key: "team", Value: "red"})); err != nil {
		t.Fatal(err)
	}
	if tags := must[[]*storev1.CloudMapTag](t)(r.Tags(ctx, scope, svc.GetArn())); len(tags) != 1 || tags[0].GetValue() != "red" {
		t.Fatalf("service tags = %v", tags)
	}
	wantErr(t, r.Retag(ctx, scope, svc.GetArn(), add(nTags(50)...)), "TooManyTagsException", "")
	wantErr(t, r.Retag(ctx, scope, svc.GetArn(), add(&storev1.CloudMapTag{Key: "team"})), "InvalidInput", "given twice")
	if tags := must[[]*storev1.CloudMapTag](t)(r.Tags(ctx, scope, svc.GetArn())); len(tags) != 1 {
		t.Fatalf("refused retags changed the tags: %v", tags)
	}
	for _, arn := range []string{
		"arn:aws:servicediscovery:us-east-1:" + account + ":service/srv-nope",
		"arn:aws:servicediscovery:us-east-1:" + account + ":namespace/ns-nope",
		"arn:aws:servicediscovery:us-east-1:" + account + ":instance/" + svc.GetId(),
		"arn:aws:servicediscovery:eu-west-1:" + account + ":service/" + svc.GetId(),
		"arn:aws:servicediscovery:us-east-1:999999999999:service/" + svc.GetId(),
		"arn:aws:ecs:us-east-1:" + account + ":service/" + svc.GetId(),
		"arn:aws:servicediscovery:us-east-1:" + account + ":service/" + svc.GetId() + "/x",
		"not-an-arn",
	} {
		_, err := r.Tags(ctx, scope, arn)
		wantErr(t, err, "ResourceNotFoundException", "Resource not found: "+arn)
		wantErr(t, r.Retag(ctx, scope, arn, add()), "ResourceNotFoundException", "")
	}
}

func TestServiceIDFromARN(t *testing.T) {
	for _, tc := range []struct {
		arn string
		id  string
		ok  bool
	}{
		{"arn:aws:servicediscovery:us-east-1:" + account + ":service/srv-abc", "srv-abc", true},
		{"arn:aws:servicediscovery:us-east-1:" + account + ":namespace/ns-abc", "ns-abc", false},
		{"arn:aws:servicediscovery:eu-west-1:" + account + ":service/srv-abc", "", false},
		{"arn:aws:servicediscovery:us-east-1:999999999999:service/srv-abc", "", false},
		{"arn:aws-cn:servicediscovery:us-east-1:" + account + ":service/srv-abc", "", false},
		{"arn:aws:servicediscovery:us-east-1:" + account + ":service/", "", false},
		{"arn:aws:servicediscovery:us-east-1:" + account + ":service/a/b", "", false},
		{"srv-abc", "", false},
	} {
		id, ok := cloudmap.ServiceIDFromARN(scope, tc.arn)
		if ok != tc.ok || (ok && id != tc.id) {
			t.Errorf("ServiceIDFromARN(%s) = %q, %v; want %q, %v", tc.arn, id, ok, tc.id, tc.ok)
		}
	}
}
