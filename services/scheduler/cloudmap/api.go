package cloudmap

import (
	"context"
	"encoding/base64"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	sdv1 "github.com/berthhq/berth/gen/berth/servicediscovery/v1"
	"github.com/berthhq/berth/gen/berth/servicediscovery/v1/servicediscoveryv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Handler implements servicediscoveryv1connect.ServicediscoveryServiceHandler over a
// Registry. Actions it does not serve (public DNS namespaces, namespace updates, service
// attributes) answer with a clear error; the rest of the model's actions fall to the
// embedded Unimplemented handler, which the gateway answers as
// UnsupportedOperationException.
type Handler struct {
	servicediscoveryv1connect.UnimplementedServicediscoveryServiceHandler
	// Logger receives the internal faults of its actions (errors that are not AWS
	// exceptions, which the client sees as ServerException); nil discards them.
	Logger *slog.Logger

	reg *Registry
}

// NewHandler returns the Cloud Map API over reg.
func NewHandler(reg *Registry) *Handler { return &Handler{reg: reg} }

func tagsIn(in []*sdv1.Tag) []*storev1.CloudMapTag {
	out := make([]*storev1.CloudMapTag, 0, len(in))
	for _, t := range in {
		out = append(out, &storev1.CloudMapTag{Key: t.GetKey(), Value: t.GetValue()})
	}
	return out
}

func tagsOut(in []*storev1.CloudMapTag) []*sdv1.Tag {
	out := make([]*sdv1.Tag, 0, len(in))
	for _, t := range in {
		out = append(out, &sdv1.Tag{Key: proto.String(t.GetKey()), Value: proto.String(t.GetValue())})
	}
	return out
}

func dnsIn(in []*sdv1.DnsRecord) []*storev1.CloudMapDnsRecord {
	out := make([]*storev1.CloudMapDnsRecord, 0, len(in))
	for _, d := range in {
		out = append(out, &storev1.CloudMapDnsRecord{Type: d.GetType(), Ttl: d.GetTtl()})
	}
	return out
}

func namespaceProps(ns *storev1.CloudMapNamespaceRecord) *sdv1.NamespaceProperties {
	p := &sdv1.NamespaceProperties{HttpProperties: &sdv1.HttpProperties{HttpName: proto.String(ns.GetName())}}
	if ns.GetType() == TypeDNSPrivate {
		p.DnsProperties = &sdv1.DnsProperties{HostedZoneId: proto.String(ns.GetHostedZoneId()), Soa: &sdv1.SOA{Ttl: ns.GetSoaTtl()}}
	}
	return p
}

// CreatePrivateDnsNamespace creates a private DNS namespace that the DNS role serves.
func (h *Handler) CreatePrivateDnsNamespace(ctx context.Context, req *connect.Request[sdv1.CreatePrivateDnsNamespaceRequest]) (*connect.Response[sdv1.CreatePrivateDnsNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.CreatePrivateDnsNamespaceRequest) (*sdv1.CreatePrivateDnsNamespaceResponse, error) {
		op, err := h.reg.CreateNamespace(ctx, sc, CreateNamespaceInput{
			Type: TypeDNSPrivate, Name: in.GetName(), Description: in.GetDescription(), CreatorRequestID: in.GetCreatorRequestId(),
			Vpc: in.GetVpc(), SOATTL: in.GetProperties().GetDnsProperties().GetSoa().GetTtl(), Tags: tagsIn(in.GetTags()),
		})
		if err != nil {
			return nil, err
		}
		return &sdv1.CreatePrivateDnsNamespaceResponse{OperationId: proto.String(op)}, nil
	})
}

// CreateHttpNamespace creates an HTTP namespace (discoverable through the API only).
func (h *Handler) CreateHttpNamespace(ctx context.Context, req *connect.Request[sdv1.CreateHttpNamespaceRequest]) (*connect.Response[sdv1.CreateHttpNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.CreateHttpNamespaceRequest) (*sdv1.CreateHttpNamespaceResponse, error) {
		op, err := h.reg.CreateNamespace(ctx, sc, CreateNamespaceInput{
			Type: TypeHTTP, Name: in.GetName(), Description: in.GetDescription(), CreatorRequestID: in.GetCreatorRequestId(), Tags: tagsIn(in.GetTags()),
		})
		if err != nil {
			return nil, err
		}
		return &sdv1.CreateHttpNamespaceResponse{OperationId: proto.String(op)}, nil
	})
}

// CreatePublicDnsNamespace is refused: Berth serves no public DNS.
func (h *Handler) CreatePublicDnsNamespace(ctx context.Context, req *connect.Request[sdv1.CreatePublicDnsNamespaceRequest]) (*connect.Response[sdv1.CreatePublicDnsNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(context.Context, keys.Scope, *sdv1.CreatePublicDnsNamespaceRequest) (*sdv1.CreatePublicDnsNamespaceResponse, error) {
		return nil, invalid("Public DNS namespaces are not supported by Berth: it serves no public DNS zone. Use CreatePrivateDnsNamespace or CreateHttpNamespace.")
	})
}

func (h *Handler) countServices(ctx context.Context, sc keys.Scope) (map[string]int32, error) {
	svcs, err := h.reg.Services(ctx, sc)
	if err != nil {
		return nil, err
	}
	n := map[string]int32{}
	for _, s := range svcs {
		n[s.GetNamespaceId()]++
	}
	return n, nil
}

// GetNamespace returns one namespace.
func (h *Handler) GetNamespace(ctx context.Context, req *connect.Request[sdv1.GetNamespaceRequest]) (*connect.Response[sdv1.GetNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.GetNamespaceRequest) (*sdv1.GetNamespaceResponse, error) {
		ns, _, err := h.reg.Namespace(ctx, sc, in.GetId())
		if err != nil {
			return nil, err
		}
		counts, err := h.countServices(ctx, sc)
		if err != nil {
			return nil, err
		}
		return &sdv1.GetNamespaceResponse{Namespace: &sdv1.Namespace{
			Arn: proto.String(ns.GetArn()), CreateDate: proto.Float64(ns.GetCreateDate()), CreatorRequestId: proto.String(ns.GetCreatorRequestId()),
			Description: proto.String(ns.GetDescription()), Id: proto.String(ns.GetId()), Name: proto.String(ns.GetName()), Properties: namespaceProps(ns),
			ResourceOwner: proto.String(sc.Account), ServiceCount: counts[ns.GetId()], Type: proto.String(ns.GetType()),
		}}, nil
	})
}

// page sorts items by id and cuts the list after the token's id, at most max (default
// 100) items. It sorts them itself because the token is an id: the registry lists in
// etcd key order, which is not id order where keys escape an id ('/' is %2F, so "a/1"
// sorts before "a-1"), and a page cut in one order and resumed in the other skips items.
func page[T any](items []T, id func(T) string, token string, max int32) ([]T, *string, error) {
	if max <= 0 || max > 100 {
		max = 100
	}
	slices.SortStableFunc(items, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	if token != "" {
		after, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return nil, nil, invalid("NextToken %q is not valid.", token)
		}
		i, _ := slices.BinarySearchFunc(items, string(after), func(it T, s string) int { return strings.Compare(id(it), s) })
		if i < len(items) && id(items[i]) == string(after) {
			i++
		}
		items = items[i:]
	}
	if len(items) <= int(max) {
		return items, nil, nil
	}
	items = items[:max]
	return items, proto.String(base64.RawURLEncoding.EncodeToString([]byte(id(items[len(items)-1])))), nil
}

// filterMatch applies one EQ / IN / BEGINS_WITH filter condition to a value.
func filterMatch(cond string, values []string, v string, allowed ...string) (bool, error) {
	if cond == "" {
		cond = "EQ"
	}
	if !slices.Contains(allowed, cond) {
		return false, invalid("Filter condition %s is not valid here: %s.", cond, strings.Join(allowed, ", "))
	}
	if len(values) == 0 {
		return false, invalid("A filter needs at least one value.")
	}
	switch cond {
	case "EQ":
		if len(values) != 1 {
			return false, invalid("An EQ filter takes exactly one value.")
		}
		return v == values[0], nil
	case "IN":
		return slices.Contains(values, v), nil
	case "BEGINS_WITH":
		if len(values) != 1 {
			return false, invalid("A BEGINS_WITH filter takes exactly one value.")
		}
		return strings.HasPrefix(v, values[0]), nil
	}
	return false, invalid("Filter condition %s is not supported by Berth for this filter.", cond)
}

// ListNamespaces lists the scope's namespaces, filtered by TYPE, NAME or HTTP_NAME.
func (h *Handler) ListNamespaces(ctx context.Context, req *connect.Request[sdv1.ListNamespacesRequest]) (*connect.Response[sdv1.ListNamespacesResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.ListNamespacesRequest) (*sdv1.ListNamespacesResponse, error) {
		nss, err := h.reg.Namespaces(ctx, sc)
		if err != nil {
			return nil, err
		}
		var kept []*storev1.CloudMapNamespaceRecord
		for _, ns := range nss {
			ok := true
			for _, f := range in.GetFilters() {
				var v string
				allowed := []string{"EQ", "BEGINS_WITH"}
				switch f.GetName() {
				case "TYPE":
					v, allowed = ns.GetType(), []string{"EQ", "IN"}
				case "NAME", "HTTP_NAME":
					v = ns.GetName()
				case "RESOURCE_OWNER":
					v, allowed = sc.Account, []string{"EQ"}
				default:
					return nil, invalid("Filter name %q is not valid: TYPE, NAME, HTTP_NAME or RESOURCE_OWNER.", f.GetName())
				}
				m, err := filterMatch(f.GetCondition(), f.GetValues(), v, allowed...)
				if err != nil {
					return nil, err
				}
				ok = ok && m
			}
			if ok {
				kept = append(kept, ns)
			}
		}
		counts, err := h.countServices(ctx, sc)
		if err != nil {
			return nil, err
		}
		kept, next, err := page(kept, (*storev1.CloudMapNamespaceRecord).GetId, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		out := &sdv1.ListNamespacesResponse{Namespaces: []*sdv1.NamespaceSummary{}, NextToken: next}
		for _, ns := range kept {
			out.Namespaces = append(out.Namespaces, &sdv1.NamespaceSummary{
				Arn: proto.String(ns.GetArn()), CreateDate: proto.Float64(ns.GetCreateDate()), Description: proto.String(ns.GetDescription()), Id: proto.String(ns.GetId()),
				Name: proto.String(ns.GetName()), Properties: namespaceProps(ns), ResourceOwner: proto.String(sc.Account), ServiceCount: counts[ns.GetId()],
				Type: proto.String(ns.GetType()),
			})
		}
		return out, nil
	})
}

// DeleteNamespace deletes a namespace without services.
func (h *Handler) DeleteNamespace(ctx context.Context, req *connect.Request[sdv1.DeleteNamespaceRequest]) (*connect.Response[sdv1.DeleteNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.DeleteNamespaceRequest) (*sdv1.DeleteNamespaceResponse, error) {
		op, err := h.reg.DeleteNamespace(ctx, sc, in.GetId())
		if err != nil {
			return nil, err
		}
		return &sdv1.DeleteNamespaceResponse{OperationId: proto.String(op)}, nil
	})
}

func (h *Handler) serviceOut(ctx context.Context, sc keys.Scope, s *storev1.CloudMapServiceRecord) (*sdv1.Service, error) {
	insts, err := h.reg.Instances(ctx, sc, s.GetId())
	if err != nil {
		return nil, err
	}
	out := &sdv1.Service{
		Arn: proto.String(s.GetArn()), CreateDate: proto.Float64(s.GetCreateDate()), CreatedByAccount: proto.String(sc.Account), CreatorRequestId: proto.String(s.GetCreatorRequestId()),
		Description: proto.String(s.GetDescription()), Id: proto.String(s.GetId()), InstanceCount: int32(len(insts)), Name: proto.String(s.GetName()),
		NamespaceId: proto.String(s.GetNamespaceId()), ResourceOwner: proto.String(sc.Account), Type: proto.String(s.GetType()),
	}
	if s.GetType() == ServiceDNSHTTP {
		out.DnsConfig = &sdv1.DnsConfig{NamespaceId: proto.String(s.GetNamespaceId()), RoutingPolicy: proto.String(s.GetRoutingPolicy()), DnsRecords: []*sdv1.DnsRecord{}}
		for _, d := range s.GetDnsRecords() {
			out.DnsConfig.DnsRecords = append(out.DnsConfig.DnsRecords, &sdv1.DnsRecord{Type: proto.String(d.GetType()), Ttl: d.GetTtl()})
		}
	}
	if s.GetCustomHealth() {
		out.HealthCheckCustomConfig = &sdv1.HealthCheckCustomConfig{FailureThreshold: s.GetCustomFailureThreshold()}
	}
	return out, nil
}

// CreateService creates a service in a namespace.
func (h *Handler) CreateService(ctx context.Context, req *connect.Request[sdv1.CreateServiceRequest]) (*connect.Response[sdv1.CreateServiceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.CreateServiceRequest) (*sdv1.CreateServiceResponse, error) {
		nsID := in.GetNamespaceId()
		if nsID == "" {
			nsID = in.GetDnsConfig().GetNamespaceId()
		}
		rec, err := h.reg.CreateService(ctx, sc, CreateServiceInput{
			Name: in.GetName(), NamespaceID: nsID, Description: in.GetDescription(), CreatorRequestID: in.GetCreatorRequestId(),
			Type: in.GetType(), RoutingPolicy: in.GetDnsConfig().GetRoutingPolicy(), DNSRecords: dnsIn(in.GetDnsConfig().GetDnsRecords()),
			HasDNSConfig: in.DnsConfig != nil, HasHealthCheckConfig: in.HealthCheckConfig != nil, HasCustomHealth: in.HealthCheckCustomConfig != nil,
			CustomFailureThreshold: in.GetHealthCheckCustomConfig().GetFailureThreshold(), Tags: tagsIn(in.GetTags()),
		})
		if err != nil {
			return nil, err
		}
		out, err := h.serviceOut(ctx, sc, rec)
		if err != nil {
			return nil, err
		}
		return &sdv1.CreateServiceResponse{Service: out}, nil
	})
}

// GetService returns one service.
func (h *Handler) GetService(ctx context.Context, req *connect.Request[sdv1.GetServiceRequest]) (*connect.Response[sdv1.GetServiceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.GetServiceRequest) (*sdv1.GetServiceResponse, error) {
		rec, _, err := h.reg.Service(ctx, sc, in.GetId())
		if err != nil {
			return nil, err
		}
		out, err := h.serviceOut(ctx, sc, rec)
		if err != nil {
			return nil, err
		}
		return &sdv1.GetServiceResponse{Service: out}, nil
	})
}

// ListServices lists the scope's services, filtered by NAMESPACE_ID.
func (h *Handler) ListServices(ctx context.Context, req *connect.Request[sdv1.ListServicesRequest]) (*connect.Response[sdv1.ListServicesResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.ListServicesRequest) (*sdv1.ListServicesResponse, error) {
		svcs, err := h.reg.Services(ctx, sc)
		if err != nil {
			return nil, err
		}
		var kept []*storev1.CloudMapServiceRecord
		for _, s := range svcs {
			ok := true
			for _, f := range in.GetFilters() {
				if f.GetName() != "NAMESPACE_ID" {
					return nil, invalid("Filter name %q is not valid: NAMESPACE_ID.", f.GetName())
				}
				m, err := filterMatch(f.GetCondition(), f.GetValues(), s.GetNamespaceId(), "EQ", "IN")
				if err != nil {
					return nil, err
				}
				ok = ok && m
			}
			if ok {
				kept = append(kept, s)
			}
		}
		kept, next, err := page(kept, (*storev1.CloudMapServiceRecord).GetId, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		out := &sdv1.ListServicesResponse{Services: []*sdv1.ServiceSummary{}, NextToken: next}
		for _, s := range kept {
			full, err := h.serviceOut(ctx, sc, s)
			if err != nil {
				return nil, err
			}
			out.Services = append(out.Services, &sdv1.ServiceSummary{
				Arn: full.Arn, CreateDate: full.CreateDate, CreatedByAccount: full.CreatedByAccount, Description: full.Description,
				DnsConfig: full.DnsConfig, HealthCheckCustomConfig: full.HealthCheckCustomConfig, Id: full.Id, InstanceCount: full.InstanceCount,
				Name: full.Name, ResourceOwner: full.ResourceOwner, Type: full.Type,
			})
		}
		return out, nil
	})
}

// UpdateService changes a service's description and DNS record TTLs.
func (h *Handler) UpdateService(ctx context.Context, req *connect.Request[sdv1.UpdateServiceRequest]) (*connect.Response[sdv1.UpdateServiceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.UpdateServiceRequest) (*sdv1.UpdateServiceResponse, error) {
		ch := in.GetService()
		if ch == nil {
			return nil, invalid("Service is required.")
		}
		op, err := h.reg.UpdateService(ctx, sc, in.GetId(), UpdateServiceInput{
			Description: ch.Description, DNSRecords: dnsIn(ch.GetDnsConfig().GetDnsRecords()), HasDNSConfig: ch.DnsConfig != nil,
			HasHealthConfig: ch.HealthCheckConfig != nil,
		})
		if err != nil {
			return nil, err
		}
		return &sdv1.UpdateServiceResponse{OperationId: proto.String(op)}, nil
	})
}

// DeleteService deletes a service without instances.
func (h *Handler) DeleteService(ctx context.Context, req *connect.Request[sdv1.DeleteServiceRequest]) (*connect.Response[sdv1.DeleteServiceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.DeleteServiceRequest) (*sdv1.DeleteServiceResponse, error) {
		if err := h.reg.DeleteService(ctx, sc, in.GetId()); err != nil {
			return nil, err
		}
		return &sdv1.DeleteServiceResponse{}, nil
	})
}

// RegisterInstance registers (or replaces) an instance of a service.
func (h *Handler) RegisterInstance(ctx context.Context, req *connect.Request[sdv1.RegisterInstanceRequest]) (*connect.Response[sdv1.RegisterInstanceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.RegisterInstanceRequest) (*sdv1.RegisterInstanceResponse, error) {
		op, err := h.reg.RegisterInstance(ctx, sc, in.GetServiceId(), in.GetInstanceId(), in.GetCreatorRequestId(), in.GetAttributes())
		if err != nil {
			return nil, err
		}
		return &sdv1.RegisterInstanceResponse{OperationId: proto.String(op)}, nil
	})
}

// DeregisterInstance removes an instance of a service.
func (h *Handler) DeregisterInstance(ctx context.Context, req *connect.Request[sdv1.DeregisterInstanceRequest]) (*connect.Response[sdv1.DeregisterInstanceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.DeregisterInstanceRequest) (*sdv1.DeregisterInstanceResponse, error) {
		op, err := h.reg.DeregisterInstance(ctx, sc, in.GetServiceId(), in.GetInstanceId())
		if err != nil {
			return nil, err
		}
		return &sdv1.DeregisterInstanceResponse{OperationId: proto.String(op)}, nil
	})
}

// GetInstance returns one instance.
func (h *Handler) GetInstance(ctx context.Context, req *connect.Request[sdv1.GetInstanceRequest]) (*connect.Response[sdv1.GetInstanceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.GetInstanceRequest) (*sdv1.GetInstanceResponse, error) {
		rec, _, err := h.reg.Instance(ctx, sc, in.GetServiceId(), in.GetInstanceId())
		if err != nil {
			return nil, err
		}
		return &sdv1.GetInstanceResponse{ResourceOwner: proto.String(sc.Account), Instance: &sdv1.Instance{
			Id: proto.String(rec.GetId()), Attributes: nonNilMap(rec.GetAttributes()), CreatorRequestId: proto.String(rec.GetCreatorRequestId()),
			CreatedByAccount: proto.String(rec.GetCreatedByAccount()),
		}}, nil
	})
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// ListInstances lists the instances of a service.
func (h *Handler) ListInstances(ctx context.Context, req *connect.Request[sdv1.ListInstancesRequest]) (*connect.Response[sdv1.ListInstancesResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.ListInstancesRequest) (*sdv1.ListInstancesResponse, error) {
		if _, _, err := h.reg.Service(ctx, sc, in.GetServiceId()); err != nil {
			return nil, err
		}
		insts, err := h.reg.Instances(ctx, sc, in.GetServiceId())
		if err != nil {
			return nil, err
		}
		insts, next, err := page(insts, (*storev1.CloudMapInstanceRecord).GetId, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		out := &sdv1.ListInstancesResponse{Instances: []*sdv1.InstanceSummary{}, NextToken: next, ResourceOwner: proto.String(sc.Account)}
		for _, i := range insts {
			out.Instances = append(out.Instances, &sdv1.InstanceSummary{Id: proto.String(i.GetId()), Attributes: nonNilMap(i.GetAttributes()), CreatedByAccount: proto.String(i.GetCreatedByAccount())})
		}
		return out, nil
	})
}

// discover returns the instances DiscoverInstances answers, and the service.
func (h *Handler) discover(ctx context.Context, sc keys.Scope, nsName, svcName string) (*storev1.CloudMapServiceRecord, []*storev1.CloudMapInstanceRecord, error) {
	nss, err := h.reg.Namespaces(ctx, sc)
	if err != nil {
		return nil, nil, err
	}
	idx := slices.IndexFunc(nss, func(n *storev1.CloudMapNamespaceRecord) bool {
		return strings.EqualFold(n.GetName(), strings.TrimSuffix(nsName, "."))
	})
	if idx < 0 {
		return nil, nil, awserr.New("NamespaceNotFound", "Namespace not found: %s", nsName)
	}
	svcs, err := h.reg.Services(ctx, sc)
	if err != nil {
		return nil, nil, err
	}
	sidx := slices.IndexFunc(svcs, func(s *storev1.CloudMapServiceRecord) bool {
		return s.GetNamespaceId() == nss[idx].GetId() && strings.EqualFold(s.GetName(), svcName)
	})
	if sidx < 0 {
		return nil, nil, awserr.New("ServiceNotFound", "Service not found: %s", svcName)
	}
	insts, err := h.reg.Instances(ctx, sc, svcs[sidx].GetId())
	return svcs[sidx], insts, err
}

// DiscoverInstances returns a service's instances by namespace and service name,
// filtered by health and by QueryParameters (OptionalParameters narrow further when
// any instance matches them, as on AWS).
func (h *Handler) DiscoverInstances(ctx context.Context, req *connect.Request[sdv1.DiscoverInstancesRequest]) (*connect.Response[sdv1.DiscoverInstancesResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.DiscoverInstancesRequest) (*sdv1.DiscoverInstancesResponse, error) {
		if in.OwnerAccount != nil && in.GetOwnerAccount() != sc.Account {
			return nil, awserr.New("NamespaceNotFound", "Namespace not found: %s (shared namespaces are not supported by Berth)", in.GetNamespaceName())
		}
		svc, insts, err := h.discover(ctx, sc, in.GetNamespaceName(), in.GetServiceName())
		if err != nil {
			return nil, err
		}
		max := in.GetMaxResults()
		if max <= 0 || max > 1000 {
			max = 100
		}
		match := func(i *storev1.CloudMapInstanceRecord, params map[string]string) bool {
			for k, v := range params {
				if i.GetAttributes()[k] != v {
					return false
				}
			}
			return true
		}
		health := func(i *storev1.CloudMapInstanceRecord) string {
			if !svc.GetCustomHealth() {
				return Unknown
			}
			return i.GetHealthStatus()
		}
		var kept []*storev1.CloudMapInstanceRecord
		for _, i := range insts {
			if match(i, in.GetQueryParameters()) {
				kept = append(kept, i)
			}
		}
		if svc.GetCustomHealth() {
			var healthy []*storev1.CloudMapInstanceRecord
			for _, i := range kept {
				if i.GetHealthStatus() == Healthy {
					healthy = append(healthy, i)
				}
			}
			switch in.GetHealthStatus() {
			case "", "HEALTHY":
				kept = healthy
			case "UNHEALTHY":
				kept = slices.DeleteFunc(kept, func(i *storev1.CloudMapInstanceRecord) bool { return i.GetHealthStatus() == Healthy })
			case "ALL":
			case "HEALTHY_OR_ELSE_ALL":
				if len(healthy) > 0 {
					kept = healthy
				}
			default:
				return nil, invalid("HealthStatus %q is not valid.", in.GetHealthStatus())
			}
		}
		if len(in.GetOptionalParameters()) > 0 {
			var narrowed []*storev1.CloudMapInstanceRecord
			for _, i := range kept {
				if match(i, in.GetOptionalParameters()) {
					narrowed = append(narrowed, i)
				}
			}
			if len(narrowed) > 0 {
				kept = narrowed
			}
		}
		if len(kept) > int(max) {
			kept = kept[:max]
		}
		rev, err := h.reg.InstancesRevision(ctx, sc, svc.GetId())
		if err != nil {
			return nil, err
		}
		out := &sdv1.DiscoverInstancesResponse{Instances: []*sdv1.HttpInstanceSummary{}, InstancesRevision: rev}
		ns, _, err := h.reg.Namespace(ctx, sc, svc.GetNamespaceId())
		if err != nil {
			return nil, err
		}
		for _, i := range kept {
			out.Instances = append(out.Instances, &sdv1.HttpInstanceSummary{
				InstanceId: proto.String(i.GetId()), Attributes: nonNilMap(i.GetAttributes()), HealthStatus: proto.String(health(i)),
				NamespaceName: proto.String(ns.GetName()), ServiceName: proto.String(svc.GetName()),
			})
		}
		return out, nil
	})
}

// DiscoverInstancesRevision returns the revision of a service's instances: it changes
// whenever an instance is registered, changed or deregistered.
func (h *Handler) DiscoverInstancesRevision(ctx context.Context, req *connect.Request[sdv1.DiscoverInstancesRevisionRequest]) (*connect.Response[sdv1.DiscoverInstancesRevisionResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.DiscoverInstancesRevisionRequest) (*sdv1.DiscoverInstancesRevisionResponse, error) {
		svc, _, err := h.discover(ctx, sc, in.GetNamespaceName(), in.GetServiceName())
		if err != nil {
			return nil, err
		}
		rev, err := h.reg.InstancesRevision(ctx, sc, svc.GetId())
		if err != nil {
			return nil, err
		}
		return &sdv1.DiscoverInstancesRevisionResponse{InstancesRevision: rev}, nil
	})
}

// GetInstancesHealthStatus returns the health of a service's instances (all, or the
// named ones): UNKNOWN for a service without a health check.
func (h *Handler) GetInstancesHealthStatus(ctx context.Context, req *connect.Request[sdv1.GetInstancesHealthStatusRequest]) (*connect.Response[sdv1.GetInstancesHealthStatusResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.GetInstancesHealthStatusRequest) (*sdv1.GetInstancesHealthStatusResponse, error) {
		svc, _, err := h.reg.Service(ctx, sc, in.GetServiceId())
		if err != nil {
			return nil, err
		}
		insts, err := h.reg.Instances(ctx, sc, svc.GetId())
		if err != nil {
			return nil, err
		}
		if names := in.GetInstances(); len(names) > 0 {
			insts = slices.DeleteFunc(insts, func(i *storev1.CloudMapInstanceRecord) bool { return !slices.Contains(names, i.GetId()) })
			if len(insts) != len(slices.Compact(slices.Sorted(slices.Values(names)))) {
				return nil, awserr.New("InstanceNotFound", "One or more of the instances %s is not registered.", strings.Join(names, ", "))
			}
		}
		insts, next, err := page(insts, (*storev1.CloudMapInstanceRecord).GetId, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		out := &sdv1.GetInstancesHealthStatusResponse{Status: map[string]string{}, NextToken: next}
		for _, i := range insts {
			st := Unknown
			if svc.GetCustomHealth() {
				st = i.GetHealthStatus()
			}
			out.Status[i.GetId()] = st
		}
		return out, nil
	})
}

// UpdateInstanceCustomHealthStatus sets an instance's custom health.
func (h *Handler) UpdateInstanceCustomHealthStatus(ctx context.Context, req *connect.Request[sdv1.UpdateInstanceCustomHealthStatusRequest]) (*connect.Response[sdv1.UpdateInstanceCustomHealthStatusResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.UpdateInstanceCustomHealthStatusRequest) (*sdv1.UpdateInstanceCustomHealthStatusResponse, error) {
		if err := h.reg.SetCustomHealth(ctx, sc, in.GetServiceId(), in.GetInstanceId(), in.GetStatus()); err != nil {
			return nil, err
		}
		return &sdv1.UpdateInstanceCustomHealthStatusResponse{}, nil
	})
}

func opOut(op *storev1.CloudMapOperationRecord) *sdv1.Operation {
	out := &sdv1.Operation{
		Id: proto.String(op.GetId()), Type: proto.String(op.GetType()), Status: proto.String(op.GetStatus()), CreateDate: proto.Float64(op.GetCreateDate()),
		UpdateDate: proto.Float64(op.GetUpdateDate()), Targets: maps.Clone(nonNilMap(op.GetTargets())), OwnerAccount: proto.String(op.GetOwnerAccount()),
	}
	if op.GetErrorCode() != "" {
		out.ErrorCode, out.ErrorMessage = proto.String(op.GetErrorCode()), proto.String(op.GetErrorMessage())
	}
	return out
}

// GetOperation returns one operation.
func (h *Handler) GetOperation(ctx context.Context, req *connect.Request[sdv1.GetOperationRequest]) (*connect.Response[sdv1.GetOperationResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.GetOperationRequest) (*sdv1.GetOperationResponse, error) {
		op, err := h.reg.Operation(ctx, sc, in.GetOperationId())
		if err != nil {
			return nil, err
		}
		return &sdv1.GetOperationResponse{Operation: opOut(op)}, nil
	})
}

// ListOperations lists operations, filtered by NAMESPACE_ID, SERVICE_ID, STATUS, TYPE or
// UPDATE_DATE (BETWEEN two epoch seconds).
func (h *Handler) ListOperations(ctx context.Context, req *connect.Request[sdv1.ListOperationsRequest]) (*connect.Response[sdv1.ListOperationsResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.ListOperationsRequest) (*sdv1.ListOperationsResponse, error) {
		ops, err := h.reg.Operations(ctx, sc)
		if err != nil {
			return nil, err
		}
		var kept []*storev1.CloudMapOperationRecord
		for _, op := range ops {
			ok := true
			for _, f := range in.GetFilters() {
				var m bool
				switch f.GetName() {
				case "NAMESPACE_ID":
					m, err = filterMatch(f.GetCondition(), f.GetValues(), op.GetTargets()["NAMESPACE"], "EQ")
				case "SERVICE_ID":
					m, err = filterMatch(f.GetCondition(), f.GetValues(), op.GetTargets()["SERVICE"], "EQ")
				case "STATUS":
					m, err = filterMatch(f.GetCondition(), f.GetValues(), op.GetStatus(), "EQ", "IN")
				case "TYPE":
					m, err = filterMatch(f.GetCondition(), f.GetValues(), op.GetType(), "EQ", "IN")
				case "UPDATE_DATE":
					if f.GetCondition() != "BETWEEN" || len(f.GetValues()) != 2 {
						return nil, invalid("The UPDATE_DATE filter takes BETWEEN and two values.")
					}
					lo, err1 := strconv.ParseFloat(f.GetValues()[0], 64)
					hi, err2 := strconv.ParseFloat(f.GetValues()[1], 64)
					if err1 != nil || err2 != nil {
						return nil, invalid("The UPDATE_DATE filter's values are epoch seconds.")
					}
					m = op.GetUpdateDate() >= lo && op.GetUpdateDate() <= hi
				default:
					return nil, invalid("Filter name %q is not valid: NAMESPACE_ID, SERVICE_ID, STATUS, TYPE or UPDATE_DATE.", f.GetName())
				}
				if err != nil {
					return nil, err
				}
				ok = ok && m
			}
			if ok {
				kept = append(kept, op)
			}
		}
		kept, next, err := page(kept, (*storev1.CloudMapOperationRecord).GetId, in.GetNextToken(), in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		out := &sdv1.ListOperationsResponse{Operations: []*sdv1.OperationSummary{}, NextToken: next}
		for _, op := range kept {
			out.Operations = append(out.Operations, &sdv1.OperationSummary{Id: proto.String(op.GetId()), Status: proto.String(op.GetStatus())})
		}
		return out, nil
	})
}

// ListTagsForResource returns a namespace's or service's tags.
func (h *Handler) ListTagsForResource(ctx context.Context, req *connect.Request[sdv1.ListTagsForResourceRequest]) (*connect.Response[sdv1.ListTagsForResourceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.ListTagsForResourceRequest) (*sdv1.ListTagsForResourceResponse, error) {
		tags, err := h.reg.Tags(ctx, sc, in.GetResourceArn())
		if err != nil {
			return nil, err
		}
		return &sdv1.ListTagsForResourceResponse{Tags: tagsOut(tags)}, nil
	})
}

// TagResource adds or replaces tags of a namespace or service.
func (h *Handler) TagResource(ctx context.Context, req *connect.Request[sdv1.TagResourceRequest]) (*connect.Response[sdv1.TagResourceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.TagResourceRequest) (*sdv1.TagResourceResponse, error) {
		add := tagsIn(in.GetTags())
		if err := checkTags(add); err != nil {
			return nil, err
		}
		err := h.reg.Retag(ctx, sc, in.GetResourceArn(), func(cur []*storev1.CloudMapTag) []*storev1.CloudMapTag {
			for _, t := range add {
				if i := slices.IndexFunc(cur, func(c *storev1.CloudMapTag) bool { return c.GetKey() == t.GetKey() }); i >= 0 {
					cur[i] = t
				} else {
					cur = append(cur, t)
				}
			}
			return cur
		})
		if err != nil {
			return nil, err
		}
		return &sdv1.TagResourceResponse{}, nil
	})
}

// UntagResource removes tags of a namespace or service.
func (h *Handler) UntagResource(ctx context.Context, req *connect.Request[sdv1.UntagResourceRequest]) (*connect.Response[sdv1.UntagResourceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, in *sdv1.UntagResourceRequest) (*sdv1.UntagResourceResponse, error) {
		err := h.reg.Retag(ctx, sc, in.GetResourceArn(), func(cur []*storev1.CloudMapTag) []*storev1.CloudMapTag {
			return slices.DeleteFunc(cur, func(c *storev1.CloudMapTag) bool { return slices.Contains(in.GetTagKeys(), c.GetKey()) })
		})
		if err != nil {
			return nil, err
		}
		return &sdv1.UntagResourceResponse{}, nil
	})
}

// UpdatePrivateDnsNamespace is refused: namespace updates are not served by Berth.
func (h *Handler) UpdatePrivateDnsNamespace(ctx context.Context, req *connect.Request[sdv1.UpdatePrivateDnsNamespaceRequest]) (*connect.Response[sdv1.UpdatePrivateDnsNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(context.Context, keys.Scope, *sdv1.UpdatePrivateDnsNamespaceRequest) (*sdv1.UpdatePrivateDnsNamespaceResponse, error) {
		return nil, invalid("UpdatePrivateDnsNamespace is not supported by Berth: delete and recreate the namespace to change it.")
	})
}

// UpdatePublicDnsNamespace is refused: Berth serves no public DNS.
func (h *Handler) UpdatePublicDnsNamespace(ctx context.Context, req *connect.Request[sdv1.UpdatePublicDnsNamespaceRequest]) (*connect.Response[sdv1.UpdatePublicDnsNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(context.Context, keys.Scope, *sdv1.UpdatePublicDnsNamespaceRequest) (*sdv1.UpdatePublicDnsNamespaceResponse, error) {
		return nil, invalid("Public DNS namespaces are not supported by Berth.")
	})
}
