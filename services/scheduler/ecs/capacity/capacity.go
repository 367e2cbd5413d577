// Package capacity is the model of ECS capacity providers on Berth
// (docs/capacity-providers.md): their names and ARNs, the built-in FARGATE providers, the
// pools of container instances they stand for, and capacity provider strategies — their
// rules (ValidateStrategy), how a strategy splits tasks (Distribute) and which strategy a
// launch uses (RunStrategy). control serves the capacity provider actions over it; control
// and service place tasks with it.
//
// A capacity provider is a
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
// group, as on AWS). Berth launches no instances, so managedScaling and
// managedTerminationProtection are accepted only DISABLED (ValidateASGSettings refuses
// ENABLED), and managedDraining either way: no instance is ever terminated by the group.
package capacity

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

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
	StatusActive   = "ACTIVE"
	StatusInactive = "INACTIVE"
	UpdateComplete = "UPDATE_COMPLETE"
	DeleteComplete = "DELETE_COMPLETE"
)

// Strategy limits from the CapacityProviderStrategyItem reference.
const (
	maxStrategyItems = 20
	maxWeight        = 1000
	maxBase          = 100000
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,255}$`)

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

// ARN returns the ARN of provider name.
func ARN(account keys.Scope, name string) string {
	return arn.ARN{Region: account.Region, Account: account.Account, Type: arn.CapacityProvider, Name: name}.String()
}

// Builtin returns FARGATE or FARGATE_SPOT as DescribeCapacityProviders shows it.
func Builtin(account keys.Scope, name string) *ecsv1.CapacityProvider {
	return &ecsv1.CapacityProvider{
		CapacityProviderArn: proto.String(ARN(account, name)),
		Name:                proto.String(name),
		Status:              proto.String(StatusActive),
		Type:                proto.String(name),
		Tags:                []*ecsv1.Tag{},
	}
}

// RefName resolves a capacity provider reference (a name or an ARN of the
// caller's) to a name; ok is false when it cannot name one of the caller's providers.
func RefName(account keys.Scope, ref string) (string, bool) {
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.CapacityProvider || !account.Owns(a.Partition, a.Account, a.Region) {
			return "", false
		}
		ref = a.Name
	}
	return ref, namePattern.MatchString(ref)
}

// Get reads the capacity provider ref (name or ARN) of account: the
// built-in ones, or the stored record (any status); nil when there is none.
func Get(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (*ecsv1.CapacityProvider, int64, error) {
	name, ok := RefName(account, ref)
	if !ok {
		return nil, 0, nil
	}
	if IsFargateProvider(name) {
		return Builtin(account, name), 0, nil
	}
	cp, rev, err := store.Get[*ecsv1.CapacityProvider](ctx, kv, keys.CapacityProvider(account, name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	return cp, rev, err
}

// DefaultManagedScaling fills AWS's ManagedScaling defaults: status DISABLED when no
// managedScaling is given (ENABLED when one is given without status), targetCapacity
// 100, minimumScalingStepSize 1, maximumScalingStepSize 10000, instanceWarmupPeriod 300.
func DefaultManagedScaling(ms *ecsv1.ManagedScaling) *ecsv1.ManagedScaling {
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

// ValidateManagedScaling checks ManagedScaling's documented ranges.
func ValidateManagedScaling(ms *ecsv1.ManagedScaling) error {
	if ms == nil {
		return nil
	}
	if ms.Status != nil && !slices.Contains([]string{"ENABLED", "DISABLED"}, ms.GetStatus()) {
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

// ValidateASGSettings checks managedTerminationProtection, managedDraining and
// managedScaling (a managedScaling without status means ENABLED, as on AWS) and refuses,
// with InvalidParameterException naming the member, what Berth cannot honour: managed
// scaling ENABLED and managed termination protection ENABLED (Berth launches and
// terminates no instances; AWS requires the second to come with the first). Both values
// of managedDraining are accepted: it drains the instances an Auto Scaling group
// terminates, and a Berth group terminates none, so either value holds.
func ValidateASGSettings(mtp, draining *string, scaling *ecsv1.ManagedScaling) error {
	if mtp != nil && !slices.Contains([]string{"ENABLED", "DISABLED"}, *mtp) {
		return awserr.InvalidParameterf("managedTerminationProtection must be ENABLED or DISABLED.")
	}
	if draining != nil && !slices.Contains([]string{"ENABLED", "DISABLED"}, *draining) {
		return awserr.InvalidParameterf("managedDraining must be ENABLED or DISABLED.")
	}
	if err := ValidateManagedScaling(scaling); err != nil {
		return err
	}
	if mtp != nil && *mtp == "ENABLED" {
		return awserr.InvalidParameterf("managedTerminationProtection ENABLED is not supported by Berth: Berth launches and terminates no instances, so there is no Auto Scaling group scale-in to protect instances from; use DISABLED.")
	}
	if scaling != nil && scaling.GetStatus() != "DISABLED" {
		return awserr.InvalidParameterf("managedScaling status ENABLED is not supported by Berth: Berth launches no instances, so there is no Auto Scaling group to scale; give managedScaling status DISABLED or leave managedScaling out.")
	}
	return nil
}

// ValidASGARN reports whether v is an Auto Scaling group ARN (or, as AWS also accepts,
// a group name: ValidASGName).
func ValidASGARN(v string) bool {
	if v == "" || len(v) > 1600 {
		return false
	}
	if !strings.HasPrefix(v, "arn:") {
		return ValidASGName(v)
	}
	parts := strings.SplitN(v, ":", 6)
	return len(parts) == 6 && parts[2] == "autoscaling" && strings.HasPrefix(parts[5], "autoScalingGroup:")
}

// ValidateStrategy checks a capacity provider strategy against the providers of a
// cluster (names, as the cluster stores them): every item names one of them, once;
// weight 0–1000, base 0–100000, base on one item at most; at most 20 items; with more
// than one item at least one weight above 0; FARGATE providers not mixed with Auto
// Scaling group ones. Errors: InvalidParameterException, with AWS's messages.
func ValidateStrategy(providers []string, strategy []*ecsv1.CapacityProviderStrategyItem) error {
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
// The strategy is checked against the cluster's providers (ValidateStrategy) and every
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
		cp, _, err := Get(ctx, kv, account, it.GetCapacityProvider())
		if err != nil {
			return nil, err
		}
		if cp == nil || cp.GetStatus() != StatusActive {
			return nil, awserr.InvalidParameterf("The specified capacity provider %s does not exist. Specify a valid name or ARN and try again.", it.GetCapacityProvider())
		}
	}
	if err := ValidateStrategy(c.GetCapacityProviders(), strat); err != nil {
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

// ValidASGName reports whether v can name an Auto Scaling group (CreateAutoScalingGroup's
// AutoScalingGroupName): 1–255 characters, each ASCII 33 to 126 except the colon. It is
// recorded in the provider's record, never used in an etcd key, so '/' is safe.
func ValidASGName(v string) bool {
	if v == "" || len(v) > 255 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 33 || v[i] > 126 || v[i] == ':' {
			return false
		}
	}
	return true
}

// ValidName reports whether name can name a capacity provider: 1–255 letters, numbers,
// underscores and hyphens (CreateCapacityProvider's name rule).
func ValidName(name string) bool { return namePattern.MatchString(name) }
