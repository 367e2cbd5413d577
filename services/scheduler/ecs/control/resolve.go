package control

import (
	"context"
	"errors"
	"strings"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// Cluster statuses.
const (
	statusActive       = "ACTIVE"
	statusInactive     = "INACTIVE"
	statusDraining     = "DRAINING"
	statusDeleteInProg = "DELETE_IN_PROGRESS"
)

// ClusterName resolves a cluster reference (empty for "default", a name or an ARN) to a
// name, for every ECS call (the service scheduler's too). An ARN of another account or
// of another resource type is a cluster that does not exist for this caller:
// ClusterNotFoundException; an ARN that does not parse, InvalidParameterException.
func ClusterName(account keys.Scope, ref string) (string, error) {
	if ref == "" {
		return DefaultCluster, nil
	}
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.Cluster {
			return "", awserr.InvalidParameterf("Invalid cluster ARN: %s", ref)
		}
		if !account.Owns(a.Partition, a.Account, a.Region) {
			return "", awserr.ClusterNotFoundError()
		}
		ref = a.Name
	}
	if !ecsrules.ValidName(ref) {
		return "", awserr.ClusterNotFoundError()
	}
	return ref, nil
}

// cluster reads a cluster record (nil when absent).
func (s *Server) cluster(ctx context.Context, account keys.Scope, name string) (*storev1.ClusterRecord, int64, error) {
	return get[*storev1.ClusterRecord](ctx, s.kv, keys.Cluster(account, name))
}

// existingCluster resolves ref (ClusterName) and returns the cluster's name when the
// cluster exists, in any status (DescribeContainerInstances and ListContainerInstances
// answer for an INACTIVE one too); otherwise ClusterNotFoundException.
func (s *Server) existingCluster(ctx context.Context, account keys.Scope, ref string) (string, error) {
	name, err := ClusterName(account, ref)
	if err != nil {
		return "", err
	}
	rec, _, err := s.cluster(ctx, account, name)
	if err != nil {
		return "", err
	}
	if rec == nil {
		return "", awserr.ClusterNotFoundError()
	}
	return name, nil
}

// activeCluster resolves ref and reads the cluster, which must be ACTIVE; otherwise
// ClusterNotFoundException ("Cluster not found."), as AWS answers for both.
func (s *Server) activeCluster(ctx context.Context, account keys.Scope, ref string) (string, *storev1.ClusterRecord, int64, error) {
	return ActiveCluster(ctx, s.kv, account, ref)
}

// ActiveCluster is Server.activeCluster on kv, for the service scheduler: it resolves ref
// (ClusterName) and reads the cluster, which must be ACTIVE; otherwise
// ClusterNotFoundException.
func ActiveCluster(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (string, *storev1.ClusterRecord, int64, error) {
	name, err := ClusterName(account, ref)
	if err != nil {
		return "", nil, 0, err
	}
	rec, rev, err := get[*storev1.ClusterRecord](ctx, kv, keys.Cluster(account, name))
	if err != nil {
		return "", nil, 0, err
	}
	if err := checkActiveCluster(rec); err != nil {
		return "", nil, 0, err
	}
	return name, rec, rev, nil
}

// checkActiveCluster returns ClusterNotFoundException unless rec (nil: absent) is an
// ACTIVE cluster: ECS treats an INACTIVE cluster as not found.
func checkActiveCluster(rec *storev1.ClusterRecord) error {
	if rec == nil || rec.GetCluster().GetStatus() != statusActive {
		return awserr.ClusterNotFoundError()
	}
	return nil
}

// idRef resolves a task or container instance reference (an id, or a long or short ARN
// of kind) within cluster. ok is false when the reference cannot name a resource of the
// caller in that cluster (another account, another cluster, another type, bad syntax).
func (s *Server) idRef(ctx context.Context, account keys.Scope, cluster, kind, ref string) (id string, ok bool, err error) {
	if !arn.IsARN(ref) {
		return ref, validID(ref), nil
	}
	a, perr := arn.Parse(ref)
	if perr != nil || a.Type != kind || !account.Owns(a.Partition, a.Account, a.Region) || !validID(a.Name) {
		return "", false, nil
	}
	if a.Cluster != "" {
		return a.Name, a.Cluster == cluster, nil
	}
	c, err := s.clusterOfID(ctx, account, kind, a.Name)
	if err != nil {
		return "", false, err
	}
	return a.Name, c == cluster, nil
}

// clusterOfID returns the cluster of a task or container instance id ("" if unknown).
func (s *Server) clusterOfID(ctx context.Context, account keys.Scope, kind, id string) (string, error) {
	v, _, err := get[*wrapperspb.StringValue](ctx, s.kv, keys.IDCluster(account, kind, id))
	if err != nil || v == nil {
		return "", err
	}
	return v.GetValue(), nil
}

// locate resolves a task or container instance ARN to its cluster and id, for calls that
// name the resource by ARN only (tags, the agent's calls). ok is false for an ARN that
// cannot name a resource of the caller.
func (s *Server) locate(ctx context.Context, account keys.Scope, kind, ref string) (cluster, id string, ok bool, err error) {
	a, perr := arn.Parse(ref)
	if perr != nil || a.Type != kind || !account.Owns(a.Partition, a.Account, a.Region) || !validID(a.Name) {
		return "", "", false, nil
	}
	if a.Cluster != "" {
		return a.Cluster, a.Name, ecsrules.ValidName(a.Cluster), nil
	}
	c, err := s.clusterOfID(ctx, account, kind, a.Name)
	return c, a.Name, c != "", err
}

// validID reports whether s can be a task or instance id (and a key part).
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return !strings.ContainsAny(s, "/:%")
}
