package service

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/cloudmap"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// maxServiceRegistries is ECS's limit of serviceRegistries per service.
const maxServiceRegistries = 1

// Cloud Map instance attributes ECS sets on the instances it registers (besides
// cloudmap.AttrIPv4 and cloudmap.AttrPort).
const (
	attrCluster      = "ECS_CLUSTER_NAME"
	attrService      = "ECS_SERVICE_NAME"
	attrFamily       = "ECS_TASK_DEFINITION_FAMILY"
	attrZone         = "AVAILABILITY_ZONE"
	attrRegion       = "REGION"
	attrEC2          = "EC2_INSTANCE_ID"
	attrInitHealth   = cloudmap.AttrInitHealth
	defaultZoneOfDev = "a"
)

// validateServiceRegistries checks a service's serviceRegistries[] as ECS does: at most
// one; registryArn a Cloud Map service of the account; containerName/containerPort a
// port mapping of the task definition; for a service with an SRV record, awsvpc needs
// port or containerName+containerPort (not both) and bridge/host need
// containerName+containerPort; bridge/host need an SRV record (their tasks have no
// address of their own for an A record).
func validateServiceRegistries(ctx context.Context, kv clientv3.KV, account keys.Scope, regs []*ecsv1.ServiceRegistry, td *ecsv1.TaskDefinition) error {
	if len(regs) > maxServiceRegistries {
		return awserr.InvalidParameterf("serviceRegistries can have at most %d item.", maxServiceRegistries)
	}
	reg := cloudmap.NewRegistry(kv, nil)
	mode := td.GetNetworkMode()
	if mode == "" {
		mode = "bridge"
	}
	for _, r := range regs {
		if r.GetRegistryArn() == "" {
			return awserr.InvalidParameterf("registryArn is required for a service registry.")
		}
		id, ok := cloudmap.ServiceIDFromARN(account, r.GetRegistryArn())
		if !ok {
			return awserr.InvalidParameterf("The service registry ARN %s is not a Cloud Map service ARN of this account and region.", r.GetRegistryArn())
		}
		svc, _, err := reg.Service(ctx, account, id)
		if err != nil {
			var e *awserr.Error
			if errors.As(err, &e) && e.Type == "ServiceNotFound" {
				return awserr.InvalidParameterf("Unable to validate the specified service registry %s: the Cloud Map service does not exist.", r.GetRegistryArn())
			}
			return err
		}
		hasSRV := slices.ContainsFunc(svc.GetDnsRecords(), func(d *storev1.CloudMapDnsRecord) bool { return d.GetType() == "SRV" })
		named := r.GetContainerName() != "" || r.ContainerPort != nil
		if named && (r.GetContainerName() == "" || r.ContainerPort == nil) {
			return awserr.InvalidParameterf("containerName and containerPort must both be specified for service registry %s.", r.GetRegistryArn())
		}
		if named {
			if err := checkContainerPort(td, r.GetContainerName(), r.GetContainerPort()); err != nil {
				return err
			}
		}
		if r.Port != nil && (r.GetPort() < 1 || r.GetPort() > 65535) {
			return awserr.InvalidParameterf("port %d of service registry %s is not valid: 1 to 65535.", r.GetPort(), r.GetRegistryArn())
		}
		switch mode {
		case "awsvpc":
			if r.Port != nil && named {
				return awserr.InvalidParameterf("Only one of port or containerName and containerPort can be specified for service registry %s.", r.GetRegistryArn())
			}
			if hasSRV && r.Port == nil && !named {
				return awserr.InvalidParameterf("The service registry %s has an SRV record: specify port, or containerName and containerPort.", r.GetRegistryArn())
			}
		case "bridge", "host":
			if r.Port != nil {
				return awserr.InvalidParameterf("port cannot be specified for service registry %s with the %s network mode: specify containerName and containerPort.", r.GetRegistryArn(), mode)
			}
			if !hasSRV {
				return awserr.InvalidParameterf("The service registry %s has no SRV record, which the %s network mode requires.", r.GetRegistryArn(), mode)
			}
			if !named {
				return awserr.InvalidParameterf("containerName and containerPort must be specified for service registry %s with the %s network mode.", r.GetRegistryArn(), mode)
			}
		default:
			return awserr.InvalidParameterf("serviceRegistries cannot be used with the %s network mode.", mode)
		}
	}
	return nil
}

// sdSync registers a service's RUNNING tasks as Cloud Map instances of its
// serviceRegistries and deregisters the others; one per Reconciler.
type sdSync struct {
	reg *cloudmap.Registry
	kv  clientv3.KV
}

func newSDSync(kv clientv3.KV) *sdSync { return &sdSync{reg: cloudmap.NewRegistry(kv, nil), kv: kv} }

// instanceAttributes returns the Cloud Map attributes of a task for registry r: its
// address (awsvpc: the task's IP; bridge/host: the host address of the binding) and,
// when the registry names a port, AWS_INSTANCE_PORT (awsvpc: port or containerPort;
// bridge/host: the binding's host port), with the ECS_* attributes ECS sets. ok is
// false while the task has no such address or binding yet.
func instanceAttributes(account keys.Scope, svc *ecsv1.Service, t *storev1.TaskRecord, in store.Item[*storev1.ContainerInstanceRecord], r *ecsv1.ServiceRegistry) (map[string]string, bool) {
	task := t.GetTask()
	attrs := map[string]string{
		attrCluster:    clusterName(svc.GetClusterArn()),
		attrService:    svc.GetServiceName(),
		attrRegion:     account.Region,
		attrZone:       account.Region + defaultZoneOfDev,
		attrInitHealth: cloudmap.Healthy,
	}
	if a, err := arn.Parse(task.GetTaskDefinitionArn()); err == nil {
		attrs[attrFamily] = a.Name
	}
	if id := in.Value.GetContainerInstance().GetEc2InstanceId(); id != "" {
		attrs[attrEC2] = id
	}
	for _, a := range task.GetAttachments() {
		if a.GetType() != "ElasticNetworkInterface" {
			continue
		}
		for _, d := range a.GetDetails() {
			if d.GetName() == "privateIPv4Address" && d.GetValue() != "" {
				attrs[cloudmap.AttrIPv4] = d.GetValue()
				switch {
				case r.Port != nil:
					attrs[cloudmap.AttrPort] = strconv.Itoa(int(r.GetPort()))
				case r.ContainerPort != nil:
					attrs[cloudmap.AttrPort] = strconv.Itoa(int(r.GetContainerPort()))
				}
				return attrs, true
			}
		}
	}
	for _, c := range task.GetContainers() {
		if c.GetName() != r.GetContainerName() {
			continue
		}
		for _, b := range c.GetNetworkBindings() {
			if b.GetContainerPort() != r.GetContainerPort() || b.GetHostPort() == 0 {
				continue
			}
			attrs[cloudmap.AttrIPv4] = hostAddress(b, in.Value)
			attrs[cloudmap.AttrPort] = strconv.Itoa(int(b.GetHostPort()))
			return attrs, true
		}
	}
	return nil, false
}

func clusterName(clusterArn string) string {
	if a, err := arn.Parse(clusterArn); err == nil {
		return a.Name
	}
	return clusterArn
}

// sync registers the service's RUNNING tasks (desired RUNNING) with every Cloud Map
// service of its serviceRegistries (the instance id is the task id) and deregisters
// the instances of its other tasks, and of tasks that are gone. Errors are logged: the
// next pass tries again.
func (s *sdSync) sync(ctx context.Context, r *Reconciler, st State) {
	svc := st.Service.Value.GetService()
	for _, e := range serviceRegistries(svc) {
		reg := e.v
		id, ok := cloudmap.ServiceIDFromARN(st.Account, reg.GetRegistryArn())
		if !ok {
			continue
		}
		insts, err := s.reg.Instances(ctx, st.Account, id)
		if err != nil {
			r.log.Warn("service: cloud map instances", "service", svc.GetServiceName(), "registry", reg.GetRegistryArn(), "err", err)
			continue
		}
		have := map[string]*storev1.CloudMapInstanceRecord{}
		for _, i := range insts {
			if i.GetAttributes()[attrService] == svc.GetServiceName() && i.GetAttributes()[attrCluster] == clusterName(svc.GetClusterArn()) {
				have[i.GetId()] = i
			}
		}
		seen := map[string]bool{}
		for _, it := range st.Tasks {
			task := it.Value.GetTask()
			tid := taskID(task.GetTaskArn())
			seen[tid] = true
			if !e.covers(it.Value) {
				continue // another task set's task: that task set's entry handles it
			}
			live := task.GetDesiredStatus() == "RUNNING" && task.GetLastStatus() == "RUNNING"
			if !live {
				if have[tid] != nil {
					s.deregister(ctx, r, st.Account, id, tid)
				}
				continue
			}
			attrs, ok := instanceAttributes(st.Account, svc, it.Value, st.Instances[it.Value.GetContainerInstanceId()], reg)
			if !ok {
				continue
			}
			if cur := have[tid]; cur != nil && maps.Equal(cur.GetAttributes(), attrs) {
				continue
			}
			if _, err := s.reg.RegisterInstance(ctx, st.Account, id, tid, "", attrs); err != nil {
				r.log.Warn("service: cloud map register", "service", svc.GetServiceName(), "task", tid, "err", err)
			}
		}
		// Instances of tasks this pass no longer sees (their records expired).
		for tid := range have {
			if !seen[tid] {
				s.deregister(ctx, r, st.Account, id, tid)
			}
		}
	}
}

func (s *sdSync) deregister(ctx context.Context, r *Reconciler, account keys.Scope, serviceID, taskID string) {
	_, err := s.reg.DeregisterInstance(ctx, account, serviceID, taskID)
	var e *awserr.Error
	if err != nil && !(errors.As(err, &e) && (e.Type == "InstanceNotFound" || e.Type == "ServiceNotFound")) {
		r.log.Warn("service: cloud map deregister", "task", taskID, "err", err)
	}
}

// release deregisters a task from its registries (the service's, or its task set's)
// before it is stopped.
func (s *sdSync) release(ctx context.Context, r *Reconciler, account keys.Scope, svc *ecsv1.Service, task *storev1.TaskRecord) {
	for _, reg := range taskRegistries(svc, task) {
		if id, ok := cloudmap.ServiceIDFromARN(account, reg.GetRegistryArn()); ok {
			s.deregister(ctx, r, account, id, taskID(task.GetTask().GetTaskArn()))
		}
	}
}

func taskID(taskArn string) string {
	if a, err := arn.Parse(taskArn); err == nil {
		return a.Name
	}
	return taskArn
}

// regEntry is one serviceRegistries entry of a service or of one of its task sets.
type regEntry = scoped[*ecsv1.ServiceRegistry]

// serviceRegistries returns the registry entries of s: its own serviceRegistries, for
// every task, and each task set's, for its own tasks.
func serviceRegistries(s *ecsv1.Service) []regEntry {
	return scopedEntries(s, s.GetServiceRegistries(), (*ecsv1.TaskSet).GetServiceRegistries)
}

// taskRegistries returns the serviceRegistries entries task t of s is registered in.
func taskRegistries(s *ecsv1.Service, t *storev1.TaskRecord) []*ecsv1.ServiceRegistry {
	return coveredBy(serviceRegistries(s), t)
}
