package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Resource names of container instances.
const (
	ResourceCPU      = "CPU"
	ResourceMemory   = "MEMORY"
	ResourcePorts    = "PORTS"
	ResourcePortsUDP = "PORTS_UDP"
	// ResourceGPU is the STRINGSET of the instance's GPU ids (registered: all of them;
	// remaining: those no task holds), present only on an instance with GPUs, as the
	// ECS agent registers them.
	ResourceGPU = "GPU"
)

// maxCustomAttributes is ECS's limit of custom attributes per container instance.
const maxCustomAttributes = 10

// ResourceInt returns the INTEGER value of the named resource (CPU units, MiB), 0 when
// absent.
func ResourceInt(rs []*ecsv1.Resource, name string) int32 {
	for _, r := range rs {
		if r.GetName() == name {
			return r.GetIntegerValue()
		}
	}
	return 0
}

// ResourcePortSet returns the STRINGSET value of the named resource (PORTS, PORTS_UDP).
func ResourcePortSet(rs []*ecsv1.Resource, name string) []string {
	for _, r := range rs {
		if r.GetName() == name {
			return r.GetStringSetValue()
		}
	}
	return nil
}

// Resources returns ECS resources as a container instance describes them: CPU and MEMORY
// as INTEGER, PORTS and PORTS_UDP as STRINGSET (sorted numerically, deduplicated).
func Resources(cpu, memory int32, ports, udp []string) []*ecsv1.Resource {
	return []*ecsv1.Resource{
		{Name: proto.String(ResourceCPU), Type: proto.String("INTEGER"), IntegerValue: cpu},
		{Name: proto.String(ResourceMemory), Type: proto.String("INTEGER"), IntegerValue: memory},
		{Name: proto.String(ResourcePorts), Type: proto.String("STRINGSET"), StringSetValue: sortPorts(ports)},
		{Name: proto.String(ResourcePortsUDP), Type: proto.String("STRINGSET"), StringSetValue: sortPorts(udp)},
	}
}

// withGPUs returns rs with a GPU STRINGSET of ids (in the agent's order) when the
// instance registered GPUs (registeredResources has one even when every GPU is held),
// unchanged otherwise.
func withGPUs(rs []*ecsv1.Resource, ids []string) []*ecsv1.Resource {
	if ids == nil {
		return rs
	}
	return append(rs, &ecsv1.Resource{Name: proto.String(ResourceGPU), Type: proto.String("STRINGSET"), StringSetValue: append([]string{}, ids...)})
}

func sortPorts(ps []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		if x != y {
			return x - y
		}
		return strings.Compare(a, b)
	})
	return out
}

// portsMinus returns a without the ports in b.
func portsMinus(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// instanceStatus is what an instance shows: DRAINING while an operator or the agent
// (no runtime) drains it, else ACTIVE.
func instanceStatus(r *storev1.ContainerInstanceRecord) string {
	if r.GetOperatorDrain() || r.GetInvoluntaryDrain() {
		return statusDraining
	}
	return statusActive
}

// mergeAttributes returns req attributes plus the custom attributes of cur the request
// does not name (agent-owned ecs.* and com.amazonaws.* attributes come only from req).
func mergeAttributes(cur, req []*ecsv1.Attribute) []*ecsv1.Attribute {
	out := []*ecsv1.Attribute{}
	names := map[string]bool{}
	for _, a := range req {
		if a == nil || a.GetName() == "" || names[a.GetName()] {
			continue
		}
		names[a.GetName()] = true
		out = append(out, &ecsv1.Attribute{Name: proto.String(a.GetName()), Value: a.Value})
	}
	for _, a := range cur {
		n := a.GetName()
		if names[n] || strings.HasPrefix(n, "ecs.") || strings.HasPrefix(n, "com.amazonaws.") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// RegisterInstance registers the agent's host as a container instance of req.cluster
// ("default", created if absent as the ECS agent does), or refreshes the registration of
// the same host (same cluster and host_id → same instance): resources and attributes are
// replaced, the reservations of placed tasks kept (GPU ids a task holds stay out of the
// remaining GPU set). host_address is kept as the host's address (peer routes to its
// task subnet and load balancer targets of its bridge and host mode tasks use it; a
// re-registration replaces it). Zero CPU and MEMORY with runtime_ready
// false is an involuntary drain (DRAINING, agentConnected false, zero registered CPU and
// memory) that returning capacity clears; an operator's DRAINING stays. Every change
// increments the instance's version. Errors: InvalidParameterException for a missing
// host_id, a host_address that is not a routable IPv4 address, or bad resources,
// ClusterNotFoundException for an unknown non-default cluster.
func (s *Server) RegisterInstance(ctx context.Context, account keys.Scope, req *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error) {
	if req == nil || req.GetHostId() == "" {
		return nil, awserr.InvalidParameterf("host_id is required.")
	}
	name, err := ClusterName(account, req.GetCluster())
	if err != nil {
		return nil, err
	}
	if name == DefaultCluster {
		if err := s.ensureDefaultCluster(ctx, account); err != nil {
			return nil, err
		}
	}
	var cpu, mem int32
	var ports, udp, gpus []string
	for _, r := range req.GetResources() {
		switch r.GetName() {
		case ResourceCPU:
			cpu = r.GetIntegerValue()
		case ResourceMemory:
			mem = r.GetIntegerValue()
		case ResourcePorts:
			ports = r.GetStringSetValue()
		case ResourcePortsUDP:
			udp = r.GetStringSetValue()
		case ResourceGPU:
			gpus = r.GetStringSetValue()
		}
	}
	for i, id := range gpus {
		if id == "" || slices.Contains(gpus[:i], id) {
			return nil, awserr.InvalidParameterf("Invalid GPU id %q in resources: GPU ids must be unique and not empty.", id)
		}
	}
	if cpu < 0 || mem < 0 {
		return nil, awserr.InvalidParameterf("CPU and MEMORY resources must not be negative.")
	}
	for _, p := range append(append([]string{}, ports...), udp...) {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, awserr.InvalidParameterf("Invalid port %q in resources.", p)
		}
	}
	if a := req.GetHostAddress(); a != "" {
		if ip := net.ParseIP(a); ip == nil || ip.To4() == nil || ip.IsLoopback() || ip.IsUnspecified() {
			return nil, awserr.InvalidParameterf("host_address %q is not a routable IPv4 address.", a)
		}
	}
	involuntary := cpu == 0 && mem == 0 && !req.GetRuntimeReady()
	long, err := s.longARN(ctx, account, SettingContainerInstanceLongARN)
	if err != nil {
		return nil, err
	}
	var outRec *storev1.ContainerInstanceRecord
	var subnet string
	err = awsapi.Retry(ctx, func() error {
		_, crec, crev, err := s.activeCluster(ctx, account, name)
		if err != nil {
			return err
		}
		hostKey := keys.InstanceByHost(account, name, req.GetHostId())
		idv, idRev, err := get[*wrapperspb.StringValue](ctx, s.kv, hostKey)
		if err != nil {
			return err
		}
		var rec *storev1.ContainerInstanceRecord
		var rev int64
		if idv != nil {
			rec, rev, err = get[*storev1.ContainerInstanceRecord](ctx, s.kv, keys.Instance(account, name, idv.GetValue()))
			if err != nil {
				return err
			}
			if rec != nil && rec.GetContainerInstance().GetStatus() == statusInactive {
				rec = nil
			}
		}
		txn := store.NewTxn(s.kv)
		if rec != nil {
			ci := rec.GetContainerInstance()
			oldReg, oldRem := ci.GetRegisteredResources(), ci.GetRemainingResources()
			resCPU := ResourceInt(oldReg, ResourceCPU) - ResourceInt(oldRem, ResourceCPU)
			resMem := ResourceInt(oldReg, ResourceMemory) - ResourceInt(oldRem, ResourceMemory)
			taskPorts := portsMinus(ResourcePortSet(oldRem, ResourcePorts), ResourcePortSet(oldReg, ResourcePorts))
			taskUDP := portsMinus(ResourcePortSet(oldRem, ResourcePortsUDP), ResourcePortSet(oldReg, ResourcePortsUDP))
			held := portsMinus(ResourcePortSet(oldReg, ResourceGPU), ResourcePortSet(oldRem, ResourceGPU))
			ci.RegisteredResources = withGPUs(Resources(cpu, mem, ports, udp), gpus)
			free := portsMinus(gpus, held)
			if gpus != nil && free == nil {
				free = []string{}
			}
			ci.RemainingResources = withGPUs(Resources(cpu-resCPU, mem-resMem, append(append([]string{}, ports...), taskPorts...), append(append([]string{}, udp...), taskUDP...)), free)
			ci.Attributes = mergeAttributes(ci.GetAttributes(), req.GetAttributes())
			if req.GetVersionInfo() != nil {
				ci.VersionInfo = req.GetVersionInfo()
			}
			rec.InvoluntaryDrain = involuntary
			rec.HostAddress = req.GetHostAddress()
			ci.AgentConnected = !involuntary
			ci.Status = proto.String(instanceStatus(rec))
			ci.StatusReason = nil
			if involuntary && req.GetRuntimeReason() != "" {
				ci.StatusReason = proto.String(req.GetRuntimeReason())
			}
			ci.Version++
			if err := s.claimTaskSubnet(ctx, txn, rec, req.GetTakenTaskSubnets()); err != nil {
				return err
			}
			setCapabilities(rec, req.GetMissingAttributes())
			txn.Update(keys.Instance(account, name, instanceID(ci.GetContainerInstanceArn())), rev, rec)
			_, err = txn.Commit(ctx)
			outRec, subnet = rec, rec.GetTaskSubnet()
			return err
		}
		id := s.newID()
		ci := &ecsv1.ContainerInstance{
			ContainerInstanceArn: proto.String(arn.ContainerInstanceARN(account.Region, account.Account, name, id, long)),
			Ec2InstanceId:        proto.String(req.GetHostId()),
			RegisteredResources:  withGPUs(Resources(cpu, mem, ports, udp), gpus),
			RemainingResources:   withGPUs(Resources(cpu, mem, ports, udp), gpus),
			Attributes:           mergeAttributes(nil, req.GetAttributes()),
			VersionInfo:          req.GetVersionInfo(),
			AgentConnected:       !involuntary,
			RegisteredAt:         s.nowEpoch(),
			Version:              1,
			Attachments:          []*ecsv1.Attachment{},
		}
		rec = &storev1.ContainerInstanceRecord{ContainerInstance: ci, ClusterName: name, HostId: req.GetHostId(), InvoluntaryDrain: involuntary, HostAddress: req.GetHostAddress()}
		ci.Status = proto.String(instanceStatus(rec))
		if involuntary && req.GetRuntimeReason() != "" {
			ci.StatusReason = proto.String(req.GetRuntimeReason())
		}
		crec.GetCluster().RegisteredContainerInstancesCount++
		if idv != nil {
			txn.IfModRevision(hostKey, idRev)
		} else {
			txn.IfAbsent(hostKey)
		}
		if err := s.claimTaskSubnet(ctx, txn, rec, req.GetTakenTaskSubnets()); err != nil {
			return err
		}
		setCapabilities(rec, req.GetMissingAttributes())
		txn.Put(hostKey, wrapperspb.String(id)).
			Create(keys.Instance(account, name, id), rec).
			Put(keys.IDCluster(account, arn.ContainerInstance, id), wrapperspb.String(name)).
			Update(keys.Cluster(account, name), crev, crec)
		_, err = txn.Commit(ctx)
		outRec, subnet = rec, rec.GetTaskSubnet()
		return err
	})
	if err != nil {
		return nil, err
	}
	// A host registering again keeps its tasks: show their counts.
	if err := task.FillCounts(ctx, s.kv, account, outRec); err != nil {
		return nil, err
	}
	return &agentv1.RegisterResponse{ContainerInstance: outRec.GetContainerInstance(), ClusterArn: arn.ClusterARN(account.Region, account.Account, name), TaskSubnet: subnet}, nil
}

// noTaskSubnet is what an instance lacks for ecs.capability.task-eni when the scheduler
// had no task subnet to give it.
const noTaskSubnet = "no awsvpc task subnet left in the scheduler's task subnet pool for this instance (berth scheduler --task-subnet-pool)"

// setCapabilities records what the agent reported missing (RegisterRequest
// missing_attributes) on rec, and withdraws ecs.capability.task-eni when the instance has
// no task subnet (the pool is exhausted): its agent could set awsvpc up but has no
// addresses to give, so placement must not send it awsvpc tasks.
func setCapabilities(rec *storev1.ContainerInstanceRecord, missing map[string]string) {
	rec.MissingAttributes = nil
	if len(missing) > 0 {
		rec.MissingAttributes = make(map[string]string, len(missing))
		for k, v := range missing {
			rec.MissingAttributes[k] = v
		}
	}
	if rec.GetTaskSubnet() != "" {
		return
	}
	ci := rec.GetContainerInstance()
	n := len(ci.GetAttributes())
	ci.Attributes = slices.DeleteFunc(ci.Attributes, func(a *ecsv1.Attribute) bool { return a.GetName() == placement.AttrTaskENI })
	if len(ci.GetAttributes()) < n {
		if rec.MissingAttributes == nil {
			rec.MissingAttributes = map[string]string{}
		}
		rec.MissingAttributes[placement.AttrTaskENI] = noTaskSubnet
	}
}

// instanceID returns the id part of a container instance ARN.
func instanceID(ciARN string) string { return ciARN[strings.LastIndexByte(ciARN, '/')+1:] }

// ensureDefaultCluster creates the account's "default" cluster if it has none ACTIVE.
func (s *Server) ensureDefaultCluster(ctx context.Context, account keys.Scope) error {
	rec, _, err := s.cluster(ctx, account, DefaultCluster)
	if err != nil || (rec != nil && rec.GetCluster().GetStatus() == statusActive) {
		return err
	}
	ctx = caller.With(ctx, caller.Identity{Account: account.Account, Region: account.Region})
	_, err = s.CreateCluster(ctx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String(DefaultCluster)}))
	if e, ok := awserr.FromConnect(err); ok {
		return e
	}
	return err
}

// SetAgentConnected records whether the instance's agent holds a session. An instance
// in involuntary drain stays disconnected. It increments the version when the flag
// changes. Errors: AccessDeniedException for an instance not of the account.
func (s *Server) SetAgentConnected(ctx context.Context, account keys.Scope, containerInstanceARN string, connected bool) error {
	cluster, id, ok, err := s.locate(ctx, account, arn.ContainerInstance, containerInstanceARN)
	if err != nil {
		return err
	}
	if !ok {
		return awserr.New("AccessDeniedException", "The container instance %s does not belong to this account.", containerInstanceARN)
	}
	_, _, err = store.Mutate(ctx, s.kv, keys.Instance(account, cluster, id), func(r *storev1.ContainerInstanceRecord) error {
		ci := r.GetContainerInstance()
		want := connected && !r.GetInvoluntaryDrain()
		if ci.GetAgentConnected() == want {
			return store.ErrNoChange
		}
		ci.AgentConnected = want
		ci.Version++
		return nil
	}, store.MaxAttempts(64))
	if isNotFound(err) {
		return awserr.New("AccessDeniedException", "The container instance %s does not belong to this account.", containerInstanceARN)
	}
	return err
}

// attrAvailabilityZone is the attribute the ECS agent sets from the instance identity
// document's availabilityZone.
const attrAvailabilityZone = "ecs.availability-zone"

// ec2InstanceIDPattern is what an instance identity document's instanceId must look like
// to name a host (it becomes part of etcd keys): AWS's i- ids and similar plain tokens.
var ec2InstanceIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// identityDocument is the part of an EC2 instance identity document Berth reads (the
// JSON of http://169.254.169.254/latest/dynamic/instance-identity/document). Its signature
// is not verified: Berth has no EC2 to ask.
type identityDocument struct {
	InstanceID       string `json:"instanceId"`
	AvailabilityZone string `json:"availabilityZone"` // e.g. "eu-west-1b": names the region too
}

// parseIdentityDocument reads an instance identity document. ok is false when doc is not
// a JSON object with an instanceId (an opaque identity); an instanceId that cannot be an
// instance id is InvalidParameterException.
func parseIdentityDocument(doc string) (identityDocument, bool, error) {
	var iid identityDocument
	if json.Unmarshal([]byte(doc), &iid) != nil || iid.InstanceID == "" {
		return identityDocument{}, false, nil
	}
	if !ec2InstanceIDPattern.MatchString(iid.InstanceID) {
		return identityDocument{}, false, awserr.InvalidParameterf("instanceIdentityDocument: invalid instanceId %q.", iid.InstanceID)
	}
	return iid, true, nil
}

// RegisterContainerInstance registers an instance through the ECS API (as the ECS agent
// does): a given containerInstanceArn re-registers that instance, otherwise the instance
// identity document (or a fresh id) identifies the host: an EC2 document's instanceId is
// the instance's ec2InstanceId and its availabilityZone the ecs.availability-zone
// attribute, as the ECS agent registers an EC2 host; any other document is an opaque
// identity. totalResources, attributes,
// versionInfo and tags are taken. Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: RegisterContainerInstance.
func (s *Server) RegisterContainerInstance(ctx context.Context, req *connect.Request[ecsv1.RegisterContainerInstanceRequest]) (*connect.Response[ecsv1.RegisterContainerInstanceResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.RegisterContainerInstanceRequest) (*ecsv1.RegisterContainerInstanceResponse, error) {
		if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		name, err := ClusterName(account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		host := ""
		attrs := m.GetAttributes()
		switch {
		case m.GetContainerInstanceArn() != "":
			c, id, ok, err := s.locate(ctx, account, arn.ContainerInstance, m.GetContainerInstanceArn())
			if err != nil {
				return nil, err
			}
			if !ok || c != name {
				return nil, awserr.InvalidParameterf("The referenced container instance %s is not registered in cluster %s.", m.GetContainerInstanceArn(), name)
			}
			rec, _, err := get[*storev1.ContainerInstanceRecord](ctx, s.kv, keys.Instance(account, name, id))
			if err != nil {
				return nil, err
			}
			if rec == nil {
				return nil, awserr.InvalidParameterf("The referenced container instance %s is not registered in cluster %s.", m.GetContainerInstanceArn(), name)
			}
			host = rec.GetHostId()
		case m.GetInstanceIdentityDocument() != "":
			iid, ok, err := parseIdentityDocument(m.GetInstanceIdentityDocument())
			if err != nil {
				return nil, err
			}
			if !ok {
				// Not an EC2 document (no JSON with an instanceId): an opaque host identity.
				sum := sha256.Sum256([]byte(m.GetInstanceIdentityDocument()))
				host = "iid-" + hex.EncodeToString(sum[:16])
				break
			}
			host = iid.InstanceID
			if iid.AvailabilityZone != "" && !slices.ContainsFunc(attrs, func(a *ecsv1.Attribute) bool { return a.GetName() == attrAvailabilityZone }) {
				attrs = append(slices.Clone(attrs), &ecsv1.Attribute{Name: proto.String(attrAvailabilityZone), Value: proto.String(iid.AvailabilityZone)})
			}
		default:
			host = "ecs-" + s.newID()
		}
		resp, err := s.RegisterInstance(ctx, account, &agentv1.RegisterRequest{
			Cluster: name, HostId: host, Resources: m.GetTotalResources(), Attributes: attrs,
			VersionInfo: m.GetVersionInfo(), RuntimeReady: true,
		})
		if err != nil {
			return nil, err
		}
		ci := resp.GetContainerInstance()
		if len(m.GetTags()) > 0 {
			rec, _, err := store.Mutate(ctx, s.kv, keys.Instance(account, name, instanceID(ci.GetContainerInstanceArn())), func(r *storev1.ContainerInstanceRecord) error {
				r.Tags = mergeTags(r.GetTags(), m.GetTags())
				return nil
			})
			if err != nil {
				return nil, err
			}
			if err := task.FillCounts(ctx, s.kv, account, rec); err != nil {
				return nil, err
			}
			ci = rec.GetContainerInstance()
			ci.Tags = rec.GetTags()
		}
		return &ecsv1.RegisterContainerInstanceResponse{ContainerInstance: ci}, nil
	})
}

// describeInstance returns the instance as DescribeContainerInstances shows it, with
// capacityProviderName from its berth.capacity-provider attribute (capacity.PoolAttribute).
func describeInstance(r *storev1.ContainerInstanceRecord, include []string) *ecsv1.ContainerInstance {
	ci := proto.Clone(r.GetContainerInstance()).(*ecsv1.ContainerInstance)
	ci.Tags = nil
	for _, a := range ci.GetAttributes() {
		if a.GetName() == capacity.PoolAttribute && a.GetValue() != "" {
			ci.CapacityProviderName = proto.String(a.GetValue())
		}
	}
	if oneOf("TAGS", include...) {
		ci.Tags = r.GetTags()
		if ci.Tags == nil {
			ci.Tags = []*ecsv1.Tag{}
		}
	}
	if !oneOf("CONTAINER_INSTANCE_HEALTH", include...) {
		ci.HealthStatus = nil
	} else if ci.HealthStatus == nil {
		ci.HealthStatus = &ecsv1.ContainerInstanceHealthStatus{OverallStatus: proto.String("OK")}
		if !ci.GetAgentConnected() {
			ci.HealthStatus.OverallStatus = proto.String("IMPAIRED")
		}
	}
	return ci
}

// instanceKeys resolves references to instance keys of a cluster; unresolvable ones get
// keys that do not exist, so they come back MISSING.
func (s *Server) instanceKeys(ctx context.Context, account keys.Scope, cluster string, refs []string) ([]string, error) {
	ks := make([]string, len(refs))
	for i, ref := range refs {
		id, ok, err := s.idRef(ctx, account, cluster, arn.ContainerInstance, ref)
		if err != nil {
			return nil, err
		}
		if !ok {
			id = "%missing" // no id has '%': the key is never present
		}
		ks[i] = keys.Instance(account, cluster, id)
	}
	return ks, nil
}

func (s *Server) instanceFailureARN(ctx context.Context, account keys.Scope, cluster, ref string) string {
	if arn.IsARN(ref) {
		return ref
	}
	long, _ := s.longARN(ctx, account, SettingContainerInstanceLongARN)
	return arn.ContainerInstanceARN(account.Region, account.Account, cluster, ref, long)
}

// DescribeContainerInstances describes up to 100 instances of a cluster by id or ARN;
// include adds TAGS and CONTAINER_INSTANCE_HEALTH. Unknown ones come back in failures
// with reason MISSING. Errors: ClusterNotFoundException.
// AWS reference: DescribeContainerInstances.
func (s *Server) DescribeContainerInstances(ctx context.Context, req *connect.Request[ecsv1.DescribeContainerInstancesRequest]) (*connect.Response[ecsv1.DescribeContainerInstancesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeContainerInstancesRequest) (*ecsv1.DescribeContainerInstancesResponse, error) {
		if len(m.GetContainerInstances()) == 0 || len(m.GetContainerInstances()) > 100 {
			return nil, awserr.InvalidParameterf("containerInstances must list between 1 and 100 container instances.")
		}
		name, err := s.existingCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		ks, err := s.instanceKeys(ctx, account, name, m.GetContainerInstances())
		if err != nil {
			return nil, err
		}
		recs, _, err := getMany[*storev1.ContainerInstanceRecord](ctx, s.kv, ks)
		if err != nil {
			return nil, err
		}
		if err := task.FillCounts(ctx, s.kv, account, recs...); err != nil {
			return nil, err
		}
		resp := &ecsv1.DescribeContainerInstancesResponse{ContainerInstances: []*ecsv1.ContainerInstance{}, Failures: []*ecsv1.Failure{}}
		for i, r := range recs {
			if r == nil {
				resp.Failures = append(resp.Failures, missing(s.instanceFailureARN(ctx, account, name, m.GetContainerInstances()[i])))
				continue
			}
			resp.ContainerInstances = append(resp.ContainerInstances, describeInstance(r, m.GetInclude()))
		}
		return resp, nil
	})
}

// ListContainerInstances lists the ARNs of a cluster's registered instances (INACTIVE,
// deregistered ones are not listed), optionally of one status (ACTIVE, DRAINING, ...) and
// matching a cluster query language filter; maxResults 1–100 and nextToken page in
// O(maxResults); filtered pages may hold fewer and still carry a nextToken.
// Errors: ClusterNotFoundException, InvalidParameterException for a bad filter.
// AWS reference: ListContainerInstances.
func (s *Server) ListContainerInstances(ctx context.Context, req *connect.Request[ecsv1.ListContainerInstancesRequest]) (*connect.Response[ecsv1.ListContainerInstancesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListContainerInstancesRequest) (*ecsv1.ListContainerInstancesResponse, error) {
		limit, err := maxResults(m.MaxResults)
		if err != nil {
			return nil, err
		}
		if m.Status != nil && !oneOf(m.GetStatus(), "ACTIVE", "DRAINING", "REGISTERING", "DEREGISTERING", "REGISTRATION_FAILED") {
			return nil, awserr.InvalidParameterf("Invalid status %q.", m.GetStatus())
		}
		expr, err := parseExpr(m.GetFilter())
		if err != nil {
			return nil, err
		}
		name, err := s.existingCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		recs, next, err := s.instancePage(ctx, account, name, limit, m.GetNextToken())
		if err != nil {
			return nil, err
		}
		if expr != nil {
			// The filter may ask for runningTasksCount, which the records do not store.
			if err := task.FillCounts(ctx, s.kv, account, recs...); err != nil {
				return nil, err
			}
		}
		resp := &ecsv1.ListContainerInstancesResponse{ContainerInstanceArns: []string{}}
		for _, r := range recs {
			ci := r.GetContainerInstance()
			st := ci.GetStatus()
			if st == statusInactive || (m.Status != nil && st != m.GetStatus()) || !matches(expr, ci) {
				continue
			}
			resp.ContainerInstanceArns = append(resp.ContainerInstanceArns, ci.GetContainerInstanceArn())
		}
		if next != "" {
			resp.NextToken = proto.String(next)
		}
		return resp, nil
	})
}

// DeregisterContainerInstance deregisters an instance: it becomes INACTIVE (still
// describable), leaves the cluster's count and its host mapping (the host registers
// anew next time). With tasks still running on it, it is refused unless force is set.
// Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: DeregisterContainerInstance.
func (s *Server) DeregisterContainerInstance(ctx context.Context, req *connect.Request[ecsv1.DeregisterContainerInstanceRequest]) (*connect.Response[ecsv1.DeregisterContainerInstanceResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeregisterContainerInstanceRequest) (*ecsv1.DeregisterContainerInstanceResponse, error) {
		if m.GetContainerInstance() == "" {
			return nil, awserr.InvalidParameterf("containerInstance is required.")
		}
		var out *storev1.ContainerInstanceRecord
		err := awsapi.Retry(ctx, func() error {
			name, crec, crev, err := s.activeCluster(ctx, account, m.GetCluster())
			if err != nil {
				return err
			}
			id, ok, err := s.idRef(ctx, account, name, arn.ContainerInstance, m.GetContainerInstance())
			if err != nil {
				return err
			}
			var rec *storev1.ContainerInstanceRecord
			var rev int64
			if ok {
				rec, rev, err = get[*storev1.ContainerInstanceRecord](ctx, s.kv, keys.Instance(account, name, id))
				if err != nil {
					return err
				}
			}
			if rec == nil || rec.GetContainerInstance().GetStatus() == statusInactive {
				return awserr.InvalidParameterf("The referenced container instance %s is not registered in cluster %s.", m.GetContainerInstance(), name)
			}
			ci := rec.GetContainerInstance()
			if !m.GetForce() {
				running, _, err := pageIDKeys(ctx, s.kv, keys.TaskList(account, name, "RUNNING", keys.DimInstance, id, ""), 1, "")
				if err != nil {
					return err
				}
				if len(running) > 0 {
					return awserr.InvalidParameterf("Found running tasks on the instance.")
				}
			}
			ci.Status = proto.String(statusInactive)
			ci.AgentConnected = false
			ci.Version++
			crec.GetCluster().RegisteredContainerInstancesCount = max(crec.GetCluster().GetRegisteredContainerInstancesCount()-1, 0)
			hostKey := keys.InstanceByHost(account, name, rec.GetHostId())
			txn := store.NewTxn(s.kv).
				Update(keys.Instance(account, name, id), rev, rec).
				Update(keys.Cluster(account, name), crev, crec).
				Delete(hostKey)
			if sub := rec.GetTaskSubnet(); sub != "" {
				// The instance's awsvpc task subnet goes back to the pool.
				txn.Delete(keys.TaskSubnet(sub))
				rec.TaskSubnet = ""
			}
			_, err = txn.Commit(ctx)
			out = rec
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := task.FillCounts(ctx, s.kv, account, out); err != nil {
			return nil, err
		}
		return &ecsv1.DeregisterContainerInstanceResponse{ContainerInstance: out.GetContainerInstance()}, nil
	})
}

// UpdateContainerInstancesState sets up to 10 instances ACTIVE or DRAINING as the
// operator's choice; an instance in involuntary drain stays DRAINING until its runtime
// returns. Unknown instances come back in failures (MISSING). Moving tasks off draining
// instances is the service scheduler's work. Errors: ClusterNotFoundException,
// InvalidParameterException. AWS reference: UpdateContainerInstancesState.
func (s *Server) UpdateContainerInstancesState(ctx context.Context, req *connect.Request[ecsv1.UpdateContainerInstancesStateRequest]) (*connect.Response[ecsv1.UpdateContainerInstancesStateResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateContainerInstancesStateRequest) (*ecsv1.UpdateContainerInstancesStateResponse, error) {
		if !oneOf(m.GetStatus(), statusActive, statusDraining) {
			return nil, awserr.InvalidParameterf("Container instance status must be ACTIVE or DRAINING.")
		}
		if len(m.GetContainerInstances()) == 0 || len(m.GetContainerInstances()) > 10 {
			return nil, awserr.InvalidParameterf("containerInstances must list between 1 and 10 container instances.")
		}
		name, _, _, err := s.activeCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.UpdateContainerInstancesStateResponse{ContainerInstances: []*ecsv1.ContainerInstance{}, Failures: []*ecsv1.Failure{}}
		for _, ref := range m.GetContainerInstances() {
			id, ok, err := s.idRef(ctx, account, name, arn.ContainerInstance, ref)
			if err != nil {
				return nil, err
			}
			if !ok {
				resp.Failures = append(resp.Failures, missing(s.instanceFailureARN(ctx, account, name, ref)))
				continue
			}
			rec, _, err := store.Mutate(ctx, s.kv, keys.Instance(account, name, id), func(r *storev1.ContainerInstanceRecord) error {
				ci := r.GetContainerInstance()
				if ci.GetStatus() == statusInactive {
					return store.ErrNoChange
				}
				r.OperatorDrain = m.GetStatus() == statusDraining
				st := instanceStatus(r)
				if st == ci.GetStatus() {
					return nil
				}
				ci.Status = proto.String(st)
				ci.Version++
				return nil
			}, store.MaxAttempts(64))
			if isNotFound(err) {
				resp.Failures = append(resp.Failures, missing(s.instanceFailureARN(ctx, account, name, ref)))
				continue
			}
			if err != nil {
				return nil, err
			}
			if rec.GetContainerInstance().GetStatus() == statusInactive {
				resp.Failures = append(resp.Failures, &ecsv1.Failure{Arn: rec.GetContainerInstance().ContainerInstanceArn, Reason: proto.String("INACTIVE")})
				continue
			}
			if err := task.FillCounts(ctx, s.kv, account, rec); err != nil {
				return nil, err
			}
			resp.ContainerInstances = append(resp.ContainerInstances, describeInstance(rec, nil))
		}
		return resp, nil
	})
}

// instancePage reads one page of a cluster's instance records in id order: an O(limit)
// key read (pageIDKeys) and one batched read of the records.
func (s *Server) instancePage(ctx context.Context, account keys.Scope, cluster string, limit int, token string) ([]*storev1.ContainerInstanceRecord, string, error) {
	ks, next, err := pageIDKeys(ctx, s.kv, keys.Instances(account, cluster), limit, token)
	if err != nil {
		return nil, "", err
	}
	recs, _, err := getMany[*storev1.ContainerInstanceRecord](ctx, s.kv, ks)
	if err != nil {
		return nil, "", err
	}
	out := recs[:0]
	for _, r := range recs {
		if r != nil {
			out = append(out, r)
		}
	}
	return out, next, nil
}
