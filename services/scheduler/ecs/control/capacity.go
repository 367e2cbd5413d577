package control

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

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
// prefixed aws, ecs or fargate —, ranges, tags, managedScaling or
// managedTerminationProtection ENABLED, which Berth cannot honour: it launches no
// instances; a managedInstancesProvider, which Berth
// does not run), ClientException (the name is taken, the group is another provider's),
// LimitExceededException (more than 100 providers). AWS reference: CreateCapacityProvider.
func (s *Server) CreateCapacityProvider(ctx context.Context, req *connect.Request[ecsv1.CreateCapacityProviderRequest]) (*connect.Response[ecsv1.CreateCapacityProviderResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.CreateCapacityProviderRequest) (*ecsv1.CreateCapacityProviderResponse, error) {
		name := m.GetName()
		if m.Name == nil {
			return nil, awserr.InvalidParameterf("name is required.")
		}
		if !capacity.ValidName(name) {
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
		if !capacity.ValidASGARN(asg.GetAutoScalingGroupArn()) {
			return nil, awserr.InvalidParameterf("autoScalingGroupProvider.autoScalingGroupArn must be an Auto Scaling group ARN or name (1-255 ASCII characters 33 to 126, no colon).")
		}
		if err := capacity.ValidateASGSettings(asg.ManagedTerminationProtection, asg.ManagedDraining, asg.GetManagedScaling()); err != nil {
			return nil, err
		}
		if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		stored := &ecsv1.AutoScalingGroupProvider{
			AutoScalingGroupArn:          proto.String(asg.GetAutoScalingGroupArn()),
			ManagedScaling:               capacity.DefaultManagedScaling(asg.GetManagedScaling()),
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
			CapacityProviderArn:      proto.String(capacity.ARN(account, name)),
			Name:                     proto.String(name),
			Status:                   proto.String(capacity.StatusActive),
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
				if p.GetStatus() != capacity.StatusActive {
					continue
				}
				active++
				if p.GetAutoScalingGroupProvider().GetAutoScalingGroupArn() == asg.GetAutoScalingGroupArn() {
					return awserr.Clientf("The specified Auto Scaling group ARN is already being used by capacity provider %s.", p.GetName())
				}
			}
			if cur != nil && cur.GetStatus() == capacity.StatusActive {
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
				cp, _, err := capacity.Get(ctx, s.kv, account, ref)
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
		all := []*ecsv1.CapacityProvider{capacity.Builtin(account, capacity.ProviderFargate), capacity.Builtin(account, capacity.ProviderFargateSpot)}
		for _, cp := range stored {
			if cp.GetStatus() == capacity.StatusActive {
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
		if err := capacity.ValidateManagedScaling(up.GetManagedScaling()); err != nil {
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
			if err := capacity.ValidateASGSettings(asg.ManagedTerminationProtection, asg.ManagedDraining, asg.GetManagedScaling()); err != nil {
				return err
			}
			cp.UpdateStatus = proto.String(capacity.UpdateComplete)
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
			cp.Status = proto.String(capacity.StatusInactive)
			cp.UpdateStatus = proto.String(capacity.DeleteComplete)
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
	name, ok := capacity.RefName(account, ref)
	if !ok {
		return "", errNoProvider()
	}
	if capacity.IsFargateProvider(name) {
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
		if cp.GetStatus() != capacity.StatusActive {
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
// strategy passes capacity.ValidateStrategy. It returns the providers by name.
func (s *Server) validateClusterProviders(ctx context.Context, account keys.Scope, cluster string, providers []string, strategy []*ecsv1.CapacityProviderStrategyItem) error {
	seen := map[string]bool{}
	for _, ref := range providers {
		name, ok := capacity.RefName(account, ref)
		cp, _, err := capacity.Get(ctx, s.kv, account, ref)
		if err != nil {
			return err
		}
		if !ok || cp == nil || cp.GetStatus() != capacity.StatusActive {
			return awserr.InvalidParameterf("The specified capacity provider %s does not exist. Specify a valid name or ARN and try again.", ref)
		}
		if seen[name] {
			return awserr.InvalidParameterf("The capacity provider %s is listed more than once.", name)
		}
		seen[name] = true
		if capacity.IsFargateProvider(name) {
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
	return capacity.ValidateStrategy(providers, strategy)
}
