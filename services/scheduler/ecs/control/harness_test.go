package control

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
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// One embedded etcd serves the whole package; each test isolates itself with fresh
// account ids.
var sharedEtcd *clientv3.Client

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "control-etcd-")
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

// newAccount returns a 12-digit account id no other test uses.
func newAccount() string {
	return fmt.Sprintf("%012d", time.Now().UnixNano()%1e6*1e5+accountSeq.Add(1))
}

type env struct {
	t   testing.TB
	s   *Server
	acc string
	sc  keys.Scope // acc in the env's region
	ctx context.Context
}

// testRegion is the region tests call in unless they pick another (env.in).
const testRegion = "us-east-1"

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, Config{Watcher: sharedEtcd})
}

// newEnvWith is newEnv with cfg (KV is always sharedEtcd): a Config without Watcher has
// no DescribeTasks cache.
func newEnvWith(t testing.TB, cfg Config) *env {
	t.Helper()
	cfg.KV = sharedEtcd
	s := New(cfg)
	t.Cleanup(s.Close)
	return (&env{t: t, s: s}).scoped(newAccount(), testRegion)
}

// as returns a copy of e acting for another account on the same server (same region).
func (e *env) as(acc string) *env { return e.scoped(acc, e.sc.Region) }

// in returns a copy of e acting for the same account in another region.
func (e *env) in(region string) *env { return e.scoped(e.acc, region) }

func (e *env) scoped(acc, region string) *env {
	id := caller.Identity{Account: acc, Region: region}
	return &env{t: e.t, s: e.s, acc: acc, sc: id.Scope(), ctx: caller.With(context.Background(), id)}
}

// call invokes a handler and returns its response or its ECS error.
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

// must is call that fails the test on error.
func must[Req, Resp any](e *env, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) *Resp {
	e.t.Helper()
	resp, err := call(e, fn, req)
	if err != nil {
		e.t.Fatalf("unexpected error: %v", err)
	}
	return resp
}

// wantErr checks an ECS error's type.
func wantErr(t testing.TB, err *awserr.Error, typ string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", typ)
	}
	if err.Type != typ {
		t.Fatalf("got %s (%s), want %s", err.Type, err.Message, typ)
	}
}

func (e *env) createCluster(name string) *ecsv1.Cluster {
	e.t.Helper()
	return must(e, e.s.CreateCluster, &ecsv1.CreateClusterRequest{ClusterName: proto.String(name)}).GetCluster()
}

// simpleTaskDef registers family with one container of cpu units and memory MiB.
func (e *env) simpleTaskDef(family string, cpu, memory int32, ports ...int32) *ecsv1.TaskDefinition {
	e.t.Helper()
	c := &ecsv1.ContainerDefinition{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: cpu, Memory: proto.Int32(memory)}
	for _, p := range ports {
		c.PortMappings = append(c.PortMappings, &ecsv1.PortMapping{ContainerPort: proto.Int32(p), HostPort: proto.Int32(p)})
	}
	return must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String(family), ContainerDefinitions: []*ecsv1.ContainerDefinition{c},
	}).GetTaskDefinition()
}

// registerHost registers a host with cpu units and memory MiB, connected.
func (e *env) registerHost(cluster, host string, cpu, memory int32) *ecsv1.ContainerInstance {
	e.t.Helper()
	resp, err := e.s.RegisterInstance(e.ctx, e.sc, &agentv1.RegisterRequest{
		Cluster: cluster, HostId: host, RuntimeReady: true,
		Resources: Resources(cpu, memory, []string{"22"}, nil),
		Attributes: []*ecsv1.Attribute{
			{Name: proto.String("ecs.os-type"), Value: proto.String("linux")},
			{Name: proto.String("ecs.cpu-architecture"), Value: proto.String("x86_64")},
		},
	})
	if err != nil {
		e.t.Fatalf("RegisterInstance: %v", err)
	}
	return resp.GetContainerInstance()
}

func (e *env) describeCluster(name string) *ecsv1.Cluster {
	e.t.Helper()
	r := must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{name}})
	if len(r.GetClusters()) != 1 {
		e.t.Fatalf("describe %s: %v", name, r.GetFailures())
	}
	return r.GetClusters()[0]
}

func (e *env) describeInstance(cluster, ciARN string) *ecsv1.ContainerInstance {
	e.t.Helper()
	r := must(e, e.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String(cluster), ContainerInstances: []string{ciARN}})
	if len(r.GetContainerInstances()) != 1 {
		e.t.Fatalf("describe instance %s: %v", ciARN, r.GetFailures())
	}
	return r.GetContainerInstances()[0]
}

func (e *env) describeTask(cluster, taskARN string) *ecsv1.Task {
	e.t.Helper()
	r := must(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String(cluster), Tasks: []string{taskARN}})
	if len(r.GetTasks()) != 1 {
		e.t.Fatalf("describe task %s: %v", taskARN, r.GetFailures())
	}
	return r.GetTasks()[0]
}
