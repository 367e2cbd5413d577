package service

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/cloudmap"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// msgDaemonDesiredCount is AWS's InvalidParameterException message for a desiredCount
// sent with (or to) a DAEMON service, whose count is the number of eligible instances.
const msgDaemonDesiredCount = "The daemon scheduling strategy does not support a desired count for services. Remove the desired count value and try again"

// CreateService creates a service (REPLICA by default, or DAEMON) running
// taskDefinition (family, family:revision or ARN; ACTIVE) on the cluster's container
// instances, and returns it ACTIVE with one PRIMARY deployment IN_PROGRESS; the leader's
// reconciler starts the tasks. desiredCount is required for REPLICA and refused for
// DAEMON, which runs one task per ACTIVE instance. deploymentConfiguration defaults to 100/200 (REPLICA) and
// 0/100 (DAEMON). The cluster's activeServicesCount is incremented in the same
// transaction. Errors: ClusterNotFoundException; InvalidParameterException for a bad
// name, count, configuration, placement, tags, an unknown task definition, or a name
// already used by an ACTIVE ("Creation of service was not idempotent.") or DRAINING
// service; ClientException "TaskDefinition is inactive". AWS reference: CreateService.
func (h *Handler) CreateService(ctx context.Context, req *connect.Request[ecsv1.CreateServiceRequest]) (*connect.Response[ecsv1.CreateServiceResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.CreateServiceRequest) (*ecsv1.CreateServiceResponse, error) {
		ns, err := checkCreateService(m)
		if err != nil {
			return nil, err
		}
		if err := h.resolveCreateService(ctx, account, m, ns); err != nil {
			return nil, err
		}
		rec := newServiceRecord(account, m, ns, h.now())
		if err := h.writeNewService(ctx, account, ns.cluster, ns.name, rec); err != nil {
			return nil, err
		}
		h.kick.Kick()
		return &ecsv1.CreateServiceResponse{Service: describe(rec, true)}, nil
	})
}

// newService is a CreateService request as its phases resolve it: checkCreateService
// fills the request's own settings, resolveCreateService what the store decides.
type newService struct {
	name, strategy, controller string
	// desired is the desired count (0 for DAEMON, which the reconciler sets).
	desired int32
	// launch is the launch type: the request's, then (resolveCreateService) the
	// capacity provider strategy's, or EC2.
	launch string
	dc     *ecsv1.DeploymentConfiguration

	cluster     string
	clusterRec  *storev1.ClusterRecord
	td          *ecsv1.TaskDefinition // empty for the EXTERNAL controller
	capStrategy []*ecsv1.CapacityProviderStrategyItem
	platform    string // the resolved Fargate platform version; "" for other launch types
}

// checkCreateService checks what a CreateService request says on its own, before
// anything is read from the store, and returns the settings it resolves.
func checkCreateService(m *ecsv1.CreateServiceRequest) (*newService, error) {
	ns := &newService{name: m.GetServiceName()}
	if ns.name == "" {
		return nil, awserr.InvalidParameterf("serviceName is required.")
	}
	if !ecsrules.ValidName(ns.name) {
		return nil, awserr.InvalidParameterf("Service names can have up to 255 letters (uppercase and lowercase), numbers, underscores, and hyphens.")
	}
	var err error
	if ns.strategy, ns.desired, err = createScheduling(m); err != nil {
		return nil, err
	}
	if ns.controller, err = createController(m, ns.strategy); err != nil {
		return nil, err
	}
	if ns.launch, err = createLaunchType(m); err != nil {
		return nil, err
	}
	if err := control.CheckFields(control.InvalidParamErr, m); err != nil {
		return nil, err
	}
	if err := validateGracePeriod(m.HealthCheckGracePeriodSeconds); err != nil {
		return nil, err
	}
	ns.dc = deploymentConfig(ns.strategy, m.GetDeploymentConfiguration())
	if err := validateDeploymentConfig(ns.strategy, ns.dc); err != nil {
		return nil, err
	}
	if err := validatePlacement(ns.strategy, m.GetPlacementConstraints(), m.GetPlacementStrategy()); err != nil {
		return nil, err
	}
	if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
		return nil, err
	}
	if err := checkPropagateTags(m.GetPropagateTags()); err != nil {
		return nil, err
	}
	return ns, nil
}

// createScheduling returns the service's scheduling strategy (REPLICA by default) and
// desired count: required for REPLICA, refused for DAEMON, whose count the reconciler
// sets to the number of eligible instances (0 until then).
func createScheduling(m *ecsv1.CreateServiceRequest) (string, int32, error) {
	strategy := m.GetSchedulingStrategy()
	if strategy == "" {
		strategy = StrategyReplica
	}
	if strategy != StrategyReplica && strategy != StrategyDaemon {
		return "", 0, awserr.InvalidParameterf("Invalid schedulingStrategy %q: valid values are REPLICA and DAEMON.", strategy)
	}
	desired := m.GetDesiredCount()
	switch {
	case strategy == StrategyReplica && m.DesiredCount == nil:
		return "", 0, awserr.InvalidParameterf("Desired count must be specified for the REPLICA scheduling strategy.")
	case strategy == StrategyDaemon && m.DesiredCount != nil:
		return "", 0, awserr.InvalidParameterf("%s", msgDaemonDesiredCount)
	case desired < 0:
		return "", 0, awserr.InvalidParameterf("Desired count must be greater than or equal to 0.")
	case strategy == StrategyDaemon:
		desired = 0
	}
	return strategy, desired, nil
}

// createController returns the service's deployment controller: ECS (the default) or
// EXTERNAL, whose task definition comes with each task set rather than the service.
func createController(m *ecsv1.CreateServiceRequest, strategy string) (string, error) {
	controller := cmp.Or(m.GetDeploymentController().GetType(), "ECS")
	switch controller {
	case "ECS":
	case ControllerExternal:
		if strategy == StrategyDaemon {
			return "", awserr.InvalidParameterf("The DAEMON scheduling strategy is not supported with the EXTERNAL deployment controller.")
		}
		if m.TaskDefinition != nil {
			return "", awserr.InvalidParameterf("taskDefinition cannot be specified for a service that uses the EXTERNAL deployment controller; give it to CreateTaskSet.")
		}
	default:
		return "", awserr.New("UnsupportedFeatureException", "The deployment controller type %s is not supported: Berth runs ECS (rolling update) and EXTERNAL (task sets) deployments.", controller)
	}
	return controller, nil
}

// createLaunchType returns the request's launch type ("" when absent) once checked: a
// known one, and not with a capacity provider strategy.
func createLaunchType(m *ecsv1.CreateServiceRequest) (string, error) {
	launch := m.GetLaunchType()
	if launch == "MANAGED_INSTANCES" {
		return "", awserr.New("UnsupportedFeatureException", "The launch type %s is not supported.", launch)
	}
	if m.LaunchType != nil && launch != "EC2" && launch != "EXTERNAL" && launch != "FARGATE" {
		return "", awserr.InvalidParameterf("Invalid launchType %q.", launch)
	}
	if len(m.GetCapacityProviderStrategy()) > 0 && m.LaunchType != nil {
		return "", awserr.InvalidParameterf("Specifying both a launch type and capacity provider strategy is not supported.")
	}
	return launch, nil
}

// checkPropagateTags checks a service's propagateTags ("" when not sent).
func checkPropagateTags(p string) error {
	if p != "" && p != "TASK_DEFINITION" && p != "SERVICE" && p != "NONE" {
		return awserr.InvalidParameterf("Invalid propagateTags %q: valid values are TASK_DEFINITION, SERVICE and NONE.", p)
	}
	return nil
}

// resolveCreateService resolves what a new service depends on in the store and checks
// the request against it: the ACTIVE cluster, the task definition (unless EXTERNAL),
// the capacity provider strategy and the launch type it gives, the launch's platform and
// network configuration, and the load balancers' and registries' targets.
func (h *Handler) resolveCreateService(ctx context.Context, account keys.Scope, m *ecsv1.CreateServiceRequest, ns *newService) error {
	var err error
	ns.cluster, ns.clusterRec, _, err = control.ActiveCluster(ctx, h.kv, account, m.GetCluster())
	if err != nil {
		return err
	}
	ns.td = &ecsv1.TaskDefinition{}
	if ns.controller != ControllerExternal {
		tdRec, err := taskDefinition(ctx, h.kv, account, m.GetTaskDefinition())
		if err != nil {
			return err
		}
		ns.td = tdRec.GetTaskDefinition()
		if err := control.CheckTaskDefinitionFields(ns.td); err != nil {
			return err
		}
	}
	ns.capStrategy, err = capacity.RunStrategy(ctx, h.kv, account, ns.clusterRec.GetCluster(), m.GetCapacityProviderStrategy(), m.LaunchType)
	if err != nil {
		return err
	}
	switch {
	case ns.capStrategy != nil && ns.strategy == StrategyDaemon:
		return awserr.InvalidParameterf("Capacity provider strategies are not supported for services using the DAEMON scheduling strategy.")
	case ns.capStrategy != nil:
		ns.launch = capacity.StrategyLaunchType(ns.capStrategy)
	case ns.launch == "":
		ns.launch = "EC2"
	}
	ns.platform, err = control.CheckServiceLaunch(ns.td, ns.launch, m.PlatformVersion, m.GetNetworkConfiguration())
	if err != nil {
		return err
	}
	if ns.launch == "FARGATE" && (len(m.GetPlacementConstraints()) > 0 || len(m.GetPlacementStrategy()) > 0) {
		return awserr.InvalidParameterf("Task placement constraints and strategies are not supported for the Fargate launch type.")
	}
	if len(m.GetLoadBalancers()) > 0 {
		if err := validateLoadBalancers(ctx, h.kv, account, m.GetLoadBalancers(), ns.td); err != nil {
			return err
		}
	}
	if err := validateAdvanced(ctx, h.kv, account, m.GetLoadBalancers(), ns.dc); err != nil {
		return err
	}
	if len(m.GetServiceRegistries()) > 0 {
		if err := validateServiceRegistries(ctx, h.kv, account, m.GetServiceRegistries(), ns.td); err != nil {
			return err
		}
	}
	return nil
}

// newServiceRecord builds the record of a new ACTIVE service with its first PRIMARY
// deployment (none for the EXTERNAL controller, whose tasks belong to the task sets the
// caller creates).
func newServiceRecord(account keys.Scope, m *ecsv1.CreateServiceRequest, ns *newService, now time.Time) *storev1.ServiceRecord {
	depID := NewDeploymentID()
	propagate := m.GetPropagateTags()
	if propagate == "" {
		propagate = "NONE"
	}
	svc := &ecsv1.Service{
		ServiceArn:                    proto.String(arn.ServiceARN(account.Region, account.Account, ns.cluster, ns.name, true)),
		ServiceName:                   proto.String(ns.name),
		ClusterArn:                    proto.String(arn.ClusterARN(account.Region, account.Account, ns.cluster)),
		LoadBalancers:                 nonNil(m.GetLoadBalancers()),
		ServiceRegistries:             nonNil(m.GetServiceRegistries()),
		Status:                        proto.String(StatusActive),
		DesiredCount:                  ns.desired,
		LaunchType:                    proto.String(ns.launch),
		TaskDefinition:                ns.td.TaskDefinitionArn,
		DeploymentConfiguration:       ns.dc,
		RoleArn:                       m.Role,
		Events:                        []*ecsv1.ServiceEvent{},
		CreatedAt:                     proto.Float64(awsapi.Epoch(now)),
		PlacementConstraints:          nonNil(m.GetPlacementConstraints()),
		PlacementStrategy:             nonNil(m.GetPlacementStrategy()),
		NetworkConfiguration:          m.GetNetworkConfiguration(),
		HealthCheckGracePeriodSeconds: m.HealthCheckGracePeriodSeconds,
		SchedulingStrategy:            proto.String(ns.strategy),
		DeploymentController:          &ecsv1.DeploymentController{Type: proto.String(ns.controller)},
		Tags:                          nonNil(m.GetTags()),
		CreatedBy:                     proto.String("arn:aws:iam::" + account.Account + ":root"),
		EnableEcsManagedTags:          m.GetEnableEcsManagedTags(),
		PropagateTags:                 proto.String(propagate),
		EnableExecuteCommand:          m.GetEnableExecuteCommand(),
		CurrentServiceDeployment:      proto.String(serviceDeploymentARN(account.Region, account.Account, ns.cluster, ns.name, depID)),
	}
	if ns.capStrategy != nil {
		svc.CapacityProviderStrategy, svc.LaunchType = ns.capStrategy, nil
	}
	if ns.launch == "FARGATE" {
		svc.PlatformVersion, svc.PlatformFamily = proto.String("LATEST"), proto.String(task.FargatePlatformFamily)
		if m.PlatformVersion != nil {
			svc.PlatformVersion = m.PlatformVersion
		}
	}
	d := newDeployment(depID, ns.td.GetTaskDefinitionArn(), ns.desired, ns.launch, m.GetNetworkConfiguration(), now)
	deploymentLaunch(d, svc, ns.platform)
	svc.Deployments = []*ecsv1.Deployment{d}
	rec := &storev1.ServiceRecord{
		Service:     svc,
		ClusterName: ns.cluster,
		Deployments: []*storev1.DeploymentRecord{{Id: depID}},
	}
	if ns.controller == ControllerExternal {
		svc.Deployments, svc.TaskSets, rec.Deployments = []*ecsv1.Deployment{}, []*ecsv1.TaskSet{}, nil
		svc.CurrentServiceDeployment = nil
	}
	return rec
}

// writeNewService stores rec as service name of cluster and counts it in the cluster's
// activeServicesCount, in one transaction retried on conflict. An INACTIVE service of
// that name is replaced; an ACTIVE or DRAINING one is InvalidParameterException, and a
// cluster gone or no longer ACTIVE ClusterNotFoundException.
func (h *Handler) writeNewService(ctx context.Context, account keys.Scope, cluster, name string, rec *storev1.ServiceRecord) error {
	key := keys.Service(account, cluster, name)
	return awsapi.Retry(ctx, func() error {
		old, oldRev, err := get[*storev1.ServiceRecord](ctx, h.kv, key)
		if err != nil {
			return fmt.Errorf("service: read %s: %w", name, err)
		}
		switch old.GetService().GetStatus() {
		case StatusActive:
			return awserr.InvalidParameterf("Creation of service was not idempotent.")
		case StatusDraining:
			return awserr.InvalidParameterf("Unable to Start a service that is still Draining.")
		}
		crec, crev, err := get[*storev1.ClusterRecord](ctx, h.kv, keys.Cluster(account, cluster))
		if err != nil {
			return fmt.Errorf("service: read cluster %s: %w", cluster, err)
		}
		if crec == nil || crec.GetCluster().GetStatus() != StatusActive {
			return awserr.ClusterNotFoundError()
		}
		crec.Cluster.ActiveServicesCount++
		txn := store.NewTxn(h.kv).Update(keys.Cluster(account, cluster), crev, crec)
		if old == nil {
			txn.Create(key, rec)
		} else {
			txn.Update(key, oldRev, rec)
		}
		_, err = txn.Commit(ctx)
		return err
	})
}

// deploymentLaunch gives a new deployment of s how its tasks launch: the service's
// capacity provider strategy (then no launchType, as AWS shows it) and, for Fargate, the
// resolved platform version and family.
func deploymentLaunch(d *ecsv1.Deployment, s *ecsv1.Service, platform string) {
	if st := s.GetCapacityProviderStrategy(); len(st) > 0 {
		d.CapacityProviderStrategy, d.LaunchType = st, nil
	}
	if platform != "" {
		d.PlatformVersion, d.PlatformFamily = proto.String(platform), proto.String(task.FargatePlatformFamily)
	}
}

// newDeployment returns a PRIMARY deployment IN_PROGRESS.
func newDeployment(id, tdARN string, desired int32, launch string, nc *ecsv1.NetworkConfiguration, now time.Time) *ecsv1.Deployment {
	return &ecsv1.Deployment{
		Id:                   proto.String(id),
		Status:               proto.String(DeploymentPrimary),
		TaskDefinition:       proto.String(tdARN),
		DesiredCount:         desired,
		CreatedAt:            proto.Float64(awsapi.Epoch(now)),
		UpdatedAt:            proto.Float64(awsapi.Epoch(now)),
		LaunchType:           proto.String(launch),
		NetworkConfiguration: nc,
		RolloutState:         proto.String(RolloutInProgress),
		RolloutStateReason:   proto.String("ECS deployment " + id + " in progress."),
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// describe returns the service as DescribeServices shows it: deployments[] without the
// INACTIVE history Berth keeps, taskSets[] (EXTERNAL controller) without their tags,
// tags only when asked for.
func describe(rec *storev1.ServiceRecord, withTags bool) *ecsv1.Service {
	s := proto.Clone(rec.GetService()).(*ecsv1.Service)
	s.Deployments = slices.DeleteFunc(s.Deployments, func(d *ecsv1.Deployment) bool {
		return d.GetStatus() == DeploymentInactive
	})
	if s.Deployments == nil {
		s.Deployments = []*ecsv1.Deployment{}
	}
	if external(s) {
		s.TaskSets = nonNil(s.TaskSets)
		for _, set := range s.TaskSets {
			set.Tags = nil // DescribeTaskSets shows them, with include TAGS
		}
	}
	if !withTags {
		s.Tags = nil
	}
	return s
}

// describeLive is describe without tags and with counts from the task records; when
// those cannot be read (the write already happened) it keeps the record's counts.
func (h *Handler) describeLive(ctx context.Context, account keys.Scope, rec *storev1.ServiceRecord) *ecsv1.Service {
	out := describe(rec, false)
	all, by, err := liveCounts(ctx, h.kv, account, rec.GetClusterName(), out.GetServiceName())
	if err != nil {
		h.log.WarnContext(ctx, "service: live counts", "service", out.GetServiceName(), "err", err)
		return out
	}
	applyCounts(out, all, by)
	return out
}

// loadService reads a service of an ACTIVE cluster by reference; a missing one is
// ServiceNotFoundException.
func (h *Handler) loadService(ctx context.Context, account keys.Scope, clusterRef, ref string) (string, string, error) {
	cluster, _, _, err := control.ActiveCluster(ctx, h.kv, account, clusterRef)
	if err != nil {
		return "", "", err
	}
	if ref == "" {
		return "", "", awserr.InvalidParameterf("service is required.")
	}
	name, ok := serviceName(account, cluster, ref)
	if !ok {
		return "", "", awserr.ServiceNotFoundError()
	}
	return cluster, name, nil
}

// loadServiceRecord is loadService followed by a read of the service's record, in any
// status (INACTIVE included): it returns the cluster's and the service's names and the
// record, or ServiceNotFoundException when there is none, or loadService's errors.
func (h *Handler) loadServiceRecord(ctx context.Context, account keys.Scope, clusterRef, ref string) (string, string, *storev1.ServiceRecord, error) {
	cluster, name, err := h.loadService(ctx, account, clusterRef, ref)
	if err != nil {
		return "", "", nil, err
	}
	rec, _, err := get[*storev1.ServiceRecord](ctx, h.kv, keys.Service(account, cluster, name))
	if err != nil {
		return "", "", nil, fmt.Errorf("service: read %s: %w", name, err)
	}
	if rec == nil {
		return "", "", nil, awserr.ServiceNotFoundError()
	}
	return cluster, name, rec, nil
}

// readService reads the service record at key (name is the service's, for errors) for a
// CAS write: the record and its revision, or ServiceNotFoundException when the service
// is absent or INACTIVE, or the store's error.
func (h *Handler) readService(ctx context.Context, key, name string) (*storev1.ServiceRecord, int64, error) {
	rec, rev, err := get[*storev1.ServiceRecord](ctx, h.kv, key)
	if err != nil {
		return nil, 0, fmt.Errorf("service: read %s: %w", name, err)
	}
	if rec == nil || rec.GetService().GetStatus() == StatusInactive {
		return nil, 0, awserr.ServiceNotFoundError()
	}
	return rec, rev, nil
}

// UpdateService changes a service: desiredCount (REPLICA), deploymentConfiguration,
// placement, propagateTags, enableECSManagedTags, enableExecuteCommand,
// healthCheckGracePeriodSeconds and networkConfiguration are stored; a new task
// definition, forceNewDeployment, or changed placement or network configuration start a
// new PRIMARY deployment (the previous PRIMARY becomes ACTIVE and is rolled out of
// service by the reconciler within minimumHealthyPercent/maximumPercent). Errors:
// ClusterNotFoundException, ServiceNotFoundException, ServiceNotActiveException
// ("Service was not ACTIVE."), InvalidParameterException, ClientException. AWS
// reference: UpdateService.
func (h *Handler) UpdateService(ctx context.Context, req *connect.Request[ecsv1.UpdateServiceRequest]) (*connect.Response[ecsv1.UpdateServiceResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateServiceRequest) (*ecsv1.UpdateServiceResponse, error) {
		u, err := h.checkUpdateService(ctx, account, m)
		if err != nil {
			return nil, err
		}
		key := keys.Service(account, u.cluster, u.name)
		var out *storev1.ServiceRecord
		err = awsapi.Retry(ctx, func() error {
			rec, rev, err := get[*storev1.ServiceRecord](ctx, h.kv, key)
			if err != nil {
				return fmt.Errorf("service: read %s: %w", u.name, err)
			}
			if rec == nil {
				return awserr.ServiceNotFoundError()
			}
			if rec.GetService().GetStatus() != StatusActive {
				return awserr.New("ServiceNotActiveException", "Service was not ACTIVE.")
			}
			if err := h.applyUpdate(ctx, account, m, u, rec); err != nil {
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
		return &ecsv1.UpdateServiceResponse{Service: h.describeLive(ctx, account, out)}, nil
	})
}

// serviceUpdate is an UpdateService request as checkUpdateService resolves it, before the
// service's record is read.
type serviceUpdate struct {
	cluster, name string
	// capStrategy is the capacity provider strategy sent, resolved; nil when none was.
	capStrategy []*ecsv1.CapacityProviderStrategyItem
	// td is the task definition sent, resolved; nil when none was.
	td *ecsv1.TaskDefinition
}

// checkUpdateService checks what an UpdateService request says on its own and resolves
// the service's name, the capacity provider strategy and the task definition it sends.
func (h *Handler) checkUpdateService(ctx context.Context, account keys.Scope, m *ecsv1.UpdateServiceRequest) (*serviceUpdate, error) {
	cluster, name, err := h.loadService(ctx, account, m.GetCluster(), m.GetService())
	if err != nil {
		return nil, err
	}
	u := &serviceUpdate{cluster: cluster, name: name}
	if m.DesiredCount != nil && m.GetDesiredCount() < 0 {
		return nil, awserr.InvalidParameterf("Desired count must be greater than or equal to 0.")
	}
	if err := control.CheckFields(control.InvalidParamErr, m); err != nil {
		return nil, err
	}
	if len(m.GetCapacityProviderStrategy()) > 0 {
		_, clusterRec, _, err := control.ActiveCluster(ctx, h.kv, account, cluster)
		if err != nil {
			return nil, err
		}
		if u.capStrategy, err = capacity.RunStrategy(ctx, h.kv, account, clusterRec.GetCluster(), m.GetCapacityProviderStrategy(), nil); err != nil {
			return nil, err
		}
	}
	if err := validateGracePeriod(m.HealthCheckGracePeriodSeconds); err != nil {
		return nil, err
	}
	if err := checkPropagateTags(m.GetPropagateTags()); err != nil {
		return nil, err
	}
	if m.TaskDefinition != nil {
		rec, err := taskDefinition(ctx, h.kv, account, m.GetTaskDefinition())
		if err != nil {
			return nil, err
		}
		u.td = rec.GetTaskDefinition()
		if err := control.CheckTaskDefinitionFields(u.td); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// applyUpdate applies an UpdateService request to rec, the ACTIVE service's record as
// read for the write, and checks the service it makes. What changes how the tasks run
// (task definition, placement, network configuration, capacity provider strategy,
// platform version, load balancers, registries, forceNewDeployment) starts a new PRIMARY
// deployment; a desired count alone resizes the PRIMARY one. An error leaves rec half
// changed: the caller drops it.
func (h *Handler) applyUpdate(ctx context.Context, account keys.Scope, m *ecsv1.UpdateServiceRequest, u *serviceUpdate, rec *storev1.ServiceRecord) error {
	s := rec.GetService()
	if err := checkExternalUpdate(m, s); err != nil {
		return err
	}
	if err := applyScaling(m, s); err != nil {
		return err
	}
	redeploy, err := applyPlacementChanges(m, u, s)
	if err != nil {
		return err
	}
	launch, platformChanged := applyPlatform(m, s)
	redeploy = redeploy || platformChanged
	// curTD is the task definition the service runs after this update: the launch
	// (CheckServiceLaunch, networkConfiguration included) and the target groups are
	// checked against it, read once.
	curTD := u.td
	if curTD == nil {
		rec, err := taskDefinition(ctx, h.kv, account, s.GetTaskDefinition())
		if err != nil {
			return err
		}
		curTD = rec.GetTaskDefinition()
	}
	if err := checkUpdatedLaunch(m, s, curTD, launch); err != nil {
		return err
	}
	targetsChanged, err := h.applyTargets(ctx, account, m, s, curTD, u.td != nil)
	if err != nil {
		return err
	}
	redeploy = redeploy || targetsChanged
	if m.LoadBalancers != nil || m.DeploymentConfiguration != nil {
		if err := validateAdvanced(ctx, h.kv, account, s.GetLoadBalancers(), s.GetDeploymentConfiguration()); err != nil {
			return err
		}
	}
	applySettings(m, s)
	now := h.now()
	if external(s) {
		// Each task set's computedDesiredCount follows the new desired count.
		redeploy = false
		for _, set := range s.GetTaskSets() {
			if set.GetStatus() != TaskSetDraining {
				set.ComputedDesiredCount = ComputedDesiredCount(s.GetDesiredCount(), set.GetScale().GetValue())
			}
		}
	}
	if redeploy {
		startDeployment(rec, account, s.GetTaskDefinition(), false, now)
	} else if p := primary(s); p != nil && s.GetSchedulingStrategy() == StrategyReplica {
		p.DesiredCount = s.GetDesiredCount()
		p.UpdatedAt = proto.Float64(awsapi.Epoch(now))
	}
	return nil
}

// checkExternalUpdate refuses, for a service of the EXTERNAL deployment controller, the
// changes its task sets hold: the task definition, network configuration and the tasks'
// rollout. The service keeps the rest.
func checkExternalUpdate(m *ecsv1.UpdateServiceRequest, s *ecsv1.Service) error {
	if !external(s) {
		return nil
	}
	switch {
	case m.TaskDefinition != nil:
		return awserr.InvalidParameterf("taskDefinition cannot be updated for a service that uses the EXTERNAL deployment controller; create a task set instead.")
	case m.GetForceNewDeployment():
		return awserr.InvalidParameterf("forceNewDeployment is not supported for a service that uses the EXTERNAL deployment controller; create a task set instead.")
	case m.NetworkConfiguration != nil:
		return awserr.InvalidParameterf("networkConfiguration cannot be updated for a service that uses the EXTERNAL deployment controller; give it to CreateTaskSet.")
	}
	return nil
}

// applyScaling applies the desired count (refused for DAEMON) and the deployment
// configuration sent.
func applyScaling(m *ecsv1.UpdateServiceRequest, s *ecsv1.Service) error {
	strategy := s.GetSchedulingStrategy()
	if m.DesiredCount != nil && strategy == StrategyDaemon {
		return awserr.InvalidParameterf("%s", msgDaemonDesiredCount)
	}
	if m.DesiredCount != nil {
		s.DesiredCount = m.GetDesiredCount()
	}
	if m.DeploymentConfiguration != nil {
		dc := deploymentConfig(strategy, m.GetDeploymentConfiguration())
		if err := validateDeploymentConfig(strategy, dc); err != nil {
			return err
		}
		s.DeploymentConfiguration = dc
	}
	return nil
}

// applyPlacementChanges applies what decides where and how the tasks run: the task
// definition, placement constraints and strategy, network configuration and capacity
// provider strategy. It reports whether they need a new deployment (so does
// forceNewDeployment): whether any of them differs from the service's.
func applyPlacementChanges(m *ecsv1.UpdateServiceRequest, u *serviceUpdate, s *ecsv1.Service) (bool, error) {
	strategy := s.GetSchedulingStrategy()
	redeploy := m.GetForceNewDeployment()
	if u.td != nil && u.td.GetTaskDefinitionArn() != s.GetTaskDefinition() {
		redeploy = true
		s.TaskDefinition = u.td.TaskDefinitionArn
	}
	if m.PlacementConstraints != nil || m.PlacementStrategy != nil {
		cons, strat := s.GetPlacementConstraints(), s.GetPlacementStrategy()
		if m.PlacementConstraints != nil {
			cons = m.GetPlacementConstraints()
		}
		if m.PlacementStrategy != nil {
			strat = m.GetPlacementStrategy()
		}
		if err := validatePlacement(strategy, cons, strat); err != nil {
			return false, err
		}
		if !protoSliceEqual(cons, s.GetPlacementConstraints()) || !protoSliceEqual(strat, s.GetPlacementStrategy()) {
			redeploy = true
		}
		s.PlacementConstraints, s.PlacementStrategy = nonNil(cons), nonNil(strat)
	}
	if m.NetworkConfiguration != nil && !proto.Equal(m.GetNetworkConfiguration(), s.GetNetworkConfiguration()) {
		s.NetworkConfiguration = m.GetNetworkConfiguration()
		redeploy = true
	}
	if u.capStrategy != nil {
		if strategy == StrategyDaemon {
			return false, awserr.InvalidParameterf("Capacity provider strategies are not supported for services using the DAEMON scheduling strategy.")
		}
		if !protoSliceEqual(u.capStrategy, s.GetCapacityProviderStrategy()) {
			s.CapacityProviderStrategy, s.LaunchType = u.capStrategy, nil
			redeploy = true
		}
	}
	return redeploy, nil
}

// applyPlatform returns the launch type the service's tasks get (its capacity provider
// strategy's, else its launchType) and sets its Fargate platform version and family: a
// new platformVersion (which needs a new deployment, reported), LATEST by default, none
// for a launch type other than FARGATE.
func applyPlatform(m *ecsv1.UpdateServiceRequest, s *ecsv1.Service) (launch string, changed bool) {
	launch = s.GetLaunchType()
	if st := s.GetCapacityProviderStrategy(); len(st) > 0 {
		launch = capacity.StrategyLaunchType(st)
	}
	if launch == "FARGATE" {
		s.PlatformFamily = proto.String(task.FargatePlatformFamily)
		if m.PlatformVersion != nil && m.GetPlatformVersion() != s.GetPlatformVersion() {
			s.PlatformVersion, changed = m.PlatformVersion, true
		} else if s.PlatformVersion == nil {
			s.PlatformVersion = proto.String("LATEST")
		}
	} else {
		s.PlatformVersion, s.PlatformFamily = nil, nil
	}
	return launch, changed
}

// checkUpdatedLaunch checks the updated service's launch against td, the task definition
// it runs after the update: platform version and network configuration
// (control.CheckServiceLaunch), and no placement for Fargate.
func checkUpdatedLaunch(m *ecsv1.UpdateServiceRequest, s *ecsv1.Service, td *ecsv1.TaskDefinition, launch string) error {
	pv := m.PlatformVersion // refused by CheckServiceLaunch for a non-Fargate service
	if launch == "FARGATE" && pv == nil {
		pv = s.PlatformVersion
	}
	if _, err := control.CheckServiceLaunch(td, launch, pv, s.GetNetworkConfiguration()); err != nil {
		return err
	}
	if launch == "FARGATE" && (len(s.GetPlacementConstraints()) > 0 || len(s.GetPlacementStrategy()) > 0) {
		return awserr.InvalidParameterf("Task placement constraints and strategies are not supported for the Fargate launch type.")
	}
	return nil
}

// applyTargets applies the load balancers and service registries sent (updateList),
// checked against td, the task definition the service runs after this update
// (tdChanged: the update sends one). It reports whether either list changed, which needs
// a new deployment.
func (h *Handler) applyTargets(ctx context.Context, account keys.Scope, m *ecsv1.UpdateServiceRequest, s *ecsv1.Service, td *ecsv1.TaskDefinition, tdChanged bool) (bool, error) {
	lbs, lbsChanged, err := updateList(m.GetLoadBalancers(), s.GetLoadBalancers(), tdChanged, func(l []*ecsv1.LoadBalancer) error {
		return validateLoadBalancers(ctx, h.kv, account, l, td)
	})
	if err != nil {
		return false, err
	}
	s.LoadBalancers = lbs
	regs, regsChanged, err := updateList(m.GetServiceRegistries(), s.GetServiceRegistries(), tdChanged, func(l []*ecsv1.ServiceRegistry) error {
		return validateServiceRegistries(ctx, h.kv, account, l, td)
	})
	if err != nil {
		return false, err
	}
	s.ServiceRegistries = regs
	return lbsChanged || regsChanged, nil
}

// applySettings applies the settings that change no task: propagateTags,
// enableECSManagedTags, enableExecuteCommand and healthCheckGracePeriodSeconds (each only
// when sent).
func applySettings(m *ecsv1.UpdateServiceRequest, s *ecsv1.Service) {
	if m.PropagateTags != nil {
		s.PropagateTags = m.PropagateTags
	}
	if m.EnableEcsManagedTags != nil {
		s.EnableEcsManagedTags = m.GetEnableEcsManagedTags()
	}
	if m.EnableExecuteCommand != nil {
		s.EnableExecuteCommand = m.GetEnableExecuteCommand()
	}
	if m.HealthCheckGracePeriodSeconds != nil {
		s.HealthCheckGracePeriodSeconds = m.HealthCheckGracePeriodSeconds
	}
}

// startDeployment adds a new PRIMARY deployment of tdARN to rec; the previous PRIMARY
// becomes ACTIVE (and, if it had not finished, is marked finished now). It returns the
// new deployment's id, a NewDeploymentID.
func startDeployment(rec *storev1.ServiceRecord, account keys.Scope, tdARN string, rollback bool, now time.Time) string {
	id := NewDeploymentID()
	startDeploymentID(rec, account, id, tdARN, rollback, now)
	return id
}

// startDeploymentID is startDeployment with the new deployment's id given.
func startDeploymentID(rec *storev1.ServiceRecord, account keys.Scope, id, tdARN string, rollback bool, now time.Time) {
	s := rec.GetService()
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == DeploymentPrimary {
			d.Status = proto.String(DeploymentActive)
			d.UpdatedAt = proto.Float64(awsapi.Epoch(now))
			dr := deploymentRecord(rec, d.GetId())
			if dr.FinishedAt == nil {
				dr.FinishedAt = ts(now)
			}
			dr.NextLaunchAt = nil // only the PRIMARY deployment launches
		}
	}
	d := newDeployment(id, tdARN, s.GetDesiredCount(), s.GetLaunchType(), s.GetNetworkConfiguration(), now)
	platform := ""
	if s.PlatformFamily != nil {
		platform = task.FargateLatest // the one platform version Berth resolves to
	}
	deploymentLaunch(d, s, platform)
	if rollback {
		d.RolloutStateReason = proto.String("ECS deployment circuit breaker: rolling back to the last completed deployment.")
	}
	s.Deployments = append([]*ecsv1.Deployment{d}, s.Deployments...)
	rec.Deployments = append(rec.Deployments, &storev1.DeploymentRecord{Id: id, Rollback: rollback})
	s.TaskDefinition = proto.String(tdARN)
	s.CurrentServiceDeployment = proto.String(serviceDeploymentARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), id))
	trimHistory(rec)
}

// maxHistory bounds the INACTIVE deployments kept for ListServiceDeployments and
// rollbacks.
const maxHistory = 20

// trimHistory drops the oldest INACTIVE deployments beyond maxHistory, and their
// DeploymentRecords (a task set's record stays while the task set does).
func trimHistory(rec *storev1.ServiceRecord) {
	s := rec.GetService()
	n := 0
	keep := s.Deployments[:0]
	for _, d := range s.Deployments {
		if d.GetStatus() == DeploymentInactive {
			n++
			if n > maxHistory {
				continue
			}
		}
		keep = append(keep, d)
	}
	s.Deployments = keep
	rec.Deployments = slices.DeleteFunc(rec.Deployments, func(dr *storev1.DeploymentRecord) bool {
		return findDeployment(s, dr.GetId()) == nil && findTaskSet(s, dr.GetId()) == nil
	})
}

// updateList applies an UpdateService list field (loadBalancers, serviceRegistries):
// sent, when not nil, replaces cur. The resulting list is checked with validate when it
// was sent, or when the task definition changes (tdChanged) and cur is not empty, since
// the list must match the task definition the service runs. It returns the list to
// store (cur itself when nothing was sent or checked; else never nil), whether it
// differs from cur (which needs a new deployment), and validate's error.
func updateList[T proto.Message](sent, cur []T, tdChanged bool, validate func([]T) error) ([]T, bool, error) {
	if sent == nil && (!tdChanged || len(cur) == 0) {
		return cur, false, nil
	}
	list := cur
	if sent != nil {
		list = sent
	}
	if err := validate(list); err != nil {
		return nil, false, err
	}
	return nonNil(list), !protoSliceEqual(list, cur), nil
}

// protoSliceEqual reports whether a and b hold equal messages (proto.Equal) in the same
// order.
func protoSliceEqual[T proto.Message](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool { return proto.Equal(x, y) })
}

// primary returns the PRIMARY deployment of s, or nil.
func primary(s *ecsv1.Service) *ecsv1.Deployment {
	for _, d := range s.GetDeployments() {
		if d.GetStatus() == DeploymentPrimary {
			return d
		}
	}
	return nil
}

func findDeployment(s *ecsv1.Service, id string) *ecsv1.Deployment {
	for _, d := range s.GetDeployments() {
		if d.GetId() == id {
			return d
		}
	}
	return nil
}

// deploymentRecord returns the DeploymentRecord of id, adding one if missing.
func deploymentRecord(rec *storev1.ServiceRecord, id string) *storev1.DeploymentRecord {
	for _, dr := range rec.GetDeployments() {
		if dr.GetId() == id {
			return dr
		}
	}
	dr := &storev1.DeploymentRecord{Id: id}
	rec.Deployments = append(rec.Deployments, dr)
	return dr
}

// DeleteService deletes a service: refused while desiredCount > 0 unless force
// (InvalidParameterException "The service cannot be stopped while it is scaled above
// 0."); with force desiredCount becomes 0. The service becomes DRAINING (the cluster's
// activeServicesCount is decremented in the same transaction) and the reconciler stops
// its tasks and then marks it INACTIVE; it stays describable for the Reconciler's
// InactiveRetention. Deleting a DRAINING service returns it unchanged; an INACTIVE one is
// ServiceNotFoundException as on AWS. Errors: ClusterNotFoundException,
// ServiceNotFoundException. AWS reference: DeleteService.
func (h *Handler) DeleteService(ctx context.Context, req *connect.Request[ecsv1.DeleteServiceRequest]) (*connect.Response[ecsv1.DeleteServiceResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteServiceRequest) (*ecsv1.DeleteServiceResponse, error) {
		cluster, name, err := h.loadService(ctx, account, m.GetCluster(), m.GetService())
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
			out = rec
			s := rec.GetService()
			if s.GetStatus() == StatusDraining {
				return nil
			}
			if s.GetSchedulingStrategy() == StrategyReplica && s.GetDesiredCount() > 0 && !m.GetForce() {
				return awserr.InvalidParameterf("The service cannot be stopped while it is scaled above 0.")
			}
			s.DesiredCount = 0
			s.Status = proto.String(StatusDraining)
			for _, d := range s.GetDeployments() {
				if d.GetStatus() == DeploymentPrimary {
					d.DesiredCount = 0
					d.UpdatedAt = h.nowEpoch()
				}
			}
			txn := store.NewTxn(h.kv).Update(key, rev, rec)
			crec, crev, err := get[*storev1.ClusterRecord](ctx, h.kv, keys.Cluster(account, cluster))
			if err != nil {
				return fmt.Errorf("service: read cluster %s: %w", cluster, err)
			}
			if crec != nil {
				crec.Cluster.ActiveServicesCount = max(crec.GetCluster().GetActiveServicesCount()-1, 0)
				txn.Update(keys.Cluster(account, cluster), crev, crec)
			}
			_, err = txn.Commit(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		h.kick.Kick()
		return &ecsv1.DeleteServiceResponse{Service: h.describeLive(ctx, account, out)}, nil
	})
}

// DescribeServices describes up to 10 services of a cluster by name or ARN, INACTIVE ones
// included; include TAGS adds their tags. runningCount and pendingCount (of the service
// and of each deployment) are counted from the task records at the time of the call. Unknown services come back in failures[] with
// reason MISSING and the ARN given, or for a name arn:…:service/NAME (no cluster), as AWS
// answers it. Errors: ClusterNotFoundException,
// InvalidParameterException for an empty or too long list. AWS reference:
// DescribeServices.
func (h *Handler) DescribeServices(ctx context.Context, req *connect.Request[ecsv1.DescribeServicesRequest]) (*connect.Response[ecsv1.DescribeServicesResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeServicesRequest) (*ecsv1.DescribeServicesResponse, error) {
		if len(m.GetServices()) == 0 {
			return nil, awserr.InvalidParameterf("Services cannot be empty.")
		}
		if len(m.GetServices()) > 10 {
			return nil, awserr.InvalidParameterf("services can have at most 10 items.")
		}
		withTags := false
		for _, inc := range m.GetInclude() {
			if inc != "TAGS" {
				return nil, awserr.InvalidParameterf("Invalid include value %q.", inc)
			}
			withTags = true
		}
		cluster, _, _, err := control.ActiveCluster(ctx, h.kv, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.DescribeServicesResponse{Services: []*ecsv1.Service{}, Failures: []*ecsv1.Failure{}}
		ks := make([]string, 0, len(m.GetServices()))
		refs := make([]string, 0, len(m.GetServices()))
		for _, ref := range m.GetServices() {
			name, ok := serviceName(account, cluster, ref)
			if !ok {
				resp.Failures = append(resp.Failures, missing(ref))
				continue
			}
			ks = append(ks, keys.Service(account, cluster, name))
			refs = append(refs, ref)
		}
		items, err := store.GetMany[*storev1.ServiceRecord](ctx, h.kv, ks)
		if err != nil {
			return nil, fmt.Errorf("service: describe: %w", err)
		}
		for i, it := range items {
			if it.Value == nil {
				a := refs[i]
				if !arn.IsARN(a) {
					// AWS names a service it did not find by name without the cluster
					// (service/NAME); one given by ARN keeps the ARN given.
					a = arn.ServiceARN(account.Region, account.Account, cluster, a, false)
				}
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			out := describe(it.Value, withTags)
			// Counts straight from the task records, not as of the last reconcile pass.
			all, by, err := liveCounts(ctx, h.kv, account, cluster, out.GetServiceName())
			if err != nil {
				return nil, err
			}
			applyCounts(out, all, by)
			resp.Services = append(resp.Services, out)
		}
		return resp, nil
	})
}

func missing(a string) *ecsv1.Failure {
	return &ecsv1.Failure{Arn: proto.String(a), Reason: proto.String("MISSING")}
}

// maxResults validates a List* maxResults (1–100) and applies the default.
func maxResults(v *int32, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > 100 {
		return 0, awserr.InvalidParameterf("maxResults must be between 1 and 100.")
	}
	return int(*v), nil
}

// ListServices lists the ARNs of a cluster's ACTIVE services in name order, filtered by
// launchType and schedulingStrategy: DRAINING and INACTIVE ones are left out, as the
// DeleteService reference says a deleted service "is no longer visible … in the
// ListServices API operation". maxResults 1–100 (default 10) and an opaque nextToken page
// through them; the filters apply before paging, so a page is short only when it is the
// last. Errors: ClusterNotFoundException, InvalidParameterException. AWS reference:
// ListServices.
func (h *Handler) ListServices(ctx context.Context, req *connect.Request[ecsv1.ListServicesRequest]) (*connect.Response[ecsv1.ListServicesResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListServicesRequest) (*ecsv1.ListServicesResponse, error) {
		limit, err := maxResults(m.MaxResults, 10)
		if err != nil {
			return nil, err
		}
		if lt := m.GetLaunchType(); lt != "" && !slices.Contains([]string{"EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES"}, lt) {
			return nil, awserr.InvalidParameterf("Invalid launchType %q.", lt)
		}
		if ss := m.GetSchedulingStrategy(); ss != "" && ss != StrategyReplica && ss != StrategyDaemon {
			return nil, awserr.InvalidParameterf("Invalid schedulingStrategy %q.", ss)
		}
		cluster, _, _, err := control.ActiveCluster(ctx, h.kv, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.ListServicesResponse{ServiceArns: []string{}}
		// Read on past the services the filters drop until the page is full and one more
		// match shows that another page exists; the token resumes after the last kept one.
		token, lastKept := m.GetNextToken(), ""
		for {
			items, next, err := store.List[*storev1.ServiceRecord](ctx, h.kv, keys.Services(account, cluster), store.MaxListLimit, token)
			if err != nil {
				if errors.Is(err, store.ErrInvalidToken) {
					return nil, awserr.InvalidParameterf("Invalid nextToken.")
				}
				return nil, fmt.Errorf("service: list: %w", err)
			}
			for _, it := range items {
				s := it.Value.GetService()
				if s.GetStatus() != StatusActive ||
					(m.GetLaunchType() != "" && s.GetLaunchType() != m.GetLaunchType()) ||
					(m.GetSchedulingStrategy() != "" && s.GetSchedulingStrategy() != m.GetSchedulingStrategy()) {
					continue
				}
				if len(resp.ServiceArns) == limit {
					resp.NextToken = proto.String(store.TokenAfter(lastKept))
					return resp, nil
				}
				resp.ServiceArns = append(resp.ServiceArns, s.GetServiceArn())
				lastKept = it.Key
			}
			if next == "" {
				return resp, nil
			}
			token = next
		}
	})
}

// ListServicesByNamespace lists the ARNs of the account's ACTIVE services, any cluster,
// whose serviceRegistries name a Cloud Map service of the namespace (given by name or
// ARN), in ARN order; maxResults 1–100 (default 10) with a nextToken. A namespace that
// does not exist answers NamespaceNotFoundException. AWS reference:
// ListServicesByNamespace.
func (h *Handler) ListServicesByNamespace(ctx context.Context, req *connect.Request[ecsv1.ListServicesByNamespaceRequest]) (*connect.Response[ecsv1.ListServicesByNamespaceResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListServicesByNamespaceRequest) (*ecsv1.ListServicesByNamespaceResponse, error) {
		if m.GetNamespace() == "" {
			return nil, awserr.InvalidParameterf("namespace is required.")
		}
		limit, err := maxResults(m.MaxResults, 10)
		if err != nil {
			return nil, err
		}
		reg := cloudmap.NewRegistry(h.kv, nil)
		nss, err := reg.Namespaces(ctx, account)
		if err != nil {
			return nil, err
		}
		nsID := ""
		for _, ns := range nss {
			if ns.GetArn() == m.GetNamespace() || ns.GetName() == strings.TrimSuffix(m.GetNamespace(), ".") {
				nsID = ns.GetId()
			}
		}
		if nsID == "" {
			return nil, awserr.New("NamespaceNotFoundException", "Namespace not found.")
		}
		svcs, err := reg.Services(ctx, account)
		if err != nil {
			return nil, err
		}
		inNS := map[string]bool{}
		for _, s := range svcs {
			if s.GetNamespaceId() == nsID {
				inNS[s.GetArn()] = true
			}
		}
		var arns []string
		token := ""
		for {
			items, next, err := store.List[*storev1.ServiceRecord](ctx, h.kv, store.MustKeyPrefix("services", account.Account, account.Region), store.MaxListLimit, token)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				s := it.Value.GetService()
				if s.GetStatus() == StatusActive && slices.ContainsFunc(serviceRegistries(s), func(e regEntry) bool { return inNS[e.v.GetRegistryArn()] }) {
					arns = append(arns, s.GetServiceArn())
				}
			}
			if next == "" {
				break
			}
			token = next
		}
		slices.Sort(arns)
		if t := m.GetNextToken(); t != "" {
			after, err := base64.RawURLEncoding.DecodeString(t)
			if err != nil {
				return nil, awserr.InvalidParameterf("nextToken is not valid.")
			}
			i, found := slices.BinarySearch(arns, string(after))
			if found {
				i++
			}
			arns = arns[i:]
		}
		resp := &ecsv1.ListServicesByNamespaceResponse{ServiceArns: []string{}}
		if len(arns) > limit {
			arns = arns[:limit]
			resp.NextToken = proto.String(base64.RawURLEncoding.EncodeToString([]byte(arns[limit-1])))
		}
		resp.ServiceArns = append(resp.ServiceArns, arns...)
		return resp, nil
	})
}

// deploymentStatus maps a deployment to the ServiceDeployment status AWS reports:
// PENDING/IN_PROGRESS, SUCCESSFUL, STOPPED (superseded or failed without rollback), and
// the ROLLBACK_* states for a circuit breaker rollback.
func deploymentStatus(d *ecsv1.Deployment, dr *storev1.DeploymentRecord) (string, string) {
	if sh := dr.GetShift(); sh.GetRolledBack() {
		// A traffic shift rolled back in place: done once its tasks are gone.
		if d.GetStatus() == DeploymentInactive {
			return "ROLLBACK_SUCCESSFUL", d.GetRolloutStateReason()
		}
		return "ROLLBACK_IN_PROGRESS", d.GetRolloutStateReason()
	}
	rb := dr.GetRollback()
	switch d.GetRolloutState() {
	case RolloutCompleted:
		if rb {
			return "ROLLBACK_SUCCESSFUL", d.GetRolloutStateReason()
		}
		return "SUCCESSFUL", d.GetRolloutStateReason()
	case RolloutFailed:
		if rb {
			return "ROLLBACK_FAILED", d.GetRolloutStateReason()
		}
		return "STOPPED", d.GetRolloutStateReason()
	}
	if d.GetStatus() != DeploymentPrimary {
		return "STOPPED", "The deployment was superseded by a newer deployment."
	}
	if rb {
		return "ROLLBACK_IN_PROGRESS", d.GetRolloutStateReason()
	}
	return "IN_PROGRESS", d.GetRolloutStateReason()
}

// ListServiceDeployments lists a service's deployments, newest first (Berth keeps the
// last 20 finished ones), filtered by status and createdAt; maxResults 1–100 (default 20)
// with a nextToken. Errors: ClusterNotFoundException, ServiceNotFoundException,
// InvalidParameterException. AWS reference: ListServiceDeployments.
func (h *Handler) ListServiceDeployments(ctx context.Context, req *connect.Request[ecsv1.ListServiceDeploymentsRequest]) (*connect.Response[ecsv1.ListServiceDeploymentsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListServiceDeploymentsRequest) (*ecsv1.ListServiceDeploymentsResponse, error) {
		limit, err := maxResults(m.MaxResults, 20)
		if err != nil {
			return nil, err
		}
		_, _, rec, err := h.loadServiceRecord(ctx, account, m.GetCluster(), m.GetService())
		if err != nil {
			return nil, err
		}
		start := 0
		if tok := m.GetNextToken(); tok != "" {
			if _, err := fmt.Sscanf(tok, "%d", &start); err != nil || start < 0 {
				return nil, awserr.InvalidParameterf("Invalid nextToken.")
			}
		}
		var all []*ecsv1.ServiceDeploymentBrief
		for _, d := range rec.GetService().GetDeployments() {
			st, reason := deploymentStatus(d, deploymentRecord(rec, d.GetId()))
			if len(m.GetStatus()) > 0 && !slices.Contains(m.GetStatus(), st) {
				continue
			}
			if ca := m.GetCreatedAt(); ca != nil {
				if (ca.After != nil && d.GetCreatedAt() < ca.GetAfter()) || (ca.Before != nil && d.GetCreatedAt() > ca.GetBefore()) {
					continue
				}
			}
			all = append(all, brief(account, rec, d, st, reason))
		}
		resp := &ecsv1.ListServiceDeploymentsResponse{ServiceDeployments: []*ecsv1.ServiceDeploymentBrief{}}
		if start < len(all) {
			end := min(start+limit, len(all))
			resp.ServiceDeployments = all[start:end]
			if end < len(all) {
				resp.NextToken = proto.String(fmt.Sprint(end))
			}
		}
		return resp, nil
	})
}

func brief(account keys.Scope, rec *storev1.ServiceRecord, d *ecsv1.Deployment, st, reason string) *ecsv1.ServiceDeploymentBrief {
	s := rec.GetService()
	b := &ecsv1.ServiceDeploymentBrief{
		ClusterArn:               s.ClusterArn,
		ServiceArn:               s.ServiceArn,
		ServiceDeploymentArn:     proto.String(serviceDeploymentARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), d.GetId())),
		TargetServiceRevisionArn: proto.String(serviceRevisionARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), d.GetId())),
		CreatedAt:                d.CreatedAt,
		StartedAt:                d.CreatedAt,
		Status:                   proto.String(st),
		StatusReason:             proto.String(reason),
	}
	if f := deploymentRecord(rec, d.GetId()).GetFinishedAt(); f != nil {
		b.FinishedAt = proto.Float64(awsapi.Epoch(f.AsTime()))
	}
	return b
}

// parseChildARN splits a service-deployment or service-revision ARN into its (account,
// region) scope, cluster, service and deployment number.
func parseChildARN(kind, a string) (account keys.Scope, cluster, svc, num string, ok bool) {
	parts := strings.SplitN(a, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "ecs" {
		return keys.Scope{}, "", "", "", false
	}
	segs := strings.Split(parts[5], "/")
	if len(segs) != 4 || segs[0] != kind {
		return keys.Scope{}, "", "", "", false
	}
	return keys.Scope{Account: parts[4], Region: parts[3]}, segs[1], segs[2], segs[3], true
}

// lookupChild reads the service and deployment a service-deployment or service-revision
// ARN names; ok is false when there is none for the caller.
func (h *Handler) lookupChild(ctx context.Context, account keys.Scope, kind, a string) (*storev1.ServiceRecord, *ecsv1.Deployment, bool, error) {
	acc, cluster, svc, num, ok := parseChildARN(kind, a)
	if !ok || acc != account || !ecsrules.ValidName(cluster) || !ecsrules.ValidName(svc) {
		return nil, nil, false, nil
	}
	rec, _, err := get[*storev1.ServiceRecord](ctx, h.kv, keys.Service(account, cluster, svc))
	if err != nil || rec == nil {
		return nil, nil, false, err
	}
	d := findDeployment(rec.GetService(), "ecs-svc/"+num)
	return rec, d, d != nil, nil
}

// DescribeServiceDeployments describes up to 20 service deployments by ARN (from
// ListServiceDeployments or a service's currentServiceDeployment); unknown ones come back
// in failures[] with reason MISSING. The circuit breaker section reports the failed task
// count and AWS's threshold. AWS reference: DescribeServiceDeployments.
func (h *Handler) DescribeServiceDeployments(ctx context.Context, req *connect.Request[ecsv1.DescribeServiceDeploymentsRequest]) (*connect.Response[ecsv1.DescribeServiceDeploymentsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeServiceDeploymentsRequest) (*ecsv1.DescribeServiceDeploymentsResponse, error) {
		if n := len(m.GetServiceDeploymentArns()); n == 0 || n > 20 {
			return nil, awserr.InvalidParameterf("serviceDeploymentArns must have 1 to 20 items.")
		}
		resp := &ecsv1.DescribeServiceDeploymentsResponse{ServiceDeployments: []*ecsv1.ServiceDeployment{}, Failures: []*ecsv1.Failure{}}
		for _, a := range m.GetServiceDeploymentArns() {
			rec, d, ok, err := h.lookupChild(ctx, account, "service-deployment", a)
			if err != nil {
				return nil, err
			}
			if !ok {
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			resp.ServiceDeployments = append(resp.ServiceDeployments, h.serviceDeployment(account, rec, d))
		}
		return resp, nil
	})
}

func (h *Handler) serviceDeployment(account keys.Scope, rec *storev1.ServiceRecord, d *ecsv1.Deployment) *ecsv1.ServiceDeployment {
	s := rec.GetService()
	dr := deploymentRecord(rec, d.GetId())
	st, reason := deploymentStatus(d, dr)
	b := brief(account, rec, d, st, reason)
	sd := &ecsv1.ServiceDeployment{
		ClusterArn:              b.ClusterArn,
		ServiceArn:              b.ServiceArn,
		ServiceDeploymentArn:    b.ServiceDeploymentArn,
		CreatedAt:               b.CreatedAt,
		StartedAt:               b.StartedAt,
		FinishedAt:              b.FinishedAt,
		Status:                  b.Status,
		StatusReason:            b.StatusReason,
		UpdatedAt:               d.UpdatedAt,
		DeploymentConfiguration: s.GetDeploymentConfiguration(),
		TargetServiceRevision: &ecsv1.ServiceRevisionSummary{
			Arn:                proto.String(serviceRevisionARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), d.GetId())),
			RequestedTaskCount: d.GetDesiredCount(),
			RunningTaskCount:   d.GetRunningCount(),
			PendingTaskCount:   d.GetPendingCount(),
		},
		SourceServiceRevisions: []*ecsv1.ServiceRevisionSummary{},
	}
	for _, o := range s.GetDeployments() {
		if o.GetStatus() == DeploymentActive && o.GetCreatedAt() <= d.GetCreatedAt() && o.GetId() != d.GetId() {
			sd.SourceServiceRevisions = append(sd.SourceServiceRevisions, &ecsv1.ServiceRevisionSummary{
				Arn:                proto.String(serviceRevisionARN(account.Region, account.Account, rec.GetClusterName(), s.GetServiceName(), o.GetId())),
				RequestedTaskCount: o.GetDesiredCount(),
				RunningTaskCount:   o.GetRunningCount(),
				PendingTaskCount:   o.GetPendingCount(),
			})
		}
	}
	cb := s.GetDeploymentConfiguration().GetDeploymentCircuitBreaker()
	sd.DeploymentCircuitBreaker = &ecsv1.ServiceDeploymentCircuitBreaker{
		Status:       proto.String("DISABLED"),
		FailureCount: d.GetFailedTasks(),
		Threshold:    int32(BreakerThreshold(d.GetDesiredCount(), DefaultBreakerMinThreshold)),
	}
	if cb.GetEnable() {
		switch d.GetRolloutState() {
		case RolloutFailed:
			sd.DeploymentCircuitBreaker.Status = proto.String("TRIGGERED")
		case RolloutCompleted:
			sd.DeploymentCircuitBreaker.Status = proto.String("MONITORING_COMPLETE")
		default:
			sd.DeploymentCircuitBreaker.Status = proto.String("MONITORING")
		}
	}
	if dr.GetRollback() {
		sd.Rollback = &ecsv1.Rollback{Reason: d.RolloutStateReason, StartedAt: d.CreatedAt, ServiceRevisionArn: sd.TargetServiceRevision.Arn}
	}
	describeShift(sd, account, rec, d)
	return sd
}

// DescribeServiceRevisions describes up to 20 service revisions by ARN: in Berth each
// deployment targets one revision (same number), holding the task definition, launch
// type, placement-independent network configuration and the load balancers and service
// registries of the service. Unknown ones come back in failures[] with reason MISSING.
// AWS reference: DescribeServiceRevisions.
func (h *Handler) DescribeServiceRevisions(ctx context.Context, req *connect.Request[ecsv1.DescribeServiceRevisionsRequest]) (*connect.Response[ecsv1.DescribeServiceRevisionsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeServiceRevisionsRequest) (*ecsv1.DescribeServiceRevisionsResponse, error) {
		if n := len(m.GetServiceRevisionArns()); n == 0 || n > 20 {
			return nil, awserr.InvalidParameterf("serviceRevisionArns must have 1 to 20 items.")
		}
		resp := &ecsv1.DescribeServiceRevisionsResponse{ServiceRevisions: []*ecsv1.ServiceRevision{}, Failures: []*ecsv1.Failure{}}
		for _, a := range m.GetServiceRevisionArns() {
			rec, d, ok, err := h.lookupChild(ctx, account, "service-revision", a)
			if err != nil {
				return nil, err
			}
			if !ok {
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			s := rec.GetService()
			resp.ServiceRevisions = append(resp.ServiceRevisions, &ecsv1.ServiceRevision{
				ResolvedConfiguration: resolvedConfiguration(rec, d),
				ServiceRevisionArn:    proto.String(a),
				ServiceArn:            s.ServiceArn,
				ClusterArn:            s.ClusterArn,
				TaskDefinition:        d.TaskDefinition,
				LaunchType:            d.LaunchType,
				NetworkConfiguration:  d.NetworkConfiguration,
				LoadBalancers:         nonNil(s.GetLoadBalancers()),
				ServiceRegistries:     nonNil(s.GetServiceRegistries()),
				CreatedAt:             d.CreatedAt,
				ContainerImages:       []*ecsv1.ContainerImage{},
			})
		}
		return resp, nil
	})
}

// validateGracePeriod refuses a negative healthCheckGracePeriodSeconds with
// InvalidParameterException naming the field; nil (not given) passes. AWS documents the
// range as 0 to 2,147,483,647 seconds (CreateService/UpdateService API reference,
// healthCheckGracePeriodSeconds), so the int32 upper bound needs no check. Without this a
// negative value was stored and read back as a grace period that had already ended.
func validateGracePeriod(v *int32) error {
	if v != nil && *v < 0 {
		return awserr.InvalidParameterf("healthCheckGracePeriodSeconds must be between 0 and 2147483647 seconds; got %d.", *v)
	}
	return nil
}
