package control

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Task protection limits from the UpdateTaskProtection reference: expiresInMinutes is
// 1–2880 (48 hours), 120 when omitted.
const (
	defaultProtectionMinutes = 120
	maxProtectionMinutes     = 2880
)

// protectionTasks is what UpdateTaskProtection and GetTaskProtection act on: the
// cluster's name and, in step, the id, the reference as the caller wrote it and the
// record (nil when the task is gone) of each task reference that resolved.
type protectionTasks struct {
	cluster   string
	ids, refs []string
	recs      []*storev1.TaskRecord
	// failures holds a MISSING failure for each reference that did not resolve.
	failures []*ecsv1.Failure
}

// protectionTargets checks the cluster (ActiveCluster), resolves the task references
// (id or ARN) and reads their records. Errors: ClusterNotFoundException, the store's.
func (s *Server) protectionTargets(ctx context.Context, account keys.Scope, clusterRef string, refs []string) (*protectionTasks, error) {
	name, _, _, err := s.activeCluster(ctx, account, clusterRef)
	if err != nil {
		return nil, err
	}
	t := &protectionTasks{cluster: name}
	var ks []string
	for _, ref := range refs {
		id, ok, err := s.idRef(ctx, account, name, arn.Task, ref)
		if err != nil {
			return nil, err
		}
		if !ok {
			t.failures = append(t.failures, missing(ref))
			continue
		}
		ks = append(ks, keys.Task(account, name, id))
		t.ids = append(t.ids, id)
		t.refs = append(t.refs, ref)
	}
	t.recs, _, err = getMany[*storev1.TaskRecord](ctx, s.kv, ks)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// UpdateTaskProtection turns scale-in protection on (for expiresInMinutes, 1–2880,
// default 120) or off for up to 10 tasks; unknown tasks come back in failures (MISSING),
// standalone and stopped tasks too (TASK_NOT_VALID, as AWS answers for a task that
// belongs to no service). The service scheduler honours it: scale-in and deployments
// leave a healthy protected task running until its protection expires.
// Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: UpdateTaskProtection.
func (s *Server) UpdateTaskProtection(ctx context.Context, req *connect.Request[ecsv1.UpdateTaskProtectionRequest]) (*connect.Response[ecsv1.UpdateTaskProtectionResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateTaskProtectionRequest) (*ecsv1.UpdateTaskProtectionResponse, error) {
		if len(m.GetTasks()) == 0 || len(m.GetTasks()) > 10 {
			return nil, awserr.InvalidParameterf("tasks must list between 1 and 10 tasks.")
		}
		minutes := int32(defaultProtectionMinutes)
		if m.ExpiresInMinutes != nil {
			minutes = m.GetExpiresInMinutes()
			if minutes < 1 || minutes > maxProtectionMinutes {
				return nil, awserr.InvalidParameterf("expiresInMinutes must be between 1 and %d.", maxProtectionMinutes)
			}
		}
		t, err := s.protectionTargets(ctx, account, m.GetCluster(), m.GetTasks())
		if err != nil {
			return nil, err
		}
		name, ids, refs, recs, failures := t.cluster, t.ids, t.refs, t.recs, t.failures
		resp := &ecsv1.UpdateTaskProtectionResponse{ProtectedTasks: []*ecsv1.ProtectedTask{}, Failures: failures}
		for i, r := range recs {
			if r == nil {
				resp.Failures = append(resp.Failures, missing(refs[i]))
				continue
			}
			if r.GetServiceName() == "" || r.GetTask().GetDesiredStatus() == task.DesiredStopped {
				// Protection is for the running tasks of a service (AWS: TASK_NOT_VALID for a
				// standalone task).
				resp.Failures = append(resp.Failures, &ecsv1.Failure{Arn: r.GetTask().TaskArn, Reason: proto.String("TASK_NOT_VALID"),
					Detail: proto.String("Task scale-in protection applies to running tasks of a service only.")})
				continue
			}
			pt := &ecsv1.ProtectedTask{TaskArn: r.GetTask().TaskArn, ProtectionEnabled: m.GetProtectionEnabled()}
			if m.GetProtectionEnabled() {
				pt.ExpirationDate = proto.Float64(awsapi.Epoch(s.now().Add(time.Duration(minutes) * time.Minute)))
			}
			if _, err := store.NewTxn(s.kv).Put(keys.Protection(account, name, ids[i]), pt).Commit(ctx); err != nil {
				return nil, err
			}
			resp.ProtectedTasks = append(resp.ProtectedTasks, pt)
		}
		if resp.Failures == nil {
			resp.Failures = []*ecsv1.Failure{}
		}
		return resp, nil
	})
}

// GetTaskProtection returns the scale-in protection of up to 100 tasks (expired
// protection reads as disabled); unknown tasks come back in failures (MISSING).
// Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: GetTaskProtection.
func (s *Server) GetTaskProtection(ctx context.Context, req *connect.Request[ecsv1.GetTaskProtectionRequest]) (*connect.Response[ecsv1.GetTaskProtectionResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.GetTaskProtectionRequest) (*ecsv1.GetTaskProtectionResponse, error) {
		if len(m.GetTasks()) == 0 || len(m.GetTasks()) > 100 {
			return nil, awserr.InvalidParameterf("tasks must list between 1 and 100 tasks.")
		}
		t, err := s.protectionTargets(ctx, account, m.GetCluster(), m.GetTasks())
		if err != nil {
			return nil, err
		}
		name, ids, refs, recs, failures := t.cluster, t.ids, t.refs, t.recs, t.failures
		pks := make([]string, len(ids))
		for i, id := range ids {
			pks[i] = keys.Protection(account, name, id)
		}
		prots, _, err := getMany[*ecsv1.ProtectedTask](ctx, s.kv, pks)
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.GetTaskProtectionResponse{ProtectedTasks: []*ecsv1.ProtectedTask{}, Failures: failures}
		now := awsapi.Epoch(s.now())
		for i, r := range recs {
			if r == nil {
				resp.Failures = append(resp.Failures, missing(refs[i]))
				continue
			}
			pt := prots[i]
			if pt == nil || (pt.GetProtectionEnabled() && pt.GetExpirationDate() <= now) {
				pt = &ecsv1.ProtectedTask{TaskArn: r.GetTask().TaskArn}
			}
			resp.ProtectedTasks = append(resp.ProtectedTasks, pt)
		}
		if resp.Failures == nil {
			resp.Failures = []*ecsv1.Failure{}
		}
		return resp, nil
	})
}
