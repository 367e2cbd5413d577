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

// targetsPerTxn is how many targets one etcd txn of RegisterTargets or DeregisterTargets
// writes: each target is a compare and a write, beside the group's compare, and etcd
// refuses a txn of more than --max-txn-ops (128 by default, which `berth scheduler`
// keeps) compares or writes. A call of AWS's largest size (1,000 targets) is so several
// txns.
const targetsPerTxn = 100

// RegisterTargets registers targets with a target group. A target that is draining is
// registered again (its drain ends); one already registered is left as it is. Ports
// default to the group's.
//
// The targets are written targetsPerTxn at a time, each txn on the condition that the
// group is unchanged; a call that fails midway (the group deleted, etcd gone) may leave
// the earlier chunks registered. That is acceptable because RegisterTargets is
// idempotent per target, on AWS as here: registering a registered target changes
// nothing, so the caller's retry registers the rest. A conflict with another write
// starts the call over, which skips what is registered already.
func (s *Service) RegisterTargets(ctx context.Context, sc keys.Scope, arn string, targets []TargetInput) error {
	tg, rev, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return validation("At least one target must be specified")
	}
	name := tg.GetTargetGroupName()
	type want struct {
		key  string
		in   TargetInput
		port int32
		addr string
	}
	var wants []want
	seen := map[string]bool{}
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
		if seen[key] {
			continue // named twice: registered once
		}
		seen[key] = true
		wants = append(wants, want{key: key, in: t, port: port, addr: addr})
	}
	have, _, err := store.ListKeys(ctx, s.kv, keys.ElbTarget(sc, name, "", 0), maxTargets+1, "")
	if err != nil {
		return err
	}
	ks := make([]string, len(wants))
	for i, w := range wants {
		ks[i] = w.key
	}
	curs, err := store.GetMany[*storev1.TargetRecord](ctx, s.kv, ks)
	if err != nil {
		return err
	}
	var txns []*store.Txn
	var txn *store.Txn
	added, inTxn := 0, 0
	for i, w := range wants {
		cur := curs[i]
		if cur.ModRevision != 0 && cur.Value.GetDeregisteredAt() == 0 && cur.Value.GetAddress() == w.addr {
			continue
		}
		if txn == nil || inTxn == targetsPerTxn {
			txn = store.NewTxn(s.kv).IfModRevision(keys.ElbTargetGroup(sc, name), rev)
			txns, inTxn = append(txns, txn), 0
		}
		inTxn++
		if cur.ModRevision != 0 {
			rec := cur.Value
			rec.DeregisteredAt = 0
			rec.Address = w.addr
			rec.TaskArn = w.in.TaskArn
			txn.Update(w.key, cur.ModRevision, rec)
			continue
		}
		added++
		txn.Create(w.key, &storev1.TargetRecord{
			Id: w.in.ID, Port: w.port, AvailabilityZone: w.in.AvailabilityZone, Address: w.addr,
			RegisteredAt: awsapi.Epoch(s.now()), TaskArn: w.in.TaskArn,
		})
	}
	if len(have)+added > maxTargets {
		return errorf(CodeTooManyTargets, "You've reached the limit on the number of targets per target group (%d)", maxTargets)
	}
	for _, txn := range txns {
		_, err = txn.Commit(ctx)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) {
			return s.RegisterTargets(ctx, sc, arn, targets) // raced with another change: again
		}
		if errors.Is(err, store.ErrNotFound) {
			return errorf(CodeTargetGroupNotFound, "Target groups '%s' not found", arn)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
// as on AWS. Targets are written targetsPerTxn at a time (see RegisterTargets): the
// call is idempotent per target, a target draining already is left as it is.
func (s *Service) DeregisterTargets(ctx context.Context, sc keys.Scope, arn string, targets []TargetInput) error {
	tg, _, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return validation("At least one target must be specified")
	}
	var ks []string
	var given []TargetInput // ks[i]'s target, its port set
	seen := map[string]bool{}
	for _, t := range targets {
		port, err := targetPort(tg, t)
		if err != nil {
			return err
		}
		key := keys.ElbTarget(sc, tg.GetTargetGroupName(), t.ID, port)
		if !seen[key] {
			seen[key] = true
			ks = append(ks, key)
			given = append(given, TargetInput{ID: t.ID, Port: &port})
		}
	}
	curs, err := store.GetMany[*storev1.TargetRecord](ctx, s.kv, ks)
	if err != nil {
		return err
	}
	var txns []*store.Txn
	var txn *store.Txn
	inTxn := 0
	for i, cur := range curs {
		if cur.ModRevision == 0 {
			return errorf(CodeInvalidTarget, "The following targets are not registered in target group '%s': 'Id=%s,Port=%d'", arn, given[i].ID, *given[i].Port)
		}
		if cur.Value.GetDeregisteredAt() != 0 {
			continue
		}
		if txn == nil || inTxn == targetsPerTxn {
			txn = store.NewTxn(s.kv)
			txns, inTxn = append(txns, txn), 0
		}
		inTxn++
		cur.Value.DeregisteredAt = awsapi.Epoch(s.now())
		txn.Update(cur.Key, cur.ModRevision, cur.Value)
	}
	for _, txn := range txns {
		_, err = txn.Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			return s.DeregisterTargets(ctx, sc, arn, targets)
		}
		if errors.Is(err, store.ErrNotFound) {
			return errorf(CodeInvalidTarget, "The following targets are not registered in target group '%s'", arn)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
