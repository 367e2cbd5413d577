package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/control"
	"github.com/berthhq/berth/services/scheduler/ecserr"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
	"google.golang.org/protobuf/proto"
)

// ControlPlacer adapts a Placer to control.Placer, the seam RunTask and StartTask place
// through: the engine chooses (constraints, strategies, failures with AWS reasons), and
// control.PlaceTxn writes the tasks, the instances' reservations, the inbox entries, the
// cluster's counters and the client token in the placement's one txn, comparing each
// chosen instance's ModRevision and the cluster's.
type ControlPlacer struct {
	// Placer chooses and commits. Required.
	Placer *Placer
}

var _ control.Placer = (*ControlPlacer)(nil)

// Place implements control.Placer. Every task of req must have the same reservation
// (RunTask's and StartTask's do: one task definition, one set of overrides). For StartTask
// (req.ContainerInstanceIDs) task i is placed on instance i with the same checks, each in
// its own txn, so one full instance fails only its own task, as on AWS. It
// returns ClusterNotFoundException when the cluster is not ACTIVE, InvalidParameterException
// for a bad constraint or strategy, or an internal error; nothing is written then.
func (c *ControlPlacer) Place(ctx context.Context, req control.PlaceRequest) (control.PlaceResult, error) {
	if len(req.Tasks) == 0 {
		return control.PlaceResult{}, nil
	}
	if req.ContainerInstanceIDs != nil {
		// StartTask: task i goes on instance i or fails there, each on its own.
		var out control.PlaceResult
		for i, id := range req.ContainerInstanceIDs {
			if i >= len(req.Tasks) {
				break
			}
			one := req
			one.Tasks = req.Tasks[i : i+1]
			one.ContainerInstanceIDs = nil
			res, err := c.place(ctx, one, []string{id})
			if err != nil {
				return out, err
			}
			out.Placed = append(out.Placed, res.Placed...)
			out.Failures = append(out.Failures, res.Failures...)
		}
		return out, nil
	}
	return c.place(ctx, req, nil)
}

// place places req.Tasks, on the named instances only when instances is not nil.
func (c *ControlPlacer) place(ctx context.Context, req control.PlaceRequest, instances []string) (control.PlaceResult, error) {
	t0 := req.Tasks[0]
	r := Request{
		Demand: Demand{CPU: t0.GetReservedCpu(), Memory: t0.GetReservedMemory(), Ports: t0.GetReservedPorts(), UDPPorts: t0.GetReservedUdpPorts()},
		Count:  len(req.Tasks),
		Group:  t0.GetTask().GetGroup(),
		Constraints: append(ConstraintsFrom(req.PlacementConstraints, req.TaskDefinition.GetPlacementConstraints()),
			requiresAttributes(req.TaskDefinition)...),
		Strategy: StrategiesFrom(req.PlacementStrategy),
	}
	r.Instances = instances
	var written []*storev1.TaskRecord
	res, err := c.Placer.Place(ctx, PlaceRequest{
		Account: req.Account, Cluster: req.Cluster, Request: r, CommitWritesInstances: true,
		Commit: func(ctx context.Context, txn *store.Txn, placed []Placed) error {
			crec, crev, err := store.Get[*storev1.ClusterRecord](ctx, c.Placer.cli, keys.Cluster(req.Account, req.Cluster))
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return ecserr.ClusterNotFoundError()
				}
				return err
			}
			if crec.GetCluster().GetStatus() != "ACTIVE" {
				return ecserr.ClusterNotFoundError()
			}
			insts := map[string]*control.InstanceState{}
			written = written[:0]
			for i, p := range placed {
				if insts[p.InstanceID] == nil {
					insts[p.InstanceID] = &control.InstanceState{Record: p.Instance, Rev: p.InstanceRev}
				}
				t := proto.Clone(req.Tasks[i]).(*storev1.TaskRecord)
				t.ContainerInstanceId = p.InstanceID
				written = append(written, t)
			}
			return control.PlaceTxn(txn, control.Placement{
				Account: req.Account, Cluster: crec, ClusterRev: crev, Instances: insts,
				Tasks: written, TaskDefinition: req.TaskDefinition, ClientToken: req.ClientToken,
			})
		},
	})
	if err != nil {
		var e *ecserr.Error
		if errors.As(err, &e) {
			return control.PlaceResult{}, err
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrExpression) {
			return control.PlaceResult{}, ecserr.InvalidParameterf("%s", strings.TrimPrefix(err.Error(), "placement: "))
		}
		return control.PlaceResult{}, fmt.Errorf("placement: %w", err)
	}
	out := control.PlaceResult{}
	if len(res.Placed) > 0 {
		out.Placed = written
	}
	seen := map[string]bool{}
	for _, f := range res.Failures {
		if seen[f.Arn+f.Reason] {
			continue
		}
		seen[f.Arn+f.Reason] = true
		out.Failures = append(out.Failures, &ecsv1.Failure{Arn: proto.String(f.Arn), Reason: proto.String(f.Reason), Detail: proto.String(f.Detail)})
	}
	return out, nil
}

// requiresAttributes turns the task definition's requiresAttributes into memberOf
// constraints.
func requiresAttributes(td *ecsv1.TaskDefinition) []Constraint {
	var out []Constraint
	for _, a := range td.GetRequiresAttributes() {
		expr := "attribute:" + a.GetName() + " exists"
		if a.Value != nil {
			expr = "attribute:" + a.GetName() + " == '" + a.GetValue() + "'"
		}
		out = append(out, Constraint{Type: ConstraintMemberOf, Expression: expr})
	}
	return out
}
