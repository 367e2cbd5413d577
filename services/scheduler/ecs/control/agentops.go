package control

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// The agent-facing ECS actions (SubmitTaskStateChange, SubmitContainerStateChange,
// SubmitAttachmentStateChanges, DiscoverPollEndpoint) let an ECS-compatible agent that
// speaks the public API report to Berth. Their state changes converge on
// ApplyTaskStateChange, the path Berth's own agent session uses, so a task moves by the
// same rules (status only forward, counters and reservations in one transaction) however
// it is reported. The caller's container instance comes from its credential: an
// instance-scoped key (caller.Identity.ContainerInstanceARN) reports only the tasks on
// its own instance (AccessDeniedException otherwise); an account-wide key reports for the
// instance the task is placed on.

// acknowledged is the acknowledgment the Submit* actions answer.
const acknowledged = "ACK"

// reportingTask resolves the task a Submit* call names (ARN, or id within cluster) and
// the container instance that reports it: the caller's own for an instance-scoped
// credential, else the instance the task is placed on. Errors: ClusterNotFoundException,
// InvalidParameterException for a task that is not there, AccessDeniedException for a
// task not placed on an instance.
func (s *Server) reportingTask(ctx context.Context, account keys.Scope, clusterRef, taskRef string) (*storev1.TaskRecord, string, error) {
	if taskRef == "" {
		return nil, "", awserr.InvalidParameterf("task is required.")
	}
	cluster, _, _, err := s.activeCluster(ctx, account, clusterRef)
	if err != nil {
		return nil, "", err
	}
	id, ok, err := s.idRef(ctx, account, cluster, arn.Task, taskRef)
	if err != nil {
		return nil, "", err
	}
	var rec *storev1.TaskRecord
	if ok {
		if rec, _, err = get[*storev1.TaskRecord](ctx, s.kv, keys.Task(account, cluster, id)); err != nil {
			return nil, "", err
		}
	}
	if rec == nil {
		return nil, "", awserr.InvalidParameterf("The referenced task %s was not found in cluster %s.", taskRef, cluster)
	}
	if who, _ := caller.From(ctx); who.ContainerInstanceARN != "" {
		return rec, who.ContainerInstanceARN, nil
	}
	inst := rec.GetTask().GetContainerInstanceArn()
	if inst == "" {
		return nil, "", awserr.New("AccessDeniedException", "The task %s is not placed on a container instance.", taskRef)
	}
	return rec, inst, nil
}

// epochTS converts an ECS timestamp (epoch seconds) to a protobuf one; nil stays nil.
func epochTS(v *float64) *timestamppb.Timestamp {
	if v == nil {
		return nil
	}
	return timestamppb.New(awsapi.FromEpoch(*v))
}

// containerState converts a reported container change to the agent session's form.
func containerState(name, runtimeID, status, reason string, exit *int32, bindings []*ecsv1.NetworkBinding, digest string) *agentv1.ContainerState {
	return &agentv1.ContainerState{
		Name: name, RuntimeId: runtimeID, LastStatus: status, ExitCode: exit, Reason: reason,
		NetworkBindings: bindings, ImageDigest: digest,
	}
}

// SubmitTaskStateChange records a task's state reported by an agent: status (PENDING,
// RUNNING, STOPPED, …; only forward), the containers' states, reason (the stoppedReason of
// a STOPPED task, whose stopCode is EssentialContainerExited unless a stop was asked
// for), pullStartedAt, pullStoppedAt, executionStoppedAt and attachments (as
// SubmitAttachmentStateChanges). managedAgents are refused: Berth has no ECS Exec. It
// answers acknowledgment "ACK". Errors: ClusterNotFoundException,
// InvalidParameterException (unknown task or status), AccessDeniedException (the task is
// not on the caller's instance). AWS reference: SubmitTaskStateChange.
func (s *Server) SubmitTaskStateChange(ctx context.Context, req *connect.Request[ecsv1.SubmitTaskStateChangeRequest]) (*connect.Response[ecsv1.SubmitTaskStateChangeResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.SubmitTaskStateChangeRequest) (*ecsv1.SubmitTaskStateChangeResponse, error) {
		if len(m.GetManagedAgents()) > 0 {
			return nil, awserr.InvalidParameterf("managedAgents are not supported by Berth: it has no ECS Exec agent; leave them out.")
		}
		status := m.GetStatus()
		if !task.ValidStatus(status) && status != "" {
			return nil, awserr.InvalidParameterf("Invalid task status %q.", status)
		}
		rec, inst, err := s.reportingTask(ctx, account, m.GetCluster(), m.GetTask())
		if err != nil {
			return nil, err
		}
		if status == "" {
			status = rec.GetTask().GetLastStatus()
		}
		ch := &agentv1.TaskStateChange{
			TaskArn: rec.GetTask().GetTaskArn(), LastStatus: status,
			PullStartedAt: epochTS(m.PullStartedAt), PullStoppedAt: epochTS(m.PullStoppedAt), ExecutionStoppedAt: epochTS(m.ExecutionStoppedAt),
		}
		for _, c := range m.GetContainers() {
			if c.GetContainerName() == "" {
				return nil, awserr.InvalidParameterf("containers[].containerName is required.")
			}
			ch.Containers = append(ch.Containers, containerState(c.GetContainerName(), c.GetRuntimeId(), c.GetStatus(), c.GetReason(), c.ExitCode, c.GetNetworkBindings(), c.GetImageDigest()))
		}
		if status == "STOPPED" {
			ch.StopCode, ch.StoppedReason = "EssentialContainerExited", m.GetReason()
		}
		if err := s.ApplyTaskStateChange(ctx, account, inst, ch); err != nil {
			return nil, err
		}
		if len(m.GetAttachments()) > 0 {
			if err := s.applyAttachments(ctx, account, m.GetCluster(), m.GetAttachments()); err != nil {
				return nil, err
			}
		}
		return &ecsv1.SubmitTaskStateChangeResponse{Acknowledgment: proto.String(acknowledged)}, nil
	})
}

// SubmitContainerStateChange records one container's state reported by an agent
// (status, exitCode, reason, runtimeId, networkBindings) through the same path as a task
// state change, the task's own status unchanged. It answers acknowledgment "ACK". Errors:
// ClusterNotFoundException, InvalidParameterException (unknown task, container or
// status), AccessDeniedException (the task is not on the caller's instance). AWS
// reference: SubmitContainerStateChange.
func (s *Server) SubmitContainerStateChange(ctx context.Context, req *connect.Request[ecsv1.SubmitContainerStateChangeRequest]) (*connect.Response[ecsv1.SubmitContainerStateChangeResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.SubmitContainerStateChangeRequest) (*ecsv1.SubmitContainerStateChangeResponse, error) {
		if m.GetContainerName() == "" {
			return nil, awserr.InvalidParameterf("containerName is required.")
		}
		if st := m.GetStatus(); st != "" {
			if !task.ValidStatus(st) {
				return nil, awserr.InvalidParameterf("Invalid container status %q.", st)
			}
		}
		rec, inst, err := s.reportingTask(ctx, account, m.GetCluster(), m.GetTask())
		if err != nil {
			return nil, err
		}
		found := false
		for _, c := range rec.GetTask().GetContainers() {
			found = found || c.GetName() == m.GetContainerName()
		}
		if !found {
			return nil, awserr.InvalidParameterf("The task %s has no container named %s.", m.GetTask(), m.GetContainerName())
		}
		ch := &agentv1.TaskStateChange{
			TaskArn: rec.GetTask().GetTaskArn(), LastStatus: rec.GetTask().GetLastStatus(),
			Containers: []*agentv1.ContainerState{containerState(m.GetContainerName(), m.GetRuntimeId(), m.GetStatus(), m.GetReason(), m.ExitCode, m.GetNetworkBindings(), "")},
		}
		if err := s.ApplyTaskStateChange(ctx, account, inst, ch); err != nil {
			return nil, err
		}
		return &ecsv1.SubmitContainerStateChangeResponse{Acknowledgment: proto.String(acknowledged)}, nil
	})
}

// SubmitAttachmentStateChanges records the status of task attachments (for instance the
// elastic network interface of an awsvpc task) by attachmentArn, among the tasks of the
// cluster (those on the caller's instance for an instance-scoped credential). It answers
// acknowledgment "ACK". Errors: ClusterNotFoundException, InvalidParameterException for
// an attachment no task of the cluster has. AWS reference: SubmitAttachmentStateChanges.
func (s *Server) SubmitAttachmentStateChanges(ctx context.Context, req *connect.Request[ecsv1.SubmitAttachmentStateChangesRequest]) (*connect.Response[ecsv1.SubmitAttachmentStateChangesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.SubmitAttachmentStateChangesRequest) (*ecsv1.SubmitAttachmentStateChangesResponse, error) {
		if len(m.GetAttachments()) == 0 {
			return nil, awserr.InvalidParameterf("attachments is required.")
		}
		if err := s.applyAttachments(ctx, account, m.GetCluster(), m.GetAttachments()); err != nil {
			return nil, err
		}
		return &ecsv1.SubmitAttachmentStateChangesResponse{Acknowledgment: proto.String(acknowledged)}, nil
	})
}

// applyAttachments sets the status of each named attachment on the task that holds it
// (one CAS write per task). It reads the cluster's tasks; a caller scoped to an instance
// sees only that instance's.
func (s *Server) applyAttachments(ctx context.Context, account keys.Scope, clusterRef string, changes []*ecsv1.AttachmentStateChange) error {
	cluster, _, _, err := s.activeCluster(ctx, account, clusterRef)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, c := range changes {
		if c.GetAttachmentArn() == "" || c.GetStatus() == "" {
			return awserr.InvalidParameterf("attachments[].attachmentArn and attachments[].status are required.")
		}
		want[c.GetAttachmentArn()] = c.GetStatus()
	}
	who, _ := caller.From(ctx)
	var items []store.Item[*storev1.TaskRecord]
	for token := ""; ; {
		page, next, err := store.List[*storev1.TaskRecord](ctx, s.kv, keys.Tasks(account, cluster), store.MaxListLimit, token)
		if err != nil {
			return err
		}
		items = append(items, page...)
		if next == "" {
			break
		}
		token = next
	}
	done := map[string]bool{}
	for _, it := range items {
		t := it.Value.GetTask()
		if who.ContainerInstanceARN != "" && t.GetContainerInstanceArn() != who.ContainerInstanceARN {
			continue
		}
		hit := false
		for _, a := range t.GetAttachments() {
			if _, ok := want[attachmentARN(account, a.GetId())]; ok {
				hit = true
			} else if _, ok := want[a.GetId()]; ok {
				hit = true
			}
		}
		if !hit {
			continue
		}
		key := it.Key
		err := awsapi.Retry(ctx, func() error {
			rec, rev, err := get[*storev1.TaskRecord](ctx, s.kv, key)
			if err != nil || rec == nil {
				return err
			}
			old := proto.Clone(rec).(*storev1.TaskRecord)
			for _, a := range rec.GetTask().GetAttachments() {
				st, ok := want[attachmentARN(account, a.GetId())]
				if !ok {
					st, ok = want[a.GetId()]
				}
				if ok {
					a.Status = proto.String(st)
					done[attachmentARN(account, a.GetId())], done[a.GetId()] = true, true
				}
			}
			rec.GetTask().Version++
			txn := store.NewTxn(s.kv)
			task.WriteTxn(txn, account, old, rev, rec)
			_, err = txn.Commit(ctx)
			return err
		})
		if err != nil {
			return err
		}
	}
	for a := range want {
		if !done[a] {
			return awserr.InvalidParameterf("The attachment %s was not found in cluster %s.", a, cluster)
		}
	}
	return nil
}

// attachmentARN is the ARN AWS gives a task attachment: attachment/{id}.
func attachmentARN(account keys.Scope, id string) string {
	return "arn:aws:ecs:" + account.Region + ":" + account.Account + ":attachment/" + id
}

// DiscoverPollEndpoint answers the endpoint an agent connects to: in Berth the gateway the
// call came through (caller.Identity.Endpoint), which relays the agent's session to the
// control plane, and the same for telemetry (Berth's agent sends its metrics on that
// session); serviceConnectEndpoint is absent (no Service Connect). A containerInstance an
// instance-scoped credential does not own is AccessDeniedException; an unknown cluster
// ClientException. AWS reference: DiscoverPollEndpoint.
func (s *Server) DiscoverPollEndpoint(ctx context.Context, req *connect.Request[ecsv1.DiscoverPollEndpointRequest]) (*connect.Response[ecsv1.DiscoverPollEndpointResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DiscoverPollEndpointRequest) (*ecsv1.DiscoverPollEndpointResponse, error) {
		who, _ := caller.From(ctx)
		if ci := m.GetContainerInstance(); ci != "" && who.ContainerInstanceARN != "" && ci != who.ContainerInstanceARN &&
			!strings.HasSuffix(who.ContainerInstanceARN, "/"+ci) {
			return nil, awserr.New("AccessDeniedException", "The credential of container instance %s cannot act for container instance %s.", who.ContainerInstanceARN, ci)
		}
		if m.Cluster != nil {
			if _, _, _, err := s.activeCluster(ctx, account, m.GetCluster()); err != nil {
				return nil, awserr.Clientf("Cluster %s not found.", m.GetCluster())
			}
		}
		if who.Endpoint == "" {
			return nil, awserr.Clientf("Berth cannot tell which endpoint this call came through; call DiscoverPollEndpoint through the gateway.")
		}
		ep := strings.TrimSuffix(who.Endpoint, "/") + "/"
		return &ecsv1.DiscoverPollEndpointResponse{Endpoint: proto.String(ep), TelemetryEndpoint: proto.String(ep)}, nil
	})
}

// UpdateContainerAgent answers as AWS does for an agent it cannot update: Berth's agent is
// not the Amazon ECS container agent and carries no version information ECS can update
// from, so a registered instance gets MissingVersionException (update Berth's agent by
// replacing the berth binary on the host and restarting it; running tasks are re-adopted).
// Errors: ClusterNotFoundException, InvalidParameterException (containerInstance missing
// or not registered in the cluster). AWS reference: UpdateContainerAgent.
func (s *Server) UpdateContainerAgent(ctx context.Context, req *connect.Request[ecsv1.UpdateContainerAgentRequest]) (*connect.Response[ecsv1.UpdateContainerAgentResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UpdateContainerAgentRequest) (*ecsv1.UpdateContainerAgentResponse, error) {
		if m.GetContainerInstance() == "" {
			return nil, awserr.InvalidParameterf("containerInstance is required.")
		}
		name, _, _, err := s.activeCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		id, ok, err := s.idRef(ctx, account, name, arn.ContainerInstance, m.GetContainerInstance())
		if err != nil {
			return nil, err
		}
		var rec *storev1.ContainerInstanceRecord
		if ok {
			if rec, _, err = get[*storev1.ContainerInstanceRecord](ctx, s.kv, keys.Instance(account, name, id)); err != nil {
				return nil, err
			}
		}
		if rec == nil || rec.GetContainerInstance().GetStatus() == statusInactive {
			return nil, awserr.InvalidParameterf("The referenced container instance %s is not registered in cluster %s.", m.GetContainerInstance(), name)
		}
		return nil, awserr.New("MissingVersionException",
			"Amazon ECS can't determine the current version of the container agent on container instance %s: it runs Berth's agent, which ECS does not update. Replace the berth binary on the host and restart the agent instead.",
			rec.GetContainerInstance().GetContainerInstanceArn())
	})
}
