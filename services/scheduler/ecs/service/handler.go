package service

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Service and deployment statuses, scheduling strategies and rollout states, as in the
// ECS API.
const (
	StatusActive   = "ACTIVE"
	StatusDraining = "DRAINING"
	StatusInactive = "INACTIVE"

	DeploymentPrimary  = "PRIMARY"
	DeploymentActive   = "ACTIVE"
	DeploymentInactive = "INACTIVE"

	RolloutInProgress = "IN_PROGRESS"
	RolloutCompleted  = "COMPLETED"
	RolloutFailed     = "FAILED"

	StrategyReplica = "REPLICA"
	StrategyDaemon  = "DAEMON"
)

// DefaultCluster is the cluster ECS uses when a request names none.
const DefaultCluster = "default"

// Config configures a Handler.
type Config struct {
	// KV is the etcd client (a *clientv3.Client works). Required.
	KV clientv3.KV
	// Logger receives internal faults; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Kick, when set, is kicked after every write so the leader's reconciler runs a pass
	// soon instead of at its next interval (it only helps when the reconciler runs in this
	// process; other replicas' reconcilers still pick the change up on their interval).
	Kick *Kicker
}

// Handler serves the ECS service actions over etcd. Its methods have the
// ecsv1connect.EcsServiceHandler signatures; embed it beside *control.Server, whose
// embedded UnimplementedEcsServiceHandler lacks these actions, so that these take
// precedence (control.NewHandler serves the pair).
// A Handler holds no per-request state and is safe for concurrent use.
type Handler struct {
	kv   clientv3.KV
	log  *slog.Logger
	now  func() time.Time
	kick *Kicker
}

// NewHandler returns a Handler for cfg. It does not touch etcd.
func NewHandler(cfg Config) *Handler {
	h := &Handler{kv: cfg.KV, log: cfg.Logger, now: cfg.Now, kick: cfg.Kick}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

// Kicker wakes a Reconciler between its periodic passes. The zero value is not usable;
// build it with NewKicker. Safe for concurrent use.
type Kicker struct{ ch chan struct{} }

// NewKicker returns a Kicker.
func NewKicker() *Kicker { return &Kicker{ch: make(chan struct{}, 1)} }

// Kick asks for a pass soon; kicks while one is pending coalesce.
func (k *Kicker) Kick() {
	if k == nil {
		return
	}
	select {
	case k.ch <- struct{}{}:
	default:
	}
}

// C returns the channel a kick is delivered on (nil for a nil Kicker, which never fires).
func (k *Kicker) C() <-chan struct{} {
	if k == nil {
		return nil
	}
	return k.ch
}

// nowEpoch is the handler's clock as an ECS timestamp (awsapi.Epoch).
func (h *Handler) nowEpoch() *float64 { return proto.Float64(awsapi.Epoch(h.now())) }

// get reads a record, nil when absent.
func get[T proto.Message](ctx context.Context, kv clientv3.KV, key string) (T, int64, error) {
	v, rev, err := store.Get[T](ctx, kv, key)
	if errors.Is(err, store.ErrNotFound) {
		var zero T
		return zero, 0, nil
	}
	return v, rev, err
}

// serviceName resolves a service reference (a name, or a short or long service ARN of
// the account and cluster); ok is false when it cannot name a service of the caller in
// that cluster.
func serviceName(account keys.Scope, cluster, ref string) (string, bool) {
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.Service || !account.Owns(a.Partition, a.Account, a.Region) || (a.Cluster != "" && a.Cluster != cluster) {
			return "", false
		}
		ref = a.Name
	}
	return ref, ecsrules.ValidName(ref)
}

// taskDefinition resolves a task definition reference (control.LookupTaskDefinition) to
// an ACTIVE revision (family alone: its latest ACTIVE revision). Errors: ClientException
// "TaskDefinition not found." (as AWS answers CreateService, e.g. Cloud-CV/EvalAI#2419) and
// ClientException "TaskDefinition is inactive".
func taskDefinition(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (*storev1.TaskDefinitionRecord, error) {
	if ref == "" {
		return nil, awserr.InvalidParameterf("taskDefinition is required.")
	}
	rec, _, err := control.LookupTaskDefinition(ctx, kv, account, ref)
	if err != nil {
		return nil, fmt.Errorf("service: read task definition %s: %w", ref, err)
	}
	if rec == nil {
		return nil, awserr.Clientf("TaskDefinition not found.")
	}
	if rec.GetTaskDefinition().GetStatus() != StatusActive {
		return nil, awserr.Clientf("TaskDefinition is inactive")
	}
	return rec, nil
}

// NewDeploymentID returns an ECS service deployment id: "ecs-svc/" and 19 random digits.
func NewDeploymentID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	n := binary.BigEndian.Uint64(b[:])%9e18 + 1e18 // [1e18, 1e19): 19 digits
	return fmt.Sprintf("ecs-svc/%d", n)
}

// newEventID returns a random UUID-shaped id for a service event.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	s := hex.EncodeToString(b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// deploymentNumber returns the digits of a deployment id.
func deploymentNumber(id string) string { return strings.TrimPrefix(id, "ecs-svc/") }

// serviceDeploymentARN returns the ARN of a service deployment, as AWS formats it:
// arn:aws:ecs:{region}:{account}:service-deployment/{cluster}/{service}/{id}.
func serviceDeploymentARN(region, account, cluster, svc, id string) string {
	return fmt.Sprintf("arn:aws:ecs:%s:%s:service-deployment/%s/%s/%s", region, account, cluster, svc, deploymentNumber(id))
}

// serviceRevisionARN returns the ARN of the service revision a deployment targets:
// arn:aws:ecs:{region}:{account}:service-revision/{cluster}/{service}/{id}. Berth has one
// revision per deployment, numbered like it.
func serviceRevisionARN(region, account, cluster, svc, id string) string {
	return fmt.Sprintf("arn:aws:ecs:%s:%s:service-revision/%s/%s/%s", region, account, cluster, svc, deploymentNumber(id))
}

// deploymentConfig returns the service's configuration with AWS's defaults: REPLICA
// minimumHealthyPercent 100 and maximumPercent 200; DAEMON 0 and 100.
func deploymentConfig(strategy string, dc *ecsv1.DeploymentConfiguration) *ecsv1.DeploymentConfiguration {
	out := &ecsv1.DeploymentConfiguration{}
	if dc != nil {
		out = proto.Clone(dc).(*ecsv1.DeploymentConfiguration)
	}
	minPct, maxPct := int32(100), int32(200)
	if strategy == StrategyDaemon {
		minPct, maxPct = 0, 100
	}
	if out.MinimumHealthyPercent == nil {
		out.MinimumHealthyPercent = proto.Int32(minPct)
	}
	if out.MaximumPercent == nil {
		out.MaximumPercent = proto.Int32(maxPct)
	}
	if out.DeploymentCircuitBreaker == nil {
		out.DeploymentCircuitBreaker = &ecsv1.DeploymentCircuitBreaker{}
	}
	if out.Alarms == nil {
		out.Alarms = &ecsv1.DeploymentAlarms{AlarmNames: []string{}}
	}
	return out
}

func validateDeploymentConfig(strategy string, dc *ecsv1.DeploymentConfiguration) error {
	minPct, maxPct := dc.GetMinimumHealthyPercent(), dc.GetMaximumPercent()
	if minPct < 0 || minPct > 100 {
		return awserr.InvalidParameterf("minimumHealthyPercent must be between 0 and 100.")
	}
	if maxPct < 100 && strategy == StrategyReplica {
		return awserr.InvalidParameterf("maximumPercent must be at least 100.")
	}
	if strategy == StrategyDaemon && maxPct != 100 {
		return awserr.InvalidParameterf("maximumPercent must be 100 for the DAEMON scheduling strategy.")
	}
	return validateShiftConfig(strategy, dc)
}

func validatePlacement(strategy string, cons []*ecsv1.PlacementConstraint, strat []*ecsv1.PlacementStrategy) error {
	if len(cons) > 10 {
		return awserr.InvalidParameterf("A service can have at most 10 placement constraints.")
	}
	if len(strat) > 5 {
		return awserr.InvalidParameterf("A service can have at most 5 placement strategies.")
	}
	if strategy == StrategyDaemon && len(strat) > 0 {
		return awserr.InvalidParameterf("Placement strategies are not supported with DAEMON scheduling strategy.")
	}
	req := placement.Request{Constraints: placement.ConstraintsFrom(cons, nil), Strategy: placement.StrategiesFrom(strat)}
	if err := placement.Compile(req); err != nil {
		return awserr.InvalidParameterf("%s", strings.TrimPrefix(err.Error(), "placement: "))
	}
	return nil
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
