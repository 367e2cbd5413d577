package control

import (
	"context"
	"encoding/base64"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsapi"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Capacity providers on Berth (docs/capacity-providers.md). A capacity provider is a
// named pool of the container instances of the cluster it is associated with:
//
//   - An instance joins the pool of provider P by carrying the custom attribute
//     PoolAttribute ("berth.capacity-provider") with the value P: given at registration
//     (the agent's custom attributes) or later with PutAttributes, and left with
//     DeleteAttributes. DescribeContainerInstances shows it as capacityProviderName.
//   - The built-in FARGATE and FARGATE_SPOT providers share one pool, the Fargate pool:
//     every ACTIVE instance of the cluster except those whose attribute FargateAttribute
//     ("berth.fargate") is "false".
//
// autoScalingGroupProvider.autoScalingGroupArn is recorded (one provider per Auto Scaling
// group, as on AWS); managedScaling, managedTerminationProtection and managedDraining are
// stored and described back — Berth launches no instances, so there is nothing for them
// to scale.

// Built-in capacity provider names.
const (
	ProviderFargate     = "FARGATE"
	ProviderFargateSpot = "FARGATE_SPOT"
)

// Instance attributes that place a container instance in capacity provider pools.
const (
	// PoolAttribute names the capacity provider whose pool the instance is in.
	PoolAttribute = "berth.capacity-provider"
	// FargateAttribute set to "false" keeps the instance out of the Fargate pool; any
	// other value, or none, leaves it in (every host takes Fargate tasks by default).
	FargateAttribute = "berth.fargate"
)

// Capacity provider statuses and update statuses (AWS's CapacityProviderStatus and
// CapacityProviderUpdateStatus).
const (
	cpActive         = "ACTIVE"
	cpInactive       = "INACTIVE"
	cpUpdateComplete = "UPDATE_COMPLETE"
	cpDeleteComplete = "DELETE_COMPLETE"
)

// Strategy limits from the CapacityProviderStrategyItem reference.
const (
	maxStrategyItems = 20
	maxWeight        = 1000
	maxBase          = 100000
)

var providerNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,255}$`)

// IsFargateProvider reports whether name is FARGATE or FARGATE_SPOT.
func IsFargateProvider(name string) bool {
	return name == ProviderFargate || name == ProviderFargateSpot
}

// PoolConstraint returns the memberOf constraint that limits placement to the pool of
// capacity provider name (see the package's capacity provider notes).
func PoolConstraint(name string) placement.Constraint {
	if IsFargateProvider(name) {
		return placement.Constraint{Type: placement.ConstraintMemberOf, Expression: "attribute:" + FargateAttribute + " != false"}
	}
	return placement.Constraint{Type: placement.ConstraintMemberOf, Expression: "attribute:" + PoolAttribute + " == '" + name + "'"}
}

// capacityProviderARN returns the ARN of provider name.
func capacityProviderARN(account keys.Scope, name string) string {
	return arn.ARN{Region: account.Region, Account: account.Account, Type: arn.CapacityProvider, Name: name}.String()
}

// builtinProvider returns FARGATE or FARGATE_SPOT as DescribeCapacityProviders shows it.
func builtinProvider(account keys.Scope, name string) *ecsv1.CapacityProvider {
	return &ecsv1.CapacityProvider{
		CapacityProviderArn: proto.String(capacityProviderARN(account, name)),
		Name:                proto.String(name),
		Status:              proto.String(cpActive),
		Type:                proto.String(name),
		Tags:                []*ecsv1.Tag{},
	}
}

// providerRefName resolves a capacity provider reference (a name or an ARN of the
// caller's) to a name; ok is false when it cannot name one of the caller's providers.
func providerRefName(account keys.Scope, ref string) (string, bool) {
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.CapacityProvider || !account.Owns(a.Partition, a.Account, a.Region) {
			return "", false
		}
		ref = a.Name
	}
	return ref, providerNamePattern.MatchString(ref)
}

// CapacityProvider reads the capacity provider ref (name or ARN) of account: the
// built-in ones, or the stored record (any status); nil when there is none.
func CapacityProvider(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (*ecsv1.CapacityProvider, int64, error) {
	name, ok := providerRefName(account, ref)
	if !ok {
		return nil, 0, nil
	}
	if IsFargateProvider(name) {
		return builtinProvider(account, name), 0, nil
	}
	return get[*ecsv1.CapacityProvider](ctx, kv, keys.CapacityProvider(account, name))
}

// defaultManagedScaling fills AWS's ManagedScaling defaults: status DISABLED when no
// managedScaling is given (ENABLED when one is given without status), targetCapacity
// 100, minimumScalingStepSize 1, maximumScalingStepSize 10000, instanceWarmupPeriod 300.
func defaultManagedScaling(ms *ecsv1.ManagedScaling) *ecsv1.ManagedScaling {
	out := &ecsv1.ManagedScaling{Status: proto.String("DISABLED")}
	if ms != nil {
		out = proto.Clone(ms).(*ecsv1.ManagedScaling)
		if out.Status == nil {
			out.Status = proto.String("ENABLED")
		}
	}
	if out.TargetCapacity == nil {
		out.TargetCapacity = proto.Int32(100)
	}
	if out.MinimumScalingStepSize == nil {
		out.MinimumScalingStepSize = proto.Int32(1)
	}
	if out.MaximumScalingStepSize == nil {
		out.MaximumScalingStepSize = proto.Int32(10000)
	}
	if out.InstanceWarmupPeriod == nil {
		out.InstanceWarmupPeriod = proto.Int32(300)
	}
	return out
}

// validateManagedScaling checks ManagedScaling's documented ranges.
func validateManagedScaling(ms *ecsv1.ManagedScaling) error {
	if ms == nil {
		return nil
	}
	if ms.Status != nil && !oneOf(ms.GetStatus(), "ENABLED", "DISABLED") {
		return awserr.InvalidParameterf("managedScaling.status must be ENABLED or DISABLED.")
	}
	if ms.TargetCapacity != nil && (ms.GetTargetCapacity() < 1 || ms.GetTargetCapacity() > 100) {
		return awserr.InvalidParameterf("managedScaling.targetCapacity must be between 1 and 100.")
	}
	if ms.MinimumScalingStepSize != nil && (ms.GetMinimumScalingStepSize() < 1 || ms.GetMinimumScalingStepSize() > 10000) {
		return awserr.InvalidParameterf("managedScaling.minimumScalingStepSize must be between 1 and 10000.")
	}
	if ms.MaximumScalingStepSize != nil && (ms.GetMaximumScalingStepSize() < 1 || ms.GetMaximumScalingStepSize() > 10000) {
		return awserr.InvalidParameterf("managedScaling.maximumScalingStepSize must be between 1 and 10000.")
	}
	if ms.MinimumScalingStepSize != nil && ms.MaximumScalingStepSize != nil && ms.GetMinimumScalingStepSize() > ms.GetMaximumScalingStepSize() {
		return awserr.InvalidParameterf("managedScaling.minimumScalingStepSize cannot be greater than maximumScalingStepSize.")
	}
	if ms.InstanceWarmupPeriod != nil && (ms.GetInstanceWarmupPeriod() < 0 || ms.GetInstanceWarmupPeriod() > 10000) {
		return awserr.InvalidParameterf("managedScaling.instanceWarmupPeriod must be between 0 and 10000.")
	}
	return nil
}

// validateASGSettings checks managedTerminationProtection and managedDraining, and that
// managed termination protection comes with managed scaling, as AWS requires.
func validateASGSettings(mtp, draining *string, scaling *ecsv1.ManagedScaling) error {
	if mtp != nil && !oneOf(*mtp, "ENABLED", "DISABLED") {
		return awserr.InvalidParameterf("managedTerminationProtection must be ENABLED or DISABLED.")
	}
	if draining != nil && !oneOf(*draining, "ENABLED", "DISABLED") {
		return awserr.InvalidParameterf("managedDraining must be ENABLED or DISABLED.")
	}
	if mtp != nil && *mtp == "ENABLED" && scaling.GetStatus() != "ENABLED" {
		return awserr.InvalidParameterf("The managed termination protection setting for the capacity provider is invalid. To enable managed termination protection for a capacity provider, managed scaling must be enabled.")
	}
	return validateManagedScaling(scaling)
}

// validASGARN reports whether v is an Auto Scaling group ARN (or, as AWS also accepts,
// a group name).
func validASGARN(v string) bool {
	if v == "" || len(v) > 1600 {
		return false
	}
	if !strings.HasPrefix(v, "arn:") {
		return providerNamePattern.MatchString(v)
	}
	parts := strings.SplitN(v, ":", 6)
	return len(parts) == 6 && parts[2] == "autoscaling" && strings.HasPrefix(parts[5], "autoScalingGroup:")
}

// accountProviders lists the account's stored capacity providers in name order.
func (s *Server) accountProviders(ctx context.Context, account keys.Scope) ([]*ecsv1.CapacityProvider, error) {
	var out []*ecsv1.CapacityProvider
	token := ""
	for {
		items, next, err := store.List[*ecsv1.CapacityProvider](ctx, s.kv, keys.CapacityProviders(account), 500, token)
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

// clustersUsing returns the names of the account's ACTIVE clusters that list provider.
func (s *Server) clustersUsing(ctx context.Context, account keys.Scope, provider string) ([]string, error) {
	var out []string
	token := ""
	for {
		items, next, err := store.List[*storev1.ClusterRecord](ctx, s.kv, keys.Clusters(account), 500, token)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			c := it.Value.GetCluster()
			if c.GetStatus() == statusActive && slices.Contains(c.GetCapacityProviders(), provider) {
				out = append(out, c.GetClusterName())
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// checkProviderCluster answers ClusterNotFoundException when a cluster is named and is
// not ACTIVE (the capacity provider calls take one for Managed Instances providers).
func (s *Server) checkProviderCluster(ctx context.Context, account keys.Scope, ref *string) (*ecsv1.Cluster, error) {
	if ref == nil {
		return nil, nil
	}
	_, rec, _, err := s.activeCluster(ctx, account, *ref)
	if err != nil {
		return nil, err
	}
	return rec.GetCluster(), nil
}

// CreateCapacityProvider creates an Auto Scaling group capacity provider: a named pool
// of container instances (those with attribute berth.capacity-provider = name).
// autoScalingGroupProvider (required) is recorded with AWS's defaults filled in; an Auto
// Scaling group belongs to one provider. Errors: InvalidParameterException (bad name —
// prefixed aws, ecs or fargate —, ranges, tags, a managedInstancesProvider, which Berth
// does not run), ClientException (the name is taken, the group is another provider's),
// LimitExceededException (more than 100 providers). AWS reference: CreateCapacityProvider.
func (s *Server) CreateCapacityProvider(ctx context.Context, req *connect.Request[ecsv1.CreateCapacityProviderRequest]) (*connect.Response[ecsv1.CreateCapacityProviderResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.CreateCapacityProviderRequest) (*ecsv1.CreateCapacityProviderResponse, error) {
		name := m.GetName()
		if m.Name == nil {
			return nil, awserr.InvalidParameterf("name is required.")
		}
		if !providerNamePattern.MatchString(name) {
			return nil, awserr.InvalidParameterf("The capacity provider name can have up to 255 characters. Valid characters are letters (uppercase and lowercase), numbers, underscores, and hyphens.")
		}
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "aws") || strings.HasPrefix(lower, "ecs") || strings.HasPrefix(lower, "fargate") {
			return nil, awserr.InvalidParameterf("The capacity provider name cannot be prefixed with 'aws', 'ecs', or 'fargate'.")
		}
		if m.ManagedInstancesProvider != nil {
			return nil, awserr.New("UnsupportedFeatureException", "Berth has no Amazon ECS Managed Instances; create a capacity provider with autoScalingGroupProvider.")
		}
		if m.Cluster != nil {
			return nil, awserr.InvalidParameterf("cluster applies to Amazon ECS Managed Instances capacity providers only; associate this capacity provider with PutClusterCapacityProviders.")
		}
		asg := m.GetAutoScalingGroupProvider()
		if asg == nil {
			return nil, awserr.InvalidParameterf("autoScalingGroupProvider is required.")
		}
		if !validASGARN(asg.GetAutoScalingGroupArn()) {
			return nil, awserr.InvalidParameterf("autoScalingGroupProvider.autoScalingGroupArn must be an Auto Scaling group ARN.")
		}
		if err := validateASGSettings(asg.ManagedTerminationProtection, asg.ManagedDraining, asg.GetManagedScaling()); err != nil {
			return nil, err
		}
		if err := ecsapi.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		stored := &ecsv1.AutoScalingGroupProvider{
			AutoScalingGroupArn:          proto.String(asg.GetAutoScalingGroupArn()),
			ManagedScaling:               defaultManagedScaling(asg.GetManagedScaling()),
			ManagedTerminationProtection: proto.String("DISABLED"),
			ManagedDraining:              proto.String("ENABLED"),
		}
		if asg.ManagedTerminationProtection != nil {
			stored.ManagedTerminationProtection = asg.ManagedTerminationProtection
		}
		if asg.ManagedDraining != nil {
			stored.ManagedDraining = asg.ManagedDraining
		}
		cp := &ecsv1.CapacityProvider{
			CapacityProviderArn:      proto.String(capacityProviderARN(account, name)),
			Name:                     proto.String(name),
			Status:                   proto.String(cpActive),
			AutoScalingGroupProvider: stored,
			Tags:                     mergeTags(nil, m.GetTags()),
			Type:                     proto.String("EC2_AUTOSCALING"),
		}
		err := awsapi.Retry(ctx, func() error {
			all, err := s.accountProviders(ctx, account)
			if err != nil {
				return err
			}
			active := 0
			var cur *ecsv1.CapacityProvider
			for _, p := range all {
				if p.GetName() == name {
					cur = p
				}
				if p.GetStatus() != cpActive {
					continue
				}
				active++
				if p.GetAutoScalingGroupProvider().GetAutoScalingGroupArn() == asg.GetAutoScalingGroupArn() {
					return awserr.Clientf("The specified Auto Scaling group ARN is already being used by capacity provider %s.", p.GetName())
				}
			}
			if cur != nil && cur.GetStatus() == cpActive {
				return awserr.Clientf("The specified capacity provider already exists. To change the configuration of an existing capacity provider, update the capacity provider.")
			}
			if active >= 100 {
				return awserr.New("LimitExceededException", "The limit of 100 capacity providers per account has been reached.")
			}
			k := keys.CapacityProvider(account, name)
			txn := store.NewTxn(s.kv)
			if cur == nil {
				txn.Create(k, cp)
			} else {
				_, rev, err := get[*ecsv1.CapacityProvider](ctx, s.kv, k)
				if err != nil {
					return err
				}
				txn.Update(k, rev, cp)
			}
			_, err = txn.Commit(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.CreateCapacityProviderResponse{CapacityProvider: cp}, nil
	})
}

// DescribeCapacityProviders describes capacity providers by name or ARN (up to 100;
// unknown ones come back in failures with reason MISSING), or, with none named, the
// built-in FARGATE and FARGATE_SPOT and the account's ACTIVE providers in name order,
// maxResults (1–10, default 10) per page with nextToken. Tags only with include TAGS.
// With cluster, only the providers associated with that cluster are listed. Errors:
// InvalidParameterException, ClusterNotFoundException.
// AWS reference: DescribeCapacityProviders.
func (s *Server) DescribeCapacityProviders(ctx context.Context, req *connect.Request[ecsv1.DescribeCapacityProvidersRequest]) (*connect.Response[ecsv1.DescribeCapacityProvidersResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeCapacityProvidersRequest) (*ecsv1.DescribeCapacityProvidersResponse, error) {
		for _, inc := range m.GetInclude() {
			if inc != "TAGS" {
				return nil, awserr.InvalidParameterf("Invalid include value %q: the only valid value is TAGS.", inc)
			}
		}
		withTags := slices.Contains(m.GetInclude(), "TAGS")
		show := func(cp *ecsv1.CapacityProvider) *ecsv1.CapacityProvider {
			out := proto.Clone(cp).(*ecsv1.CapacityProvider)
			if !withTags {
				out.Tags = nil
			} else if out.Tags == nil {
				out.Tags = []*ecsv1.Tag{}
			}
			return out
		}
		cluster, err := s.checkProviderCluster(ctx, account, m.Cluster)
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.DescribeCapacityProvidersResponse{CapacityProviders: []*ecsv1.CapacityProvider{}, Failures: []*ecsv1.Failure{}}
		if len(m.GetCapacityProviders()) > 0 {
			if len(m.GetCapacityProviders()) > 100 {
				return nil, awserr.InvalidParameterf("capacityProviders can list at most 100 capacity providers.")
			}
			if m.MaxResults != nil || m.NextToken != nil {
				return nil, awserr.InvalidParameterf("maxResults and nextToken cannot be used when capacityProviders are specified.")
			}
			for _, ref := range m.GetCapacityProviders() {
				cp, _, err := CapacityProvider(ctx, s.kv, account, ref)
				if err != nil {
					return nil, err
				}
				if cp == nil || (cluster != nil && !slices.Contains(cluster.GetCapacityProviders(), cp.GetName())) {
					resp.Failures = append(resp.Failures, missing(ref))
					continue
				}
				resp.CapacityProviders = append(resp.CapacityProviders, show(cp))
			}
			return resp, nil
		}
		limit := 10
		if m.MaxResults != nil {
			if m.GetMaxResults() < 1 || m.GetMaxResults() > 10 {
				return nil, awserr.InvalidParameterf("maxResults must be between 1 and 10.")
			}
			limit = int(m.GetMaxResults())
		}
		start := 0
		if tok := m.GetNextToken(); tok != "" {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			n, cerr := strconv.Atoi(strings.TrimPrefix(string(b), "cp:"))
			if err != nil || cerr != nil || !strings.HasPrefix(string(b), "cp:") || n < 0 {
				return nil, awserr.InvalidParameterf("Invalid nextToken.")
			}
			start = n
		}
		stored, err := s.accountProviders(ctx, account)
		if err != nil {
			return nil, err
		}
		all := []*ecsv1.CapacityProvider{builtinProvider(account, ProviderFargate), builtinProvider(account, ProviderFargateSpot)}
		for _, cp := range stored {
			if cp.GetStatus() == cpActive {
				all = append(all, cp)
			}
		}
		if cluster != nil {
			all = slices.DeleteFunc(all, func(cp *ecsv1.CapacityProvider) bool {
				return !slices.Contains(cluster.GetCapacityProviders(), cp.GetName())
			})
		}
		for i := start; i < len(all) && i < start+limit; i++ {
			resp.CapacityProviders = append(resp.CapacityProviders, show(all[i]))
		}
		if start+limit < len(all) {
			resp.NextToken = proto.String(base64.RawURLEncoding.EncodeToString([]byte("cp:" + strconv.Itoa(start+limit))))
		}
		return resp, nil
	})
}

// UpdateCapacityProvider changes an ACTIVE Auto Scaling group provider's managedScaling
// (members given replace the stored ones), managedTerminationProtection and
// managedDraining; updateStatus becomes UPDATE_COMPLETE. Errors: ClientException
// (unknown or INACTIVE provider, or FARGATE/FARGATE_SPOT, which AWS manages),
// InvalidParameterException (ranges), ClusterNotFoundException.
// AWS reference: UpdateCapacityProvider.
func (s *Server) UpdateCapacityProvider(ctx context.Context, req *connect.Request[ecsv1.UpdateCapacityProviderRequest]) (*connect.Response[ecsv1.UpdateCapacityProviderResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateCapacityProviderRequest) (*ecsv1.UpdateCapacityProviderResponse, error) {
		if m.Name == nil {
			return nil, awserr.InvalidParameterf("name is required.")
		}
		if m.ManagedInstancesProvider != nil {
			return nil, awserr.New("UnsupportedFeatureException", "Berth has no Amazon ECS Managed Instances; update autoScalingGroupProvider.")
		}
		up := m.GetAutoScalingGroupProvider()
		if up == nil {
			return nil, awserr.InvalidParameterf("autoScalingGroupProvider is required.")
		}
		if err := validateManagedScaling(up.GetManagedScaling()); err != nil {
			return nil, err
		}
		name, err := s.providerToChange(ctx, account, m.Cluster, m.GetName(), "updated")
		if err != nil {
			return nil, err
		}
		cp, err := s.mutateActiveProvider(ctx, account, name, func(cp *ecsv1.CapacityProvider) error {
			asg := cp.GetAutoScalingGroupProvider()
			if ms := up.GetManagedScaling(); ms != nil {
				cur := asg.GetManagedScaling()
				proto.Merge(cur, ms)
				asg.ManagedScaling = cur
			}
			if up.ManagedTerminationProtection != nil {
				asg.ManagedTerminationProtection = up.ManagedTerminationProtection
			}
			if up.ManagedDraining != nil {
				asg.ManagedDraining = up.ManagedDraining
			}
			if err := validateASGSettings(asg.ManagedTerminationProtection, asg.ManagedDraining, asg.GetManagedScaling()); err != nil {
				return err
			}
			cp.UpdateStatus = proto.String(cpUpdateComplete)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.UpdateCapacityProviderResponse{CapacityProvider: cp}, nil
	})
}

// DeleteCapacityProvider deletes an Auto Scaling group provider that no ACTIVE cluster
// lists: it becomes INACTIVE (updateStatus DELETE_COMPLETE; Berth has no group to
// release, so deletion completes at once), is described by name but no longer listed,
// and its name can be used again. Errors: ClientException (unknown or INACTIVE provider,
// a built-in one, or one still associated with a cluster), ClusterNotFoundException.
// AWS reference: DeleteCapacityProvider.
func (s *Server) DeleteCapacityProvider(ctx context.Context, req *connect.Request[ecsv1.DeleteCapacityProviderRequest]) (*connect.Response[ecsv1.DeleteCapacityProviderResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteCapacityProviderRequest) (*ecsv1.DeleteCapacityProviderResponse, error) {
		if m.CapacityProvider == nil {
			return nil, awserr.InvalidParameterf("capacityProvider is required.")
		}
		name, err := s.providerToChange(ctx, account, m.Cluster, m.GetCapacityProvider(), "deleted")
		if err != nil {
			return nil, err
		}
		users, err := s.clustersUsing(ctx, account, name)
		if err != nil {
			return nil, err
		}
		if len(users) > 0 {
			return nil, awserr.Clientf("The specified capacity provider is in use by cluster %s and cannot be deleted. Remove it from the cluster with PutClusterCapacityProviders first.", users[0])
		}
		cp, err := s.mutateActiveProvider(ctx, account, name, func(cp *ecsv1.CapacityProvider) error {
			cp.Status = proto.String(cpInactive)
			cp.UpdateStatus = proto.String(cpDeleteComplete)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.DeleteCapacityProviderResponse{CapacityProvider: cp}, nil
	})
}

// errNoProvider is the ClientException UpdateCapacityProvider and DeleteCapacityProvider
// answer for a provider that does not exist or is INACTIVE.
func errNoProvider() error {
	return awserr.Clientf("The specified capacity provider does not exist. Specify a valid name or ARN and try again.")
}

// providerToChange checks the cluster of an UpdateCapacityProvider or
// DeleteCapacityProvider call (checkProviderCluster; nil is none) and resolves ref (a
// provider name or ARN) to a name. It returns errNoProvider for a ref that names no
// provider of the account, and ClientException for FARGATE and FARGATE_SPOT, which
// Amazon ECS manages and which cannot be verb ("updated", "deleted").
func (s *Server) providerToChange(ctx context.Context, account keys.Scope, cluster *string, ref, verb string) (string, error) {
	if _, err := s.checkProviderCluster(ctx, account, cluster); err != nil {
		return "", err
	}
	name, ok := providerRefName(account, ref)
	if !ok {
		return "", errNoProvider()
	}
	if IsFargateProvider(name) {
		return "", awserr.Clientf("The %s capacity provider is managed by Amazon ECS and cannot be %s.", name, verb)
	}
	return name, nil
}

// mutateActiveProvider applies fn to the ACTIVE capacity provider name (CAS, retried)
// and returns it as written, without its tags, as UpdateCapacityProvider and
// DeleteCapacityProvider answer it. An absent or INACTIVE provider is errNoProvider;
// fn's error is returned as is.
func (s *Server) mutateActiveProvider(ctx context.Context, account keys.Scope, name string, fn func(cp *ecsv1.CapacityProvider) error) (*ecsv1.CapacityProvider, error) {
	cp, _, err := store.Mutate(ctx, s.kv, keys.CapacityProvider(account, name), func(cp *ecsv1.CapacityProvider) error {
		if cp.GetStatus() != cpActive {
			return errNoProvider()
		}
		return fn(cp)
	}, store.MaxAttempts(64))
	if isNotFound(err) {
		return nil, errNoProvider()
	}
	if err != nil {
		return nil, err
	}
	cp.Tags = nil
	return cp, nil
}

// validateClusterProviders checks a cluster's capacity providers and default strategy
// (CreateCluster, PutClusterCapacityProviders): each provider exists and is ACTIVE, an
// Auto Scaling group provider is associated with no other cluster, no duplicates, and the
// strategy passes validateStrategy. It returns the providers by name.
func (s *Server) validateClusterProviders(ctx context.Context, account keys.Scope, cluster string, providers []string, strategy []*ecsv1.CapacityProviderStrategyItem) error {
	seen := map[string]bool{}
	for _, ref := range providers {
		name, ok := providerRefName(account, ref)
		cp, _, err := CapacityProvider(ctx, s.kv, account, ref)
		if err != nil {
			return err
		}
		if !ok || cp == nil || cp.GetStatus() != cpActive {
			return awserr.InvalidParameterf("The specified capacity provider %s does not exist. Specify a valid name or ARN and try again.", ref)
		}
		if seen[name] {
			return awserr.InvalidParameterf("The capacity provider %s is listed more than once.", name)
		}
		seen[name] = true
		if IsFargateProvider(name) {
			continue
		}
		users, err := s.clustersUsing(ctx, account, name)
		if err != nil {
			return err
		}
		for _, u := range users {
			if u != cluster {
				return awserr.InvalidParameterf("The capacity provider %s is already associated with cluster %s. An Auto Scaling group capacity provider can be associated with one cluster only.", name, u)
			}
		}
	}
	return validateStrategy(providers, strategy)
}

// validateStrategy checks a capacity provider strategy against the providers of a
// cluster (names, as the cluster stores them): every item names one of them, once;
// weight 0–1000, base 0–100000, base on one item at most; at most 20 items; with more
// than one item at least one weight above 0; FARGATE providers not mixed with Auto
// Scaling group ones. Errors: InvalidParameterException, with AWS's messages.
func validateStrategy(providers []string, strategy []*ecsv1.CapacityProviderStrategyItem) error {
	if len(strategy) > maxStrategyItems {
		return awserr.InvalidParameterf("A capacity provider strategy can contain at most %d capacity providers.", maxStrategyItems)
	}
	seen := map[string]bool{}
	bases, weights, fargate := 0, 0, 0
	for _, it := range strategy {
		if it == nil || it.CapacityProvider == nil {
			return awserr.InvalidParameterf("capacityProviderStrategy.capacityProvider is required.")
		}
		if !slices.Contains(providers, it.GetCapacityProvider()) {
			return awserr.InvalidParameterf("The specified capacity provider strategy cannot contain a capacity provider that is not associated with the cluster. Associate the capacity provider with the cluster or specify a valid capacity provider and try again.")
		}
		if seen[it.GetCapacityProvider()] {
			return awserr.InvalidParameterf("The capacity provider %s appears more than once in the capacity provider strategy.", it.GetCapacityProvider())
		}
		seen[it.GetCapacityProvider()] = true
		if it.GetWeight() < 0 || it.GetWeight() > maxWeight {
			return awserr.InvalidParameterf("The capacity provider strategy weight must be between 0 and %d.", maxWeight)
		}
		if it.GetBase() < 0 || it.GetBase() > maxBase {
			return awserr.InvalidParameterf("The capacity provider strategy base must be between 0 and %d.", maxBase)
		}
		if it.GetBase() > 0 {
			bases++
		}
		if it.GetWeight() > 0 {
			weights++
		}
		if IsFargateProvider(it.GetCapacityProvider()) {
			fargate++
		}
	}
	if bases > 1 {
		return awserr.InvalidParameterf("Only one capacity provider in a capacity provider strategy can have a base defined.")
	}
	if len(strategy) > 1 && weights == 0 {
		return awserr.InvalidParameterf("At least one capacity provider in a capacity provider strategy must have a weight greater than zero.")
	}
	if fargate > 0 && fargate < len(strategy) {
		return awserr.InvalidParameterf("A capacity provider strategy cannot contain both Fargate capacity providers and Auto Scaling group capacity providers.")
	}
	return nil
}

// Distribute assigns n new tasks to the providers of strategy with AWS's base and weight
// semantics, given how many tasks of the same run or service each provider already has
// (counts, by provider name; nil for none). The provider with a base gets tasks until it
// holds base of them; every other task goes where the share beyond the base falls
// furthest behind weight / total weight (ties to the earlier item; weight-0 providers
// take tasks only when every weight is 0). It returns the provider of each new task, in
// order. For RunTask (counts nil) this is base tasks on the base provider and the rest
// split by weight: base 1 with weights 1:3 over 9 tasks places 1+2 and 6.
func Distribute(strategy []*ecsv1.CapacityProviderStrategyItem, counts map[string]int, n int) []string {
	if len(strategy) == 0 || n <= 0 {
		return nil
	}
	have := map[string]int{}
	for k, v := range counts {
		have[k] = v
	}
	allZero := true
	for _, it := range strategy {
		allZero = allZero && it.GetWeight() == 0
	}
	out := make([]string, 0, n)
	for range n {
		pick := ""
		for _, it := range strategy {
			if it.GetBase() > 0 && have[it.GetCapacityProvider()] < int(it.GetBase()) {
				pick = it.GetCapacityProvider()
				break
			}
		}
		if pick == "" {
			best := -1.0
			for _, it := range strategy {
				w := float64(it.GetWeight())
				if allZero {
					w = 1
				}
				if w == 0 {
					continue
				}
				beyond := have[it.GetCapacityProvider()] - int(it.GetBase())
				if beyond < 0 {
					beyond = 0
				}
				score := float64(beyond+1) / w
				if best < 0 || score < best {
					best, pick = score, it.GetCapacityProvider()
				}
			}
		}
		have[pick]++
		out = append(out, pick)
	}
	return out
}

// RunStrategy returns the capacity provider strategy a task launch uses on cluster c:
// the given one (which must not come with a launchType), else — with no launchType
// either — the cluster's default strategy; nil means the launch type (EC2 by default).
// The strategy is checked against the cluster's providers (validateStrategy) and every
// provider must be ACTIVE. Errors: InvalidParameterException.
func RunStrategy(ctx context.Context, kv clientv3.KV, account keys.Scope, c *ecsv1.Cluster, given []*ecsv1.CapacityProviderStrategyItem, launchType *string) ([]*ecsv1.CapacityProviderStrategyItem, error) {
	if len(given) > 0 && launchType != nil {
		return nil, awserr.InvalidParameterf("Specifying both a launch type and capacity provider strategy is not supported.")
	}
	strat := given
	if len(strat) == 0 {
		if launchType != nil {
			return nil, nil
		}
		strat = c.GetDefaultCapacityProviderStrategy()
	}
	if len(strat) == 0 {
		return nil, nil
	}
	for _, it := range strat {
		if it == nil || it.CapacityProvider == nil {
			return nil, awserr.InvalidParameterf("capacityProviderStrategy.capacityProvider is required.")
		}
		cp, _, err := CapacityProvider(ctx, kv, account, it.GetCapacityProvider())
		if err != nil {
			return nil, err
		}
		if cp == nil || cp.GetStatus() != cpActive {
			return nil, awserr.InvalidParameterf("The specified capacity provider %s does not exist. Specify a valid name or ARN and try again.", it.GetCapacityProvider())
		}
	}
	if err := validateStrategy(c.GetCapacityProviders(), strat); err != nil {
		return nil, err
	}
	return strat, nil
}

// StrategyLaunchType returns the launch type of tasks placed through strategy: FARGATE
// for the Fargate providers, EC2 for Auto Scaling group ones.
func StrategyLaunchType(strategy []*ecsv1.CapacityProviderStrategyItem) string {
	if len(strategy) > 0 && IsFargateProvider(strategy[0].GetCapacityProvider()) {
		return "FARGATE"
	}
	return "EC2"
}
