package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/elbv2/lb"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// lbWorld is a service test with a real load balancer: the lb data plane on the shared
// etcd, and an agent that runs each task as an HTTP server on its own port of its host's
// address (what a bridge task's dynamic host port looks like to the load balancer). Each
// host's instance record holds its own loopback address (127.0.0.2, 127.0.0.3, …) as its
// host address, so a target that does not use its instance's address reaches no server.
type lbWorld struct {
	*env
	elb      *elb.Service
	tgArn    string
	listener string // host:port of the listener

	mu       sync.Mutex
	backends map[string]*httptest.Server // by task ARN
	hostAddr map[string]string           // host address by container instance ARN
	status   map[string]*atomic.Int32    // the health check answer of each task
	// stoppedWithTargets lists tasks whose stop order reached the agent while they
	// still had a target: the drain must come first.
	stoppedWithTargets []string
}

func newLBWorld(t *testing.T, hosts int) *lbWorld {
	e := newEnv(t, ReconcilerConfig{})
	w := &lbWorld{env: e, elb: elb.New(sharedEtcd), backends: map[string]*httptest.Server{}, status: map[string]*atomic.Int32{}, hostAddr: map[string]string{}}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, b := range w.backends {
			b.Close()
		}
	})
	for i := range hosts {
		// RegisterInstance takes only routable addresses; each host's record gets its own
		// loopback address here, so the test's servers can listen on it.
		addr := fmt.Sprintf("127.0.0.%d", i+2)
		ciArn := e.host(fmt.Sprintf("h%d", i), 1024, 1024)
		a, err := arn.Parse(ciArn)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.Mutate(e.ctx, sharedEtcd, keys.Instance(e.sc, e.cluster, a.Name), func(r *storev1.ContainerInstanceRecord) error {
			r.HostAddress = addr
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		w.hostAddr[ciArn] = addr
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = lb.Run(ctx, sharedEtcd, lb.Config{ListenHost: "127.0.0.1"}) }()

	lbRec, err := w.elb.CreateLoadBalancer(ctx, e.sc, elb.CreateLoadBalancerInput{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	port, path := int32(80), "/health"
	tg, err := w.elb.CreateTargetGroup(ctx, e.sc, elb.TargetGroupInput{
		Name: "web", Protocol: "HTTP", Port: &port, HealthCheckPath: &path,
		HealthyThresholdCount: proto.Int32(2), UnhealthyThresholdCount: proto.Int32(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.tgArn = tg.GetTargetGroupArn()
	// The API's floor is a 5 s interval; the data plane takes the record as it is, so the
	// test checks every second.
	if _, _, err := store.Mutate(ctx, sharedEtcd, keys.ElbTargetGroup(e.sc, "web"), func(r *storev1.TargetGroupRecord) error {
		r.HealthCheckIntervalSeconds, r.HealthCheckTimeoutSeconds = 1, 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.elb.ModifyTargetGroupAttributes(ctx, e.sc, w.tgArn, []elb.Tag{{Key: "deregistration_delay.timeout_seconds", Value: "5"}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lport := int32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	if _, err := w.elb.CreateListener(ctx, e.sc, elb.ListenerInput{
		LoadBalancerArn: lbRec.GetLoadBalancerArn(), Protocol: "HTTP", Port: &lport,
		DefaultActions: []elb.ActionInput{{Type: "forward", TargetGroupArn: w.tgArn}},
	}); err != nil {
		t.Fatal(err)
	}
	w.listener = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(lport)))
	return w
}

// webTaskDef registers a task definition whose container "app" maps port 80.
func (w *lbWorld) webTaskDef(family string) string {
	return must(w.env, w.ctl.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String(family),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: proto.String("app"), Image: proto.String("web"), Memory: proto.Int32(64),
			PortMappings: []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80)}},
		}},
	}).GetTaskDefinition().GetTaskDefinitionArn()
}

// taskTargets returns the registered targets by task ARN with their states.
func (w *lbWorld) taskTargets() map[string]string {
	hs, err := w.elb.DescribeTargetHealth(context.Background(), w.sc, w.tgArn, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, h := range hs {
		out[h.TaskArn] = h.State
	}
	return out
}

// agentRound plays the agent: a PENDING task starts its server and reports RUNNING with
// its binding; a task ordered to stop shuts its server down (in-flight requests finish)
// and reports STOPPED.
func (w *lbWorld) agentRound() {
	targets := w.taskTargets()
	for _, rec := range w.tasks() {
		t := rec.GetTask()
		arn := t.GetTaskArn()
		switch {
		case t.GetLastStatus() == "STOPPED":
		case t.GetDesiredStatus() == "STOPPED":
			if _, ok := targets[arn]; ok {
				w.stoppedWithTargets = append(w.stoppedWithTargets, arn)
			}
			w.mu.Lock()
			if b := w.backends[arn]; b != nil {
				b.Close()
				delete(w.backends, arn)
			}
			w.mu.Unlock()
			ch := &agentv1.TaskStateChange{TaskArn: arn, LastStatus: "STOPPED"}
			ch.Containers = []*agentv1.ContainerState{{Name: "app", LastStatus: "STOPPED", ExitCode: proto.Int32(0)}}
			if err := w.ctl.ApplyTaskStateChange(context.Background(), w.sc, t.GetContainerInstanceArn(), ch); err != nil {
				w.t.Fatal(err)
			}
		case t.GetLastStatus() == "PENDING":
			st := &atomic.Int32{}
			st.Store(200)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					rw.WriteHeader(int(st.Load()))
					return
				}
				fmt.Fprint(rw, arn)
			}))
			ln, err := net.Listen("tcp", net.JoinHostPort(w.hostAddr[t.GetContainerInstanceArn()], "0"))
			if err != nil {
				w.t.Fatal(err)
			}
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			w.mu.Lock()
			w.backends[arn], w.status[arn] = srv, st
			w.mu.Unlock()
			port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
			ch := &agentv1.TaskStateChange{TaskArn: arn, LastStatus: "RUNNING", Containers: []*agentv1.ContainerState{{
				Name: "app", LastStatus: "RUNNING",
				NetworkBindings: []*ecsv1.NetworkBinding{{BindIp: proto.String("0.0.0.0"), ContainerPort: proto.Int32(80), HostPort: proto.Int32(int32(port)), Protocol: proto.String("tcp")}},
			}}}
			if err := w.ctl.ApplyTaskStateChange(context.Background(), w.sc, t.GetContainerInstanceArn(), ch); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// checkTargetAddresses fails the test unless every target of the group is reached at
// the host address its task's instance registered.
func (w *lbWorld) checkTargetAddresses() {
	w.t.Helper()
	hs, err := w.elb.DescribeTargetHealth(context.Background(), w.sc, w.tgArn, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	instanceOf := map[string]string{}
	for _, rec := range w.tasks() {
		instanceOf[rec.GetTask().GetTaskArn()] = rec.GetTask().GetContainerInstanceArn()
	}
	for _, h := range hs {
		host, _, err := net.SplitHostPort(h.Address)
		if want := w.hostAddr[instanceOf[h.TaskArn]]; err != nil || host != want {
			w.t.Errorf("target %s:%d of task %s is at %q, want its instance's host address %s", h.ID, h.Port, h.TaskArn, h.Address, want)
		}
	}
}

// until runs reconcile passes and agent rounds every 100ms until cond holds.
func (w *lbWorld) until(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s; targets %v", what, w.taskTargets())
		}
		w.pass()
		w.agentRound()
		time.Sleep(100 * time.Millisecond)
	}
}

// healthyLive reports whether the service has exactly n live tasks, each with a healthy
// target, and no other target.
func (w *lbWorld) healthyLive(n int) bool {
	targets := w.taskTargets()
	live := 0
	for _, rec := range w.tasks() {
		t := rec.GetTask()
		if t.GetDesiredStatus() != "RUNNING" || t.GetLastStatus() == "STOPPED" {
			continue
		}
		live++
		if targets[t.GetTaskArn()] != elb.StateHealthy {
			return false
		}
	}
	return live == n && len(targets) == n
}

// load sends GET requests through the listener from two workers until stop is
// closed (at most 50,000), counting answers that are not 200 and errors.
func (w *lbWorld) load(stop <-chan struct{}) (ok, failed *atomic.Int64, done *sync.WaitGroup) {
	ok, failed, done = &atomic.Int64{}, &atomic.Int64{}, &sync.WaitGroup{}
	client := &http.Client{Timeout: 10 * time.Second}
	for range 2 {
		done.Go(func() {
			for ok.Load()+failed.Load() < 50000 {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get("http://" + w.listener + "/")
				if err != nil {
					failed.Add(1)
					w.t.Logf("request failed: %v", err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					w.t.Logf("request answered %d", resp.StatusCode)
					continue
				}
				ok.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	return ok, failed, done
}

// TestLoadBalancedServiceLosesNoRequests is issue 17's zero-failure test at the service
// scheduler's level: a 3-task service behind an ALB listener (the real lb data plane,
// health checks and drains), a load generator through the listener during a rolling
// deployment and a task that dies: not one request fails, and the target group always
// holds exactly the service's tasks once the service settles.
func TestLoadBalancedServiceLosesNoRequests(t *testing.T) {
	w := newLBWorld(t, 6)
	td := w.webTaskDef("web")
	svc := must(w.env, w.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String(w.cluster), ServiceName: proto.String("web"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(3),
		DeploymentConfiguration: &ecsv1.DeploymentConfiguration{
			MinimumHealthyPercent: proto.Int32(100), MaximumPercent: proto.Int32(200),
		},
		LoadBalancers: []*ecsv1.LoadBalancer{{TargetGroupArn: proto.String(w.tgArn), ContainerName: proto.String("app"), ContainerPort: proto.Int32(80)}},
	}).GetService()
	if len(svc.GetLoadBalancers()) != 1 {
		t.Fatalf("service loadBalancers = %v", svc.GetLoadBalancers())
	}
	// The rollout completes only once the targets are healthy.
	w.until("3 healthy targets and the rollout COMPLETED", 30*time.Second, func() bool {
		healthy := w.healthyLive(3)
		done := w.service("web").GetDeployments()[0].GetRolloutState() == "COMPLETED"
		if done && !healthy {
			t.Fatalf("rollout COMPLETED before the targets were healthy: %v", w.taskTargets())
		}
		return healthy && done
	})
	// Each target is its instance's registered host address and the task's host port,
	// not loopback: on a multi-host cluster the lb role runs elsewhere.
	w.checkTargetAddresses()

	stop := make(chan struct{})
	ok, failed, done := w.load(stop)
	time.Sleep(300 * time.Millisecond)

	// A rolling deployment: three new tasks, three old ones drained, then stopped.
	before := map[string]bool{}
	for arn := range w.taskTargets() {
		before[arn] = true
	}
	must(w.env, w.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String(w.cluster), Service: proto.String("web"), ForceNewDeployment: true})
	w.until("the new deployment's 3 healthy targets", 60*time.Second, func() bool {
		if !w.healthyLive(3) {
			return false
		}
		for arn := range w.taskTargets() {
			if before[arn] {
				return false
			}
		}
		return true
	})
	if len(w.stoppedWithTargets) > 0 {
		t.Errorf("tasks stopped before their targets drained: %v", w.stoppedWithTargets)
	}

	// A task dies on its own: its server goes away at once.
	var victim *storev1.TaskRecord
	for _, rec := range w.tasks() {
		if rec.GetTask().GetLastStatus() == "RUNNING" && rec.GetTask().GetDesiredStatus() == "RUNNING" {
			victim = rec
			break
		}
	}
	w.mu.Lock()
	b := w.backends[victim.GetTask().GetTaskArn()]
	delete(w.backends, victim.GetTask().GetTaskArn())
	w.mu.Unlock()
	b.CloseClientConnections()
	b.Close()
	w.kill(victim)
	w.until("a replacement's healthy target", 30*time.Second, func() bool {
		_, still := w.taskTargets()[victim.GetTask().GetTaskArn()]
		return !still && w.healthyLive(3)
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	done.Wait()
	t.Logf("load through the listener: %d requests answered 200, %d failed", ok.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed", failed.Load(), ok.Load()+failed.Load())
	}
	if ok.Load() < 100 {
		t.Errorf("only %d requests went through", ok.Load())
	}
}

// TestUnhealthyTargetReplacesTask: a task whose target fails its health checks is
// replaced once the grace period is over, with AWS's event and stoppedReason.
func TestUnhealthyTargetReplacesTask(t *testing.T) {
	w := newLBWorld(t, 4)
	td := w.webTaskDef("web")
	must(w.env, w.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String(w.cluster), ServiceName: proto.String("web"), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(1), HealthCheckGracePeriodSeconds: proto.Int32(60),
		LoadBalancers: []*ecsv1.LoadBalancer{{TargetGroupArn: proto.String(w.tgArn), ContainerName: proto.String("app"), ContainerPort: proto.Int32(80)}},
	})
	w.until("a healthy target", 30*time.Second, func() bool { return w.healthyLive(1) })
	var first string
	for arn := range w.taskTargets() {
		first = arn
	}
	w.mu.Lock()
	w.status[first].Store(500)
	w.mu.Unlock()
	// Inside the grace period the unhealthy target is ignored: the task stays.
	w.until("the target unhealthy", 30*time.Second, func() bool { return w.taskTargets()[first] == elb.StateUnhealthy })
	for range 5 {
		w.pass()
		w.agentRound()
	}
	for _, rec := range w.tasks() {
		if rec.GetTask().GetTaskArn() == first && rec.GetTask().GetDesiredStatus() != "RUNNING" {
			t.Fatal("task stopped inside healthCheckGracePeriodSeconds")
		}
	}
	w.clock.Advance(2 * time.Minute)
	w.until("a replacement", 30*time.Second, func() bool {
		_, still := w.taskTargets()[first]
		return !still && w.healthyLive(1)
	})
	var stopped *ecsv1.Task
	for _, rec := range w.tasks() {
		if rec.GetTask().GetTaskArn() == first {
			stopped = rec.GetTask()
		}
	}
	if want := fmt.Sprintf(ReasonELBUnhealthy, w.tgArn); stopped.GetStoppedReason() != want {
		t.Errorf("stoppedReason %q, want %q; events %v", stopped.GetStoppedReason(), want, w.service("web").GetEvents())
	}
	// The stop is announced once, by the pass that started the drain.
	id := first[strings.LastIndex(first, "/")+1:]
	n := 0
	for _, ev := range w.service("web").GetEvents() {
		if strings.Contains(ev.GetMessage(), "has stopped 1 running tasks: (task "+id+")") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d events announce the stop of %s, want 1", n, id)
	}
	if !hasEvent(w.service("web"), "is unhealthy in (target-group "+w.tgArn+") due to (reason Health checks failed with these codes: [500]).") {
		t.Errorf("no unhealthy event: %v", w.service("web").GetEvents())
	}
}

func TestLoadBalancersValidated(t *testing.T) {
	w := newLBWorld(t, 1)
	td := w.webTaskDef("web")
	create := func(lbs ...*ecsv1.LoadBalancer) error {
		_, err := call(w.env, w.h.CreateService, &ecsv1.CreateServiceRequest{
			Cluster: proto.String(w.cluster), ServiceName: proto.String("v"), TaskDefinition: proto.String(td),
			DesiredCount: proto.Int32(0), LoadBalancers: lbs,
		})
		if err == nil {
			return nil
		}
		return err
	}
	lbOf := func(arn, name string, port int32) *ecsv1.LoadBalancer {
		return &ecsv1.LoadBalancer{TargetGroupArn: proto.String(arn), ContainerName: proto.String(name), ContainerPort: proto.Int32(port)}
	}
	missing := strings.Replace(w.tgArn, "targetgroup/web/", "targetgroup/nope/", 1)
	for _, c := range []struct {
		lbs  []*ecsv1.LoadBalancer
		want string
	}{
		{[]*ecsv1.LoadBalancer{lbOf(missing, "app", 80)}, "Unable to validate the specified targetGroupArn " + missing},
		{[]*ecsv1.LoadBalancer{lbOf(w.tgArn, "nope", 80)}, "The container nope does not exist in the task definition."},
		{[]*ecsv1.LoadBalancer{lbOf(w.tgArn, "app", 81)}, "The container app did not have a container port 81 defined."},
		{[]*ecsv1.LoadBalancer{lbOf(w.tgArn, "app", 80), lbOf(w.tgArn, "app", 80), lbOf(w.tgArn, "app", 80), lbOf(w.tgArn, "app", 80), lbOf(w.tgArn, "app", 80), lbOf(w.tgArn, "app", 80)}, "loadBalancers can have at most 5 items."},
	} {
		err := create(c.lbs...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want InvalidParameterException %q", err, c.want)
		}
	}
	if err := create(lbOf(w.tgArn, "app", 80)); err != nil {
		t.Errorf("valid loadBalancers refused: %v", err)
	}
}

// TestStaleTargetDeregistered: a target of a task whose record is gone (expired, or
// stopped while no pass ran) is deregistered by the service's next pass.
func TestStaleTargetDeregistered(t *testing.T) {
	w := newLBWorld(t, 1)
	td := w.webTaskDef("web")
	must(w.env, w.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String(w.cluster), ServiceName: proto.String("web"), TaskDefinition: proto.String(td), DesiredCount: proto.Int32(0),
		LoadBalancers: []*ecsv1.LoadBalancer{{TargetGroupArn: proto.String(w.tgArn), ContainerName: proto.String("app"), ContainerPort: proto.Int32(80)}},
	})
	stale := fmt.Sprintf("arn:aws:ecs:%s:%s:task/%s/%032x", testRegion, w.acc, w.cluster, 42)
	port := int32(1)
	if err := w.elb.RegisterTargets(context.Background(), w.sc, w.tgArn, []elb.TargetInput{{ID: "i-gone", Port: &port, Address: "127.0.0.1:1", TaskArn: stale}}); err != nil {
		t.Fatal(err)
	}
	w.until("the stale target deregistered", 10*time.Second, func() bool {
		st, ok := w.taskTargets()[stale]
		return !ok || st == elb.StateDraining
	})
}
