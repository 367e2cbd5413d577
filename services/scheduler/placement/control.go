package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

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

	// Batch, when true, commits concurrent RunTask placements of one cluster and task
	// definition (without clientToken) together: one txn, one write of the cluster's
	// counters, for all of them. Without it each placement is its own txn, and the
	// cluster record they all update makes them take turns.
	Batch bool

	// Cluster records as this placer last wrote them, so the next placement's txn can
	// compare against them without a read (a stale one fails the CAS and is re-read).
	mu       sync.Mutex
	clusters map[string]clusterState
	queues   map[string]*ctlQueue // by account/cluster/task definition, under mu
}

type clusterState struct {
	rec *storev1.ClusterRecord
	rev int64
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
	if c.Batch && req.ClientToken == "" {
		return c.placeBatched(ctx, req)
	}
	return c.place(ctx, req, nil)
}

// place places req.Tasks, on the named instances only when instances is not nil.
func (c *ControlPlacer) place(ctx context.Context, req control.PlaceRequest, instances []string) (control.PlaceResult, error) {
	r := toRequest(req, instances)
	var written []*storev1.TaskRecord
	var crec *storev1.ClusterRecord
	var crev int64
	attempt := 0
	res, err := c.Placer.Place(ctx, PlaceRequest{
		Account: req.Account, Cluster: req.Cluster, Request: r, CommitWritesInstances: true,
		Commit: func(ctx context.Context, txn *store.Txn, placed []Placed) error {
			attempt++
			var err error
			crec, crev, err = c.cluster(ctx, req.Account, req.Cluster, attempt > 1)
			if err != nil {
				return err
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
		return control.PlaceResult{}, domainError(err)
	}
	out := control.PlaceResult{Failures: failures(res.Failures)}
	if len(res.Placed) > 0 {
		out.Placed = written
		c.wrote(req.Account, req.Cluster, crec, res.Revision)
	}
	return out, nil
}

// toRequest converts control's request for the engine.
func toRequest(req control.PlaceRequest, instances []string) Request {
	t0 := req.Tasks[0]
	return Request{
		Demand: Demand{CPU: t0.GetReservedCpu(), Memory: t0.GetReservedMemory(), Ports: t0.GetReservedPorts(), UDPPorts: t0.GetReservedUdpPorts()},
		Count:  len(req.Tasks),
		Group:  t0.GetTask().GetGroup(),
		Constraints: append(ConstraintsFrom(req.PlacementConstraints, req.TaskDefinition.GetPlacementConstraints()),
			RequiresAttributes(req.TaskDefinition)...),
		Strategy:  StrategiesFrom(req.PlacementStrategy),
		Instances: instances,
	}
}

// domainError turns a placement error into what control returns: ECS exceptions as they
// are, a bad constraint or strategy as InvalidParameterException, anything else wrapped.
func domainError(err error) error {
	var e *ecserr.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrExpression) {
		return ecserr.InvalidParameterf("%s", strings.TrimPrefix(err.Error(), "placement: "))
	}
	return fmt.Errorf("placement: %w", err)
}

// failures converts engine failures to ECS ones, one per instance and reason.
func failures(fs []Failure) []*ecsv1.Failure {
	var out []*ecsv1.Failure
	seen := map[string]bool{}
	for _, f := range fs {
		if seen[f.Arn+f.Reason] {
			continue
		}
		seen[f.Arn+f.Reason] = true
		out = append(out, &ecsv1.Failure{Arn: proto.String(f.Arn), Reason: proto.String(f.Reason), Detail: proto.String(f.Detail)})
	}
	return out
}

// wrote records the cluster record PlaceTxn updated (its counters) as stored at rev.
func (c *ControlPlacer) wrote(account keys.Scope, cluster string, crec *storev1.ClusterRecord, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusters == nil {
		c.clusters = map[string]clusterState{}
	}
	if cur, ok := c.clusters[cacheKey(account, cluster)]; !ok || cur.rev < rev {
		c.clusters[cacheKey(account, cluster)] = clusterState{rec: crec, rev: rev}
	}
}

// cluster returns the cluster record to compare against: the one this placer last wrote,
// unless fresh asks for a read (a retry after a conflict). It returns a private copy, and
// ClusterNotFoundException when the cluster is absent or not ACTIVE.
func (c *ControlPlacer) cluster(ctx context.Context, account keys.Scope, name string, fresh bool) (*storev1.ClusterRecord, int64, error) {
	k := cacheKey(account, name)
	if !fresh {
		c.mu.Lock()
		cur, ok := c.clusters[k]
		c.mu.Unlock()
		if ok {
			return proto.Clone(cur.rec).(*storev1.ClusterRecord), cur.rev, nil
		}
	}
	rec, rev, err := store.Get[*storev1.ClusterRecord](ctx, c.Placer.cli, keys.Cluster(account, name))
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.GetCluster().GetStatus() != "ACTIVE") {
		c.mu.Lock()
		delete(c.clusters, k)
		c.mu.Unlock()
		return nil, 0, ecserr.ClusterNotFoundError()
	}
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	if c.clusters == nil {
		c.clusters = map[string]clusterState{}
	}
	if cur, ok := c.clusters[k]; !ok || cur.rev < rev {
		c.clusters[k] = clusterState{rec: proto.Clone(rec).(*storev1.ClusterRecord), rev: rev}
	}
	c.mu.Unlock()
	return rec, rev, nil
}

// RequiresAttributes turns the task definition's requiresAttributes into memberOf
// constraints (for RunTask here, and for the service scheduler's launches).
func RequiresAttributes(td *ecsv1.TaskDefinition) []Constraint {
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
