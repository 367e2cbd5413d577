package service

import (
	"cmp"
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Messages of the task set actions' errors, as AWS words them.
const (
	msgNotExternal     = "Amazon ECS only supports task set management on services configured to use external deployment controllers."
	msgTaskSetNotFound = "The specified task set does not exist."
)

// taskSetARN returns a task set's ARN: task-set/{cluster}/{service}/{id}, the id being
// "ecs-svc/<19 digits>" as on AWS.
func taskSetARN(region, account, cluster, svc, id string) string {
	return fmt.Sprintf("arn:aws:ecs:%s:%s:task-set/%s/%s/%s", region, account, cluster, svc, id)
}

// findTaskSet returns the task set of s whose id or ARN is ref, or nil.
func findTaskSet(s *ecsv1.Service, ref string) *ecsv1.TaskSet {
	for _, set := range s.GetTaskSets() {
		if set.GetId() == ref || set.GetTaskSetArn() == ref {
			return set
		}
	}
	return nil
}

// validScale checks a task set's scale (unit PERCENT, value 0–100) and returns it with
// the defaults filled in (100 PERCENT when nil).
func validScale(sc *ecsv1.Scale) (*ecsv1.Scale, error) {
	if sc == nil {
		return &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: 100}, nil
	}
	if u := sc.GetUnit(); u != "" && u != "PERCENT" {
		return nil, awserr.InvalidParameterf("Invalid scale unit %q: the only valid value is PERCENT.", u)
	}
	if v := sc.GetValue(); v < 0 || v > 100 {
		return nil, awserr.InvalidParameterf("Scale value must be between 0 and 100 (percent); got %g.", v)
	}
	return &ecsv1.Scale{Unit: proto.String("PERCENT"), Value: sc.GetValue()}, nil
}

// mutateExternal reads the service (cluster and service by name or ARN, both required),
// checks that it is ACTIVE and uses the EXTERNAL deployment controller, applies fn to the
// record and writes it back (CAS, retried on conflict). fn may return an ECS error,
// which is returned as is. It returns the record as written.
func (h *Handler) mutateExternal(ctx context.Context, account keys.Scope, clusterRef, serviceRef string, fn func(rec *storev1.ServiceRecord) error) (*storev1.ServiceRecord, error) {
	if clusterRef == "" {
		return nil, awserr.InvalidParameterf("cluster is required.")
	}
	cluster, name, err := h.loadService(ctx, account, clusterRef, serviceRef)
	if err != nil {
		return nil, err
	}
	key := keys.Service(account, cluster, name)
	var out *storev1.ServiceRecord
	err = awsapi.Retry(ctx, func() error {
		rec, rev, err := h.readService(ctx, key, name)
		if err != nil {
			return err
		}
		if rec.GetService().GetStatus() != StatusActive {
			return awserr.New("ServiceNotActiveException", "Service was not ACTIVE.")
		}
		if !external(rec.GetService()) {
			return awserr.InvalidParameterf("%s", msgNotExternal)
		}
		if err := fn(rec); err != nil {
			return err
		}
		out = rec
		_, err = store.Update(ctx, h.kv, key, rev, rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	h.kick.Kick()
	return out, nil
}

// describeTaskSet returns a task set as the task set actions answer it: tags only when
// asked for (CreateTaskSet's answer has them), counts from tasks (liveTaskSet).
func describeTaskSet(set *ecsv1.TaskSet, withTags bool) *ecsv1.TaskSet {
	out := proto.Clone(set).(*ecsv1.TaskSet)
	if !withTags {
		out.Tags = nil
	}
	return out
}

// CreateTaskSet creates a task set in a service that uses the EXTERNAL deployment
// controller: taskDefinition (required; ACTIVE), scale (PERCENT, 0–100, default 100),
// launchType (default the service's; EC2 or EXTERNAL), externalId and tags. It starts
// ACTIVE and STABILIZING with computedDesiredCount = ceil(service desiredCount ×
// scale%); the reconciler places its tasks (startedBy the task set id) like a
// deployment's. Errors: ClusterNotFoundException, ServiceNotFoundException,
// ServiceNotActiveException, InvalidParameterException (service not EXTERNAL, bad scale,
// tags, launch type), ClientException for an unknown or inactive task definition.
// networkConfiguration (required for awsvpc, refused otherwise: control.
// CheckNetworkConfiguration), loadBalancers (the task set's RUNNING tasks register with
// the target groups, drained before they stop) and serviceRegistries (its tasks register
// in the Cloud Map service) are honoured and checked as CreateService checks them;
// capacityProviderStrategy, platformVersion and clientToken are refused naming the field.
// AWS reference: CreateTaskSet.
func (h *Handler) CreateTaskSet(ctx context.Context, req *connect.Request[ecsv1.CreateTaskSetRequest]) (*connect.Response[ecsv1.CreateTaskSetResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.CreateTaskSetRequest) (*ecsv1.CreateTaskSetResponse, error) {
		if m.GetTaskDefinition() == "" {
			return nil, awserr.InvalidParameterf("taskDefinition is required.")
		}
		switch {
		case len(m.GetCapacityProviderStrategy()) > 0:
			return nil, awserr.InvalidParameterf("capacityProviderStrategy is not supported for task sets by Berth; use launchType EC2 or EXTERNAL.")
		case m.PlatformVersion != nil:
			return nil, awserr.InvalidParameterf("platformVersion is not supported by Berth: it applies to Fargate only.")
		case m.ClientToken != nil:
			return nil, awserr.InvalidParameterf("clientToken is not supported by Berth yet; leave it out.")
		}
		scale, err := validScale(m.GetScale())
		if err != nil {
			return nil, err
		}
		if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		if lt := m.GetLaunchType(); lt != "" && lt != "EC2" && lt != "EXTERNAL" {
			return nil, awserr.New("UnsupportedFeatureException", "The launch type %s is not supported for task sets; use EC2 or EXTERNAL.", lt)
		}
		tdRec, err := taskDefinition(ctx, h.kv, account, m.GetTaskDefinition())
		if err != nil {
			return nil, err
		}
		td := tdRec.GetTaskDefinition()
		if err := control.CheckTaskDefinitionFields(td); err != nil {
			return nil, err
		}
		// As for a service's deployment: awsvpc tasks need networkConfiguration, the
		// other modes refuse it; loadBalancers name target groups the task set's tasks
		// register with, serviceRegistries the Cloud Map service they register in.
		if err := control.CheckNetworkConfiguration(td, m.GetNetworkConfiguration()); err != nil {
			return nil, err
		}
		if len(m.GetLoadBalancers()) > 0 {
			if err := validateLoadBalancers(ctx, h.kv, account, m.GetLoadBalancers(), td); err != nil {
				return nil, err
			}
		}
		if len(m.GetServiceRegistries()) > 0 {
			if err := validateServiceRegistries(ctx, h.kv, account, m.GetServiceRegistries(), td); err != nil {
				return nil, err
			}
		}
		now := h.now()
		var set *ecsv1.TaskSet
		_, err = h.mutateExternal(ctx, account, m.GetCluster(), m.GetService(), func(rec *storev1.ServiceRecord) error {
			s := rec.GetService()
			id := NewDeploymentID()
			set = &ecsv1.TaskSet{
				Id:                       proto.String(id),
				TaskSetArn:               proto.String(taskSetARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), id)),
				ServiceArn:               s.ServiceArn,
				ClusterArn:               s.ClusterArn,
				ExternalId:               m.ExternalId,
				Status:                   proto.String(TaskSetActive),
				TaskDefinition:           td.TaskDefinitionArn,
				ComputedDesiredCount:     ComputedDesiredCount(s.GetDesiredCount(), scale.GetValue()),
				CreatedAt:                proto.Float64(awsapi.Epoch(now)),
				UpdatedAt:                proto.Float64(awsapi.Epoch(now)),
				LaunchType:               proto.String(cmp.Or(m.GetLaunchType(), s.GetLaunchType(), "EC2")),
				CapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{},
				LoadBalancers:            nonNil(m.GetLoadBalancers()),
				ServiceRegistries:        nonNil(m.GetServiceRegistries()),
				NetworkConfiguration:     m.GetNetworkConfiguration(),
				Scale:                    scale,
				StabilityStatus:          proto.String(StabilityStabilize),
				StabilityStatusAt:        proto.Float64(awsapi.Epoch(now)),
				Tags:                     nonNil(m.GetTags()),
			}
			s.TaskSets = append(s.TaskSets, set)
			rec.Deployments = append(rec.Deployments, &storev1.DeploymentRecord{Id: id})
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.CreateTaskSetResponse{TaskSet: describeTaskSet(set, true)}, nil
	})
}

// DescribeTaskSets describes the task sets of a service under the EXTERNAL deployment
// controller: those named in taskSets (id or ARN; unknown ones come back in failures[]
// with reason MISSING), or all of them; include TAGS adds their tags. runningCount and
// pendingCount are counted from the task records at the time of the call. Errors:
// ClusterNotFoundException, ServiceNotFoundException, InvalidParameterException (service
// not EXTERNAL, bad include). AWS reference: DescribeTaskSets.
func (h *Handler) DescribeTaskSets(ctx context.Context, req *connect.Request[ecsv1.DescribeTaskSetsRequest]) (*connect.Response[ecsv1.DescribeTaskSetsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeTaskSetsRequest) (*ecsv1.DescribeTaskSetsResponse, error) {
		if m.GetCluster() == "" {
			return nil, awserr.InvalidParameterf("cluster is required.")
		}
		withTags := false
		for _, inc := range m.GetInclude() {
			if inc != "TAGS" {
				return nil, awserr.InvalidParameterf("Invalid include value %q.", inc)
			}
			withTags = true
		}
		cluster, name, rec, err := h.loadServiceRecord(ctx, account, m.GetCluster(), m.GetService())
		if err != nil {
			return nil, err
		}
		s := rec.GetService()
		if !external(s) {
			return nil, awserr.InvalidParameterf("%s", msgNotExternal)
		}
		_, by, err := liveCounts(ctx, h.kv, account, cluster, name)
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.DescribeTaskSetsResponse{TaskSets: []*ecsv1.TaskSet{}, Failures: []*ecsv1.Failure{}}
		add := func(set *ecsv1.TaskSet) {
			out := describeTaskSet(set, withTags)
			c := by[set.GetId()]
			out.RunningCount, out.PendingCount = c.running, c.pending
			resp.TaskSets = append(resp.TaskSets, out)
		}
		if len(m.GetTaskSets()) == 0 {
			for _, set := range s.GetTaskSets() {
				add(set)
			}
			return resp, nil
		}
		for _, ref := range m.GetTaskSets() {
			if set := findTaskSet(s, ref); set != nil {
				add(set)
				continue
			}
			resp.Failures = append(resp.Failures, missing(ref))
		}
		return resp, nil
	})
}

// UpdateTaskSet sets a task set's scale (PERCENT, 0–100; required); its
// computedDesiredCount follows at once and the reconciler starts or stops its tasks.
// Errors: ClusterNotFoundException, ServiceNotFoundException, ServiceNotActiveException,
// TaskSetNotFoundException (unknown or DRAINING), InvalidParameterException. AWS
// reference: UpdateTaskSet.
func (h *Handler) UpdateTaskSet(ctx context.Context, req *connect.Request[ecsv1.UpdateTaskSetRequest]) (*connect.Response[ecsv1.UpdateTaskSetResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateTaskSetRequest) (*ecsv1.UpdateTaskSetResponse, error) {
		if m.GetTaskSet() == "" {
			return nil, awserr.InvalidParameterf("taskSet is required.")
		}
		if m.Scale == nil {
			return nil, awserr.InvalidParameterf("scale is required.")
		}
		scale, err := validScale(m.GetScale())
		if err != nil {
			return nil, err
		}
		now := h.now()
		var out *ecsv1.TaskSet
		_, err = h.mutateExternal(ctx, account, m.GetCluster(), m.GetService(), func(rec *storev1.ServiceRecord) error {
			s := rec.GetService()
			set := findTaskSet(s, m.GetTaskSet())
			if set == nil || set.GetStatus() == TaskSetDraining {
				return awserr.New("TaskSetNotFoundException", msgTaskSetNotFound)
			}
			set.Scale = scale
			set.ComputedDesiredCount = ComputedDesiredCount(s.GetDesiredCount(), scale.GetValue())
			set.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			out = set
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.UpdateTaskSetResponse{TaskSet: describeTaskSet(out, false)}, nil
	})
}

// UpdateServicePrimaryTaskSet makes a task set the service's PRIMARY one (the previous
// PRIMARY becomes ACTIVE) and the service's taskDefinition and launchType the task set's.
// Errors: ClusterNotFoundException, ServiceNotFoundException, ServiceNotActiveException,
// TaskSetNotFoundException (unknown or DRAINING), InvalidParameterException. AWS
// reference: UpdateServicePrimaryTaskSet.
func (h *Handler) UpdateServicePrimaryTaskSet(ctx context.Context, req *connect.Request[ecsv1.UpdateServicePrimaryTaskSetRequest]) (*connect.Response[ecsv1.UpdateServicePrimaryTaskSetResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateServicePrimaryTaskSetRequest) (*ecsv1.UpdateServicePrimaryTaskSetResponse, error) {
		if m.GetPrimaryTaskSet() == "" {
			return nil, awserr.InvalidParameterf("primaryTaskSet is required.")
		}
		now := h.now()
		var out *ecsv1.TaskSet
		_, err := h.mutateExternal(ctx, account, m.GetCluster(), m.GetService(), func(rec *storev1.ServiceRecord) error {
			s := rec.GetService()
			set := findTaskSet(s, m.GetPrimaryTaskSet())
			if set == nil || set.GetStatus() == TaskSetDraining {
				return awserr.New("TaskSetNotFoundException", msgTaskSetNotFound)
			}
			for _, o := range s.GetTaskSets() {
				if o != set && o.GetStatus() == TaskSetPrimary {
					o.Status = proto.String(TaskSetActive)
					o.UpdatedAt = proto.Float64(awsapi.Epoch(now))
				}
			}
			if set.GetStatus() != TaskSetPrimary {
				set.Status = proto.String(TaskSetPrimary)
				set.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			}
			s.TaskDefinition, s.LaunchType = set.TaskDefinition, set.LaunchType
			out = set
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.UpdateServicePrimaryTaskSetResponse{TaskSet: describeTaskSet(out, false)}, nil
	})
}

// DeleteTaskSet deletes a task set: it becomes DRAINING with computedDesiredCount 0, the
// reconciler stops its tasks and it leaves the service's taskSets once none is left.
// Without force a task set still scaled above 0% is refused (InvalidParameterException),
// as the force member's documentation says. Deleting a DRAINING task set again returns
// it. Errors: ClusterNotFoundException, ServiceNotFoundException, ServiceNotActiveException,
// TaskSetNotFoundException, InvalidParameterException. AWS reference: DeleteTaskSet.
func (h *Handler) DeleteTaskSet(ctx context.Context, req *connect.Request[ecsv1.DeleteTaskSetRequest]) (*connect.Response[ecsv1.DeleteTaskSetResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteTaskSetRequest) (*ecsv1.DeleteTaskSetResponse, error) {
		if m.GetTaskSet() == "" {
			return nil, awserr.InvalidParameterf("taskSet is required.")
		}
		now := h.now()
		var out *ecsv1.TaskSet
		_, err := h.mutateExternal(ctx, account, m.GetCluster(), m.GetService(), func(rec *storev1.ServiceRecord) error {
			set := findTaskSet(rec.GetService(), m.GetTaskSet())
			if set == nil {
				return awserr.New("TaskSetNotFoundException", msgTaskSetNotFound)
			}
			out = set
			if set.GetStatus() == TaskSetDraining {
				return nil
			}
			if !m.GetForce() && set.GetScale().GetValue() > 0 {
				return awserr.InvalidParameterf("The task set cannot be deleted while it is scaled above 0 percent; scale it to 0 first, or use force.")
			}
			set.Status = proto.String(TaskSetDraining)
			set.ComputedDesiredCount = 0
			set.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.DeleteTaskSetResponse{TaskSet: describeTaskSet(out, false)}, nil
	})
}
