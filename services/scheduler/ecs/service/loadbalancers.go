package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxLoadBalancers is ECS's limit of loadBalancers per service.
const maxLoadBalancers = 5

// ReasonELBUnhealthy is the stoppedReason of a task stopped because a target of it failed
// its load balancer's health checks (AWS's wording, with the target group's ARN).
const ReasonELBUnhealthy = elbUnhealthyPrefix + " in (target-group %s)"

const elbUnhealthyPrefix = "Task failed ELB health checks"

// validateLoadBalancers checks a service's loadBalancers[] as ECS does: at most 5, each
// naming a target group that exists and is associated with a load balancer, and a
// containerName and containerPort of the task definition; a target group of target type
// ip needs the awsvpc network mode and one of type instance does not allow it. Classic
// Load Balancers (loadBalancerName) do not exist in Berth.
func validateLoadBalancers(ctx context.Context, kv clientv3.KV, account keys.Scope, lbs []*ecsv1.LoadBalancer, td *ecsv1.TaskDefinition) error {
	if len(lbs) > maxLoadBalancers {
		return awserr.InvalidParameterf("loadBalancers can have at most %d items.", maxLoadBalancers)
	}
	svc := elb.New(kv)
	seen := map[string]bool{}
	for _, l := range lbs {
		if l.GetLoadBalancerName() != "" && l.GetTargetGroupArn() == "" {
			return awserr.InvalidParameterf("Classic Load Balancers are not supported by Berth: give targetGroupArn instead of loadBalancerName %s.", l.GetLoadBalancerName())
		}
		if l.GetTargetGroupArn() == "" {
			return awserr.InvalidParameterf("targetGroupArn is required for a load balancer.")
		}
		if l.GetLoadBalancerName() != "" {
			return awserr.InvalidParameterf("loadBalancerName and targetGroupArn cannot both be specified.")
		}
		if l.GetContainerName() == "" || l.ContainerPort == nil {
			return awserr.InvalidParameterf("containerName and containerPort must be specified for target group %s.", l.GetTargetGroupArn())
		}
		k := l.GetTargetGroupArn() + "|" + l.GetContainerName() + "|" + strconv.Itoa(int(l.GetContainerPort()))
		if seen[k] {
			return awserr.InvalidParameterf("The load balancer with targetGroupArn %s, containerName %s and containerPort %d is specified more than once.", l.GetTargetGroupArn(), l.GetContainerName(), l.GetContainerPort())
		}
		seen[k] = true
		tg, err := svc.TargetGroup(ctx, account, l.GetTargetGroupArn())
		if elb.CodeOf(err) == elb.CodeTargetGroupNotFound {
			return awserr.InvalidParameterf("Unable to validate the specified targetGroupArn %s: the target group does not exist.", l.GetTargetGroupArn())
		}
		if err != nil {
			return err
		}
		inUse, err := svc.InUse(ctx, account, l.GetTargetGroupArn())
		if err != nil {
			return err
		}
		if !inUse {
			return awserr.InvalidParameterf("The target group with targetGroupArn %s does not have an associated load balancer.", l.GetTargetGroupArn())
		}
		if err := checkContainerPort(td, l.GetContainerName(), l.GetContainerPort()); err != nil {
			return err
		}
		mode := td.GetNetworkMode()
		if mode == "" {
			mode = "bridge"
		}
		switch {
		case tg.GetTargetType() == "ip" && mode != "awsvpc":
			return awserr.InvalidParameterf("The provided target group %s has target type ip, which is incompatible with the %s network mode specified in the task definition.", l.GetTargetGroupArn(), mode)
		case tg.GetTargetType() == "instance" && mode == "awsvpc":
			return awserr.InvalidParameterf("The provided target group %s has target type instance, which is incompatible with the awsvpc network mode specified in the task definition.", l.GetTargetGroupArn())
		}
	}
	return nil
}

// checkContainerPort checks that the task definition td has a container named name with
// a port mapping for containerPort, as a service's loadBalancers and serviceRegistries
// entries must name; otherwise InvalidParameterException in AWS's words.
func checkContainerPort(td *ecsv1.TaskDefinition, name string, containerPort int32) error {
	var container *ecsv1.ContainerDefinition
	for _, c := range td.GetContainerDefinitions() {
		if c.GetName() == name {
			container = c
		}
	}
	if container == nil {
		return awserr.InvalidParameterf("The container %s does not exist in the task definition.", name)
	}
	if !slices.ContainsFunc(container.GetPortMappings(), func(p *ecsv1.PortMapping) bool { return p.GetContainerPort() == containerPort }) {
		return awserr.InvalidParameterf("The container %s did not have a container port %d defined.", name, containerPort)
	}
	return nil
}

// TaskTargets is the health of one task's targets across its service's target groups.
type TaskTargets struct {
	// State is healthy when every target is healthy; unhealthy when one is; else the
	// state of the first target that is not healthy (initial, draining, unused), or ""
	// when the task has no target yet.
	State string
	// TargetGroupArn, Port and Description name the target that decided State when it
	// is unhealthy (for the service event and the stoppedReason).
	TargetGroupArn string
	Port           int32
	Description    string
	// Registered is the number of targets the task has (any state).
	Registered int
}

// lbSync registers and deregisters a service's tasks with its target groups and reads
// their health; one per Reconciler.
type lbSync struct {
	svc *elb.Service
	kv  clientv3.KV
	// draining holds the tasks whose stop waits for their targets' drain: they are not
	// registered again while their stop is pending.
	mu       sync.Mutex
	draining map[string]pendingStop // by task ARN
}

// pendingStop is a task whose stop waits for its targets' drain: its service and the
// stoppedReason decided first (later passes see a draining target, not the cause).
type pendingStop struct{ service, reason string }

func newLBSync(kv clientv3.KV) *lbSync {
	return &lbSync{svc: elb.New(kv), kv: kv, draining: map[string]pendingStop{}}
}

// hostAddress is where a bridge or host mode target is reached: the address of the
// network binding when it names one, else the address the instance's agent registered
// as its host's (RegisterRequest.host_address, what the cluster's other hosts reach it
// at), else loopback: an agent registers none when its control plane is on its own host
// (as under `berth dev`, where the lb role shares that one host).
func hostAddress(b *ecsv1.NetworkBinding, in *storev1.ContainerInstanceRecord) string {
	if ip := b.GetBindIp(); ip != "" && ip != "0.0.0.0" && ip != "::" {
		return ip
	}
	if a := in.GetHostAddress(); a != "" {
		return a
	}
	return "127.0.0.1"
}

// target returns the target a task gives a load balancer entry: (id, port, address),
// from the task's network bindings (bridge and host: the host's address and host port)
// or its awsvpc attachment (the task's IP and the container port). ok is false while the
// task has no such binding yet.
func taskTarget(t *storev1.TaskRecord, in store.Item[*storev1.ContainerInstanceRecord], l *ecsv1.LoadBalancer, tg *storev1.TargetGroupRecord) (string, int32, string, bool) {
	task := t.GetTask()
	for _, a := range task.GetAttachments() {
		if a.GetType() != "ElasticNetworkInterface" {
			continue
		}
		for _, d := range a.GetDetails() {
			if d.GetName() == "privateIPv4Address" && d.GetValue() != "" {
				ip := d.GetValue()
				return ip, l.GetContainerPort(), net.JoinHostPort(ip, strconv.Itoa(int(l.GetContainerPort()))), true
			}
		}
	}
	for _, c := range task.GetContainers() {
		if c.GetName() != l.GetContainerName() {
			continue
		}
		for _, b := range c.GetNetworkBindings() {
			if b.GetContainerPort() != l.GetContainerPort() || b.GetHostPort() == 0 || (b.GetProtocol() != "" && b.GetProtocol() != "tcp") {
				continue
			}
			host := hostAddress(b, in.Value)
			id := in.Value.GetContainerInstance().GetEc2InstanceId()
			if tg.GetTargetType() == "ip" {
				id = host
			}
			if id == "" {
				id = t.GetContainerInstanceId()
			}
			return id, b.GetHostPort(), net.JoinHostPort(host, strconv.Itoa(int(b.GetHostPort()))), true
		}
	}
	return "", 0, "", false
}

// sync registers the service's RUNNING tasks (desired RUNNING) with every target group
// of their loadBalancers (the service's, and a task set's for its own tasks) and starts
// the drain of the targets of every other task, then returns the health of each task's
// targets by task ARN. Errors of one target group are logged and leave its tasks without
// health (not healthy).
func (s *lbSync) sync(ctx context.Context, r *Reconciler, st State) map[string]TaskTargets {
	svc := st.Service.Value.GetService()
	out := map[string]TaskTargets{}
	for _, e := range recordLBs(st.Service.Value) {
		l := e.v
		arn := l.GetTargetGroupArn()
		tg, err := s.svc.TargetGroup(ctx, st.Account, arn)
		if err != nil {
			r.log.Warn("service: load balancer target group", "service", svc.GetServiceName(), "targetGroup", arn, "err", err)
			continue
		}
		health, err := s.svc.DescribeTargetHealth(ctx, st.Account, arn, nil)
		if err != nil {
			r.log.Warn("service: describe target health", "targetGroup", arn, "err", err)
			continue
		}
		byTask := map[string][]elb.TargetHealth{}
		for _, h := range health {
			if h.TaskArn != "" {
				byTask[h.TaskArn] = append(byTask[h.TaskArn], h)
			}
		}
		var register, deregister []elb.TargetInput
		mine := map[string]bool{}
		for _, it := range st.Tasks {
			mine[it.Value.GetTask().GetTaskArn()] = true
		}
		// Targets of tasks that no longer exist or have stopped (their records expired,
		// or they stopped while no pass ran) are deregistered too; a target group may be
		// shared, so a task of another service that still runs is left alone.
		for tarn, hs := range byTask {
			if mine[tarn] || !s.gone(ctx, st.Account, tarn) {
				continue
			}
			for _, h := range hs {
				if h.State != elb.StateDraining {
					deregister = append(deregister, elb.TargetInput{ID: h.ID, Port: &h.Port})
				}
			}
		}
		for _, it := range st.Tasks {
			if !e.covers(it.Value) {
				continue // another task set's task: that task set's entry handles it
			}
			task := it.Value.GetTask()
			tarn := task.GetTaskArn()
			hs := byTask[tarn]
			live := task.GetDesiredStatus() == "RUNNING" && task.GetLastStatus() == "RUNNING" && !s.isDraining(tarn)
			if !live {
				for _, h := range hs {
					if h.State != elb.StateDraining {
						deregister = append(deregister, elb.TargetInput{ID: h.ID, Port: &h.Port})
					}
				}
				if len(hs) > 0 || s.isDraining(tarn) {
					// Its stop waits for (or just saw the end of) the drain.
					out[tarn] = merge(out[tarn], TaskTargets{State: elb.StateDraining, Registered: len(hs)})
				}
				continue
			}
			id, port, addr, ok := taskTarget(it.Value, st.Instances[it.Value.GetContainerInstanceId()], l, tg)
			if !ok {
				continue
			}
			var cur *elb.TargetHealth
			for i := range hs {
				if hs[i].ID == id && hs[i].Port == port {
					cur = &hs[i]
				}
			}
			if cur == nil || cur.State == elb.StateDraining {
				register = append(register, elb.TargetInput{ID: id, Port: &port, Address: addr, TaskArn: tarn})
				out[tarn] = merge(out[tarn], TaskTargets{State: elb.StateInitial, Registered: 1})
				continue
			}
			out[tarn] = merge(out[tarn], TaskTargets{State: cur.State, TargetGroupArn: arn, Port: port, Description: cur.Description, Registered: 1})
		}
		if len(register) > 0 {
			if err := s.svc.RegisterTargets(ctx, st.Account, arn, register); err != nil {
				r.log.Warn("service: register targets", "targetGroup", arn, "err", err)
			}
		}
		if len(deregister) > 0 {
			if err := s.svc.DeregisterTargets(ctx, st.Account, arn, deregister); err != nil && elb.CodeOf(err) != elb.CodeInvalidTarget {
				r.log.Warn("service: deregister targets", "targetGroup", arn, "err", err)
			}
		}
	}
	return out
}

// merge combines the health of a task's targets in two groups.
func merge(a, b TaskTargets) TaskTargets {
	if a.State == "" {
		return b
	}
	n := a.Registered + b.Registered
	switch {
	case a.State == elb.StateUnhealthy:
	case b.State == elb.StateUnhealthy, a.State == elb.StateHealthy:
		a = b
	}
	a.Registered = n
	return a
}

// gone reports whether the task taskArn names has no record or is STOPPED.
func (s *lbSync) gone(ctx context.Context, account keys.Scope, taskArn string) bool {
	a, err := arn.Parse(taskArn)
	if err != nil || a.Cluster == "" {
		return false
	}
	rec, _, err := store.Get[*storev1.TaskRecord](ctx, s.kv, keys.Task(account, a.Cluster, a.Name))
	if errors.Is(err, store.ErrNotFound) {
		return true
	}
	return err == nil && rec.GetTask().GetLastStatus() == "STOPPED"
}

func (s *lbSync) isDraining(taskArn string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.draining[taskArn]
	return ok
}

// drained starts the drain of a task's targets before it is stopped for reason and
// reports whether they are all gone, so the task may be stopped now, with the reason
// its stop was first decided for. A task whose stop waits stays out of the target groups
// until it is stopped.
func (s *lbSync) drained(ctx context.Context, account keys.Scope, svc *ecsv1.Service, task *storev1.TaskRecord, reason string) (bool, string, error) {
	tarn := task.GetTask().GetTaskArn()
	s.mu.Lock()
	if p, ok := s.draining[tarn]; ok {
		reason = p.reason
	} else {
		s.draining[tarn] = pendingStop{service: svc.GetServiceArn(), reason: reason}
	}
	s.mu.Unlock()
	left := 0
	for _, tgArn := range lbTargetGroups(taskLBs(svc, task)) {
		health, err := s.svc.DescribeTargetHealth(ctx, account, tgArn, nil)
		if elb.CodeOf(err) == elb.CodeTargetGroupNotFound {
			continue
		}
		if err != nil {
			return false, "", err
		}
		var dereg []elb.TargetInput
		for _, h := range health {
			if h.TaskArn != tarn {
				continue
			}
			left++
			if h.State != elb.StateDraining {
				dereg = append(dereg, elb.TargetInput{ID: h.ID, Port: &h.Port})
			}
		}
		if len(dereg) > 0 {
			if err := s.svc.DeregisterTargets(ctx, account, tgArn, dereg); err != nil && elb.CodeOf(err) != elb.CodeInvalidTarget {
				return false, "", err
			}
		}
	}
	if left == 0 {
		s.mu.Lock()
		delete(s.draining, tarn)
		s.mu.Unlock()
	}
	return left == 0, reason, nil
}

// keepOnly forgets the pending drains of a service's tasks that its last pass no longer
// stops: they are registered again.
func (s *lbSync) keepOnly(serviceArn string, stopping map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for arn, p := range s.draining {
		if p.service == serviceArn && !stopping[arn] {
			delete(s.draining, arn)
		}
	}
}

// unhealthyEvent is AWS's service event for a task whose target failed its health checks.
func unhealthyEvent(service string, th TaskTargets) string {
	return fmt.Sprintf("(service %s) (port %d) is unhealthy in (target-group %s) due to (reason %s).", service, th.Port, th.TargetGroupArn, th.Description)
}

// taskDeployment returns the deployment or task set id that started the service task t.
func taskDeployment(t *storev1.TaskRecord) string {
	if d := t.GetDeploymentId(); d != "" {
		return d
	}
	return t.GetTask().GetStartedBy()
}

// scoped is one entry of a service's list (loadBalancers, serviceRegistries) or of one of
// its task sets' (EXTERNAL deployment controller), with the task set whose tasks it
// applies to ("": every task of the service).
type scoped[T any] struct {
	v   T
	dep string
}

// covers reports whether the entry applies to task t.
func (e scoped[T]) covers(t *storev1.TaskRecord) bool {
	return e.dep == "" || taskDeployment(t) == e.dep
}

// scopedEntries returns own, for every task of s, then each task set's of(task set), for
// that task set's tasks.
func scopedEntries[T any](s *ecsv1.Service, own []T, of func(*ecsv1.TaskSet) []T) []scoped[T] {
	var out []scoped[T]
	for _, v := range own {
		out = append(out, scoped[T]{v: v})
	}
	for _, ts := range s.GetTaskSets() {
		for _, v := range of(ts) {
			out = append(out, scoped[T]{v: v, dep: ts.GetId()})
		}
	}
	return out
}

// coveredBy returns the values of the entries that apply to task t.
func coveredBy[T any](es []scoped[T], t *storev1.TaskRecord) []T {
	var out []T
	for _, e := range es {
		if e.covers(t) {
			out = append(out, e.v)
		}
	}
	return out
}

// lbEntry is one loadBalancers entry of a service or of one of its task sets.
type lbEntry = scoped[*ecsv1.LoadBalancer]

// serviceLBs returns the load balancer entries of s: its own loadBalancers, for every
// task, and each task set's, for that task set's tasks.
func serviceLBs(s *ecsv1.Service) []lbEntry {
	return scopedEntries(s, s.GetLoadBalancers(), (*ecsv1.TaskSet).GetLoadBalancers)
}

// taskLBs returns the loadBalancers entries task t of s registers with: the service's,
// and those of the task set that started it.
func taskLBs(s *ecsv1.Service, t *storev1.TaskRecord) []*ecsv1.LoadBalancer {
	return coveredBy(serviceLBs(s), t)
}
