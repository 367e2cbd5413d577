package control

import (
	"context"
	"slices"
	"strconv"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// validateClusterSettings accepts containerInsights, the only cluster setting ECS has,
// with the values AWS knows (enabled, disabled, enhanced); Berth honours disabled only:
// it has no Container Insights metrics yet, so enabled and enhanced are refused
// (InvalidParameterException) rather than recorded.
func validateClusterSettings(settings []*ecsv1.ClusterSetting) error {
	for _, st := range settings {
		if st.GetName() != SettingContainerInsights {
			return awserr.InvalidParameterf("Invalid cluster setting name %q; the only cluster setting is containerInsights.", st.GetName())
		}
		if !oneOf(st.GetValue(), "enabled", "disabled", "enhanced") {
			return awserr.InvalidParameterf("Invalid value %q for cluster setting containerInsights.", st.GetValue())
		}
		if st.GetValue() != "disabled" {
			return awserr.InvalidParameterf("settings: containerInsights %s is not supported by Berth: Berth has no Container Insights metrics yet; use disabled.", st.GetValue())
		}
	}
	return nil
}

// validateClusterConfiguration refuses what a cluster's configuration and Service
// Connect defaults ask that Berth cannot do (InvalidParameterException naming the member):
// executeCommandConfiguration beyond logging DEFAULT or NONE (Berth has no ECS Exec, so no
// session is ever logged or encrypted; a KMS key, logging OVERRIDE or a logConfiguration
// would name a destination that never gets anything), managedStorageConfiguration with a
// KMS key (Berth has no KMS: task storage is not encrypted with a customer key) and a
// serviceConnectDefaults namespace (Berth has no Service Connect yet). An empty
// namespace, which clears the default, is accepted.
func validateClusterConfiguration(conf *ecsv1.ClusterConfiguration, sc *ecsv1.ClusterServiceConnectDefaultsRequest) error {
	if ec := conf.GetExecuteCommandConfiguration(); ec != nil {
		switch {
		case ec.KmsKeyId != nil:
			return awserr.InvalidParameterf("configuration.executeCommandConfiguration.kmsKeyId is not supported by Berth: Berth has no ECS Exec and no KMS, so there is no session to encrypt.")
		case ec.LogConfiguration != nil:
			return awserr.InvalidParameterf("configuration.executeCommandConfiguration.logConfiguration is not supported by Berth: Berth has no ECS Exec, so no session would ever be logged there.")
		case ec.Logging != nil && !oneOf(ec.GetLogging(), "DEFAULT", "NONE", "OVERRIDE"):
			return awserr.InvalidParameterf("Invalid value %q for configuration.executeCommandConfiguration.logging: valid values are NONE, DEFAULT and OVERRIDE.", ec.GetLogging())
		case ec.GetLogging() == "OVERRIDE":
			return awserr.InvalidParameterf("configuration.executeCommandConfiguration.logging OVERRIDE is not supported by Berth: Berth has no ECS Exec, so no session would ever be logged; use DEFAULT or NONE.")
		}
	}
	if ms := conf.GetManagedStorageConfiguration(); ms != nil {
		if ms.KmsKeyId != nil {
			return awserr.InvalidParameterf("configuration.managedStorageConfiguration.kmsKeyId is not supported by Berth: Berth has no KMS, and task storage is not encrypted with a customer key.")
		}
		if ms.FargateEphemeralStorageKmsKeyId != nil {
			return awserr.InvalidParameterf("configuration.managedStorageConfiguration.fargateEphemeralStorageKmsKeyId is not supported by Berth: Berth has no KMS, and task storage is not encrypted with a customer key.")
		}
	}
	if sc.GetNamespace() != "" {
		return awserr.InvalidParameterf("serviceConnectDefaults.namespace is not supported by Berth: Berth has no Service Connect yet; leave serviceConnectDefaults out.")
	}
	return nil
}

// mergeClusterSettings applies settings over cur.
func mergeClusterSettings(cur, settings []*ecsv1.ClusterSetting) []*ecsv1.ClusterSetting {
	out := append([]*ecsv1.ClusterSetting{}, cur...)
	for _, st := range settings {
		found := false
		for i, c := range out {
			if c.GetName() == st.GetName() {
				out[i] = &ecsv1.ClusterSetting{Name: proto.String(st.GetName()), Value: proto.String(st.GetValue())}
				found = true
			}
		}
		if !found {
			out = append(out, &ecsv1.ClusterSetting{Name: proto.String(st.GetName()), Value: proto.String(st.GetValue())})
		}
	}
	return out
}

// CreateCluster creates a cluster (clusterName, default "default") and returns it. An
// ACTIVE cluster of that name is returned unchanged, as ECS does; an INACTIVE one is
// created afresh. Errors: InvalidParameterException for a bad name, tags or settings.
// AWS reference: CreateCluster.
func (s *Server) CreateCluster(ctx context.Context, req *connect.Request[ecsv1.CreateClusterRequest]) (*connect.Response[ecsv1.CreateClusterResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.CreateClusterRequest) (*ecsv1.CreateClusterResponse, error) {
		name := m.GetClusterName()
		if m.ClusterName == nil {
			name = DefaultCluster
		}
		if !ecsrules.ValidName(name) {
			return nil, awserr.InvalidParameterf("Cluster name can have up to 255 characters. Valid characters are letters (uppercase and lowercase), numbers, underscores, and hyphens.")
		}
		if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		if err := validateClusterSettings(m.GetSettings()); err != nil {
			return nil, err
		}
		if err := validateClusterConfiguration(m.GetConfiguration(), m.GetServiceConnectDefaults()); err != nil {
			return nil, err
		}
		providers := providerNames(account, m.GetCapacityProviders())
		if err := s.validateClusterProviders(ctx, account, name, providers, m.GetDefaultCapacityProviderStrategy()); err != nil {
			return nil, err
		}
		stored, err := s.settings(ctx, account)
		if err != nil {
			return nil, err
		}
		c := &ecsv1.Cluster{
			ClusterArn:                      proto.String(arn.ClusterARN(account.Region, account.Account, name)),
			ClusterName:                     proto.String(name),
			Status:                          proto.String(statusActive),
			Tags:                            mergeTags(nil, m.GetTags()),
			Settings:                        mergeClusterSettings([]*ecsv1.ClusterSetting{{Name: proto.String(SettingContainerInsights), Value: proto.String(effective(stored, SettingContainerInsights))}}, m.GetSettings()),
			CapacityProviders:               providers,
			DefaultCapacityProviderStrategy: m.GetDefaultCapacityProviderStrategy(),
			Configuration:                   m.GetConfiguration(),
			Statistics:                      []*ecsv1.KeyValuePair{},
			Attachments:                     []*ecsv1.Attachment{},
		}
		if ns := m.GetServiceConnectDefaults().GetNamespace(); ns != "" {
			c.ServiceConnectDefaults = &ecsv1.ClusterServiceConnectDefaults{Namespace: proto.String(ns)}
		}
		var out *ecsv1.Cluster
		err = awsapi.Retry(ctx, func() error {
			cur, rev, err := s.cluster(ctx, account, name)
			if err != nil {
				return err
			}
			if cur != nil && cur.GetCluster().GetStatus() == statusActive {
				out = cur.GetCluster()
				return nil
			}
			txn := store.NewTxn(s.kv)
			rec := &storev1.ClusterRecord{Cluster: c}
			if cur == nil {
				txn.Create(keys.Cluster(account, name), rec)
			} else {
				txn.Update(keys.Cluster(account, name), rev, rec)
			}
			txn.PutIndex(keys.ActiveCluster(account, name))
			if _, err := txn.Commit(ctx); err != nil {
				return err
			}
			out = c
			return nil
		})
		if err != nil {
			return nil, err
		}
		desc, err := s.describeCluster(ctx, account, out, []string{"TAGS", "SETTINGS", "CONFIGURATIONS", "ATTACHMENTS"})
		if err != nil {
			return nil, err
		}
		return &ecsv1.CreateClusterResponse{Cluster: desc}, nil
	})
}

// describeCluster returns a copy of c with its task counts (taskCounts; 0 for an
// INACTIVE cluster) and the optional parts asked for by include. Errors: etcd's.
func (s *Server) describeCluster(ctx context.Context, account keys.Scope, c *ecsv1.Cluster, include []string) (*ecsv1.Cluster, error) {
	var pending, running int32
	if c.GetStatus() == statusActive {
		// An INACTIVE cluster had none when it was deleted, and none can be placed since.
		var err error
		if pending, running, err = s.taskCounts(ctx, account, c.GetClusterName()); err != nil {
			return nil, err
		}
	}
	out := proto.Clone(c).(*ecsv1.Cluster)
	out.PendingTasksCount, out.RunningTasksCount = pending, running
	want := map[string]bool{}
	for _, i := range include {
		want[i] = true
	}
	if !want["TAGS"] {
		out.Tags = nil
	}
	if !want["SETTINGS"] {
		out.Settings = nil
	}
	if !want["CONFIGURATIONS"] {
		out.Configuration = nil
	}
	if !want["ATTACHMENTS"] {
		out.Attachments = nil
		out.AttachmentsStatus = nil
	}
	out.Statistics = nil
	if want["STATISTICS"] {
		kv := func(n string, v int32) *ecsv1.KeyValuePair {
			return &ecsv1.KeyValuePair{Name: proto.String(n), Value: proto.String(strconv.Itoa(int(v)))}
		}
		out.Statistics = []*ecsv1.KeyValuePair{
			kv("runningEC2TasksCount", running),
			kv("runningFargateTasksCount", 0),
			kv("pendingEC2TasksCount", pending),
			kv("pendingFargateTasksCount", 0),
			kv("activeEC2ServiceCount", c.GetActiveServicesCount()),
			kv("activeFargateServiceCount", 0),
			kv("drainingEC2ServiceCount", 0),
			kv("drainingFargateServiceCount", 0),
		}
	}
	return out, nil
}

// taskCounts returns a cluster's pendingTasksCount (PROVISIONING, PENDING, ACTIVATING)
// and runningTasksCount: running is the count of the cluster's keys.InstanceRunning keys,
// pending the sum of its instance records' active_tasks (which task.PlaceTxn and
// ApplyTaskStateChange keep in the transactions that place or stop a task; a deregistered
// instance's record stays) less running. The cluster record keeps no counters of its
// own, so the placements and the state changes of a cluster do not all write one key,
// and a task going from PENDING to RUNNING writes no instance record either. It reads
// the cluster's instance records, 500 a page, and then counts (as task.FillCounts): a
// task that stops in between shows as pending in this answer. Errors: etcd's.
func (s *Server) taskCounts(ctx context.Context, account keys.Scope, cluster string) (pending, running int32, err error) {
	var active int32
	token := ""
	for {
		items, next, err := store.List[*storev1.ContainerInstanceRecord](ctx, s.kv, keys.Instances(account, cluster), 500, token)
		if err != nil {
			return 0, 0, err
		}
		for _, it := range items {
			active += it.Value.GetActiveTasks()
		}
		if next == "" {
			break
		}
		token = next
	}
	resp, err := s.kv.Get(ctx, keys.InstanceRunning(account, cluster, "", ""), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, err
	}
	running = int32(resp.Count)
	return max(active-running, 0), running, nil
}

// DescribeClusters describes up to 100 clusters by name or ARN ("default" when none is
// given); include adds SETTINGS, STATISTICS, TAGS, CONFIGURATIONS, ATTACHMENTS. INACTIVE
// clusters are described; unknown ones come back in failures with reason MISSING.
// AWS reference: DescribeClusters.
func (s *Server) DescribeClusters(ctx context.Context, req *connect.Request[ecsv1.DescribeClustersRequest]) (*connect.Response[ecsv1.DescribeClustersResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeClustersRequest) (*ecsv1.DescribeClustersResponse, error) {
		refs := m.GetClusters()
		if len(refs) == 0 {
			refs = []string{DefaultCluster}
		}
		if len(refs) > 100 {
			return nil, awserr.InvalidParameterf("The number of clusters must be at most 100.")
		}
		for _, inc := range m.GetInclude() {
			if !oneOf(inc, "ATTACHMENTS", "CONFIGURATIONS", "SETTINGS", "STATISTICS", "TAGS") {
				return nil, awserr.InvalidParameterf("Invalid include value %q.", inc)
			}
		}
		resp := &ecsv1.DescribeClustersResponse{Clusters: []*ecsv1.Cluster{}, Failures: []*ecsv1.Failure{}}
		var ks []string
		var names []string
		for _, ref := range refs {
			name, err := ClusterName(account, ref)
			if err != nil {
				resp.Failures = append(resp.Failures, missing(clusterFailureARN(account.Region, account.Account, ref)))
				continue
			}
			ks = append(ks, keys.Cluster(account, name))
			names = append(names, name)
		}
		recs, _, err := getMany[*storev1.ClusterRecord](ctx, s.kv, ks)
		if err != nil {
			return nil, err
		}
		for i, rec := range recs {
			if rec == nil {
				resp.Failures = append(resp.Failures, missing(arn.ClusterARN(account.Region, account.Account, names[i])))
				continue
			}
			c, err := s.describeCluster(ctx, account, rec.GetCluster(), m.GetInclude())
			if err != nil {
				return nil, err
			}
			if c.Statistics != nil && c.GetStatus() == statusActive {
				if err := s.splitFargateStatistics(ctx, account, c); err != nil {
					return nil, err
				}
			}
			resp.Clusters = append(resp.Clusters, c)
		}
		return resp, nil
	})
}

// splitFargateStatistics moves a cluster's FARGATE tasks and services from the EC2
// statistics describeCluster wrote (from the instances' counters, which count every task)
// to the Fargate ones: it reads the cluster's tasks with desiredStatus RUNNING and its
// services, O(those) — only for DescribeClusters with include STATISTICS.
func (s *Server) splitFargateStatistics(ctx context.Context, account keys.Scope, c *ecsv1.Cluster) error {
	name := c.GetClusterName()
	ks, err := TaskKeys(ctx, s.kv, account, name, task.DesiredRunning, keys.DimAll, "-")
	if err != nil {
		return err
	}
	recs, _, err := getMany[*storev1.TaskRecord](ctx, s.kv, ks)
	if err != nil {
		return err
	}
	var running, pending, services int32
	for _, r := range recs {
		if r.GetTask().GetLaunchType() != "FARGATE" {
			continue
		}
		p, run := task.Counts(r.GetTask().GetLastStatus())
		pending, running = pending+p, running+run
	}
	token := ""
	for {
		items, next, err := store.List[*storev1.ServiceRecord](ctx, s.kv, keys.Services(account, name), 500, token)
		if err != nil {
			return err
		}
		for _, it := range items {
			svc := it.Value.GetService()
			if svc.GetStatus() == statusActive && (svc.GetLaunchType() == "FARGATE" || (len(svc.GetCapacityProviderStrategy()) > 0 && capacity.StrategyLaunchType(svc.GetCapacityProviderStrategy()) == "FARGATE")) {
				services++
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	set := map[string]int32{
		"runningEC2TasksCount": max(c.GetRunningTasksCount()-running, 0), "runningFargateTasksCount": running,
		"pendingEC2TasksCount": max(c.GetPendingTasksCount()-pending, 0), "pendingFargateTasksCount": pending,
		"activeEC2ServiceCount": max(c.GetActiveServicesCount()-services, 0), "activeFargateServiceCount": services,
	}
	for _, kv := range c.Statistics {
		if v, ok := set[kv.GetName()]; ok {
			kv.Value = proto.String(strconv.Itoa(int(v)))
		}
	}
	return nil
}

func clusterFailureARN(region, account, ref string) string {
	if arn.IsARN(ref) {
		return ref
	}
	return arn.ClusterARN(region, account, ref)
}

// missing returns a failure with reason MISSING.
func missing(a string) *ecsv1.Failure {
	return &ecsv1.Failure{Arn: proto.String(a), Reason: proto.String("MISSING")}
}

// ListClusters lists the ARNs of the account's ACTIVE clusters in name order, maxResults
// (1–100, default 100) per page with an opaque nextToken; a page costs O(maxResults).
// AWS reference: ListClusters.
func (s *Server) ListClusters(ctx context.Context, req *connect.Request[ecsv1.ListClustersRequest]) (*connect.Response[ecsv1.ListClustersResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListClustersRequest) (*ecsv1.ListClustersResponse, error) {
		limit, err := maxResults(m.MaxResults)
		if err != nil {
			return nil, err
		}
		ks, next, err := pageKeys(ctx, s.kv, keys.ActiveCluster(account, ""), limit, m.GetNextToken(), false)
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.ListClustersResponse{ClusterArns: make([]string, 0, len(ks))}
		for _, k := range ks {
			resp.ClusterArns = append(resp.ClusterArns, arn.ClusterARN(account.Region, account.Account, lastPart(k)))
		}
		if next != "" {
			resp.NextToken = proto.String(next)
		}
		return resp, nil
	})
}

// DeleteCluster marks an ACTIVE cluster INACTIVE (it stays describable) and returns it.
// It is refused with ClusterContainsContainerInstancesException while instances are
// registered, ClusterContainsServicesException while services are active, and
// ClusterContainsTasksException while tasks are pending or running; an unknown or
// INACTIVE cluster is ClusterNotFoundException. AWS reference: DeleteCluster.
func (s *Server) DeleteCluster(ctx context.Context, req *connect.Request[ecsv1.DeleteClusterRequest]) (*connect.Response[ecsv1.DeleteClusterResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteClusterRequest) (*ecsv1.DeleteClusterResponse, error) {
		if m.GetCluster() == "" {
			return nil, awserr.InvalidParameterf("cluster is required.")
		}
		var out *ecsv1.Cluster
		err := awsapi.Retry(ctx, func() error {
			name, rec, rev, err := s.activeCluster(ctx, account, m.GetCluster())
			if err != nil {
				return err
			}
			c := rec.GetCluster()
			if c.GetRegisteredContainerInstancesCount() > 0 {
				return awserr.New("ClusterContainsContainerInstancesException", "The Cluster cannot be deleted while Container Instances are active or draining.")
			}
			if c.GetActiveServicesCount() > 0 {
				return awserr.New("ClusterContainsServicesException", "The Cluster cannot be deleted while Services are active.")
			}
			active, _, err := pageIDKeys(ctx, s.kv, keys.TaskList(account, name, "RUNNING", keys.DimAll, "-", ""), 1, "")
			if err != nil {
				return err
			}
			pending, running, err := s.taskCounts(ctx, account, name)
			if err != nil {
				return err
			}
			if running > 0 || pending > 0 || len(active) > 0 {
				return awserr.New("ClusterContainsTasksException", "The Cluster cannot be deleted while Tasks are active.")
			}
			c.Status = proto.String(statusInactive)
			_, err = store.NewTxn(s.kv).
				Update(keys.Cluster(account, name), rev, rec).
				Delete(keys.ActiveCluster(account, name)).
				Commit(ctx)
			out = c
			return err
		})
		if err != nil {
			return nil, err
		}
		desc, err := s.describeCluster(ctx, account, out, []string{"SETTINGS", "CONFIGURATIONS"})
		if err != nil {
			return nil, err
		}
		return &ecsv1.DeleteClusterResponse{Cluster: desc}, nil
	})
}

// mutateCluster applies fn to an ACTIVE cluster under CAS and returns it.
func (s *Server) mutateCluster(ctx context.Context, account keys.Scope, ref string, fn func(*ecsv1.Cluster) error) (*ecsv1.Cluster, error) {
	name, err := ClusterName(account, ref)
	if err != nil {
		return nil, err
	}
	rec, _, err := store.Mutate(ctx, s.kv, keys.Cluster(account, name), func(r *storev1.ClusterRecord) error {
		if r.GetCluster().GetStatus() != statusActive {
			return awserr.ClusterNotFoundError()
		}
		return fn(r.GetCluster())
	}, store.MaxAttempts(64))
	if isNotFound(err) {
		return nil, awserr.ClusterNotFoundError()
	}
	if err != nil {
		return nil, err
	}
	return rec.GetCluster(), nil
}

// UpdateCluster updates a cluster's settings, configuration and Service Connect defaults
// and returns it. Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: UpdateCluster.
func (s *Server) UpdateCluster(ctx context.Context, req *connect.Request[ecsv1.UpdateClusterRequest]) (*connect.Response[ecsv1.UpdateClusterResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateClusterRequest) (*ecsv1.UpdateClusterResponse, error) {
		if m.GetCluster() == "" {
			return nil, awserr.InvalidParameterf("cluster is required.")
		}
		if err := validateClusterSettings(m.GetSettings()); err != nil {
			return nil, err
		}
		if err := validateClusterConfiguration(m.GetConfiguration(), m.GetServiceConnectDefaults()); err != nil {
			return nil, err
		}
		c, err := s.mutateCluster(ctx, account, m.GetCluster(), func(c *ecsv1.Cluster) error {
			c.Settings = mergeClusterSettings(c.Settings, m.GetSettings())
			if m.Configuration != nil {
				c.Configuration = m.GetConfiguration()
			}
			if m.ServiceConnectDefaults != nil {
				c.ServiceConnectDefaults = &ecsv1.ClusterServiceConnectDefaults{Namespace: m.GetServiceConnectDefaults().Namespace}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		desc, err := s.describeCluster(ctx, account, c, []string{"SETTINGS", "CONFIGURATIONS", "TAGS"})
		if err != nil {
			return nil, err
		}
		return &ecsv1.UpdateClusterResponse{Cluster: desc}, nil
	})
}

// UpdateClusterSettings sets a cluster's settings (containerInsights) and returns the
// cluster. Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: UpdateClusterSettings.
func (s *Server) UpdateClusterSettings(ctx context.Context, req *connect.Request[ecsv1.UpdateClusterSettingsRequest]) (*connect.Response[ecsv1.UpdateClusterSettingsResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateClusterSettingsRequest) (*ecsv1.UpdateClusterSettingsResponse, error) {
		if m.GetCluster() == "" {
			return nil, awserr.InvalidParameterf("cluster is required.")
		}
		if len(m.GetSettings()) == 0 {
			return nil, awserr.InvalidParameterf("settings is required.")
		}
		if err := validateClusterSettings(m.GetSettings()); err != nil {
			return nil, err
		}
		c, err := s.mutateCluster(ctx, account, m.GetCluster(), func(c *ecsv1.Cluster) error {
			c.Settings = mergeClusterSettings(c.Settings, m.GetSettings())
			return nil
		})
		if err != nil {
			return nil, err
		}
		desc, err := s.describeCluster(ctx, account, c, []string{"SETTINGS"})
		if err != nil {
			return nil, err
		}
		return &ecsv1.UpdateClusterSettingsResponse{Cluster: desc}, nil
	})
}

// PutClusterCapacityProviders replaces a cluster's capacity providers (names or ARNs,
// stored as names) and default strategy, which RunTask and CreateService use when given
// neither a launchType nor a strategy. Each provider must exist and be ACTIVE, and an Auto
// Scaling group provider can belong to one cluster only; a provider a service's strategy
// uses cannot be removed. Both lists are required (empty lists clear them). Errors:
// ClusterNotFoundException, InvalidParameterException, ResourceInUseException.
// AWS reference: PutClusterCapacityProviders.
func (s *Server) PutClusterCapacityProviders(ctx context.Context, req *connect.Request[ecsv1.PutClusterCapacityProvidersRequest]) (*connect.Response[ecsv1.PutClusterCapacityProvidersResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.PutClusterCapacityProvidersRequest) (*ecsv1.PutClusterCapacityProvidersResponse, error) {
		if m.GetCluster() == "" {
			return nil, awserr.InvalidParameterf("cluster is required.")
		}
		name, _, _, err := s.activeCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		providers := providerNames(account, m.GetCapacityProviders())
		if err := s.validateClusterProviders(ctx, account, name, providers, m.GetDefaultCapacityProviderStrategy()); err != nil {
			return nil, err
		}
		inUse, err := s.providersInUse(ctx, account, name)
		if err != nil {
			return nil, err
		}
		for p, svc := range inUse {
			if !slices.Contains(providers, p) {
				return nil, awserr.New("ResourceInUseException", "The specified capacity provider %s is in use by service %s and cannot be removed.", p, svc)
			}
		}
		c, err := s.mutateCluster(ctx, account, m.GetCluster(), func(c *ecsv1.Cluster) error {
			c.CapacityProviders = providers
			c.DefaultCapacityProviderStrategy = m.GetDefaultCapacityProviderStrategy()
			return nil
		})
		if err != nil {
			return nil, err
		}
		desc, err := s.describeCluster(ctx, account, c, []string{"SETTINGS", "CONFIGURATIONS"})
		if err != nil {
			return nil, err
		}
		return &ecsv1.PutClusterCapacityProvidersResponse{Cluster: desc}, nil
	})
}

// providerNames returns capacity provider references as names (ARNs of the caller's
// providers become their names; anything else is kept for validation to refuse).
func providerNames(account keys.Scope, refs []string) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if n, ok := capacity.RefName(account, r); ok {
			r = n
		}
		out = append(out, r)
	}
	return out
}

// providersInUse returns the capacity providers the strategies of a cluster's ACTIVE and
// DRAINING services use, each with one service using it.
func (s *Server) providersInUse(ctx context.Context, account keys.Scope, cluster string) (map[string]string, error) {
	out := map[string]string{}
	token := ""
	for {
		items, next, err := store.List[*storev1.ServiceRecord](ctx, s.kv, keys.Services(account, cluster), 500, token)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			svc := it.Value.GetService()
			if svc.GetStatus() == statusInactive {
				continue
			}
			for _, st := range svc.GetCapacityProviderStrategy() {
				out[st.GetCapacityProvider()] = svc.GetServiceName()
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}
