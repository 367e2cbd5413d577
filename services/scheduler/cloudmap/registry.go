package cloudmap

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Namespace types.
const (
	TypeDNSPrivate = "DNS_PRIVATE"
	TypeDNSPublic  = "DNS_PUBLIC"
	TypeHTTP       = "HTTP"
)

// Service types.
const (
	ServiceDNSHTTP = "DNS_HTTP"
	ServiceHTTP    = "HTTP"
)

// Health statuses.
const (
	Healthy   = "HEALTHY"
	Unhealthy = "UNHEALTHY"
	Unknown   = "UNKNOWN"
)

// Instance attributes Cloud Map reserves (RegisterInstance).
const (
	AttrIPv4       = "AWS_INSTANCE_IPV4"
	AttrIPv6       = "AWS_INSTANCE_IPV6"
	AttrPort       = "AWS_INSTANCE_PORT"
	AttrCNAME      = "AWS_INSTANCE_CNAME"
	AttrAlias      = "AWS_ALIAS_DNS_NAME"
	AttrInitHealth = "AWS_INIT_HEALTH_STATUS"
)

// Limits from the Cloud Map quotas and the model's constraints.
const (
	maxAttributes = 30
	maxTags       = 50
	defaultSOATTL = 15
)

// Registry is Cloud Map's state in etcd: every method takes the caller's scope and
// returns *awserr.Error (Cloud Map's exception names) for client errors.
type Registry struct {
	kv  clientv3.KV
	now func() time.Time
}

// NewRegistry returns a Registry over kv; now is the clock (time.Now when nil).
func NewRegistry(kv clientv3.KV, now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{kv: kv, now: now}
}

func invalid(format string, args ...any) *awserr.Error {
	return awserr.New("InvalidInput", format, args...)
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomID returns n random lowercase alphanumerics.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// ARN returns arn:aws:servicediscovery:{region}:{account}:{kind}/{id} (kind namespace or
// service).
func ARN(sc keys.Scope, kind, id string) string {
	return fmt.Sprintf("arn:%s:servicediscovery:%s:%s:%s/%s", keys.Partition, sc.Region, sc.Account, kind, id)
}

// parseARN returns the kind and id of a Cloud Map ARN of this scope.
func parseARN(sc keys.Scope, arn string) (kind, id string, ok bool) {
	p := strings.SplitN(arn, ":", 6)
	if len(p) != 6 || p[0] != "arn" || p[2] != "servicediscovery" || !sc.Owns(p[1], p[4], p[3]) {
		return "", "", false
	}
	kind, id, ok = strings.Cut(p[5], "/")
	return kind, id, ok && id != "" && !strings.Contains(id, "/")
}

// ServiceIDFromARN returns the id of a Cloud Map service ARN of sc; false when arn is
// not one.
func ServiceIDFromARN(sc keys.Scope, arn string) (string, bool) {
	kind, id, ok := parseARN(sc, arn)
	return id, ok && kind == "service"
}

// recordOp writes a SUCCESS operation into t and returns its id.
func (r *Registry) recordOp(t *store.Txn, sc keys.Scope, typ string, targets map[string]string) string {
	id := randomID(32) + "-" + randomID(8)
	now := awsapi.Epoch(r.now())
	t.Create(keys.CloudMapOperation(sc, id), &storev1.CloudMapOperationRecord{
		Id: id, Type: typ, Status: "SUCCESS", CreateDate: now, UpdateDate: now, Targets: targets, OwnerAccount: sc.Account,
	})
	return id
}

// Namespace reads a namespace by id, or NamespaceNotFound.
func (r *Registry) Namespace(ctx context.Context, sc keys.Scope, id string) (*storev1.CloudMapNamespaceRecord, int64, error) {
	if id == "" || strings.Contains(id, "/") {
		return nil, 0, awserr.New("NamespaceNotFound", "Namespace not found: %q", id)
	}
	rec, rev, err := store.Get[*storev1.CloudMapNamespaceRecord](ctx, r.kv, keys.CloudMapNamespace(sc, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, awserr.New("NamespaceNotFound", "Namespace not found: %s", id)
	}
	return rec, rev, err
}

// Namespaces returns every namespace of the scope.
func (r *Registry) Namespaces(ctx context.Context, sc keys.Scope) ([]*storev1.CloudMapNamespaceRecord, error) {
	return listAll[*storev1.CloudMapNamespaceRecord](ctx, r.kv, keys.CloudMapNamespace(sc, ""))
}

// Service reads a service by id, or ServiceNotFound.
func (r *Registry) Service(ctx context.Context, sc keys.Scope, id string) (*storev1.CloudMapServiceRecord, int64, error) {
	if id == "" || strings.Contains(id, "/") {
		return nil, 0, awserr.New("ServiceNotFound", "Service not found: %q", id)
	}
	rec, rev, err := store.Get[*storev1.CloudMapServiceRecord](ctx, r.kv, keys.CloudMapService(sc, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, awserr.New("ServiceNotFound", "Service not found: %s", id)
	}
	return rec, rev, err
}

// Services returns every service of the scope.
func (r *Registry) Services(ctx context.Context, sc keys.Scope) ([]*storev1.CloudMapServiceRecord, error) {
	return listAll[*storev1.CloudMapServiceRecord](ctx, r.kv, keys.CloudMapService(sc, ""))
}

// Instances returns the instances of a service, in id order.
func (r *Registry) Instances(ctx context.Context, sc keys.Scope, serviceID string) ([]*storev1.CloudMapInstanceRecord, error) {
	return listAll[*storev1.CloudMapInstanceRecord](ctx, r.kv, keys.CloudMapInstance(sc, serviceID, ""))
}

func listAll[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string) ([]T, error) {
	var out []T
	token := ""
	for {
		items, next, err := store.List[T](ctx, kv, prefix, 500, token)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			out = append(out, it.Value)
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// CreateNamespaceInput is CreatePrivateDnsNamespace's or CreateHttpNamespace's request.
type CreateNamespaceInput struct {
	Type, Name, Description, CreatorRequestID, Vpc string
	SOATTL                                         int64
	Tags                                           []*storev1.CloudMapTag
}

var (
	dnsNamespaceName  = regexp.MustCompile(`^([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?$`)
	httpNamespaceName = regexp.MustCompile(`^[0-9A-Za-z_\-]+$`)
	serviceName       = regexp.MustCompile(`^[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?$`)
	instanceIDPattern = regexp.MustCompile(`^[0-9a-zA-Z_/:.@-]{1,64}$`)
)

// CreateNamespace creates a private DNS or HTTP namespace and returns the operation id.
// A repeated call with the same CreatorRequestId returns the first call's operation;
// another namespace of the same name and type is NamespaceAlreadyExists.
func (r *Registry) CreateNamespace(ctx context.Context, sc keys.Scope, in CreateNamespaceInput) (string, error) {
	switch in.Type {
	case TypeDNSPrivate:
		in.Name = strings.TrimSuffix(strings.ToLower(in.Name), ".")
		if len(in.Name) > 253 || !dnsNamespaceName.MatchString(in.Name) {
			return "", invalid("Namespace name %q is not a valid DNS domain name.", in.Name)
		}
		if in.Vpc == "" {
			return "", invalid("Vpc is required for a private DNS namespace.")
		}
		if in.SOATTL == 0 {
			in.SOATTL = defaultSOATTL
		}
		if in.SOATTL < 0 || in.SOATTL > 2147483647 {
			return "", invalid("SOA TTL %d is not valid: 0 to 2147483647.", in.SOATTL)
		}
	case TypeHTTP:
		if len(in.Name) > 1024 || !httpNamespaceName.MatchString(in.Name) {
			return "", invalid("Namespace name %q is not valid: 1 to 1024 letters, digits, '_' or '-'.", in.Name)
		}
	}
	if len(in.Description) > 1024 {
		return "", invalid("Description is longer than 1024 characters.")
	}
	if err := checkTags(in.Tags); err != nil {
		return "", err
	}
	if in.CreatorRequestID != "" {
		if op, ok, err := r.opByRequest(ctx, sc, "CREATE_NAMESPACE", "NAMESPACE", in.CreatorRequestID); err != nil || ok {
			return op, err
		}
	}
	id := "ns-" + randomID(16)
	rec := &storev1.CloudMapNamespaceRecord{
		Id: id, Arn: ARN(sc, "namespace", id), Name: in.Name, Type: in.Type, Description: in.Description,
		CreatorRequestId: in.CreatorRequestID, CreateDate: awsapi.Epoch(r.now()), Vpc: in.Vpc, Tags: in.Tags,
	}
	if in.Type == TypeDNSPrivate {
		rec.HostedZoneId = "Z" + strings.ToUpper(randomID(20))
		rec.SoaTtl = in.SOATTL
	}
	t := store.NewTxn(r.kv).IfAbsent(keys.CloudMapNamespaceName(sc, in.Type, in.Name)).
		PutIndex(keys.CloudMapNamespaceName(sc, in.Type, in.Name)).
		Create(keys.CloudMapNamespace(sc, id), rec)
	op := r.recordOp(t, sc, "CREATE_NAMESPACE", map[string]string{"NAMESPACE": id})
	if _, err := t.Commit(ctx); err != nil {
		if errors.Is(err, store.ErrExists) {
			return "", awserr.New("NamespaceAlreadyExists", "Namespace %s already exists.", in.Name)
		}
		return "", err
	}
	return op, nil
}

// opByRequest finds the operation a previous create with the same CreatorRequestId
// returned (namespaces: by the namespace's creator request id).
func (r *Registry) opByRequest(ctx context.Context, sc keys.Scope, typ, target, requestID string) (string, bool, error) {
	nss, err := r.Namespaces(ctx, sc)
	if err != nil {
		return "", false, err
	}
	idx := slices.IndexFunc(nss, func(n *storev1.CloudMapNamespaceRecord) bool { return n.GetCreatorRequestId() == requestID })
	if idx < 0 {
		return "", false, nil
	}
	ops, err := listAll[*storev1.CloudMapOperationRecord](ctx, r.kv, keys.CloudMapOperation(sc, ""))
	if err != nil {
		return "", false, err
	}
	for _, op := range ops {
		if op.GetType() == typ && op.GetTargets()[target] == nss[idx].GetId() {
			return op.GetId(), true, nil
		}
	}
	return "", false, awserr.New("DuplicateRequest", "A namespace was already created with CreatorRequestId %s.", requestID)
}

// DeleteNamespace deletes a namespace that has no services and returns the operation id.
func (r *Registry) DeleteNamespace(ctx context.Context, sc keys.Scope, id string) (string, error) {
	ns, rev, err := r.Namespace(ctx, sc, id)
	if err != nil {
		return "", err
	}
	names, _, err := store.ListKeys(ctx, r.kv, keys.CloudMapServiceName(sc, id, ""), 1, "")
	if err != nil {
		return "", err
	}
	if len(names) > 0 {
		return "", awserr.New("ResourceInUse", "Namespace %s has services; delete them first.", id)
	}
	t := store.NewTxn(r.kv).IfModRevision(keys.CloudMapNamespace(sc, id), rev).
		Delete(keys.CloudMapNamespace(sc, id)).
		Delete(keys.CloudMapNamespaceName(sc, ns.GetType(), ns.GetName())).
		If(clientv3.Compare(clientv3.CreateRevision(keys.CloudMapServiceName(sc, id, "")).WithPrefix(), "=", 0))
	op := r.recordOp(t, sc, "DELETE_NAMESPACE", map[string]string{"NAMESPACE": id})
	if _, err := t.Commit(ctx); err != nil {
		switch {
		case errors.Is(err, store.ErrPreconditionFailed):
			return "", awserr.New("ResourceInUse", "Namespace %s has services; delete them first.", id)
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
			return "", awserr.New("NamespaceNotFound", "Namespace not found: %s", id)
		}
		return "", err
	}
	return op, nil
}

// CreateServiceInput is CreateService's request.
type CreateServiceInput struct {
	Name, NamespaceID, Description, CreatorRequestID, Type, RoutingPolicy string
	DNSRecords                                                            []*storev1.CloudMapDnsRecord
	HasDNSConfig, HasHealthCheckConfig, HasCustomHealth                   bool
	CustomFailureThreshold                                                int32
	Tags                                                                  []*storev1.CloudMapTag
}

// checkDNSRecords validates DnsConfig.DnsRecords as Cloud Map does; Berth serves A and
// SRV.
func checkDNSRecords(recs []*storev1.CloudMapDnsRecord) error {
	if len(recs) == 0 {
		return invalid("DnsConfig.DnsRecords must have at least one record.")
	}
	seen := map[string]bool{}
	for _, d := range recs {
		switch d.GetType() {
		case "A", "SRV":
		case "AAAA", "CNAME":
			return invalid("DNS record type %s is not supported by Berth: A and SRV are.", d.GetType())
		default:
			return invalid("DNS record type %q is not valid: SRV, A, AAAA or CNAME.", d.GetType())
		}
		if seen[d.GetType()] {
			return invalid("DnsConfig.DnsRecords has two %s records.", d.GetType())
		}
		seen[d.GetType()] = true
		if d.GetTtl() < 0 || d.GetTtl() > 2147483647 {
			return invalid("DNS record TTL %d is not valid: 0 to 2147483647.", d.GetTtl())
		}
	}
	return nil
}

// CreateService creates a service in a namespace. As on AWS, a service of a DNS
// namespace with DnsConfig is DNS_HTTP, one without is HTTP (Type HTTP); an HTTP
// namespace's services take no DnsConfig.
func (r *Registry) CreateService(ctx context.Context, sc keys.Scope, in CreateServiceInput) (*storev1.CloudMapServiceRecord, error) {
	if !serviceName.MatchString(in.Name) {
		return nil, invalid("Service name %q is not valid: a DNS label of up to 63 letters, digits, '_' or '-'.", in.Name)
	}
	if in.NamespaceID == "" {
		return nil, invalid("NamespaceId is required.")
	}
	if in.HasHealthCheckConfig {
		return nil, invalid("HealthCheckConfig (Route 53 health checks) is not supported by Berth; use HealthCheckCustomConfig.")
	}
	if in.HasHealthCheckConfig && in.HasCustomHealth {
		return nil, invalid("HealthCheckConfig and HealthCheckCustomConfig cannot both be set.")
	}
	if len(in.Description) > 1024 {
		return nil, invalid("Description is longer than 1024 characters.")
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	ns, _, err := r.Namespace(ctx, sc, in.NamespaceID)
	if err != nil {
		return nil, err
	}
	typ := ServiceHTTP
	switch {
	case in.Type != "" && in.Type != ServiceHTTP:
		return nil, invalid("Type %q is not valid: HTTP.", in.Type)
	case ns.GetType() == TypeHTTP && in.HasDNSConfig:
		return nil, invalid("A service in HTTP namespace %s cannot have DnsConfig.", ns.GetId())
	case in.Type == ServiceHTTP && in.HasDNSConfig:
		return nil, invalid("A service of type HTTP cannot have DnsConfig.")
	case in.HasDNSConfig:
		typ = ServiceDNSHTTP
		if err := checkDNSRecords(in.DNSRecords); err != nil {
			return nil, err
		}
		switch in.RoutingPolicy {
		case "":
			in.RoutingPolicy = "MULTIVALUE"
		case "MULTIVALUE", "WEIGHTED":
		default:
			return nil, invalid("RoutingPolicy %q is not valid: MULTIVALUE or WEIGHTED.", in.RoutingPolicy)
		}
	}
	if in.HasCustomHealth {
		if in.CustomFailureThreshold == 0 {
			in.CustomFailureThreshold = 1
		}
		if in.CustomFailureThreshold < 1 || in.CustomFailureThreshold > 10 {
			return nil, invalid("HealthCheckCustomConfig.FailureThreshold %d is not valid: 1 to 10.", in.CustomFailureThreshold)
		}
	}
	if in.CreatorRequestID != "" {
		svcs, err := r.Services(ctx, sc)
		if err != nil {
			return nil, err
		}
		for _, s := range svcs {
			if s.GetCreatorRequestId() == in.CreatorRequestID {
				if s.GetName() == in.Name && s.GetNamespaceId() == in.NamespaceID {
					return s, nil
				}
				return nil, awserr.New("DuplicateRequest", "A service was already created with CreatorRequestId %s.", in.CreatorRequestID)
			}
		}
	}
	id := "srv-" + randomID(16)
	rec := &storev1.CloudMapServiceRecord{
		Id: id, Arn: ARN(sc, "service", id), Name: in.Name, NamespaceId: ns.GetId(), Description: in.Description,
		CreatorRequestId: in.CreatorRequestID, CreateDate: awsapi.Epoch(r.now()), Type: typ, DnsRecords: in.DNSRecords,
		RoutingPolicy: in.RoutingPolicy, CustomHealth: in.HasCustomHealth, CustomFailureThreshold: in.CustomFailureThreshold,
		Tags: in.Tags,
	}
	nameKey := keys.CloudMapServiceName(sc, ns.GetId(), strings.ToLower(in.Name))
	_, err = store.NewTxn(r.kv).
		IfAbsent(nameKey).PutIndex(nameKey).
		If(clientv3.Compare(clientv3.CreateRevision(keys.CloudMapNamespace(sc, ns.GetId())), ">", 0)).
		Create(keys.CloudMapService(sc, id), rec).
		Commit(ctx)
	switch {
	case errors.Is(err, store.ErrExists):
		return nil, awserr.New("ServiceAlreadyExists", "Service %s already exists in namespace %s.", in.Name, ns.GetId())
	case errors.Is(err, store.ErrPreconditionFailed):
		return nil, awserr.New("NamespaceNotFound", "Namespace not found: %s", ns.GetId())
	case err != nil:
		return nil, err
	}
	return rec, nil
}

// UpdateServiceInput is UpdateService's ServiceChange.
type UpdateServiceInput struct {
	Description                   *string
	DNSRecords                    []*storev1.CloudMapDnsRecord
	HasDNSConfig, HasHealthConfig bool
}

// UpdateService changes a service's description and DNS records (types may not change,
// as on AWS: only TTLs) and returns the operation id.
func (r *Registry) UpdateService(ctx context.Context, sc keys.Scope, id string, in UpdateServiceInput) (string, error) {
	if in.HasHealthConfig {
		return "", invalid("HealthCheckConfig (Route 53 health checks) is not supported by Berth; use HealthCheckCustomConfig.")
	}
	for {
		rec, rev, err := r.Service(ctx, sc, id)
		if err != nil {
			return "", err
		}
		if in.Description != nil {
			if len(*in.Description) > 1024 {
				return "", invalid("Description is longer than 1024 characters.")
			}
			rec.Description = *in.Description
		}
		if in.HasDNSConfig {
			if rec.GetType() != ServiceDNSHTTP {
				return "", invalid("Service %s has no DnsConfig to update.", id)
			}
			if err := checkDNSRecords(in.DNSRecords); err != nil {
				return "", err
			}
			if len(in.DNSRecords) != len(rec.GetDnsRecords()) {
				return "", invalid("UpdateService cannot add or remove DNS record types: only their TTL changes.")
			}
			for _, d := range in.DNSRecords {
				if !slices.ContainsFunc(rec.GetDnsRecords(), func(o *storev1.CloudMapDnsRecord) bool { return o.GetType() == d.GetType() }) {
					return "", invalid("UpdateService cannot change DNS record types: %s is not one of the service's.", d.GetType())
				}
			}
			rec.DnsRecords = in.DNSRecords
		}
		t := store.NewTxn(r.kv).Update(keys.CloudMapService(sc, id), rev, rec)
		op := r.recordOp(t, sc, "UPDATE_SERVICE", map[string]string{"SERVICE": id})
		_, err = t.Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			return "", awserr.New("ServiceNotFound", "Service not found: %s", id)
		}
		return op, err
	}
}

// DeleteService deletes a service that has no instances.
func (r *Registry) DeleteService(ctx context.Context, sc keys.Scope, id string) error {
	rec, rev, err := r.Service(ctx, sc, id)
	if err != nil {
		return err
	}
	prefix := keys.CloudMapInstance(sc, id, "")
	_, err = store.NewTxn(r.kv).IfModRevision(keys.CloudMapService(sc, id), rev).
		If(clientv3.Compare(clientv3.CreateRevision(prefix).WithPrefix(), "=", 0)).
		Delete(keys.CloudMapService(sc, id)).
		Delete(keys.CloudMapRevision(sc, id)).
		Delete(keys.CloudMapServiceName(sc, rec.GetNamespaceId(), strings.ToLower(rec.GetName()))).
		Commit(ctx)
	switch {
	case errors.Is(err, store.ErrPreconditionFailed):
		return awserr.New("ResourceInUse", "Service %s has registered instances; deregister them first.", id)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		return awserr.New("ServiceNotFound", "Service not found: %s", id)
	}
	return err
}

// RegisterInstance creates or replaces an instance of a service and returns the
// operation id. Attributes are checked against the service's DNS records as AWS does:
// an A record needs AWS_INSTANCE_IPV4, an SRV record AWS_INSTANCE_PORT too.
func (r *Registry) RegisterInstance(ctx context.Context, sc keys.Scope, serviceID, instanceID, requestID string, attrs map[string]string) (string, error) {
	if !instanceIDPattern.MatchString(instanceID) {
		return "", invalid("InstanceId %q is not valid: 1 to 64 of [0-9a-zA-Z_/:.@-].", instanceID)
	}
	if len(attrs) == 0 {
		return "", invalid("Attributes is required.")
	}
	if len(attrs) > maxAttributes {
		return "", awserr.New("ResourceLimitExceeded", "An instance can have at most %d attributes.", maxAttributes)
	}
	for k, v := range attrs {
		if k == "" || len(k) > 255 || len(v) > 1024 {
			return "", invalid("Attribute %q is not valid: keys 1 to 255 characters, values at most 1024.", k)
		}
	}
	svc, _, err := r.Service(ctx, sc, serviceID)
	if err != nil {
		return "", err
	}
	for _, d := range svc.GetDnsRecords() {
		if attrs[AttrIPv4] == "" {
			return "", invalid("The service's %s record needs the %s attribute.", d.GetType(), AttrIPv4)
		}
		if d.GetType() == "SRV" && attrs[AttrPort] == "" {
			return "", invalid("The service's SRV record needs the %s attribute.", AttrPort)
		}
	}
	if ip := attrs[AttrIPv4]; ip != "" && !validIPv4(ip) {
		return "", invalid("%s %q is not an IPv4 address.", AttrIPv4, ip)
	}
	if p := attrs[AttrPort]; p != "" && !validPort(p) {
		return "", invalid("%s %q is not a port (1 to 65535).", AttrPort, p)
	}
	health := Unknown
	if svc.GetCustomHealth() {
		health = Healthy
		switch attrs[AttrInitHealth] {
		case "", Healthy:
		case Unhealthy:
			health = Unhealthy
		default:
			return "", invalid("%s must be HEALTHY or UNHEALTHY.", AttrInitHealth)
		}
	}
	rec := &storev1.CloudMapInstanceRecord{
		Id: instanceID, ServiceId: serviceID, Attributes: maps.Clone(attrs), CreatorRequestId: requestID,
		CreatedByAccount: sc.Account, HealthStatus: health,
	}
	t := store.NewTxn(r.kv).Put(keys.CloudMapInstance(sc, serviceID, instanceID), rec).
		If(clientv3.Compare(clientv3.CreateRevision(keys.CloudMapService(sc, serviceID)), ">", 0))
	t.PutIndex(keys.CloudMapRevision(sc, serviceID))
	op := r.recordOp(t, sc, "REGISTER_INSTANCE", map[string]string{"SERVICE": serviceID, "INSTANCE": instanceID})
	if _, err := t.Commit(ctx); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return "", awserr.New("ServiceNotFound", "Service not found: %s", serviceID)
		}
		return "", err
	}
	return op, nil
}

// DeregisterInstance removes an instance and returns the operation id; InstanceNotFound
// when it is not registered.
func (r *Registry) DeregisterInstance(ctx context.Context, sc keys.Scope, serviceID, instanceID string) (string, error) {
	if _, _, err := r.Service(ctx, sc, serviceID); err != nil {
		return "", err
	}
	if !instanceIDPattern.MatchString(instanceID) {
		return "", awserr.New("InstanceNotFound", "Instance not found: %s", instanceID)
	}
	key := keys.CloudMapInstance(sc, serviceID, instanceID)
	_, rev, err := store.Get[*storev1.CloudMapInstanceRecord](ctx, r.kv, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", awserr.New("InstanceNotFound", "Instance not found: %s", instanceID)
	}
	if err != nil {
		return "", err
	}
	t := store.NewTxn(r.kv).IfModRevision(key, rev).Delete(key)
	t.PutIndex(keys.CloudMapRevision(sc, serviceID))
	op := r.recordOp(t, sc, "DEREGISTER_INSTANCE", map[string]string{"SERVICE": serviceID, "INSTANCE": instanceID})
	if _, err := t.Commit(ctx); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			return "", awserr.New("InstanceNotFound", "Instance not found: %s", instanceID)
		}
		return "", err
	}
	return op, nil
}

// Instance reads one instance, or InstanceNotFound.
func (r *Registry) Instance(ctx context.Context, sc keys.Scope, serviceID, instanceID string) (*storev1.CloudMapInstanceRecord, int64, error) {
	if _, _, err := r.Service(ctx, sc, serviceID); err != nil {
		return nil, 0, err
	}
	if !instanceIDPattern.MatchString(instanceID) {
		return nil, 0, awserr.New("InstanceNotFound", "Instance not found: %s", instanceID)
	}
	rec, rev, err := store.Get[*storev1.CloudMapInstanceRecord](ctx, r.kv, keys.CloudMapInstance(sc, serviceID, instanceID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, awserr.New("InstanceNotFound", "Instance not found: %s", instanceID)
	}
	return rec, rev, err
}

// SetCustomHealth sets an instance's custom health status (HEALTHY or UNHEALTHY);
// CustomHealthNotFound when the service has no HealthCheckCustomConfig.
func (r *Registry) SetCustomHealth(ctx context.Context, sc keys.Scope, serviceID, instanceID, status string) error {
	if status != Healthy && status != Unhealthy {
		return invalid("Status %q is not valid: HEALTHY or UNHEALTHY.", status)
	}
	svc, _, err := r.Service(ctx, sc, serviceID)
	if err != nil {
		return err
	}
	if !svc.GetCustomHealth() {
		return awserr.New("CustomHealthNotFound", "Service %s has no HealthCheckCustomConfig.", serviceID)
	}
	for {
		rec, rev, err := r.Instance(ctx, sc, serviceID, instanceID)
		if err != nil {
			return err
		}
		if rec.GetHealthStatus() == status {
			return nil
		}
		rec.HealthStatus = status
		_, err = store.Update(ctx, r.kv, keys.CloudMapInstance(sc, serviceID, instanceID), rev, rec)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			return awserr.New("InstanceNotFound", "Instance not found: %s", instanceID)
		}
		return err
	}
}

// Operation reads one operation, or OperationNotFound.
func (r *Registry) Operation(ctx context.Context, sc keys.Scope, id string) (*storev1.CloudMapOperationRecord, error) {
	if id == "" || strings.Contains(id, "/") {
		return nil, awserr.New("OperationNotFound", "Operation not found: %q", id)
	}
	rec, _, err := store.Get[*storev1.CloudMapOperationRecord](ctx, r.kv, keys.CloudMapOperation(sc, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, awserr.New("OperationNotFound", "Operation not found: %s", id)
	}
	return rec, err
}

// Operations returns every operation of the scope.
func (r *Registry) Operations(ctx context.Context, sc keys.Scope) ([]*storev1.CloudMapOperationRecord, error) {
	return listAll[*storev1.CloudMapOperationRecord](ctx, r.kv, keys.CloudMapOperation(sc, ""))
}

func checkTags(tags []*storev1.CloudMapTag) error {
	if len(tags) > maxTags {
		return awserr.New("TooManyTagsException", "A resource can have at most %d tags.", maxTags)
	}
	seen := map[string]bool{}
	for _, t := range tags {
		if t.GetKey() == "" || len(t.GetKey()) > 128 || len(t.GetValue()) > 256 {
			return invalid("Tag key %q is not valid: 1 to 128 characters, values at most 256.", t.GetKey())
		}
		if strings.HasPrefix(strings.ToLower(t.GetKey()), "aws:") {
			return invalid("Tag keys beginning with aws: are reserved.")
		}
		if seen[t.GetKey()] {
			return invalid("Tag key %s is given twice.", t.GetKey())
		}
		seen[t.GetKey()] = true
	}
	return nil
}

// Tags returns the tags of a namespace or service ARN.
func (r *Registry) Tags(ctx context.Context, sc keys.Scope, arn string) ([]*storev1.CloudMapTag, error) {
	kind, id, ok := parseARN(sc, arn)
	switch {
	case ok && kind == "namespace":
		ns, _, err := r.Namespace(ctx, sc, id)
		if err == nil {
			return ns.GetTags(), nil
		}
	case ok && kind == "service":
		svc, _, err := r.Service(ctx, sc, id)
		if err == nil {
			return svc.GetTags(), nil
		}
	}
	return nil, awserr.New("ResourceNotFoundException", "Resource not found: %s", arn)
}

// Retag applies fn to the tags of a namespace or service ARN and stores the result.
func (r *Registry) Retag(ctx context.Context, sc keys.Scope, arn string, fn func([]*storev1.CloudMapTag) []*storev1.CloudMapTag) error {
	kind, id, ok := parseARN(sc, arn)
	for ok {
		var (
			key  string
			rev  int64
			msg  proto.Message
			tags *[]*storev1.CloudMapTag
		)
		switch kind {
		case "namespace":
			ns, r2, err := r.Namespace(ctx, sc, id)
			if err != nil {
				ok = false
				continue
			}
			key, rev, msg, tags = keys.CloudMapNamespace(sc, id), r2, ns, &ns.Tags
		case "service":
			svc, r2, err := r.Service(ctx, sc, id)
			if err != nil {
				ok = false
				continue
			}
			key, rev, msg, tags = keys.CloudMapService(sc, id), r2, svc, &svc.Tags
		default:
			ok = false
			continue
		}
		*tags = fn(*tags)
		if err := checkTags(*tags); err != nil {
			return err
		}
		_, err := store.Update(ctx, r.kv, key, rev, msg)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		return err
	}
	return awserr.New("ResourceNotFoundException", "Resource not found: %s", arn)
}

func validIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

// InstancesRevision returns the revision of a service's instances: the etcd revision of
// the last register or deregister (0 before the first).
func (r *Registry) InstancesRevision(ctx context.Context, sc keys.Scope, serviceID string) (int64, error) {
	res, err := r.kv.Get(ctx, keys.CloudMapRevision(sc, serviceID))
	if err != nil {
		return 0, err
	}
	if len(res.Kvs) == 0 {
		return 0, nil
	}
	return res.Kvs[0].ModRevision, nil
}
