package elb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TargetInput is one TargetDescription.
type TargetInput struct {
	ID               string
	Port             *int32
	AvailabilityZone string
	// Address is where the lb role connects ("host:port"); set by the ECS service
	// scheduler, which knows the task's network bindings. Empty for API callers: ip
	// targets connect to Id:Port, instance targets to the instance's host.
	Address string
	// TaskArn is the ECS task behind the target, for the service scheduler.
	TaskArn string
}

// InstanceHost resolves an instance target's id (a container instance's ec2InstanceId)
// to the host address the lb role connects to; it returns an *Error (InvalidTarget)
// when no such instance exists.
type InstanceHost func(ctx context.Context, sc keys.Scope, instanceID string) (string, error)

// WithInstanceHost sets how instance targets resolve; without it only ip targets can be
// registered through the API.
func (s *Service) WithInstanceHost(f InstanceHost) *Service {
	s.instanceHost = f
	return s
}

// maxTargets is AWS's limit of targets per target group.
const maxTargets = 1000

// RegisterTargets registers targets with a target group. A target that is draining is
// registered again (its drain ends); one already registered is left as it is. Ports
// default to the group's.
func (s *Service) RegisterTargets(ctx context.Context, sc keys.Scope, arn string, targets []TargetInput) error {
	tg, rev, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return validation("At least one target must be specified")
	}
	name := tg.GetTargetGroupName()
	have, _, err := store.ListKeys(ctx, s.kv, keys.ElbTarget(sc, name, "", 0), maxTargets+1, "")
	if err != nil {
		return err
	}
	txn := store.NewTxn(s.kv).IfModRevision(keys.ElbTargetGroup(sc, name), rev)
	added := 0
	for _, t := range targets {
		port, err := targetPort(tg, t)
		if err != nil {
			return err
		}
		addr := t.Address
		if addr == "" {
			host := t.ID
			switch tg.GetTargetType() {
			case "ip":
				ip, perr := netip.ParseAddr(t.ID)
				if perr != nil || !ip.Is4() {
					return errorf(CodeInvalidTarget, "The IP address '%s' is not a valid IPv4 address", t.ID)
				}
			case "instance":
				if s.instanceHost == nil {
					return errorf(CodeInvalidTarget, "The following targets are not valid instances: '%s'", t.ID)
				}
				if host, err = s.instanceHost(ctx, sc, t.ID); err != nil {
					return err
				}
			}
			addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		key := keys.ElbTarget(sc, name, t.ID, port)
		cur, crev, err := store.Get[*storev1.TargetRecord](ctx, s.kv, key)
		switch {
		case err == nil:
			if cur.GetDeregisteredAt() == 0 && cur.GetAddress() == addr {
				continue
			}
			cur.DeregisteredAt = 0
			cur.Address = addr
			cur.TaskArn = t.TaskArn
			txn.Update(key, crev, cur)
		case errors.Is(err, store.ErrNotFound):
			added++
			txn.Create(key, &storev1.TargetRecord{
				Id: t.ID, Port: port, AvailabilityZone: t.AvailabilityZone, Address: addr,
				RegisteredAt: awsapi.Epoch(s.now()), TaskArn: t.TaskArn,
			})
		default:
			return err
		}
	}
	if len(have)+added > maxTargets {
		return errorf(CodeTooManyTargets, "You've reached the limit on the number of targets per target group (%d)", maxTargets)
	}
	_, err = txn.Commit(ctx)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) {
		return s.RegisterTargets(ctx, sc, arn, targets) // raced with another change: again
	}
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeTargetGroupNotFound, "Target groups '%s' not found", arn)
	}
	return err
}

func targetPort(tg *storev1.TargetGroupRecord, t TargetInput) (int32, error) {
	if t.ID == "" {
		return 0, validation("A target ID must be specified")
	}
	port := tg.GetPort()
	if t.Port != nil {
		port = *t.Port
	}
	if port < 1 || port > 65535 {
		return 0, validation("Port '%d' must be between 1 and 65535", port)
	}
	return port, nil
}

// DeregisterTargets starts the drain of registered targets: the lb role stops sending
// them new requests and removes them once nothing is in flight or the group's
// deregistration delay has passed. A target that is not registered is InvalidTarget,
// as on AWS.
func (s *Service) DeregisterTargets(ctx context.Context, sc keys.Scope, arn string, targets []TargetInput) error {
	tg, _, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return validation("At least one target must be specified")
	}
	txn := store.NewTxn(s.kv)
	for _, t := range targets {
		port, err := targetPort(tg, t)
		if err != nil {
			return err
		}
		key := keys.ElbTarget(sc, tg.GetTargetGroupName(), t.ID, port)
		cur, crev, err := store.Get[*storev1.TargetRecord](ctx, s.kv, key)
		if errors.Is(err, store.ErrNotFound) {
			return errorf(CodeInvalidTarget, "The following targets are not registered in target group '%s': 'Id=%s,Port=%d'", arn, t.ID, port)
		}
		if err != nil {
			return err
		}
		if cur.GetDeregisteredAt() != 0 {
			continue
		}
		cur.DeregisteredAt = awsapi.Epoch(s.now())
		txn.Update(key, crev, cur)
	}
	_, err = txn.Commit(ctx)
	if errors.Is(err, store.ErrConflict) {
		return s.DeregisterTargets(ctx, sc, arn, targets)
	}
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeInvalidTarget, "The following targets are not registered in target group '%s'", arn)
	}
	return err
}

// TargetHealth is one TargetHealthDescription.
type TargetHealth struct {
	ID, AvailabilityZone       string
	Port                       int32
	HealthCheckPort            string
	State, Reason, Description string
	TaskArn, Address           string
}

// DescribeTargetHealth returns the health of the group's targets, or of the given ones
// (a target not registered is unused / Target.NotRegistered). Targets of a group no
// listener forwards to are unused / Target.NotInUse; a target the lb role has not
// checked yet is initial / Elb.RegistrationInProgress; a deregistered one draining.
func (s *Service) DescribeTargetHealth(ctx context.Context, sc keys.Scope, arn string, targets []TargetInput) ([]TargetHealth, error) {
	tg, _, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return nil, err
	}
	inUse, err := s.InUse(ctx, sc, arn)
	if err != nil {
		return nil, err
	}
	name := tg.GetTargetGroupName()
	items, err := store.ListAll[*storev1.TargetRecord](ctx, s.kv, keys.ElbTarget(sc, name, "", 0))
	if err != nil {
		return nil, err
	}
	hs, err := store.ListAll[*storev1.TargetHealthRecord](ctx, s.kv, keys.ElbTargetHealth(sc, name, "", 0))
	if err != nil {
		return nil, err
	}
	health := map[string]*storev1.TargetHealthRecord{}
	for _, h := range hs {
		health[h.Key] = h.Value
	}
	hcPort := func(port int32) string {
		if p := tg.GetHealthCheckPort(); p != "" && p != "traffic-port" {
			return p
		}
		return strconv.Itoa(int(port))
	}
	describe := func(t *storev1.TargetRecord) TargetHealth {
		out := TargetHealth{ID: t.GetId(), Port: t.GetPort(), AvailabilityZone: t.GetAvailabilityZone(), HealthCheckPort: hcPort(t.GetPort()),
			TaskArn: t.GetTaskArn(), Address: t.GetAddress()}
		h := health[keys.ElbTargetHealth(sc, name, t.GetId(), t.GetPort())]
		switch {
		case t.GetDeregisteredAt() != 0:
			out.State, out.Reason = StateDraining, ReasonDeregistrationInProgress
		case !inUse:
			out.State, out.Reason = StateUnused, ReasonNotInUse
		case h == nil || h.GetState() == StateUnused || h.GetState() == StateDraining:
			out.State, out.Reason = StateInitial, ReasonRegistrationInProgress
		default:
			out.State, out.Reason, out.Description = h.GetState(), h.GetReason(), h.GetDescription()
		}
		if out.Description == "" {
			out.Description = Describe(out.Reason)
		}
		return out
	}
	var out []TargetHealth
	if len(targets) == 0 {
		for _, it := range items {
			out = append(out, describe(it.Value))
		}
		return out, nil
	}
	byKey := map[string]*storev1.TargetRecord{}
	for _, it := range items {
		byKey[it.Key] = it.Value
	}
	for _, t := range targets {
		port, err := targetPort(tg, t)
		if err != nil {
			return nil, err
		}
		if rec := byKey[keys.ElbTarget(sc, name, t.ID, port)]; rec != nil {
			out = append(out, describe(rec))
			continue
		}
		out = append(out, TargetHealth{ID: t.ID, Port: port, HealthCheckPort: hcPort(port), State: StateUnused,
			Reason: ReasonNotRegistered, Description: Describe(ReasonNotRegistered)})
	}
	return out, nil
}

// String is "id:port state/reason", for logs and test failures.
func (h TargetHealth) String() string {
	return fmt.Sprintf("%s:%d %s/%s", h.ID, h.Port, h.State, strings.TrimSpace(h.Reason))
}
