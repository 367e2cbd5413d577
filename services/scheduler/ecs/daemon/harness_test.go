package daemon

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/capacity"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// One embedded etcd serves the package; each test has an account of its own.
var sharedEtcd *clientv3.Client

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "daemon-etcd-")
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

// env is one test's account: control (clusters, instances, the agents' reports), the
// daemon actions and the daemon loop over the shared etcd, and a scripted agent for
// every host.
type env struct {
	t       testing.TB
	sc      keys.Scope
	ctx     context.Context
	ctl     *control.Server
	d       *Daemons
	r       *Reconciler
	cluster string
	// crash makes the agent fail the tasks of this daemon task definition ARN.
	crash string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	acc := fmt.Sprintf("%012d", time.Now().UnixNano()%1e6*1e5+accountSeq.Add(1))
	sc := keys.Scope{Account: acc, Region: "us-east-1"}
	e := &env{
		t: t, sc: sc, ctx: caller.With(context.Background(), caller.Identity{Account: acc, Region: sc.Region}),
		ctl: control.New(control.Config{KV: sharedEtcd}), d: NewHandler(Config{KV: sharedEtcd}), cluster: "c1",
	}
	// Passes read every account's daemons: leave none behind.
	t.Cleanup(func() {
		_, _ = sharedEtcd.Delete(context.Background(), keys.Daemons(sc, ""), clientv3.WithPrefix())
	})
	p := placement.NewPlacer(sharedEtcd, nil, placement.WithoutCache())
	t.Cleanup(p.Close)
	e.r = NewReconciler(ReconcilerConfig{Client: sharedEtcd, Placer: p, StableAfter: -1})
	must(e, e.ctl.CreateCluster, &ecsv1.CreateClusterRequest{ClusterName: proto.String(e.cluster)})
	must(e, e.ctl.CreateCapacityProvider, &ecsv1.CreateCapacityProviderRequest{
		Name: proto.String("pool"), AutoScalingGroupProvider: &ecsv1.AutoScalingGroupProvider{AutoScalingGroupArn: proto.String("asg-" + acc)},
	})
	must(e, e.ctl.PutClusterCapacityProviders, &ecsv1.PutClusterCapacityProvidersRequest{
		Cluster: proto.String(e.cluster), CapacityProviders: []string{"pool"}, DefaultCapacityProviderStrategy: []*ecsv1.CapacityProviderStrategyItem{},
	})
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

// host registers a connected container instance, in the pool when pool is set.
func (e *env) host(name string, pool bool) string {
	e.t.Helper()
	var attrs []*ecsv1.Attribute
	if pool {
		attrs = append(attrs, &ecsv1.Attribute{Name: proto.String(capacity.PoolAttribute), Value: proto.String("pool")})
	}
	resp, err := e.ctl.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
		Cluster: e.cluster, HostId: name, RuntimeReady: true,
		Resources: control.Resources(4096, 8192, nil, nil), Attributes: attrs,
	})
	if err != nil {
		e.t.Fatalf("RegisterInstance: %v", err)
	}
	return resp.GetContainerInstance().GetContainerInstanceArn()
}

// daemonTD registers a daemon task definition of family with one container.
func (e *env) daemonTD(family, image string) string {
	e.t.Helper()
	return must(e, e.d.RegisterDaemonTaskDefinition, &ecsv1.RegisterDaemonTaskDefinitionRequest{
		Family: proto.String(family),
		ContainerDefinitions: []*ecsv1.DaemonContainerDefinition{{
			Name: proto.String("agent"), Image: proto.String(image), Memory: proto.Int32(64), Cpu: 64,
		}},
	}).GetDaemonTaskDefinitionArn()
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

// agent plays every host's agent once: PENDING tasks start (or crash), tasks ordered to
// stop stop.
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
		case t.GetLastStatus() == "PENDING" && t.GetTaskDefinitionArn() == e.crash:
			ch.LastStatus, ch.StopCode, ch.StoppedReason = "STOPPED", "EssentialContainerExited", "Essential container in task exited"
		case t.GetLastStatus() == "PENDING":
			ch.LastStatus = "RUNNING"
		default:
			continue
		}
		for _, c := range t.GetContainers() {
			cs := &agentv1.ContainerState{Name: c.GetName(), LastStatus: ch.LastStatus}
			if ch.LastStatus == "STOPPED" {
				cs.ExitCode = proto.Int32(1)
			}
			ch.Containers = append(ch.Containers, cs)
		}
		if err := e.ctl.ApplyTaskStateChange(context.Background(), e.sc, t.GetContainerInstanceArn(), ch); err != nil {
			e.t.Fatalf("ApplyTaskStateChange: %v", err)
		}
	}
}

// step runs one daemon pass and one agent round.
func (e *env) step() {
	e.t.Helper()
	if err := e.r.Pass(context.Background()); err != nil {
		e.t.Fatalf("Pass: %v", err)
	}
	e.agent()
}

// live returns the daemon's live (not STOPPED, desired RUNNING) tasks by instance ARN,
// with their task definition ARN.
func (e *env) live(name string) map[string]string {
	out := map[string]string{}
	for _, rec := range e.tasks() {
		t := rec.GetTask()
		if rec.GetServiceName() != ServicePrefix+name || t.GetLastStatus() == "STOPPED" || t.GetDesiredStatus() == "STOPPED" {
			continue
		}
		if _, dup := out[t.GetContainerInstanceArn()]; dup {
			e.t.Fatalf("two live tasks of daemon %s on %s", name, t.GetContainerInstanceArn())
		}
		out[t.GetContainerInstanceArn()] = t.GetTaskDefinitionArn()
	}
	return out
}
