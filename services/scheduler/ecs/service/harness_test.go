package service

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// One embedded etcd serves the whole package; each test isolates itself with a fresh
// account id.
var sharedEtcd *clientv3.Client

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "service-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv, err := etcdembed.Start(ctx, etcdembed.Config{Dir: dir, ClientURL: "http://127.0.0.1:0", UnsafeNoFsync: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd:", err)
		os.Exit(1)
	}
	sharedEtcd = srv.Client()
	code := m.Run()
	_ = srv.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var accountSeq atomic.Int64

// testRegion is the region the tests call in.
const testRegion = "us-east-1"

func newAccount() string {
	return fmt.Sprintf("%012d", time.Now().UnixNano()%1e6*1e5+accountSeq.Add(1))
}

// clock is a controllable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one test's account with a control server, a service handler and a reconciler
// over the shared etcd, and a scripted agent.
type env struct {
	t       testing.TB
	acc     string
	sc      keys.Scope // acc in testRegion
	ctx     context.Context
	ctl     *control.Server
	h       *Handler
	r       *Reconciler
	clock   *clock
	cluster string
	// behave decides what the fake agent does with a PENDING task: "run" (RUNNING,
	// containers HEALTHY when health-checked), "crash" (STOPPED, EssentialContainerExited),
	// "hold" (stay PENDING), "unhealthy" (RUNNING with UNHEALTHY containers), "flap"
	// (RUNNING, then STOPPED with exit code 3 on the next round: a real agent's crash loop).
	behave func(t *ecsv1.Task) string
}

func newEnv(t testing.TB, cfg ReconcilerConfig) *env {
	t.Helper()
	acc := newAccount()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := &env{
		t: t, acc: acc, sc: keys.Scope{Account: acc, Region: testRegion}, ctx: caller.With(context.Background(), caller.Identity{Account: acc, Region: testRegion}),
		ctl:     control.New(control.Config{KV: sharedEtcd, Now: clk.Now}),
		h:       NewHandler(Config{KV: sharedEtcd, Now: clk.Now}),
		clock:   clk,
		cluster: "c1",
		behave:  func(*ecsv1.Task) string { return "run" },
	}
	// Passes read every account's services: leave none behind for later tests.
	t.Cleanup(func() {
		_, _ = sharedEtcd.Delete(context.Background(), store.MustKeyPrefix("services", acc), clientv3.WithPrefix())
	})
	p := placement.NewPlacer(sharedEtcd, nil, placement.WithoutCache())
	t.Cleanup(p.Close)
	cfg.Client, cfg.Placer, cfg.Now = sharedEtcd, p, clk.Now
	if cfg.StableAfter == 0 {
		// The clock stands still between steps: tests opt into the stability window.
		cfg.StableAfter = -1
	}
	e.r = NewReconciler(cfg)
	must(e, e.ctl.CreateCluster, &ecsv1.CreateClusterRequest{ClusterName: proto.String(e.cluster)})
	return e
}

func call[Req, Resp any](e *env, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, *awserr.Error) {
	e.t.Helper()
	resp, err := fn(e.ctx, connect.NewRequest(req))
	if err != nil {
		ee, ok := awserr.FromConnect(err)
		if !ok {
			e.t.Fatalf("error without ECS detail: %v", err)
		}
		return nil, ee
	}
	return resp.Msg, nil
}

func must[Req, Resp any](e *env, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) *Resp {
	e.t.Helper()
	resp, err := call(e, fn, req)
	if err != nil {
		e.t.Fatalf("unexpected error: %v", err)
	}
	return resp
}

func wantErr(t testing.TB, err *awserr.Error, typ string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", typ)
	}
	if err.Type != typ {
		t.Fatalf("got %s (%s), want %s", err.Type, err.Message, typ)
	}
}

// taskDef registers family with one essential container; health adds a health check.
func (e *env) taskDef(family, image string, cpu, memory int32, health bool) string {
	e.t.Helper()
	c := &ecsv1.ContainerDefinition{Name: proto.String("app"), Image: proto.String(image), Cpu: cpu, Memory: proto.Int32(memory)}
	if health {
		c.HealthCheck = &ecsv1.HealthCheck{Command: []string{"CMD", "true"}}
	}
	return must(e, e.ctl.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String(family), ContainerDefinitions: []*ecsv1.ContainerDefinition{c},
	}).GetTaskDefinition().GetTaskDefinitionArn()
}

// host registers a connected container instance with cpu units and MiB.
func (e *env) host(name string, cpu, memory int32, attrs ...*ecsv1.Attribute) string {
	e.t.Helper()
	resp, err := e.ctl.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
		Cluster: e.cluster, HostId: name, RuntimeReady: true,
		Resources:  control.Resources(cpu, memory, nil, nil),
		Attributes: attrs,
	})
	if err != nil {
		e.t.Fatalf("RegisterInstance: %v", err)
	}
	return resp.GetContainerInstance().GetContainerInstanceArn()
}

func (e *env) drain(ciARN string, state string) {
	e.t.Helper()
	must(e, e.ctl.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{
		Cluster: proto.String(e.cluster), ContainerInstances: []string{ciARN}, Status: proto.String(state),
	})
}

// tasks returns every task record of the cluster.
func (e *env) tasks() []*storev1.TaskRecord {
	e.t.Helper()
	items, err := store.ListAll[*storev1.TaskRecord](context.Background(), sharedEtcd, keys.Tasks(e.sc, e.cluster))
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]*storev1.TaskRecord, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

func instanceARN(e *env, t *storev1.TaskRecord) string { return t.GetTask().GetContainerInstanceArn() }

// agent plays every agent once: PENDING tasks are started (or crash, per behave),
// tasks ordered to stop are STOPPED. It reports through control.ApplyTaskStateChange.
func (e *env) agent() {
	e.t.Helper()
	for _, rec := range e.tasks() {
		t := rec.GetTask()
		if t.GetLastStatus() == "STOPPED" {
			continue
		}
		ch := &agentv1.TaskStateChange{TaskArn: t.GetTaskArn()}
		switch {
		case t.GetDesiredStatus() == "STOPPED":
			ch.LastStatus = "STOPPED"
			for _, c := range t.GetContainers() {
				ch.Containers = append(ch.Containers, &agentv1.ContainerState{Name: c.GetName(), LastStatus: "STOPPED", ExitCode: proto.Int32(0)})
			}
		case t.GetLastStatus() == "RUNNING" && e.behave(t) == "flap":
			ch.LastStatus, ch.StopCode, ch.StoppedReason = "STOPPED", "EssentialContainerExited", "Essential container in task exited"
			for _, c := range t.GetContainers() {
				ch.Containers = append(ch.Containers, &agentv1.ContainerState{Name: c.GetName(), LastStatus: "STOPPED", ExitCode: proto.Int32(3)})
			}
		case t.GetLastStatus() == "PENDING":
			switch e.behave(t) {
			case "hold":
				continue
			case "crash":
				ch.LastStatus, ch.StopCode, ch.StoppedReason = "STOPPED", "EssentialContainerExited", "Essential container in task exited"
				for _, c := range t.GetContainers() {
					ch.Containers = append(ch.Containers, &agentv1.ContainerState{Name: c.GetName(), LastStatus: "STOPPED", ExitCode: proto.Int32(1)})
				}
			case "unhealthy":
				ch.LastStatus = "RUNNING"
				for _, c := range t.GetContainers() {
					ch.Containers = append(ch.Containers, &agentv1.ContainerState{Name: c.GetName(), LastStatus: "RUNNING", HealthStatus: "UNHEALTHY"})
				}
			default:
				ch.LastStatus = "RUNNING"
				for _, c := range t.GetContainers() {
					ch.Containers = append(ch.Containers, &agentv1.ContainerState{Name: c.GetName(), LastStatus: "RUNNING", HealthStatus: "HEALTHY"})
				}
			}
		default:
			continue
		}
		if err := e.ctl.ApplyTaskStateChange(context.Background(), e.sc, t.GetContainerInstanceArn(), ch); err != nil {
			e.t.Fatalf("ApplyTaskStateChange: %v", err)
		}
	}
}

// kill makes a running task exit on its own (the container died).
func (e *env) kill(rec *storev1.TaskRecord) {
	e.t.Helper()
	t := rec.GetTask()
	ch := &agentv1.TaskStateChange{TaskArn: t.GetTaskArn(), LastStatus: "STOPPED", StopCode: "EssentialContainerExited", StoppedReason: "Essential container in task exited"}
	for _, c := range t.GetContainers() {
		ch.Containers = append(ch.Containers, &agentv1.ContainerState{Name: c.GetName(), LastStatus: "STOPPED", ExitCode: proto.Int32(137)})
	}
	if err := e.ctl.ApplyTaskStateChange(context.Background(), e.sc, t.GetContainerInstanceArn(), ch); err != nil {
		e.t.Fatalf("kill: %v", err)
	}
}

func (e *env) pass() {
	e.t.Helper()
	if err := e.r.Pass(context.Background()); err != nil {
		e.t.Fatalf("Pass: %v", err)
	}
}

// step runs one reconcile pass and one agent round.
func (e *env) step() {
	e.t.Helper()
	e.pass()
	e.agent()
}

func (e *env) service(name string) *ecsv1.Service {
	e.t.Helper()
	r := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String(e.cluster), Services: []string{name}})
	if len(r.GetServices()) != 1 {
		e.t.Fatalf("describe %s: %v", name, r.GetFailures())
	}
	return r.GetServices()[0]
}

func (e *env) createService(name, td string, desired int32, dc *ecsv1.DeploymentConfiguration) *ecsv1.Service {
	e.t.Helper()
	return must(e, e.h.CreateService, &ecsv1.CreateServiceRequest{
		Cluster: proto.String(e.cluster), ServiceName: proto.String(name), TaskDefinition: proto.String(td),
		DesiredCount: proto.Int32(desired), DeploymentConfiguration: dc,
	}).GetService()
}

// counts summarises a service's tasks by lastStatus: live (not STOPPED) and healthy
// (RUNNING with its health-checked containers HEALTHY), by task definition.
type counts struct {
	total, healthy int
	byTD           map[string]int // live tasks by task definition ARN
	healthyByTD    map[string]int
}

func (e *env) count(svc string) counts {
	c := counts{byTD: map[string]int{}, healthyByTD: map[string]int{}}
	for _, rec := range e.tasks() {
		if rec.GetServiceName() != svc || rec.GetTask().GetLastStatus() == "STOPPED" {
			continue
		}
		t := rec.GetTask()
		c.total++
		c.byTD[t.GetTaskDefinitionArn()]++
		if t.GetLastStatus() == "RUNNING" {
			ok := true
			for _, ct := range t.GetContainers() {
				if ct.GetHealthStatus() == "UNHEALTHY" {
					ok = false
				}
			}
			if ok {
				c.healthy++
				c.healthyByTD[t.GetTaskDefinitionArn()]++
			}
		}
	}
	return c
}

// settle steps until the service is steady with its deployments finished, or fails.
func (e *env) settle(name string, maxSteps int) *ecsv1.Service {
	e.t.Helper()
	for range maxSteps {
		e.step()
		s := e.service(name)
		if len(s.GetDeployments()) == 1 && s.GetDeployments()[0].GetRolloutState() == RolloutCompleted &&
			s.GetRunningCount() == s.GetDesiredCount() && s.GetPendingCount() == 0 {
			e.pass() // let the pass record the steady state
			return e.service(name)
		}
	}
	s := e.service(name)
	e.t.Fatalf("service %s did not settle: desired %d running %d pending %d deployments %v", name, s.GetDesiredCount(), s.GetRunningCount(), s.GetPendingCount(), s.GetDeployments())
	return nil
}

func hasEvent(s *ecsv1.Service, sub string) bool {
	for _, ev := range s.GetEvents() {
		if strings.Contains(ev.GetMessage(), sub) {
			return true
		}
	}
	return false
}
