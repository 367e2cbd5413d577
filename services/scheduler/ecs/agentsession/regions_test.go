package agentsession

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

// regionAgent is one agent's session in one region, over the real Connect handler.
type regionAgent struct {
	region string
	arn    string
	in     chan *agentv1.SessionResponse
}

// TestAgentsInTwoRegions: the same host id joins the same cluster name in us-east-1 and
// eu-west-1 (two instances, one per region); tasks run in one region are assigned to
// that region's agent only, and an agent cannot open a session, signed for one region,
// on the instance of another.
func TestAgentsInTwoRegions(t *testing.T) {
	cli := etcdtest.Start(t)
	p := placement.NewPlacer(cli, nil)
	defer p.Close()
	ctl := control.New(control.Config{KV: cli, Placer: p})
	srv := New(Config{Etcd: cli, Control: ctl})
	mux := http.NewServeMux()
	mux.Handle(agentv1connect.NewAgentServiceHandler(srv, connect.WithInterceptors(caller.Interceptor{})))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	defer hs.Close()
	defer srv.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	client := agentv1connect.NewAgentServiceClient(&http.Client{Transport: tr}, hs.URL)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ctxIn := func(region string) context.Context {
		return caller.With(context.Background(), caller.Identity{Account: acct, Region: region})
	}
	open := func(region, ciARN string) (*connect.BidiStreamForClient[agentv1.SessionRequest, agentv1.SessionResponse], chan *agentv1.SessionResponse) {
		st := client.Session(sctx)
		st.RequestHeader().Set(identity.AccountHeader, acct)
		st.RequestHeader().Set(identity.RegionHeader, region)
		if err := st.Send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: ciARN}}}); err != nil {
			t.Fatal(err)
		}
		in := make(chan *agentv1.SessionResponse, 16)
		go func() {
			defer close(in)
			for {
				m, err := st.Receive()
				if err != nil {
					return
				}
				in <- m
			}
		}()
		return st, in
	}
	var agents []*regionAgent
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		ctx := ctxIn(region)
		if _, err := ctl.CreateCluster(ctx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("shared")})); err != nil {
			t.Fatal(err)
		}
		if _, err := ctl.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
			Family:               proto.String("app"),
			ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 128, Memory: proto.Int32(128)}},
		})); err != nil {
			t.Fatal(err)
		}
		reg := connect.NewRequest(&agentv1.RegisterRequest{Cluster: "shared", HostId: "same-host", RuntimeReady: true, Resources: control.Resources(2048, 2048, nil, nil)})
		reg.Header().Set(identity.AccountHeader, acct)
		reg.Header().Set(identity.RegionHeader, region)
		rr, err := client.Register(context.Background(), reg)
		if err != nil {
			t.Fatalf("register in %s: %v", region, err)
		}
		a := &regionAgent{region: region, arn: rr.Msg.GetContainerInstance().GetContainerInstanceArn()}
		if !strings.Contains(a.arn, ":"+region+":") || !strings.Contains(rr.Msg.GetClusterArn(), ":"+region+":") {
			t.Fatalf("%s: instance %s in cluster %s", region, a.arn, rr.Msg.GetClusterArn())
		}
		_, a.in = open(region, a.arn)
		agents = append(agents, a)
	}
	if agents[0].arn == agents[1].arn {
		t.Fatal("one instance for two regions")
	}
	next := func(a *regionAgent, within time.Duration) *agentv1.SessionResponse {
		t.Helper()
		select {
		case m, ok := <-a.in:
			if !ok {
				t.Fatalf("%s: session ended", a.region)
			}
			return m
		case <-time.After(within):
			return nil
		}
	}
	for _, a := range agents {
		if next(a, 10*time.Second).GetExpectedTasks() == nil {
			t.Fatalf("%s: no expected tasks", a.region)
		}
	}

	// Three tasks in eu-west-1: all assigned to the eu-west-1 agent, none to us-east-1's.
	run, err := ctl.RunTask(ctxIn("eu-west-1"), connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("shared"), TaskDefinition: proto.String("app"), Count: proto.Int32(3)}))
	if err != nil || len(run.Msg.GetTasks()) != 3 {
		t.Fatalf("RunTask: %v %v", run, err)
	}
	for range 3 {
		as := next(agents[1], 10*time.Second).GetAssignment()
		if !strings.Contains(as.GetTask().GetTaskArn(), ":eu-west-1:") || as.GetTask().GetContainerInstanceArn() != agents[1].arn {
			t.Fatalf("eu-west-1 agent got %v", as)
		}
	}
	if m := next(agents[0], 500*time.Millisecond); m.GetAssignment() != nil {
		t.Fatalf("us-east-1 agent got an eu-west-1 task: %v", m)
	}

	// An agent signed for us-east-1 cannot hold the eu-west-1 instance's session.
	_, in := open("us-east-1", agents[1].arn)
	select {
	case m, ok := <-in:
		if ok {
			t.Fatalf("cross-region hello answered %v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cross-region hello neither refused nor answered")
	}
}
