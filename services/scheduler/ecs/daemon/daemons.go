package daemon

import (
	"context"
	"slices"
	"sort"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/capacity"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/ecs/service"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ServicePrefix starts the service name a daemon's tasks carry ("daemon:{name}"): a
// colon is not allowed in a service name, so no service ever claims them.
const ServicePrefix = "daemon:"

// DefaultDrainPercent is the share of a daemon's hosts a deployment replaces at a time
// when deploymentConfiguration.drainPercent is not given.
const DefaultDrainPercent = 25.0

// daemonNotFound and daemonNotActive are AWS's errors for an unknown daemon and one being
// deleted.
func daemonNotFound() error { return awserr.New("DaemonNotFoundException", "Daemon not found.") }
func daemonNotActive() error {
	return awserr.New("DaemonNotActiveException", "Daemon is not active.")
}

// settings are the members CreateDaemon and UpdateDaemon share, checked.
type settings struct {
	tdARN     string
	td        *storev1.DaemonTaskDefinitionRecord
	providers []string // capacity provider ARNs, as given order, deduplicated
	names     []string // their names
	config    *ecsv1.DaemonDeploymentConfiguration
	propagate string
	managed   bool
}

// check validates the shared members against the cluster: the daemon task definition
// (ACTIVE), the capacity providers (existing, not Fargate, associated with the cluster),
// the deployment configuration and the tag and execute-command settings.
func (h *Daemons) check(ctx context.Context, account keys.Scope, cluster *storev1.ClusterRecord, tdRef string, providers []string,
	cfg *ecsv1.DaemonDeploymentConfiguration, propagate *string, managed, exec bool) (*settings, error) {
	s := &settings{managed: managed, propagate: "NONE"}
	if tdRef == "" {
		return nil, awserr.InvalidParameterf("daemonTaskDefinitionArn is required.")
	}
	td, _, err := lookup(ctx, h.kv, account, tdRef)
	if err != nil {
		return nil, err
	}
	if td == nil {
		return nil, awserr.Clientf("Daemon task definition not found: %s.", tdRef)
	}
	if st := td.GetDaemonTaskDefinition().GetStatus(); st != StatusActive {
		return nil, awserr.InvalidParameterf("Daemon task definition %s is %s; only an ACTIVE daemon task definition can be deployed.", tdRef, st)
	}
	s.td, s.tdARN = td, td.GetDaemonTaskDefinition().GetDaemonTaskDefinitionArn()
	if len(providers) == 0 {
		return nil, awserr.InvalidParameterf("capacityProviderArns must name at least one capacity provider.")
	}
	associated := map[string]bool{}
	for _, p := range cluster.GetCluster().GetCapacityProviders() {
		associated[p] = true
	}
	for _, ref := range providers {
		cp, _, err := capacity.Get(ctx, h.kv, account, ref)
		if err != nil {
			return nil, err
		}
		if cp == nil || cp.GetStatus() != capacity.StatusActive {
			return nil, awserr.InvalidParameterf("The specified capacity provider %s does not exist.", ref)
		}
		name := cp.GetName()
		if capacity.IsFargateProvider(name) {
			return nil, awserr.InvalidParameterf("The capacity provider %s cannot run daemons: a daemon runs on the container instances of a capacity provider, and %s has none.", ref, name)
		}
		if !associated[name] {
			return nil, awserr.InvalidParameterf("The specified capacity provider %s is not associated with the cluster. Associate it with PutClusterCapacityProviders first.", name)
		}
		if slices.Contains(s.names, name) {
			continue
		}
		s.names = append(s.names, name)
		s.providers = append(s.providers, cp.GetCapacityProviderArn())
	}
	c := proto.Clone(cfg).(*ecsv1.DaemonDeploymentConfiguration)
	if cfg == nil {
		c = &ecsv1.DaemonDeploymentConfiguration{}
	}
	if c.DrainPercent == nil {
		c.DrainPercent = proto.Float64(DefaultDrainPercent)
	}
	if p := c.GetDrainPercent(); p < 0 || p > 100 {
		return nil, awserr.InvalidParameterf("deploymentConfiguration.drainPercent must be between 0.0 and 100.0; got %v.", p)
	}
	if b := c.GetBakeTimeInMinutes(); b < 0 || b > 1440 {
		return nil, awserr.InvalidParameterf("deploymentConfiguration.bakeTimeInMinutes must be between 0 and 1440; got %d.", b)
	}
	if a := c.GetAlarms(); a.GetEnable() || len(a.GetAlarmNames()) > 0 {
		return nil, awserr.InvalidParameterf("deploymentConfiguration.alarms is not supported by Berth: Berth has no CloudWatch alarms. Deployments roll back on their circuit breaker (failed tasks) instead.")
	}
	s.config = c
	if exec {
		return nil, awserr.InvalidParameterf("enableExecuteCommand is not supported by Berth: ECS Exec needs the SSM agent and Session Manager, which Berth does not have.")
	}
	if propagate != nil {
		if *propagate != "DAEMON" && *propagate != "NONE" {
			return nil, awserr.InvalidParameterf("propagateTags must be DAEMON or NONE; got %q.", *propagate)
		}
		s.propagate = *propagate
	}
	return s, nil
}

// daemonRef resolves a daemon ARN of account to its cluster and name.
func daemonRef(account keys.Scope, ref string) (string, string, error) {
	if ref == "" {
		return "", "", awserr.InvalidParameterf("daemonArn is required.")
	}
	a, err := arn.Parse(ref)
	if err != nil || a.Type != arn.Daemon || !account.Owns(a.Partition, a.Account, a.Region) {
		return "", "", awserr.InvalidParameterf("Invalid daemonArn %q: expected arn:aws:ecs:{region}:{account}:daemon/{cluster}/{name}.", ref)
	}
	return a.Cluster, a.Name, nil
}

// readDaemon reads the daemon ref names: ClusterNotFoundException when its cluster does
// not exist, DaemonNotFoundException when it does not.
func (h *Daemons) readDaemon(ctx context.Context, account keys.Scope, ref string) (*storev1.DaemonRecord, int64, error) {
	cluster, name, err := daemonRef(account, ref)
	if err != nil {
		return nil, 0, err
	}
	c, _, err := get[*storev1.ClusterRecord](ctx, h.kv, keys.Cluster(account, cluster))
	if err != nil {
		return nil, 0, err
	}
	if c == nil {
		return nil, 0, awserr.ClusterNotFoundError()
	}
	d, rev, err := get[*storev1.DaemonRecord](ctx, h.kv, keys.Daemon(account, cluster, name))
	if err != nil {
		return nil, 0, err
	}
	if d == nil {
		return nil, 0, daemonNotFound()
	}
	return d, rev, nil
}

// newRevision returns the revision a deployment of s deploys.
func newRevision(account keys.Scope, d *storev1.DaemonRecord, s *settings, now float64) *ecsv1.DaemonRevision {
	id := newID()
	imgs := []*ecsv1.DaemonContainerImage{}
	for _, c := range s.td.GetDaemonTaskDefinition().GetContainerDefinitions() {
		imgs = append(imgs, &ecsv1.DaemonContainerImage{ContainerName: c.Name, Image: c.Image})
	}
	return &ecsv1.DaemonRevision{
		DaemonRevisionArn:       proto.String(arn.ARN{Region: account.Region, Account: account.Account, Type: arn.DaemonRevision, Cluster: d.GetClusterName(), Name: d.GetDaemonName() + "/" + id}.String()),
		ClusterArn:              proto.String(arn.ClusterARN(account.Region, account.Account, d.GetClusterName())),
		DaemonArn:               proto.String(d.GetDaemonArn()),
		DaemonTaskDefinitionArn: proto.String(s.tdARN),
		ContainerImages:         imgs,
		CreatedAt:               proto.Float64(now),
		EnableEcsManagedTags:    proto.Bool(s.managed),
		EnableExecuteCommand:    proto.Bool(false),
		PropagateTags:           proto.String(s.propagate),
	}
}

// startDeployment records a new deployment of s on d (its revision, the deployment, the
// synthetic service's new PRIMARY deployment) and returns the records to write.
func (h *Daemons) startDeployment(account keys.Scope, d *storev1.DaemonRecord, s *settings, now time.Time) (*ecsv1.DaemonRevision, *storev1.DaemonDeploymentRecord) {
	epoch := awsapi.Epoch(now)
	rev := newRevision(account, d, s, epoch)
	id := newID()
	dep := &ecsv1.DaemonDeployment{
		DaemonDeploymentArn:     proto.String(arn.ARN{Region: account.Region, Account: account.Account, Type: arn.DaemonDeployment, Cluster: d.GetClusterName(), Name: d.GetDaemonName() + "/" + id}.String()),
		ClusterArn:              rev.ClusterArn,
		Status:                  proto.String(DeploymentPending),
		CreatedAt:               proto.Float64(epoch),
		DeploymentConfiguration: s.config,
		TargetDaemonRevision:    &ecsv1.DaemonDeploymentRevisionDetail{Arn: rev.DaemonRevisionArn, CapacityProviders: []*ecsv1.DaemonDeploymentCapacityProvider{}, TotalRunningInstanceCount: proto.Int32(0), TotalDrainingInstanceCount: proto.Int32(0)},
		SourceDaemonRevisions:   []*ecsv1.DaemonDeploymentRevisionDetail{},
		CircuitBreaker:          &ecsv1.DaemonCircuitBreaker{Status: proto.String("MONITORING")},
		Alarms:                  &ecsv1.DaemonDeploymentAlarms{Status: proto.String("DISABLED"), AlarmNames: []string{}, TriggeredAlarmNames: []string{}},
	}
	if d.GetRevisionArn() != "" {
		dep.SourceDaemonRevisions = append(dep.SourceDaemonRevisions, &ecsv1.DaemonDeploymentRevisionDetail{Arn: proto.String(d.GetRevisionArn())})
	}
	if d.RevisionOf == nil {
		d.RevisionOf = map[string]string{}
	}
	d.RevisionOf[id] = rev.GetDaemonRevisionArn()
	d.DeploymentArn, d.RevisionArn = dep.GetDaemonDeploymentArn(), rev.GetDaemonRevisionArn()
	d.CapacityProviderArns, d.DeploymentConfiguration = s.providers, s.config
	d.PropagateTags, d.EnableEcsManagedTags = s.propagate, s.managed
	d.UpdatedAt = epoch
	svc := d.GetService().GetService()
	svc.PropagateTags = proto.String("NONE")
	if s.propagate == "DAEMON" {
		svc.PropagateTags = proto.String("SERVICE")
	}
	svc.EnableEcsManagedTags = s.managed
	service.StartDeployment(d.Service, account, id, s.tdARN, now)
	return rev, &storev1.DaemonDeploymentRecord{Deployment: dep, DaemonArn: d.GetDaemonArn()}
}

// CreateDaemon creates a daemon in a cluster (the default one when clusterArn is not
// given) and its first deployment, which starts one task on every container instance of
// its capacity providers. The daemon, its revision and its deployment are one
// transaction. Errors: InvalidParameterException for a bad name or member (naming it),
// ClientException for an unknown daemon task definition, ClusterNotFoundException.
// A repeated call with the same clientToken returns the daemon it created. AWS
// reference: CreateDaemon.
func (h *Daemons) CreateDaemon(ctx context.Context, req *connect.Request[ecsv1.CreateDaemonRequest]) (*connect.Response[ecsv1.CreateDaemonResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.CreateDaemonRequest) (*ecsv1.CreateDaemonResponse, error) {
		if err := control.CheckFields(control.InvalidParamErr, m); err != nil {
			return nil, err
		}
		name := m.GetDaemonName()
		if !familyPattern.MatchString(name) {
			return nil, awserr.InvalidParameterf("daemonName can have up to 255 characters. Valid characters are letters (uppercase and lowercase), numbers, underscores, and hyphens.")
		}
		if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		ref := m.GetClusterArn()
		if ref == "" {
			ref = service.DefaultCluster
		}
		cluster, crec, _, err := control.ActiveCluster(ctx, h.kv, account, ref)
		if err != nil {
			return nil, err
		}
		s, err := h.check(ctx, account, crec, m.GetDaemonTaskDefinitionArn(), m.GetCapacityProviderArns(), m.GetDeploymentConfiguration(), m.PropagateTags, m.GetEnableEcsManagedTags(), m.GetEnableExecuteCommand())
		if err != nil {
			return nil, err
		}
		key := keys.Daemon(account, cluster, name)
		if cur, _, err := get[*storev1.DaemonRecord](ctx, h.kv, key); err != nil {
			return nil, err
		} else if cur != nil {
			if m.GetClientToken() != "" && cur.GetClientToken() == m.GetClientToken() {
				return &ecsv1.CreateDaemonResponse{DaemonArn: proto.String(cur.GetDaemonArn()), Status: proto.String(cur.GetStatus()), CreatedAt: proto.Float64(cur.GetCreatedAt()), DeploymentArn: proto.String(cur.GetDeploymentArn())}, nil
			}
			return nil, awserr.InvalidParameterf("Creation of daemon was not idempotent: a daemon named %s already exists in the cluster.", name)
		}
		now := h.now()
		daemonARN := arn.ARN{Region: account.Region, Account: account.Account, Type: arn.Daemon, Cluster: cluster, Name: name}.String()
		d := &storev1.DaemonRecord{
			DaemonArn: daemonARN, DaemonName: name, ClusterName: cluster, Status: StatusActive,
			CreatedAt: awsapi.Epoch(now), Tags: m.GetTags(), ClientToken: m.GetClientToken(),
			Service: newServiceRecord(account, cluster, name, daemonARN, m.GetTags(), now),
		}
		rev, dep := h.startDeployment(account, d, s, now)
		txn := store.NewTxn(h.kv)
		txn.Create(key, d)
		txn.Create(revisionKey(account, rev.GetDaemonRevisionArn()), &storev1.DaemonRevisionRecord{Revision: rev})
		txn.Create(deploymentKey(account, dep.GetDeployment().GetDaemonDeploymentArn()), dep)
		if _, err := txn.Commit(ctx); err != nil {
			return nil, err
		}
		h.kick()
		return &ecsv1.CreateDaemonResponse{DaemonArn: proto.String(daemonARN), Status: proto.String(StatusActive), CreatedAt: proto.Float64(d.GetCreatedAt()), DeploymentArn: proto.String(d.GetDeploymentArn())}, nil
	})
}

// newServiceRecord returns the DAEMON-strategy service record the reconciler keeps for a
// new daemon (no deployment yet).
func newServiceRecord(account keys.Scope, cluster, name, daemonARN string, tags []*ecsv1.Tag, now time.Time) *storev1.ServiceRecord {
	return &storev1.ServiceRecord{ClusterName: cluster, Service: &ecsv1.Service{
		ServiceName: proto.String(ServicePrefix + name), ServiceArn: proto.String(daemonARN),
		ClusterArn: proto.String(arn.ClusterARN(account.Region, account.Account, cluster)),
		Status:     proto.String(service.StatusActive), SchedulingStrategy: proto.String(service.StrategyDaemon),
		LaunchType: proto.String("EC2"), Tags: tags, CreatedAt: proto.Float64(awsapi.Epoch(now)),
		DeploymentConfiguration: &ecsv1.DeploymentConfiguration{
			MinimumHealthyPercent: proto.Int32(0), MaximumPercent: proto.Int32(100),
			DeploymentCircuitBreaker: &ecsv1.DeploymentCircuitBreaker{Enable: true, Rollback: true},
		},
	}}
}

// revisionKey and deploymentKey return the keys of a daemon revision and deployment
// from their ARNs (issued by Berth, so they parse).
func revisionKey(account keys.Scope, a string) string {
	p, _ := arn.Parse(a)
	daemon, id := splitChild(p.Name)
	return keys.DaemonRevision(account, p.Cluster, daemon, id)
}

func deploymentKey(account keys.Scope, a string) string {
	p, _ := arn.Parse(a)
	daemon, id := splitChild(p.Name)
	return keys.DaemonDeployment(account, p.Cluster, daemon, id)
}

// splitChild splits "{daemon}/{id}".
func splitChild(s string) (string, string) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// UpdateDaemon changes a daemon's task definition, capacity providers and settings and
// starts a deployment to the new revision (a deployment still in progress is STOPPED).
// Errors: DaemonNotFoundException, DaemonNotActiveException for a daemon being deleted,
// InvalidParameterException / ClientException as CreateDaemon, ClusterNotFoundException.
// AWS reference: UpdateDaemon.
func (h *Daemons) UpdateDaemon(ctx context.Context, req *connect.Request[ecsv1.UpdateDaemonRequest]) (*connect.Response[ecsv1.UpdateDaemonResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateDaemonRequest) (*ecsv1.UpdateDaemonResponse, error) {
		if err := control.CheckFields(control.InvalidParamErr, m); err != nil {
			return nil, err
		}
		var out *storev1.DaemonRecord
		err := awsapi.Retry(ctx, func() error {
			d, drev, err := h.readDaemon(ctx, account, m.GetDaemonArn())
			if err != nil {
				return err
			}
			if d.GetStatus() != StatusActive {
				return daemonNotActive()
			}
			_, crec, _, err := control.ActiveCluster(ctx, h.kv, account, d.GetClusterName())
			if err != nil {
				return err
			}
			s, err := h.check(ctx, account, crec, m.GetDaemonTaskDefinitionArn(), m.GetCapacityProviderArns(), m.GetDeploymentConfiguration(), m.PropagateTags, m.GetEnableEcsManagedTags(), m.GetEnableExecuteCommand())
			if err != nil {
				return err
			}
			txn := store.NewTxn(h.kv)
			now := h.now()
			// The deployment in progress is superseded.
			if prev := d.GetDeploymentArn(); prev != "" {
				pk := deploymentKey(account, prev)
				pd, prev, err := get[*storev1.DaemonDeploymentRecord](ctx, h.kv, pk)
				if err != nil {
					return err
				}
				if st := pd.GetDeployment().GetStatus(); pd != nil && (st == DeploymentPending || st == DeploymentInProgress) {
					dep := pd.GetDeployment()
					dep.Status = proto.String(DeploymentStopped)
					dep.StatusReason = proto.String("Superseded by a newer daemon deployment.")
					dep.StoppedAt = proto.Float64(awsapi.Epoch(now))
					txn.Update(pk, prev, pd)
				}
			}
			rev, dep := h.startDeployment(account, d, s, now)
			txn.Update(keys.Daemon(account, d.GetClusterName(), d.GetDaemonName()), drev, d)
			txn.Create(revisionKey(account, rev.GetDaemonRevisionArn()), &storev1.DaemonRevisionRecord{Revision: rev})
			txn.Create(deploymentKey(account, dep.GetDeployment().GetDaemonDeploymentArn()), dep)
			if _, err := txn.Commit(ctx); err != nil {
				return err
			}
			out = d
			return nil
		})
		if err != nil {
			return nil, err
		}
		h.kick()
		return &ecsv1.UpdateDaemonResponse{DaemonArn: proto.String(out.GetDaemonArn()), Status: proto.String(out.GetStatus()), CreatedAt: proto.Float64(out.GetCreatedAt()), UpdatedAt: proto.Float64(out.GetUpdatedAt()), DeploymentArn: proto.String(out.GetDeploymentArn())}, nil
	})
}

// DeleteDaemon deletes a daemon: it is DELETE_IN_PROGRESS while its tasks stop (on every
// host at once), and its records go once none is left. Errors: DaemonNotFoundException,
// DaemonNotActiveException when it is already being deleted, ClusterNotFoundException.
// AWS reference: DeleteDaemon.
func (h *Daemons) DeleteDaemon(ctx context.Context, req *connect.Request[ecsv1.DeleteDaemonRequest]) (*connect.Response[ecsv1.DeleteDaemonResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteDaemonRequest) (*ecsv1.DeleteDaemonResponse, error) {
		var out *storev1.DaemonRecord
		err := awsapi.Retry(ctx, func() error {
			d, drev, err := h.readDaemon(ctx, account, m.GetDaemonArn())
			if err != nil {
				return err
			}
			if d.GetStatus() != StatusActive {
				return daemonNotActive()
			}
			d.Status = StatusDeleteInProgress
			d.UpdatedAt = h.nowEpoch()
			d.GetService().GetService().Status = proto.String(service.StatusDraining)
			if _, err := store.Update(ctx, h.kv, keys.Daemon(account, d.GetClusterName(), d.GetDaemonName()), drev, d); err != nil {
				return err
			}
			out = d
			return nil
		})
		if err != nil {
			return nil, err
		}
		h.kick()
		return &ecsv1.DeleteDaemonResponse{DaemonArn: proto.String(out.GetDaemonArn()), Status: proto.String(out.GetStatus()), CreatedAt: proto.Float64(out.GetCreatedAt()), UpdatedAt: proto.Float64(out.GetUpdatedAt()), DeploymentArn: proto.String(out.GetDeploymentArn())}, nil
	})
}

// DescribeDaemon describes a daemon with its current revisions: each revision that has
// tasks running, with their count per capacity provider. Errors: InvalidParameterException
// for a malformed ARN, ClusterNotFoundException, DaemonNotFoundException. AWS
// reference: DescribeDaemon.
func (h *Daemons) DescribeDaemon(ctx context.Context, req *connect.Request[ecsv1.DescribeDaemonRequest]) (*connect.Response[ecsv1.DescribeDaemonResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeDaemonRequest) (*ecsv1.DescribeDaemonResponse, error) {
		d, _, err := h.readDaemon(ctx, account, m.GetDaemonArn())
		if err != nil {
			return nil, err
		}
		tasks, err := daemonTasks(ctx, h.kv, account, d.GetClusterName(), d.GetDaemonName())
		if err != nil {
			return nil, err
		}
		return &ecsv1.DescribeDaemonResponse{Daemon: &ecsv1.DaemonDetail{
			DaemonArn: proto.String(d.GetDaemonArn()), ClusterArn: proto.String(arn.ClusterARN(account.Region, account.Account, d.GetClusterName())),
			Status: proto.String(d.GetStatus()), CreatedAt: proto.Float64(d.GetCreatedAt()), UpdatedAt: proto.Float64(d.GetUpdatedAt()),
			DeploymentArn: proto.String(d.GetDeploymentArn()), CurrentRevisions: currentRevisions(account, d, tasks),
		}}, nil
	})
}

// daemonTasks returns the task records of a daemon (any status).
func daemonTasks(ctx context.Context, kv clientv3.KV, account keys.Scope, cluster, name string) ([]store.Item[*storev1.TaskRecord], error) {
	all, err := store.ListAll[*storev1.TaskRecord](ctx, kv, keys.Tasks(account, cluster))
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, t := range all {
		if t.Value.GetServiceName() == ServicePrefix+name {
			out = append(out, t)
		}
	}
	return out, nil
}

// currentRevisions counts a daemon's RUNNING tasks by revision and capacity provider.
func currentRevisions(account keys.Scope, d *storev1.DaemonRecord, tasks []store.Item[*storev1.TaskRecord]) []*ecsv1.DaemonRevisionDetail {
	counts := map[string]map[string]int32{}
	var order []string
	for _, t := range tasks {
		if t.Value.GetTask().GetLastStatus() != "RUNNING" {
			continue
		}
		rev := d.GetRevisionOf()[t.Value.GetDeploymentId()]
		if rev == "" {
			continue
		}
		if counts[rev] == nil {
			counts[rev] = map[string]int32{}
			order = append(order, rev)
		}
		counts[rev][t.Value.GetTask().GetCapacityProviderName()]++
	}
	out := []*ecsv1.DaemonRevisionDetail{}
	for _, rev := range order {
		detail := &ecsv1.DaemonRevisionDetail{Arn: proto.String(rev), CapacityProviders: []*ecsv1.DaemonCapacityProvider{}}
		names := make([]string, 0, len(counts[rev]))
		for n := range counts[rev] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			detail.CapacityProviders = append(detail.CapacityProviders, &ecsv1.DaemonCapacityProvider{Arn: proto.String(capacity.ARN(account, n)), RunningCount: counts[rev][n]})
			detail.TotalRunningCount += counts[rev][n]
		}
		out = append(out, detail)
	}
	return out
}

// ListDaemons lists the daemons of a cluster (of every cluster when clusterArn is not
// given), optionally only those using one of capacityProviderArns; maxResults 1 to 100
// (default 100) with nextToken. Errors: ClusterNotFoundException for an unknown cluster.
// AWS reference: ListDaemons.
func (h *Daemons) ListDaemons(ctx context.Context, req *connect.Request[ecsv1.ListDaemonsRequest]) (*connect.Response[ecsv1.ListDaemonsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListDaemonsRequest) (*ecsv1.ListDaemonsResponse, error) {
		limit, err := maxResults(m.MaxResults, 100)
		if err != nil {
			return nil, err
		}
		cluster := ""
		if m.GetClusterArn() != "" {
			if cluster, err = control.ClusterName(account, m.GetClusterArn()); err != nil {
				return nil, err
			}
			c, _, err := get[*storev1.ClusterRecord](ctx, h.kv, keys.Cluster(account, cluster))
			if err != nil {
				return nil, err
			}
			if c == nil {
				return nil, awserr.ClusterNotFoundError()
			}
		}
		want := map[string]bool{}
		for _, ref := range m.GetCapacityProviderArns() {
			name, ok := capacity.RefName(account, ref)
			if !ok {
				return nil, awserr.InvalidParameterf("Invalid capacity provider %q.", ref)
			}
			want[capacity.ARN(account, name)] = true
		}
		items, err := store.ListAll[*storev1.DaemonRecord](ctx, h.kv, keys.Daemons(account, cluster))
		if err != nil {
			return nil, err
		}
		var out []*ecsv1.DaemonSummary
		for _, it := range items {
			d := it.Value
			if len(want) > 0 && !slices.ContainsFunc(d.GetCapacityProviderArns(), func(a string) bool { return want[a] }) {
				continue
			}
			out = append(out, &ecsv1.DaemonSummary{DaemonArn: proto.String(d.GetDaemonArn()), Status: proto.String(d.GetStatus()), CreatedAt: proto.Float64(d.GetCreatedAt()), UpdatedAt: proto.Float64(d.GetUpdatedAt())})
		}
		page, next, err := paginate(out, m.GetNextToken(), limit)
		if err != nil {
			return nil, err
		}
		return &ecsv1.ListDaemonsResponse{DaemonSummariesList: nonNil(page), NextToken: next}, nil
	})
}

// childRef parses a daemon deployment or revision ARN of account; ok is false when it is
// not one.
func childRef(account keys.Scope, typ, ref string) (cluster, daemon, id string, ok bool) {
	a, err := arn.Parse(ref)
	if err != nil || a.Type != typ || !account.Owns(a.Partition, a.Account, a.Region) {
		return "", "", "", false
	}
	daemon, id = splitChild(a.Name)
	return a.Cluster, daemon, id, true
}

// missing is the failure of an ARN that names nothing.
func missing(a string) *ecsv1.Failure {
	return &ecsv1.Failure{Arn: proto.String(a), Reason: proto.String("MISSING")}
}

// DescribeDaemonDeployments describes up to 20 daemon deployments; an unknown one is a
// failure with reason MISSING. Errors: InvalidParameterException for an empty or too
// long list. AWS reference: DescribeDaemonDeployments.
func (h *Daemons) DescribeDaemonDeployments(ctx context.Context, req *connect.Request[ecsv1.DescribeDaemonDeploymentsRequest]) (*connect.Response[ecsv1.DescribeDaemonDeploymentsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeDaemonDeploymentsRequest) (*ecsv1.DescribeDaemonDeploymentsResponse, error) {
		if n := len(m.GetDaemonDeploymentArns()); n == 0 || n > 20 {
			return nil, awserr.InvalidParameterf("daemonDeploymentArns must have 1 to 20 items.")
		}
		resp := &ecsv1.DescribeDaemonDeploymentsResponse{DaemonDeployments: []*ecsv1.DaemonDeployment{}, Failures: []*ecsv1.Failure{}}
		for _, a := range m.GetDaemonDeploymentArns() {
			cluster, daemon, id, ok := childRef(account, arn.DaemonDeployment, a)
			if !ok {
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			rec, _, err := get[*storev1.DaemonDeploymentRecord](ctx, h.kv, keys.DaemonDeployment(account, cluster, daemon, id))
			if err != nil {
				return nil, err
			}
			if rec == nil {
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			resp.DaemonDeployments = append(resp.DaemonDeployments, rec.GetDeployment())
		}
		return resp, nil
	})
}

// ListDaemonDeployments lists a daemon's deployments, newest first, optionally by status
// and creation time; maxResults 1 to 100 (default 20) with nextToken. Errors:
// InvalidParameterException, ClusterNotFoundException, and DaemonNotFoundException
// (answered as ClientException, the model's error for this action). AWS reference:
// ListDaemonDeployments.
func (h *Daemons) ListDaemonDeployments(ctx context.Context, req *connect.Request[ecsv1.ListDaemonDeploymentsRequest]) (*connect.Response[ecsv1.ListDaemonDeploymentsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListDaemonDeploymentsRequest) (*ecsv1.ListDaemonDeploymentsResponse, error) {
		limit, err := maxResults(m.MaxResults, 100)
		if err != nil {
			return nil, err
		}
		if m.MaxResults == nil {
			limit = 20
		}
		for _, s := range m.GetStatus() {
			if !slices.Contains([]string{DeploymentPending, DeploymentSuccessful, DeploymentStopped, "STOP_REQUESTED", DeploymentInProgress, DeploymentRollbackInProgress, DeploymentRollbackSuccessful, DeploymentRollbackFailed}, s) {
				return nil, awserr.InvalidParameterf("Invalid status %q.", s)
			}
		}
		d, _, err := h.readDaemon(ctx, account, m.GetDaemonArn())
		if err != nil {
			if e, ok := err.(*awserr.Error); ok && e.Type == "DaemonNotFoundException" {
				return nil, awserr.Clientf("Daemon not found.")
			}
			return nil, err
		}
		items, err := store.ListAll[*storev1.DaemonDeploymentRecord](ctx, h.kv, keys.DaemonDeployments(account, d.GetClusterName(), d.GetDaemonName()))
		if err != nil {
			return nil, err
		}
		var out []*ecsv1.DaemonDeploymentSummary
		for _, it := range items {
			dep := it.Value.GetDeployment()
			if len(m.GetStatus()) > 0 && !slices.Contains(m.GetStatus(), dep.GetStatus()) {
				continue
			}
			if c := m.GetCreatedAt(); c != nil {
				if (c.After != nil && dep.GetCreatedAt() < c.GetAfter()) || (c.Before != nil && dep.GetCreatedAt() > c.GetBefore()) {
					continue
				}
			}
			out = append(out, &ecsv1.DaemonDeploymentSummary{
				DaemonDeploymentArn: dep.DaemonDeploymentArn, DaemonArn: proto.String(d.GetDaemonArn()), ClusterArn: dep.ClusterArn,
				Status: dep.Status, StatusReason: dep.StatusReason, CreatedAt: dep.CreatedAt, StartedAt: dep.StartedAt,
				FinishedAt: dep.FinishedAt, StoppedAt: dep.StoppedAt, TargetDaemonRevisionArn: dep.GetTargetDaemonRevision().Arn,
			})
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].GetCreatedAt() > out[j].GetCreatedAt() })
		page, next, err := paginate(out, m.GetNextToken(), limit)
		if err != nil {
			return nil, err
		}
		return &ecsv1.ListDaemonDeploymentsResponse{DaemonDeployments: nonNil(page), NextToken: next}, nil
	})
}

// DescribeDaemonRevisions describes up to 20 daemon revisions; an unknown one is a
// failure with reason MISSING. AWS reference: DescribeDaemonRevisions.
func (h *Daemons) DescribeDaemonRevisions(ctx context.Context, req *connect.Request[ecsv1.DescribeDaemonRevisionsRequest]) (*connect.Response[ecsv1.DescribeDaemonRevisionsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeDaemonRevisionsRequest) (*ecsv1.DescribeDaemonRevisionsResponse, error) {
		if n := len(m.GetDaemonRevisionArns()); n == 0 || n > 20 {
			return nil, awserr.InvalidParameterf("daemonRevisionArns must have 1 to 20 items.")
		}
		resp := &ecsv1.DescribeDaemonRevisionsResponse{DaemonRevisions: []*ecsv1.DaemonRevision{}, Failures: []*ecsv1.Failure{}}
		for _, a := range m.GetDaemonRevisionArns() {
			cluster, daemon, id, ok := childRef(account, arn.DaemonRevision, a)
			if !ok {
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			rec, _, err := get[*storev1.DaemonRevisionRecord](ctx, h.kv, keys.DaemonRevision(account, cluster, daemon, id))
			if err != nil {
				return nil, err
			}
			if rec == nil {
				resp.Failures = append(resp.Failures, missing(a))
				continue
			}
			resp.DaemonRevisions = append(resp.DaemonRevisions, rec.GetRevision())
		}
		return resp, nil
	})
}
