package control

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// maxRunCount is RunTask's maximum count, and StartTask's maximum of instances.
const maxRunCount = 10

// taskSpec is what RunTask and StartTask share.
type taskSpec struct {
	overrides      *ecsv1.TaskOverride
	startedBy      string
	group          string
	tags           []*ecsv1.Tag
	propagateTags  string
	managedTags    bool
	execCommand    bool
	launchType     string
	taskDefinition string
	// platformVersion is RunTask's (nil when absent); a FARGATE launch resolves it.
	platformVersion *string
	// network is the launch's networkConfiguration (CheckNetworkConfiguration).
	network *ecsv1.NetworkConfiguration
	// providers, when set, names the capacity provider of each task to build (capacity.Distribute);
	// nil for none (launchType without a strategy, other than FARGATE).
	providers []string
}

// validateOverrides checks that overrides name containers of the task definition and
// carry sane values. A task-level cpu or memory override is held to the bounds
// RegisterTaskDefinition holds the task definition's to, with the same errors: it
// replaces that value, so it must not run a task registration would refuse. So are the
// containers' memory settings, as the overrides leave them: a container's memory must not
// exceed the task's memory (the override's when given), nor its memoryReservation its
// memory, nor the containers' memory together the task's (InvalidParameterException with
// RegisterTaskDefinition's wording). Overrides longer than 8,192 characters as JSON are
// refused as AWS does.
func validateOverrides(td *ecsv1.TaskDefinition, ov *ecsv1.TaskOverride) error {
	if err := checkOverridesSize(ov); err != nil {
		return err
	}
	defs := map[string]*ecsv1.ContainerDefinition{}
	for _, c := range td.GetContainerDefinitions() {
		defs[c.GetName()] = c
	}
	byName := map[string]*ecsv1.ContainerOverride{}
	for _, o := range ov.GetContainerOverrides() {
		if o == nil {
			return awserr.InvalidParameterf("Container override is empty.")
		}
		if defs[o.GetName()] == nil {
			return awserr.InvalidParameterf("Override for container named %s is not a container in the TaskDefinition.", o.GetName())
		}
		if o.GetCpu() < 0 || (o.Memory != nil && o.GetMemory() < 6) || (o.MemoryReservation != nil && o.GetMemoryReservation() < 6) {
			return awserr.InvalidParameterf("Invalid cpu or memory override for container %s.", o.GetName())
		}
		if err := validateResourceRequirements(InvalidParamErr, "container override '"+o.GetName()+"'", o.GetResourceRequirements()); err != nil {
			return err
		}
		byName[o.GetName()] = o
	}
	if ov == nil {
		return nil
	}
	if ov.Cpu != nil {
		if _, ok := normalizeCPU(ov.GetCpu()); !ok {
			return taskCPUError()
		}
	}
	taskMem := 0
	if ov.Memory != nil {
		v, ok := normalizeMemory(ov.GetMemory())
		if !ok {
			return taskMemoryError(ov.GetMemory())
		}
		taskMem, _ = strconv.Atoi(v)
	} else if td.Memory != nil {
		if n, err := placement.ParseMemory(td.GetMemory()); err == nil {
			taskMem = int(n)
		}
	}
	if len(byName) == 0 && ov.Memory == nil {
		return nil // nothing the task definition's registration did not check
	}
	memSum := 0
	for _, c := range td.GetContainerDefinitions() {
		name := c.GetName()
		mem, res := c.Memory, c.MemoryReservation
		if o := byName[name]; o != nil {
			if o.Memory != nil {
				mem = o.Memory
			}
			if o.MemoryReservation != nil {
				res = o.MemoryReservation
			}
		}
		if err := checkContainerMemory(InvalidParamErr, name, mem, res, taskMem); err != nil {
			return err
		}
		memSum += containerMemoryMiB(mem, res)
	}
	return checkTaskMemorySum(InvalidParamErr, memSum, taskMem)
}

// resolveRunnable is RunnableTaskDefinition returning the definition and its tags.
func (s *Server) resolveRunnable(ctx context.Context, account keys.Scope, ref string) (*ecsv1.TaskDefinition, []*ecsv1.Tag, error) {
	rec, err := RunnableTaskDefinition(ctx, s.kv, account, ref)
	if err != nil {
		return nil, nil, err
	}
	return rec.GetTaskDefinition(), rec.GetTags(), nil
}

// checkSpec validates the parts of RunTask and StartTask they share.
func checkSpec(sp *taskSpec, td *ecsv1.TaskDefinition) error {
	if len(sp.startedBy) > 128 {
		return awserr.InvalidParameterf("startedBy can be at most 128 characters.")
	}
	if len(sp.group) > 255 {
		return awserr.InvalidParameterf("group can be at most 255 characters.")
	}
	if err := ecsrules.ValidateTags(sp.tags); err != nil {
		return err
	}
	if sp.propagateTags != "" && !oneOf(sp.propagateTags, "TASK_DEFINITION", "SERVICE", "NONE") {
		return awserr.InvalidParameterf("Invalid propagateTags %q: valid values are TASK_DEFINITION, SERVICE and NONE.", sp.propagateTags)
	}
	if sp.propagateTags == "SERVICE" {
		return awserr.InvalidParameterf("propagateTags SERVICE is only valid for tasks started by a service.")
	}
	if sp.launchType != "" && !oneOf(sp.launchType, "EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES") {
		return awserr.InvalidParameterf("Invalid launchType %q.", sp.launchType)
	}
	// Berth has no Managed Instances capacity: such a task must not be run on a container
	// instance while claiming to be one. FARGATE runs on the Fargate pool (fargate.go).
	if sp.launchType == "MANAGED_INSTANCES" {
		return awserr.New("UnsupportedFeatureException", "Berth runs tasks on registered container instances only: launchType %s is not supported; use EC2, FARGATE or EXTERNAL.", sp.launchType)
	}
	if err := validateOverrides(td, sp.overrides); err != nil {
		return err
	}
	if sp.launchType == "FARGATE" {
		if err := checkFargateRun(td, sp.overrides); err != nil {
			return err
		}
		v, err := fargatePlatform(sp.platformVersion)
		if err != nil {
			return err
		}
		sp.platformVersion = &v
	} else if sp.platformVersion != nil {
		return awserr.InvalidParameterf("The platformVersion parameter is only supported for tasks using the Fargate launch type.")
	}
	return CheckNetworkConfiguration(td, sp.network)
}

// newTasks builds n pending task records for a cluster; long says whether their ARNs
// take the long format (the account's SettingTaskLongARN). clientToken is RunTask's
// ("" for none).
func (s *Server) newTasks(account keys.Scope, cluster string, long bool, td *ecsv1.TaskDefinition, tdTags []*ecsv1.Tag, sp *taskSpec, n int, clientToken string) []*storev1.TaskRecord {
	launch := sp.launchType
	if launch == "" {
		launch = "EC2"
	}
	now := s.now()
	out := make([]*storev1.TaskRecord, 0, n)
	for i := range n {
		tt := task.Template{
			Region: account.Region, Account: account.Account, Cluster: cluster, LongARN: long, NewID: s.newID, Now: now,
			TaskDefinition: td, Overrides: sp.overrides, Group: sp.group, LaunchType: launch, StartedBy: sp.startedBy,
			Tags: sp.tags, PropagateTags: sp.propagateTags, TaskDefinitionTags: tdTags, ManagedTags: sp.managedTags,
			EnableExecuteCommand: sp.execCommand, NetworkConfiguration: sp.network, ClientToken: clientToken,
		}
		if i < len(sp.providers) {
			tt.CapacityProviderName = sp.providers[i]
		}
		if launch == "FARGATE" {
			tt.PlatformVersion = sp.platformVersion
		}
		out = append(out, task.NewRecord(tt))
	}
	return out
}

// describeTask returns a copy of the task as DescribeTasks shows it; tags only with
// include TAGS.
func describeTask(r *storev1.TaskRecord, withTags bool) *ecsv1.Task {
	return describeOwned(proto.Clone(r.GetTask()).(*ecsv1.Task), withTags)
}

// describeOwned is describeTask without the copy, for a task the caller owns (decoded
// for this call, or just written): it changes t and returns it. DescribeTasks(100) and
// RunTask answer this way (copying each task was a sixth of DescribeTasks(100)'s scheduler
// CPU).
func describeOwned(t *ecsv1.Task, withTags bool) *ecsv1.Task {
	if t.GetLaunchType() == "FARGATE" {
		// A Fargate task shows no container instance (the record keeps it for the
		// agent's delivery and the reaper).
		t.ContainerInstanceArn = nil
	}
	if t.GetEnableExecuteCommand() {
		execAgents(t)
	}
	if !withTags {
		t.Tags = nil
	} else if t.Tags == nil {
		t.Tags = []*ecsv1.Tag{}
	}
	return t
}

// execAgents sets each container's managedAgents to the ExecuteCommandAgent entry AWS
// shows for a task run with enableExecuteCommand. Berth's agent is the exec agent, and
// it runs commands in a container while the container runs, so the entry's lastStatus
// follows the container's: PENDING, then RUNNING (lastStartedAt the task's startedAt),
// then STOPPED.
func execAgents(t *ecsv1.Task) {
	for _, c := range t.GetContainers() {
		status := c.GetLastStatus()
		if status == "" {
			status = "PENDING"
		}
		ma := &ecsv1.ManagedAgent{Name: proto.String(ExecuteAgentName), LastStatus: proto.String(status)}
		if status != "PENDING" && t.StartedAt != nil {
			ma.LastStartedAt = t.StartedAt
		}
		c.ManagedAgents = []*ecsv1.ManagedAgent{ma}
	}
}

// RunTask starts count (1–10, default 1) tasks of an ACTIVE task definition (family,
// family:revision or ARN) on the cluster's instances through the Placer; tasks that
// cannot be placed come back in failures with AWS's reasons. clientToken (up to 64
// characters) makes the call idempotent: a repeated token returns the tasks it started.
// startedBy, group (default "family:{family}"), overrides, tags (propagateTags
// TASK_DEFINITION adds the definition's) are stored with the tasks. Errors:
// ClusterNotFoundException, InvalidParameterException (bad count, inactive task
// definition, override of an unknown container, no container instances), ClientException
// (unknown task definition). AWS reference: RunTask.
func (s *Server) RunTask(ctx context.Context, req *connect.Request[ecsv1.RunTaskRequest]) (*connect.Response[ecsv1.RunTaskResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.RunTaskRequest) (*ecsv1.RunTaskResponse, error) {
		count := int32(1)
		if m.Count != nil {
			count = m.GetCount()
		}
		if count < 1 || count > maxRunCount {
			return nil, awserr.InvalidParameterf("count must be between 1 and %d.", maxRunCount)
		}
		if len(m.GetClientToken()) > 64 {
			return nil, awserr.InvalidParameterf("clientToken can be at most 64 characters.")
		}
		if len(m.GetCapacityProviderStrategy()) > 0 && m.LaunchType != nil {
			return nil, awserr.InvalidParameterf("Specifying both a launch type and capacity provider strategy is not supported.")
		}
		if m.LaunchType != nil && !oneOf(m.GetLaunchType(), "EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES") {
			return nil, awserr.InvalidParameterf("Invalid launchType %q.", m.GetLaunchType())
		}
		if err := CheckFields(InvalidParamErr, m); err != nil {
			return nil, err
		}
		name, err := ClusterName(account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		// The cluster, the task definition and the account's settings in one read; each
		// is checked where it always was.
		rr, err := readForRun(ctx, s.kv, account, name, m.GetTaskDefinition())
		if err != nil {
			return nil, err
		}
		crec, err := rr.activeCluster()
		if err != nil {
			return nil, err
		}
		if tok := m.GetClientToken(); tok != "" {
			prev, err := s.tasksForToken(ctx, account, name, tok)
			if err != nil || prev != nil {
				return prev, err
			}
		}
		td, tdTags, err := rr.runnable()
		if err != nil {
			return nil, err
		}
		if err := CheckTaskDefinitionFields(td); err != nil {
			return nil, err
		}
		strategy, err := capacity.RunStrategy(ctx, s.kv, account, crec.GetCluster(), m.GetCapacityProviderStrategy(), m.LaunchType)
		if err != nil {
			return nil, err
		}
		launch := m.GetLaunchType()
		var providers []string
		switch {
		case strategy != nil:
			launch = capacity.StrategyLaunchType(strategy)
			providers = capacity.Distribute(strategy, nil, int(count))
		case launch == "FARGATE":
			providers = make([]string, count)
			for i := range providers {
				providers[i] = capacity.ProviderFargate
			}
		}
		sp := &taskSpec{overrides: m.GetOverrides(), startedBy: m.GetStartedBy(), group: m.GetGroup(), tags: m.GetTags(),
			propagateTags: m.GetPropagateTags(), managedTags: m.GetEnableEcsManagedTags(), execCommand: m.GetEnableExecuteCommand(), launchType: launch,
			platformVersion: m.PlatformVersion, network: m.GetNetworkConfiguration(), providers: providers}
		if err := checkSpec(sp, td); err != nil {
			return nil, err
		}
		if launch == "FARGATE" && (len(m.GetPlacementConstraints()) > 0 || len(m.GetPlacementStrategy()) > 0) {
			return nil, awserr.InvalidParameterf("Task placement constraints and strategies are not supported for the Fargate launch type.")
		}
		for _, c := range m.GetPlacementConstraints() {
			if !oneOf(c.GetType(), "distinctInstance", "memberOf") {
				return nil, awserr.InvalidParameterf("Invalid placement constraint type %q.", c.GetType())
			}
			if c.GetType() == "memberOf" {
				if _, err := parseExpr(c.GetExpression()); err != nil {
					return nil, err
				}
			}
		}
		if len(m.GetPlacementConstraints()) > 10 {
			return nil, awserr.InvalidParameterf("At most 10 placement constraints can be specified.")
		}
		for _, st := range m.GetPlacementStrategy() {
			if !oneOf(st.GetType(), "random", "spread", "binpack") {
				return nil, awserr.InvalidParameterf("Invalid placement strategy type %q.", st.GetType())
			}
		}
		if len(m.GetPlacementStrategy()) > 5 {
			return nil, awserr.InvalidParameterf("At most 5 placement strategies can be specified.")
		}
		if crec.GetCluster().GetRegisteredContainerInstancesCount() == 0 {
			return nil, awserr.InvalidParameterf("No Container Instances were found in your cluster.")
		}
		long, err := rr.longARN(SettingTaskLongARN)
		if err != nil {
			return nil, err
		}
		tasks := s.newTasks(account, name, long, td, tdTags, sp, int(count), m.GetClientToken())
		res, err := s.placeByProvider(ctx, placeRequest{
			account: account, cluster: name, tasks: tasks, td: td,
			constraints: m.GetPlacementConstraints(), strategy: m.GetPlacementStrategy(),
			clientToken: m.GetClientToken(),
		})
		if errors.Is(err, errClientTokenUsed) {
			return s.tasksForToken(ctx, account, name, m.GetClientToken())
		}
		if err != nil {
			return nil, err
		}
		return placeResponse(res), nil
	})
}

func placeResponse(res placeResult) *ecsv1.RunTaskResponse {
	resp := &ecsv1.RunTaskResponse{Tasks: []*ecsv1.Task{}, Failures: res.failures}
	if resp.Failures == nil {
		resp.Failures = []*ecsv1.Failure{}
	}
	for _, t := range res.placed {
		resp.Tasks = append(resp.Tasks, describeOwned(t.GetTask(), true)) // written by this call
	}
	return resp
}

// tasksForToken returns the RunTask response for a client token already used, or nil.
func (s *Server) tasksForToken(ctx context.Context, account keys.Scope, cluster, token string) (*ecsv1.RunTaskResponse, error) {
	v, _, err := get[*wrapperspb.StringValue](ctx, s.kv, keys.ClientToken(account, cluster, token))
	if err != nil || v == nil {
		return nil, err
	}
	var ks []string
	for id := range strings.SplitSeq(v.GetValue(), ",") {
		ks = append(ks, keys.Task(account, cluster, id))
	}
	recs, _, err := getMany[*storev1.TaskRecord](ctx, s.kv, ks)
	if err != nil {
		return nil, err
	}
	resp := &ecsv1.RunTaskResponse{Tasks: []*ecsv1.Task{}, Failures: []*ecsv1.Failure{}}
	for _, r := range recs {
		if r != nil {
			resp.Tasks = append(resp.Tasks, describeOwned(r.GetTask(), true)) // decoded for this call
		}
	}
	return resp, nil
}

// StartTask starts one task of an ACTIVE task definition on each named container
// instance (1–10, ids or ARNs); an instance that is unknown, not ACTIVE, disconnected or
// short of resources yields a failure instead. Errors as RunTask.
// AWS reference: StartTask.
func (s *Server) StartTask(ctx context.Context, req *connect.Request[ecsv1.StartTaskRequest]) (*connect.Response[ecsv1.StartTaskResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.StartTaskRequest) (*ecsv1.StartTaskResponse, error) {
		if len(m.GetContainerInstances()) == 0 || len(m.GetContainerInstances()) > maxRunCount {
			return nil, awserr.InvalidParameterf("containerInstances must list between 1 and %d container instances.", maxRunCount)
		}
		if err := CheckFields(InvalidParamErr, m); err != nil {
			return nil, err
		}
		name, _, _, err := s.activeCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		td, tdTags, err := s.resolveRunnable(ctx, account, m.GetTaskDefinition())
		if err != nil {
			return nil, err
		}
		if err := CheckTaskDefinitionFields(td); err != nil {
			return nil, err
		}
		sp := &taskSpec{overrides: m.GetOverrides(), startedBy: m.GetStartedBy(), group: m.GetGroup(), tags: m.GetTags(),
			propagateTags: m.GetPropagateTags(), managedTags: m.GetEnableEcsManagedTags(), execCommand: m.GetEnableExecuteCommand(),
			network: m.GetNetworkConfiguration()}
		if err := checkSpec(sp, td); err != nil {
			return nil, err
		}
		var ids []string
		var failures []*ecsv1.Failure
		for _, ref := range m.GetContainerInstances() {
			id, ok, err := s.idRef(ctx, account, name, arn.ContainerInstance, ref)
			if err != nil {
				return nil, err
			}
			if !ok {
				failures = append(failures, missing(s.instanceFailureARN(ctx, account, name, ref)))
				continue
			}
			ids = append(ids, id)
		}
		resp := &ecsv1.StartTaskResponse{Tasks: []*ecsv1.Task{}, Failures: failures}
		if len(ids) > 0 {
			long, err := s.longARN(ctx, account, SettingTaskLongARN)
			if err != nil {
				return nil, err
			}
			tasks := s.newTasks(account, name, long, td, tdTags, sp, len(ids), "")
			res, err := s.place(ctx, placeRequest{account: account, cluster: name, tasks: tasks, td: td, instanceIDs: ids})
			if err != nil {
				return nil, err
			}
			r := placeResponse(res)
			resp.Tasks = r.Tasks
			for _, f := range r.Failures {
				if f.GetReason() == placement.ReasonMissing {
					f.Arn = proto.String(s.instanceFailureARN(ctx, account, name, f.GetArn()))
				}
				resp.Failures = append(resp.Failures, f)
			}
		}
		if resp.Failures == nil {
			resp.Failures = []*ecsv1.Failure{}
		}
		return resp, nil
	})
}

// taskKey resolves a task reference (id or ARN) of a cluster to its key; ok false when it
// cannot name a task of the caller there.
func (s *Server) taskKey(ctx context.Context, account keys.Scope, cluster, ref string) (string, bool, error) {
	id, ok, err := s.idRef(ctx, account, cluster, arn.Task, ref)
	if err != nil || !ok {
		return "", false, err
	}
	return keys.Task(account, cluster, id), true, nil
}

// StopTask stops a task: desiredStatus STOPPED, stopCode UserInitiated, stoppedReason the
// given reason (default "Task stopped by user"), and for a task placed on an instance a
// StopOrder in the agent's inbox, all in one transaction; a task not placed yet goes
// straight to STOPPED. Stopping a stopped task returns it unchanged. Errors:
// ClusterNotFoundException, InvalidParameterException "The referenced task was not found.".
// AWS reference: StopTask.
func (s *Server) StopTask(ctx context.Context, req *connect.Request[ecsv1.StopTaskRequest]) (*connect.Response[ecsv1.StopTaskResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.StopTaskRequest) (*ecsv1.StopTaskResponse, error) {
		if m.GetTask() == "" {
			return nil, awserr.InvalidParameterf("task is required.")
		}
		if len(m.GetReason()) > 1024 {
			return nil, awserr.InvalidParameterf("reason can be at most 1024 characters.")
		}
		name, err := ClusterName(account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		if rec, _, err := s.cluster(ctx, account, name); err != nil {
			return nil, err
		} else if rec == nil {
			return nil, awserr.ClusterNotFoundError()
		}
		key, ok, err := s.taskKey(ctx, account, name, m.GetTask())
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, awserr.InvalidParameterf("The referenced task was not found.")
		}
		reason := m.GetReason()
		if reason == "" {
			reason = "Task stopped by user"
		}
		t, err := s.stopTask(ctx, account, key, "UserInitiated", reason)
		if err != nil {
			return nil, err
		}
		return &ecsv1.StopTaskResponse{Task: describeTask(t, false)}, nil
	})
}

// StopTaskRecord stops the task at key as StopTask does, with the given stopCode and
// reason (ServiceSchedulerInitiated for the service scheduler), and returns the task.
// It is exported for the service reconciler. Errors: InvalidParameterException when the
// task does not exist.
func (s *Server) StopTaskRecord(ctx context.Context, account keys.Scope, cluster, taskID, stopCode, reason string) (*storev1.TaskRecord, error) {
	return s.stopTask(ctx, account, keys.Task(account, cluster, taskID), stopCode, reason)
}

func (s *Server) stopTask(ctx context.Context, account keys.Scope, key, stopCode, reason string) (*storev1.TaskRecord, error) {
	return task.StopTxn(ctx, s.kv, s.now, account, key, stopCode, reason)
}

// DescribeTasks describes up to 100 tasks of a cluster by id or ARN (include TAGS adds
// tags) in one etcd round trip, plus a wait for the task cache to catch up when there is
// one (describeTasks); unknown ones come back in failures with reason MISSING.
// Errors: ClusterNotFoundException, InvalidParameterException for an empty or too long
// list. AWS reference: DescribeTasks.
func (s *Server) DescribeTasks(ctx context.Context, req *connect.Request[ecsv1.DescribeTasksRequest]) (*connect.Response[ecsv1.DescribeTasksResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeTasksRequest) (*ecsv1.DescribeTasksResponse, error) {
		if len(m.GetTasks()) == 0 {
			return nil, awserr.InvalidParameterf("Tasks cannot be empty.")
		}
		if len(m.GetTasks()) > 100 {
			return nil, awserr.InvalidParameterf("tasks can list at most 100 tasks.")
		}
		name, err := ClusterName(account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		ks := make([]string, len(m.GetTasks()))
		var long *bool
		for i, ref := range m.GetTasks() {
			k, ok, err := s.taskKey(ctx, account, name, ref)
			if err != nil {
				return nil, err
			}
			if !ok {
				k = keys.Task(account, name, "%missing")
			}
			ks[i] = k
		}
		withTags := oneOf("TAGS", m.GetInclude()...)
		tasks, err := s.describeTasks(ctx, account, name, ks, withTags)
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.DescribeTasksResponse{Tasks: make([]*ecsv1.Task, 0, len(tasks)), Failures: []*ecsv1.Failure{}}
		for i, t := range tasks {
			if t != nil {
				resp.Tasks = append(resp.Tasks, t)
				continue
			}
			ref := m.GetTasks()[i]
			if !arn.IsARN(ref) {
				if long == nil {
					l, err := s.longARN(ctx, account, SettingTaskLongARN)
					if err != nil {
						return nil, err
					}
					long = &l
				}
				ref = arn.TaskARN(account.Region, account.Account, name, ref, *long)
			}
			resp.Failures = append(resp.Failures, missing(ref))
		}
		return resp, nil
	})
}

// describeTasks returns the tasks of keys ks of cluster name as DescribeTasks answers
// them (nil where there is no such task), or ClusterNotFoundException. With the task
// cache (Config.Watcher) it reads only the cluster key (count only, linearizable) and
// takes the tasks from the cache once the cache has caught up with that read's revision
// (the tasks are then shared with the cache and other responses: read-only); without it,
// or when the cache is not current in time, it reads the cluster's existence and the
// records in one etcd txn.
func (s *Server) describeTasks(ctx context.Context, account keys.Scope, name string, ks []string, withTags bool) ([]*ecsv1.Task, error) {
	if s.taskCache != nil {
		resp, err := s.kv.Get(ctx, keys.Cluster(account, name), clientv3.WithCountOnly())
		if err != nil {
			return nil, err
		}
		if resp.Count == 0 {
			return nil, awserr.ClusterNotFoundError()
		}
		if tasks, ok := s.taskCache.tasks(ctx, account, name, resp.Header.GetRevision(), ks, withTags); ok {
			return tasks, nil
		}
	}
	// The cluster's existence and the tasks in one read (one etcd round trip).
	found, recs, err := countAndGetMany[*storev1.TaskRecord](ctx, s.kv, keys.Cluster(account, name), ks)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, awserr.ClusterNotFoundError()
	}
	tasks := make([]*ecsv1.Task, len(recs))
	for i, r := range recs {
		if r != nil {
			tasks[i] = describeOwned(r.GetTask(), withTags) // decoded for this call
		}
	}
	return tasks, nil
}

// ListTasks lists the ARNs of a cluster's tasks with a desiredStatus (RUNNING by
// default; STOPPED; PENDING lists none, as ECS never sets it), filtered by one of
// containerInstance, family, serviceName, startedBy from an index (further filters and
// launchType are applied to the page, which may then hold fewer than maxResults);
// maxResults 1–100 and nextToken page in O(maxResults): one index range read and one
// batched read of the page's records. Errors: ClusterNotFoundException,
// ServiceNotFoundException (serviceName names no service of the cluster),
// InvalidParameterException. AWS reference: ListTasks.
func (s *Server) ListTasks(ctx context.Context, req *connect.Request[ecsv1.ListTasksRequest]) (*connect.Response[ecsv1.ListTasksResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListTasksRequest) (*ecsv1.ListTasksResponse, error) {
		limit, err := maxResults(m.MaxResults)
		if err != nil {
			return nil, err
		}
		desired := task.DesiredRunning
		if m.DesiredStatus != nil {
			desired = m.GetDesiredStatus()
			if !oneOf(desired, "RUNNING", "PENDING", "STOPPED") {
				return nil, awserr.InvalidParameterf("Invalid desiredStatus %q: valid values are RUNNING, PENDING and STOPPED.", desired)
			}
		}
		if m.LaunchType != nil && !oneOf(m.GetLaunchType(), "EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES") {
			return nil, awserr.InvalidParameterf("Invalid launchType %q.", m.GetLaunchType())
		}
		if m.StartedBy != nil && (m.Family != nil || m.ServiceName != nil) {
			return nil, awserr.InvalidParameterf("startedBy may not be specified with family or serviceName.")
		}
		if m.Family != nil && m.ServiceName != nil {
			return nil, awserr.InvalidParameterf("family may not be specified with serviceName.")
		}
		name, err := ClusterName(account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		if rec, _, err := s.cluster(ctx, account, name); err != nil {
			return nil, err
		} else if rec == nil {
			return nil, awserr.ClusterNotFoundError()
		}
		svcName := m.GetServiceName()
		if m.ServiceName != nil {
			// A service that does not exist is ServiceNotFoundException, as AWS answers
			// (not an empty list).
			if arn.IsARN(svcName) {
				if a, err := arn.Parse(svcName); err == nil && a.Type == arn.Service && account.Owns(a.Partition, a.Account, a.Region) && (a.Cluster == "" || a.Cluster == name) {
					svcName = a.Name
				}
			}
			n, err := s.kv.Get(ctx, keys.Service(account, name, svcName), clientv3.WithCountOnly())
			if err != nil {
				return nil, err
			}
			if !ecsrules.ValidName(svcName) || n.Count == 0 {
				return nil, awserr.ServiceNotFoundError()
			}
		}
		resp := &ecsv1.ListTasksResponse{TaskArns: []string{}}
		if desired == "PENDING" {
			return resp, nil
		}
		instID := ""
		if m.ContainerInstance != nil {
			id, ok, err := s.idRef(ctx, account, name, arn.ContainerInstance, m.GetContainerInstance())
			if err != nil {
				return nil, err
			}
			if !ok {
				return resp, nil
			}
			instID = id
		}
		dim, val := keys.DimAll, "-"
		for _, f := range []struct {
			set      bool
			dim, val string
		}{
			{instID != "", keys.DimInstance, instID},
			{m.ServiceName != nil, keys.DimService, svcName},
			{m.Family != nil, keys.DimFamily, m.GetFamily()},
			{m.StartedBy != nil, keys.DimStartedBy, m.GetStartedBy()},
		} {
			if !f.set {
				continue
			}
			if dim == keys.DimAll {
				dim, val = f.dim, f.val
			}
		}
		if (dim == keys.DimFamily || dim == keys.DimService) && !ecsrules.ValidName(val) {
			return resp, nil
		}
		ks, next, err := pageIDKeys(ctx, s.kv, keys.TaskList(account, name, desired, dim, val, ""), limit, m.GetNextToken())
		if err != nil {
			return nil, err
		}
		tks := make([]string, len(ks))
		for i, k := range ks {
			tks[i] = keys.Task(account, name, lastPart(k))
		}
		recs, _, err := getMany[*storev1.TaskRecord](ctx, s.kv, tks)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r == nil {
				continue
			}
			t := r.GetTask()
			if (instID != "" && r.GetContainerInstanceId() != instID) ||
				(m.ServiceName != nil && r.GetServiceName() != m.GetServiceName()) ||
				(m.Family != nil && task.Family(r) != m.GetFamily()) ||
				(m.StartedBy != nil && t.GetStartedBy() != m.GetStartedBy()) ||
				(m.LaunchType != nil && t.GetLaunchType() != m.GetLaunchType()) {
				continue
			}
			resp.TaskArns = append(resp.TaskArns, t.GetTaskArn())
		}
		if next != "" {
			resp.NextToken = proto.String(next)
		}
		return resp, nil
	})
}

// ApplyTaskStateChange records a task state change reported by the agent of
// containerInstanceARN: lastStatus moves only forward (an older report is ignored),
// containers' lastStatus, exitCode, reason, runtimeId, health, image digest and network
// bindings are updated, timestamps set, and when the task STOPPED its stopCode and
// stoppedReason kept (a user's stop wins), desiredStatus set STOPPED, the instance's
// reservation released and the inbox entry deleted. The instance's pending/running
// counters change in the same transaction (a cluster's are their sums). Concurrent
// changes of the replica are committed together (stateBatcher), each instance's on its
// own. Errors: AccessDeniedException
// for a task that is not on that instance or not of the account; InvalidParameterException
// for an unknown status.
func (s *Server) ApplyTaskStateChange(ctx context.Context, account keys.Scope, containerInstanceARN string, ch *agentv1.TaskStateChange) error {
	if ch == nil {
		return awserr.InvalidParameterf("task state change is empty.")
	}
	if !task.ValidStatus(ch.GetLastStatus()) {
		return awserr.InvalidParameterf("Invalid task status %q.", ch.GetLastStatus())
	}
	denied := awserr.New("AccessDeniedException", "The task %s is not on container instance %s.", ch.GetTaskArn(), containerInstanceARN)
	icluster, instID, ok, err := s.locate(ctx, account, arn.ContainerInstance, containerInstanceARN)
	if err != nil {
		return err
	}
	if !ok {
		return denied
	}
	tcluster, taskID, ok, err := s.locate(ctx, account, arn.Task, ch.GetTaskArn())
	if err != nil {
		return err
	}
	if !ok || tcluster != icluster {
		return denied
	}
	return s.states.apply(ctx, &stateCall{account: account, cluster: tcluster, instID: instID, taskID: taskID, ch: ch, denied: denied})
}
